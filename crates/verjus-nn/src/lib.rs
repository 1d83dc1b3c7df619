//! verjus-nn: the static network graph.
//!
//! - [`def`]: network definitions as data (serde JSON);
//! - [`solver`]: SGD and Adam/AdamW over fused device updates, learning-rate
//!   schedules, clipping by global norm, state keyed by parameter name;
//! - [`data`]: datasets (the IDX files of MNIST and Fashion-MNIST) and
//!   minibatches.
pub mod data;
pub mod def;
pub mod solver;
#[cfg(test)]
mod testing;

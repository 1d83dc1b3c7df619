//! Datasets: reading them from disk and cutting them into minibatches.
//!
//! - [`idx`]: the IDX file format of MNIST and Fashion-MNIST, validated;
//! - [`load_fashion_mnist`]: the dataset as Debian's `dataset-fashion-mnist`
//!   installs it (or from a directory given by argument or environment);
//! - [`Dataset`] / [`Batches`]: examples and labels in memory, minibatches in
//!   order or shuffled by seed.

mod dataset;
mod fashion;
pub mod idx;

pub use dataset::{Batch, Batches, Dataset};
pub use fashion::{data_dir, load_fashion_mnist, Split, CLASSES, DEFAULT_DIR, ENV_VAR};

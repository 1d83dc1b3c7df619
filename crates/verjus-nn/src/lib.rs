//! verjus-nn: the static network graph.
pub mod def;

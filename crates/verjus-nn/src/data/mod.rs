//! Datasets: reading them from disk and cutting them into minibatches.
//!
//! - [`idx`]: the IDX file format of MNIST and Fashion-MNIST, validated;
//! - [`load_fashion_mnist`]: the dataset as Debian's `dataset-fashion-mnist`
//!   installs it (or from a directory given by argument or environment);
//! - [`Dataset`] / [`Batches`]: examples and labels in memory, minibatches in
//!   order or shuffled by seed;
//! - [`CharVocab`]: a character vocabulary with `<pad>` and `<eot>`, saved as
//!   JSON with a network;
//! - [`read_utf8`] / [`split_texts`]: text files, and training/validation splits;
//! - [`load_fortunes`]: the texts of Debian's `fortunes` package;
//! - [`TextBatcher`]: padded batches of texts for a character language model,
//!   bucketed by length and shuffled per epoch by seed.

mod batcher;
mod dataset;
mod fashion;
mod fortunes;
pub mod idx;
mod text;
mod vocab;

pub use batcher::{TextBatch, TextBatcher};
pub use dataset::{Batch, Batches, Dataset};
pub use fashion::{data_dir, load_fashion_mnist, Split, CLASSES, DEFAULT_DIR, ENV_VAR};
pub use fortunes::{
    fortunes_dir, load_fortunes, read_fortunes, split_fortunes, FORTUNES_DIR, FORTUNES_ENV_VAR,
};
pub use text::{read_utf8, split_texts, TextSplit};
pub use vocab::{CharVocab, EOT, PAD, SPECIALS, VOCAB_FILE};

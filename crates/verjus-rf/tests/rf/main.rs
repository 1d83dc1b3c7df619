//! Tests of the RF core on the native backend: golden values (`golden.rs`),
//! finite-difference gradients through the tape (`grads.rs`), concat and pad
//! (`concat.rs`), conv and pool (`conv_pool.rs`), slice, split and the
//! dim-creating ops over dynamic dims (`dynamic.rs`), full/expand/merge/split dims (`shape.rs`), random draws
//! and dropout (`random.rs`), gather and
//! cross-entropy (`index_loss.rs`), the LSTM (`lstm.rs`), optimizers (`optim.rs`), and the
//! batched-vs-single-entry check for each op (`single_entry.rs`).

mod binding;
mod common;
mod concat;
mod conv_pool;
mod dynamic;
mod golden;
mod grads;
mod index_loss;
mod lstm;
mod optim;
mod random;
mod shape;
mod single_entry;

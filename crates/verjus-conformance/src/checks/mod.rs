//! One check per op: the backend, called through the validated `verjus_core::ops`
//! functions, against the [`reference`](crate::reference).
//!
//! Every check runs a table of cases chosen to break kernels rather than to look
//! typical: size 1, primes (7, 13, 31), lengths that are not multiples of a SIMD
//! width (17, 33, 65), empty batches and empty axes (0), rank 0, broadcasting,
//! strides, padding and dilation together. Inputs are deterministic Philox draws
//! (see [`inputs`](crate::inputs)), uploaded with `ops::upload`; results come back
//! with `ops::download` and must match within the [`Tolerance`](crate::Tolerance)
//! named in each check. A check returns `Err` with one line per failing case.

pub(crate) mod attention;
mod concat;
mod conv;
mod ctc;
pub(crate) mod depthwise;
mod dropout;
mod elementwise;
mod gemm;
mod index;
pub(crate) mod layer_norm;
mod loss;
mod lstm;
mod lstm_alone;
pub(crate) mod lstm_operands;
mod lstm_repeat;
mod memory;
mod optim;
mod permute;
mod pool;
mod random;
mod reduce;
mod select;
mod softmax;

pub use attention::{attention, attention_backward};
pub use concat::{concat, split};
pub use conv::{conv2d, conv2d_backward_bias, conv2d_backward_data, conv2d_backward_filter};
pub use ctc::{ctc_case, ctc_loss, Entries};
pub use depthwise::{depthwise_conv1d, depthwise_conv1d_backward};
pub use dropout::{dropout, dropout_backward};
pub use elementwise::{binary, binary_backward, relu_keeps_nan, unary, unary_backward};
pub(crate) use elementwise::{BINARY_OPS, UNARY_OPS};
pub use gemm::{gemm, gemm_reduced_precision};
pub use index::{index_add, index_select};
pub use layer_norm::{layer_norm, layer_norm_backward};
pub use loss::softmax_cross_entropy;
pub use lstm::{lstm_cell, lstm_cell_backward, lstm_sequence, lstm_sequence_backward};
pub use lstm_alone::lstm_lengths_equal_sequences_alone;
pub use lstm_repeat::lstm_backward_twice;
pub use memory::{cast, copy, fill};
pub use optim::{adam_update, nadam_update, sgd_update};
pub use permute::permute;
pub use pool::{avg_pool2d, avg_pool2d_backward, max_pool2d, max_pool2d_backward};
pub use random::{random_normal, random_uniform};
pub use reduce::{argmax, reduce, reduce_backward};
pub use select::select;
pub use softmax::{log_softmax, log_softmax_backward, softmax, softmax_backward};

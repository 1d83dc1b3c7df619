//! One gradient rule per op, shared by the eager tape and the static graph.
//!
//! Each function here is the backward of one op, written once: it reads what
//! the forward saved and the output gradient, and writes the input gradients
//! into tensors the caller provides. The two callers differ only in where
//! those tensors come from:
//!
//! - the tape ([`crate::autograd`]) allocates fresh outputs (and any scratch)
//!   in each backward closure and hands them on;
//! - the static graph's layers (`verjus-nn`) pass the buffers their context
//!   planned once, so a training step allocates nothing.
//!
//! A rule that needs temporaries takes them from the caller as well, and says
//! which shapes it wants (`matmul_scratch`), so the static graph can plan them.
//! Outputs are overwritten (as a layer's backward overwrites its
//! destinations); the one exception, [`index_select`], says so. Summing the
//! gradients of a value used several times is not a rule of any op: the tape
//! and the static graph each do it where they route gradients.
//!
//! The files follow the op groups of [`crate::ops`].

mod attention;
mod concat;
mod conv;
mod ctc;
mod depthwise;
mod dropout;
mod elementwise;
mod index;
mod layer_norm;
mod loss;
mod lstm;
mod matmul;
mod pool;
mod reduce;
mod select;
mod shape_ops;
mod softmax;

pub use attention::attention;
pub use concat::{concat, split};
pub use conv::{conv2d, Conv2dGrads};
pub use ctc::ctc_loss;
pub use depthwise::depthwise_conv1d;
pub use dropout::dropout;
pub use elementwise::{binary, unary};
pub use index::index_select;
pub use layer_norm::layer_norm;
pub use loss::softmax_cross_entropy;
pub use lstm::{lstm_cell, lstm_sequence};
pub use matmul::{matmul, matmul_scratch, Operand};
pub use pool::pool2d;
pub use reduce::{reduce, sum_to};
pub use select::{select, SelectGrads};
pub use shape_ops::{permute, reshape};
pub use softmax::softmax;

//! The gradient rules written from other ops, shared by the eager tape and the
//! static graph. (A fused op's backward is an op of its own, which both call
//! directly: `ops::softmax_backward`, `ops::lstm_sequence_backward`, ...)
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
//! destinations). Summing the
//! gradients of a value used several times is not a rule of any op: the tape
//! and the static graph each do it where they route gradients.
//!
//! The files follow the op groups of [`crate::ops`].

mod concat;
mod conv;
mod elementwise;
mod matmul;
mod reduce;
mod select;
mod shape_ops;

pub use concat::{concat, split};
pub use conv::{conv2d, Conv2dGrads};
pub use elementwise::{binary, unary};
pub use matmul::{matmul, matmul_scratch, Operand};
pub use reduce::{reduce, sum_to};
pub use select::{select, SelectGrads};
pub use shape_ops::{permute, reshape};

//! Eager reverse-mode automatic differentiation over [`Var`]s.
//!
//! # A dynamic graph, not a global tape
//!
//! Every op on [`Var`]s computes its value at once (through the validated
//! [`crate::ops`], so it runs on whatever backend holds the values) and, when
//! grad mode is on and an input requires a gradient, links a *node* to its
//! output (one node to all outputs of an op with several, such as the LSTM's
//! `y`, `h_n`, `c_n`): the op's backward closure, the tensors that closure
//! needs (the input values it reads are handed to it when it runs), and one
//! edge per input pointing at the node output that made that
//! input (or at the leaf itself). The graph is therefore owned by the values: dropping the last
//! handle to a loss frees its whole graph and the saved activations with it, a
//! model that branches or loops differently on every step needs no bookkeeping,
//! and two threads can build and differentiate independent graphs without
//! sharing (or locking) a tape. A global tape would have to be cleared by
//! hand, would keep every recorded activation alive until then, and would
//! serialise all threads on one recorder.
//!
//! [`Var::backward`] walks the nodes reachable from the output in topological
//! order (consumers before producers), sums the gradients of values used more
//! than once, and adds the results into the gradient slots of the leaves,
//! summing across calls as PyTorch does. [`grad`] computes the same gradients
//! for chosen inputs and returns them instead, leaving the slots alone.
//!
//! Backward closures allocate the inputs' gradients and call the op's
//! backward, the one the static graph's layers call too: a fused op's own
//! (`ops::softmax_backward`, `ops::lstm_sequence_backward`, ...) or a rule in
//! [`crate::grad`] written from other ops. They compute with plain tensor
//! ops, so nothing they do is recorded: first-order gradients only.
//!
//! The files are the tape's own (the [`Var`] handle, nodes, recording, the
//! backward pass, grad mode, saved tensors and checkpoint scopes, whose design
//! `checkpoint.rs` describes) and one per op group; each says in its `//!`
//! what it holds.

mod alloc;
mod arith;
mod attention;
mod autocast;
mod cast;
mod checkpoint;
mod conv;
mod ctc;
mod depthwise;
mod dropout;
mod engine;
mod grad_mode;
mod index;
mod layer_norm;
mod loss;
mod lstm;
mod matmul;
mod node;
mod pool;
mod random;
mod record;
mod reduce;
mod resolve;
mod saved;
mod select;
mod shape_ops;
mod softmax;
mod unary;
mod var;

#[cfg(test)]
mod tests;

pub use autocast::{autocast, autocast_dtype, AutocastGuard};
pub use checkpoint::{checkpoint_scope, in_checkpoint_scope, CheckpointScope};
pub use ctc::CtcTargets;
pub use engine::{grad, grad_with};
pub use grad_mode::{enable_grad, is_grad_enabled, no_grad, GradModeGuard};
pub use lstm::LstmVars;
pub use saved::{reset_tape_saved_peak, tape_saved_stats, TapeSavedStats};
pub use var::Var;

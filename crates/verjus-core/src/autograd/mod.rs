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
//! Backward closures allocate the inputs' gradients and call the op's rule in
//! [`crate::grad`], the one the static graph's layers call too. The rules
//! compute with plain tensor ops, so nothing they do is recorded: first-order
//! gradients only.
//!
//! # Files
//!
//! - `var.rs`: the [`Var`] handle, its value and gradient slot;
//! - `node.rs`: graph nodes;
//! - `record.rs`: how an op records itself, and what its backward reads;
//! - `resolve.rs`: the input values handed to a backward when it runs;
//! - `saved.rs`: the tensors nodes keep for backward, counted
//!   ([`tape_saved_stats`]);
//! - `checkpoint.rs`: gradient checkpoint scopes (values recomputed in
//!   backward instead of kept; the design is described there);
//! - `engine.rs`: the backward pass ([`Var::backward`], [`grad`]);
//! - `grad_mode.rs`: [`no_grad`] and friends;
//! - `alloc.rs`: allocate-and-call helpers the ops and the engine share;
//! - one file per op group: `arith.rs`, `unary.rs`, `matmul.rs`, `reduce.rs`,
//!   `softmax.rs`, `conv.rs`, `depthwise.rs`, `pool.rs`, `dropout.rs`, `random.rs`, `index.rs`, `layer_norm.rs`, `loss.rs`,
//!   `shape_ops.rs`, `select.rs`, `lstm.rs` (an op with several outputs on
//!   one node).

mod alloc;
mod arith;
mod attention;
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

pub use checkpoint::{checkpoint_scope, in_checkpoint_scope, CheckpointScope};
pub use ctc::CtcTargets;
pub use engine::{grad, grad_with};
pub use grad_mode::{enable_grad, is_grad_enabled, no_grad, GradModeGuard};
pub use lstm::LstmVars;
pub use saved::{reset_tape_saved_peak, tape_saved_stats, TapeSavedStats};
pub use var::Var;

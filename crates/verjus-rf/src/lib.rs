//! verjus-rf: the core of the RF frontend (`verjus.rf`, after RETURNN's
//! `returnn.frontend`): tensors whose axes are named by [`Dim`] objects.
//!
//! # Why the dim logic lives here, once
//!
//! In RF an op never matches axes by position: `a + b` lines the operands up
//! by their dims, `matmul(a, b, reduce=[k])` contracts `k` wherever it sits,
//! and a reduction over a dynamic (per-sequence) dim masks the padding. That
//! logic is easy to get subtly wrong, and RETURNN has two drifted copies of it
//! (Python and a C++ fast path that silently broadcasts where Python raises).
//! verjus keeps exactly one: this crate. The Python package holds thin
//! handles to these types, and every op goes through the functions here.
//!
//! # What is here
//!
//! - [`Dim`] (`dim.rs`): identity is the object (an `Arc` with a unique id),
//!   never the name or size; static, dynamic (lengths over other dims) or of
//!   unknown size ([`batch_dim`]);
//! - [`RfTensor`] (`tensor.rs`): an autograd [`Var`](verjus_core::autograd::Var),
//!   its dims in raw-axis order, a [`RfDType`] (`dtype.rs`), optional
//!   `sparse_dim` / `feature_dim`; [`RfTensor::copy_transpose`];
//! - `align.rs`: permuting/broadcasting an operand to an ordered dim list
//!   (only when the order differs);
//! - `binary.rs`: [`combine`] / [`compare`] (union of dims in order of
//!   appearance, the broadcast-all-sources check) and [`where_`];
//! - `dim_math.rs`: dim arithmetic ([`Dim::add`], [`Dim::mul`],
//!   [`Dim::ceildiv`], ...; RETURNN's `dim + 1`, `2 * dim`,
//!   `dim.ceildiv_right(2)`), each entry's length derived, the same formula
//!   on the same dim giving the same dim;
//! - `mask.rs`: [`sequence_mask`], [`range_over_dim`], masking by lengths;
//! - `matmul.rs`: [`matmul`] (common dims, then a-only, then b-only);
//! - `optim.rs`: [`Optimizer`] (the static graph's solvers: SGD, Adam/AdamW,
//!   schedules, clipping) over parameters;
//! - `random.rs`: [`random_uniform`], [`random_normal`], [`dropout`] from one
//!   Philox stream ([`set_random_seed`]);
//! - `reduce.rs`: masked [`reduce`] (sum, mean, max, min, logsumexp), [`argmax`];
//! - `shape.rs`: [`full`], [`full_like`], [`expand_dim`], [`merge_dims`],
//!   [`split_dims`] (a dynamic dim merges as the first of the merged dims);
//! - `softmax.rs`: masked [`softmax`] / [`log_softmax`];
//! - `concat.rs`: [`concat()`] and [`pad`], returning the new dim; over
//!   dynamic dims per sequence (`seq_concat.rs`), with lengths derived per
//!   entry (`derive.rs`);
//! - `slice.rs`: [`slice()`] (RETURNN's start/end/step/size) and [`split`];
//! - `conv.rs`: [`conv`] (1-D/2-D, groups, dilation, strides) and
//!   `pool.rs`: [`pool`] (max/avg), both masking the padding of dynamic
//!   dims, with the window arithmetic and out dims in `window.rs`
//!   ([`Window`], [`Padding`]);
//! - `index.rs`: [`gather`] (with dims shared by source and indices as
//!   batch dims, `clip_to_valid`), [`one_hot`]; `loss.rs`: [`cross_entropy`]
//!   against sparse or dense targets;
//! - `lstm.rs`: [`lstm`] (RETURNN's `rf.LSTM` over a dynamic, static or
//!   [`single_step_dim`] spatial dim, on the core's fused LSTM ops);
//! - `unary.rs`: activations and elementwise functions, [`cast`],
//!   [`stop_gradient`], [`gradient`].
//!
//! Every op runs on the autograd tape through `verjus_core`'s validated ops,
//! on whichever backend holds the values. Errors are [`verjus_core::Error`]s
//! naming the op and the dims by name; nothing panics on user input. The
//! success path formats no strings and copies only where the layout must
//! change.

mod align;
mod attention;
mod binary;
mod concat;
mod conv;
mod ctc;
mod derive;
mod dim;
mod dim_math;
mod dtype;
mod index;
mod loss;
mod lstm;
mod mask;
mod matmul;
mod normalization;
mod optim;
mod pool;
mod random;
mod reduce;
pub mod replicas;
mod seq_concat;
mod shape;
mod slice;
mod softmax;
mod tensor;
mod unary;
mod window;

pub use attention::dot_attention;
pub use binary::{combine, combine_float_scalar, combine_scalar, compare, parse_kind, where_};
pub use concat::{concat, pad};
pub use conv::{conv, ConvArgs};
pub use ctc::{ctc_loss, CtcOptions};
pub use dim::{batch_dim, fmt_dims, single_step_dim, Dim};
pub use dim_math::DimMath;
pub use dtype::RfDType;
pub use index::{gather, one_hot};
pub use loss::{cross_entropy, EstimatedType};
pub use lstm::{lstm, LstmParams};
pub use mask::{range_over_dim, sequence_mask};
pub use matmul::matmul;
pub use normalization::layer_norm;
pub use optim::{Optimizer, SlotState};
pub use pool::{parse_pool_mode, pool};
pub use random::{
    dropout, random_normal, random_state, random_uniform, restore_random_state, set_random_seed,
};
pub use reduce::{argmax, reduce, ReduceMode};
pub use shape::{expand_dim, full, full_like, merge_dims, split_dims};
pub use slice::{slice, split, SliceRange, SliceSize};
pub use softmax::{log_softmax, softmax};
pub use tensor::RfTensor;
pub use unary::{activation, cast, gradient, safe_log, stop_gradient};
pub use window::{Padding, Window};

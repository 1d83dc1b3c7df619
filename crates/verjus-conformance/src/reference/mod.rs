//! Reference implementations of every op in `verjus_core::ops`.
//!
//! They are written for obviousness, not speed: nested loops over plain
//! [`Array`](crate::array::Array)s, accumulation in `f64`, and their own index
//! arithmetic (no `Shape`, no plans, no im2col). A backend is correct when it
//! agrees with these within the documented tolerance, so these functions are the
//! executable form of the semantics documented in `verjus_core::ops`. The only
//! core code they reuse is what *defines* an op: the scalar functions
//! (`UnaryOp::apply`/`derivative`, `BinaryOp::apply`/`partials`) and the Philox
//! stream of `verjus_core::rng`.
//!
//! The references assume valid arguments (the checks only pass valid ones) and
//! panic on anything else; validation is tested separately, in `errors`.

pub mod attention;
pub mod concat;
pub mod conv;
pub mod ctc;
pub mod depthwise;
pub mod dropout;
pub mod elementwise;
pub mod gemm;
pub mod index;
pub mod layer_norm;
pub mod loss;
pub mod lstm;
pub mod memory;
pub mod optim;
pub mod permute;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod softmax;

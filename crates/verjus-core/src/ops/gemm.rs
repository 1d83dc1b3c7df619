//! General matrix multiplication: `C = alpha * op(A) @ op(B) + beta * C`.
//!
//! Matrices are the last two axes; leading axes are a batch. `A` and `B` either
//! have the same batch axes, or one of them is a plain matrix that every batch
//! entry shares (the weight of a linear layer applied to a batch of sequences).
//!
//! `A` and `B` are float32, or both bfloat16 or both float16 (mixed
//! precision: tensor cores on CUDA, a widening to float32 on the CPU); products
//! accumulate in float32 and `C` is float32.

use super::{check_device, check_dtype, check_f32_on, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// Transposes and scalars of a GEMM.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmSpec {
    /// Use `A^T` (A is stored `[.., k, m]`).
    pub trans_a: bool,
    /// Use `B^T` (B is stored `[.., n, k]`).
    pub trans_b: bool,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the existing `C` (0 overwrites, 1 accumulates).
    pub beta: f32,
}

impl Default for GemmSpec {
    fn default() -> Self {
        GemmSpec {
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
        }
    }
}

impl GemmSpec {
    /// `C = op(A) @ op(B)` with the given transposes.
    pub fn new(trans_a: bool, trans_b: bool) -> Self {
        GemmSpec {
            trans_a,
            trans_b,
            ..Self::default()
        }
    }

    /// The same product, accumulated into `C` (`beta = 1`).
    pub fn accumulate(self) -> Self {
        GemmSpec { beta: 1.0, ..self }
    }
}

/// Validated sizes of a (batched) GEMM.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmPlan {
    pub spec: GemmSpec,
    /// Number of matrix products.
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Whether `A` has batch axes (otherwise one matrix is shared by all).
    pub a_batched: bool,
    /// Whether `B` has batch axes.
    pub b_batched: bool,
}

/// `c = alpha * op(a) @ op(b) + beta * c`.
pub fn gemm(
    be: &dyn Backend,
    a: &Tensor,
    b: &Tensor,
    c: &mut Tensor,
    spec: GemmSpec,
) -> Result<()> {
    let plan = GemmPlan::new(a.shape(), b.shape(), spec)?;
    check_f32_on("gemm", be, &[("C", c)])?;
    check_device("gemm", "A", be, a)?;
    check_device("gemm", "B", be, b)?;
    if !a.dtype().is_reduced_float() {
        check_dtype("gemm", "A", a, DType::F32)?;
    }
    check_dtype("gemm", "B", b, a.dtype())?;
    check_shape("gemm", "C", c, &plan.output_shape(a.shape(), b.shape())?)?;
    be.gemm(&plan, a, b, c)
}

impl GemmPlan {
    /// Checks the operand shapes and derives the sizes.
    pub fn new(a: &Shape, b: &Shape, spec: GemmSpec) -> Result<Self> {
        let op = "gemm";
        if a.rank() < 2 || b.rank() < 2 {
            return Err(Error::shape(
                op,
                if a.rank() < 2 { "A" } else { "B" },
                "a matrix of rank >= 2",
                if a.rank() < 2 { a } else { b },
            ));
        }
        let (ad, bd) = (a.dims(), b.dims());
        let (ra, rb) = (ad.len(), bd.len());
        let (m, ka) = if spec.trans_a {
            (ad[ra - 1], ad[ra - 2])
        } else {
            (ad[ra - 2], ad[ra - 1])
        };
        let (kb, n) = if spec.trans_b {
            (bd[rb - 1], bd[rb - 2])
        } else {
            (bd[rb - 2], bd[rb - 1])
        };
        if ka != kb {
            return Err(Error::shape(
                op,
                "B (inner dimensions)",
                format!(
                    "k = {ka} from A {a}{}",
                    if spec.trans_a { " (transposed)" } else { "" }
                ),
                format!(
                    "k = {kb} from B {b}{}",
                    if spec.trans_b { " (transposed)" } else { "" }
                ),
            ));
        }
        let (a_batch, b_batch) = (&ad[..ra - 2], &bd[..rb - 2]);
        if !a_batch.is_empty() && !b_batch.is_empty() && a_batch != b_batch {
            return Err(Error::shape(
                op,
                "B (batch axes)",
                format!("batch axes {a_batch:?} as in A {a}"),
                b,
            ));
        }
        let batch_dims = if a_batch.is_empty() { b_batch } else { a_batch };
        Ok(GemmPlan {
            spec,
            batch: batch_dims.iter().product(),
            m,
            n,
            k: ka,
            a_batched: !a_batch.is_empty(),
            b_batched: !b_batch.is_empty(),
        })
    }

    /// The shape of `C`: the batch axes, then `[m, n]`.
    pub fn output_shape(&self, a: &Shape, b: &Shape) -> Result<Shape> {
        let batch = if self.a_batched {
            &a.dims()[..a.rank() - 2]
        } else {
            &b.dims()[..b.rank() - 2]
        };
        let mut dims = batch.to_vec();
        dims.extend([self.m, self.n]);
        Shape::new(dims)
    }
}

//! [`matmul`]: contraction over named dims.
//!
//! Output dims: the dims `a` and `b` share (other than the reduced ones) in
//! `a`'s order, then `a`'s own, then `b`'s own. The operands are brought to
//! `[common, a_only, reduce]` and `[common, reduce, b_only]` (or, when `b`
//! already is laid out so, `[common, b_only, reduce]` read transposed),
//! flattened to one batched GEMM, and the result is unflattened. Each
//! permute and reshape is skipped when the layout already fits.

use crate::align::{check_sizes, permuted};
use crate::mask::{check_axes, masked};
use crate::{fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::{Error, Result};

/// `sum over reduce of a * b` by dims (see the module docs). With
/// `use_mask`, the padding of dynamic reduced dims counts as 0.
pub fn matmul(a: &RfTensor, b: &RfTensor, reduce: &[Dim], use_mask: bool) -> Result<RfTensor> {
    check_axes("matmul", a, reduce)?;
    check_axes("matmul", b, reduce)?;
    for t in [a, b] {
        if t.dtype() != RfDType::Float32 {
            return Err(Error::invalid(
                "matmul",
                format!(
                    "needs float32 operands, got {} {}",
                    t.dtype(),
                    fmt_dims(t.dims())
                ),
            ));
        }
    }
    let (a, b) = if use_mask && reduce.iter().any(Dim::is_dynamic) {
        (masked(a, reduce, 0.0)?, b.clone())
    } else {
        (a.clone(), b.clone())
    };
    check_sizes("matmul", &a, &b)?;
    let in_b = |d: &&Dim| b.axis_of(d).is_some();
    let common: Vec<Dim> = a
        .dims()
        .iter()
        .filter(|d| in_b(d) && !reduce.contains(d))
        .cloned()
        .collect();
    let a_only: Vec<Dim> = a.dims().iter().filter(|d| !in_b(d)).cloned().collect();
    let b_only: Vec<Dim> = b
        .dims()
        .iter()
        .filter(|d| a.axis_of(d).is_none())
        .cloned()
        .collect();
    let size = |t: &RfTensor, ds: &[Dim]| -> usize {
        let sizes = t.var().shape();
        ds.iter()
            .map(|d| t.axis_of(d).map_or(1, |i| sizes.dims()[i]))
            .product()
    };
    let (c, m, k, n) = (
        size(&a, &common),
        size(&a, &a_only),
        size(&a, reduce),
        size(&b, &b_only),
    );
    let batch = |rows: usize, cols: usize| {
        if common.is_empty() {
            vec![rows, cols]
        } else {
            vec![c, rows, cols]
        }
    };
    let a_order = [&common[..], &a_only, reduce].concat();
    let va = flat(permuted(&a, &a_order)?, batch(m, k))?;
    let b_plain = [&common[..], reduce, &b_only].concat();
    let b_trans = [&common[..], &b_only, reduce].concat();
    let (vb, trans_b) = if b.dims() == b_trans && b.dims() != b_plain {
        (flat(b.var().clone(), batch(n, k))?, true)
    } else {
        (flat(permuted(&b, &b_plain)?, batch(k, n))?, false)
    };
    let out_dims = [&common[..], &a_only, &b_only].concat();
    let out_sizes: Vec<usize> = out_dims
        .iter()
        .map(|d| {
            // From the operand that has the dim (a dim of size 0 must stay 0).
            let owner = if a.axis_of(d).is_some() { &a } else { &b };
            size(owner, std::slice::from_ref(d))
        })
        .collect();
    let y = flat(va.matmul_t(&vb, false, trans_b)?, out_sizes)?;
    Ok(RfTensor::from_parts(y, out_dims, RfDType::Float32))
}

/// `v` under `dims` (same element count); no copy when it already has them.
fn flat(v: Var, dims: Vec<usize>) -> Result<Var> {
    if v.shape().dims() == dims.as_slice() {
        Ok(v)
    } else {
        v.reshape(dims)
    }
}

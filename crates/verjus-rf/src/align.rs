//! Lining operands up by dims: the one place axes are moved.
//!
//! An operand is brought to an output dim order in two steps, each skipped
//! when not needed: permute its own dims into the order they have in the
//! output (a copy, only when the order differs), then insert size-1 axes
//! for output dims it lacks, so that NumPy broadcasting (right-aligned) in
//! the backend sees matching axes. Missing *leading* dims need no axes, so
//! the common cases (same dims; a bias over the last dims) move nothing.

use crate::{fmt_dims, Dim, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::{Error, Result};

/// The dims of `a`, then those of `b` not in `a` (order of appearance).
pub(crate) fn union(a: &[Dim], b: &[Dim]) -> Vec<Dim> {
    let mut out = a.to_vec();
    out.extend(b.iter().filter(|d| !a.contains(d)).cloned());
    out
}

/// Fails when a dim shared by `a` and `b` has different sizes in them
/// (possible for dims of unknown size, such as the batch).
pub(crate) fn check_sizes(op: &str, a: &RfTensor, b: &RfTensor) -> Result<()> {
    // The values are shared handles: no shape copies on this hot path.
    let (sa, sb) = (a.var().value(), b.var().value());
    for (i, d) in a.dims().iter().enumerate() {
        if let Some(j) = b.axis_of(d) {
            if sa.dims()[i] != sb.dims()[j] {
                return Err(Error::invalid(
                    op,
                    format!(
                        "dim {d} has size {} in {} but {} in {}",
                        sa.dims()[i],
                        fmt_dims(a.dims()),
                        sb.dims()[j],
                        fmt_dims(b.dims())
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `t`'s value with its axes in the order of `order` (the same dims).
pub(crate) fn permuted(t: &RfTensor, order: &[Dim]) -> Result<Var> {
    let dims = t.dims();
    if dims == order {
        return Ok(t.var().clone());
    }
    let perm: Vec<usize> = order
        .iter()
        .map(|d| t.axis("permute", d))
        .collect::<Result<_>>()?;
    t.var().permute(&perm)
}

/// `t`'s value laid out to broadcast against a value with dims `out` (a
/// superset of `t`'s dims), as the module docs describe.
pub(crate) fn aligned(t: &RfTensor, out: &[Dim]) -> Result<Var> {
    if t.dims() == out {
        return Ok(t.var().clone()); // the operand with all dims, e.g. `x` in `x + bias`
    }
    let own: Vec<Dim> = out
        .iter()
        .filter(|d| t.dims().contains(d))
        .cloned()
        .collect();
    let var = permuted(t, &own)?;
    let Some(first) = out.iter().position(|d| t.dims().contains(d)) else {
        return Ok(var); // a scalar broadcasts as it is
    };
    if out.len() - first == own.len() {
        return Ok(var);
    }
    let sizes = var.shape();
    let mut k = 0;
    let shape: Vec<usize> = out[first..]
        .iter()
        .map(|d| {
            if t.dims().contains(d) {
                k += 1;
                sizes.dims()[k - 1]
            } else {
                1
            }
        })
        .collect();
    var.reshape(shape)
}

//! The reference attention behind the `Backend` methods of the reference
//! backend. The lengths are validated here, as a backend must
//! (`ops::check_key_lengths`); `ignore_lengths` is the planted bug.

use verjus_conformance::array::Array;
use verjus_conformance::reference::attention::{self as r, Operands};
use verjus_core::ops::{check_key_lengths, AttentionArgs, AttentionGrads};
use verjus_core::{Result, Tensor};

fn array(t: &Tensor) -> Result<Array> {
    Ok(Array::new(t.dims().to_vec(), t.to_vec::<f32>()?))
}

fn store(t: &mut Tensor, a: &Array) -> Result<()> {
    t.as_mut_slice::<f32>()?.copy_from_slice(&a.data);
    Ok(())
}

/// Runs `f` on the operands as host arrays.
fn with_operands<T>(
    op: &str,
    args: &AttentionArgs<'_>,
    ignore_lengths: bool,
    f: impl FnOnce(&Operands<'_>) -> Result<T>,
) -> Result<T> {
    let lengths = args.lengths.map(|l| l.to_vec::<i32>()).transpose()?;
    if let Some(l) = &lengths {
        check_key_lengths(op, l, args.k.dims()[1])?;
    }
    let (q, k, v) = (array(args.q)?, array(args.k)?, array(args.v)?);
    f(&Operands {
        q: &q,
        k: &k,
        v: &v,
        lengths: lengths.as_deref().filter(|_| !ignore_lengths),
        causal: args.causal,
        scale: args.scale,
    })
}

pub fn forward(
    args: &AttentionArgs<'_>,
    out: &mut Tensor,
    lse: &mut Tensor,
    ignore_lengths: bool,
) -> Result<()> {
    with_operands("attention", args, ignore_lengths, |o| {
        let (y, l) = r::attention(o);
        store(out, &y)?;
        store(lse, &l)
    })
}

pub fn backward(
    args: &AttentionArgs<'_>,
    dout: &Tensor,
    grads: AttentionGrads<'_>,
    ignore_lengths: bool,
) -> Result<()> {
    let dout = array(dout)?;
    with_operands("attention_backward", args, ignore_lengths, |o| {
        let (dq, dk, dv) = r::attention_backward(o, &dout);
        for (g, a) in [(grads.dq, dq), (grads.dk, dk), (grads.dv, dv)] {
            if let Some(g) = g {
                store(g, &a)?;
            }
        }
        Ok(())
    })
}

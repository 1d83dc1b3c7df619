//! Fused scaled dot-product attention on the tape.
//!
//! The node keeps the operands' values (`q`, `k`, `v`, the constant key
//! lengths), the output and the per-row log-sum-exp, never the attention
//! weights: its backward, [`crate::ops::attention_backward`], recomputes them.

use super::alloc;
use super::node::{need, BackwardFn};
use super::record::{Reads, Saves};
use super::saved::Saved;
use super::var::Var;
use crate::ops::{self, AttentionArgs, AttentionGrads};
use crate::{Result, Tensor};
use std::sync::Arc;

impl Var {
    /// Attention of the queries `q [N, Tq, D]` over the keys `k [N, Tk, D]`
    /// and values `v [N, Tk, Dv]` (see [`ops::attention`]): `[N, Tq, Dv]`.
    /// `lengths` (int32 `[N]`, a constant) masks each entry's keys from its
    /// length on; `causal` lets query `i` see keys `0..=i` only. Gradients
    /// flow to `q`, `k` and `v`.
    pub fn attention(
        q: &Var,
        k: &Var,
        v: &Var,
        lengths: Option<&Var>,
        causal: bool,
        scale: f32,
    ) -> Result<Var> {
        let lengths = lengths.map(Var::value);
        // The backward reads every operand (given at call time) and keeps the
        // output and the log-sum-exp of its own.
        let saves = Saves::own(Reads::All);
        Var::record(
            "attention",
            q.backend(),
            &[q, k, v],
            saves,
            move |be, xs| {
                let args = AttentionArgs {
                    q: &xs[0],
                    k: &xs[1],
                    v: &xs[2],
                    lengths: lengths.as_deref(),
                    causal,
                    scale,
                };
                let plan = ops::attention_plan("attention", be, &args)?;
                let mut out = alloc::output(be, &plan.output_shape())?;
                let mut lse = alloc::output(be, &plan.lse_shape())?;
                ops::attention(be, &args, &mut out, &mut lse)?;
                let out = Arc::new(out);
                let saved_out = Saved::new(out.clone());
                let lse = Saved::owned(lse);
                let lengths = lengths.clone();
                let backward: BackwardFn = Box::new(move |be, dout, inputs, needs| {
                    let (q, k, v) = (inputs.get(0)?, inputs.get(1)?, inputs.get(2)?);
                    let mut grads: [Option<Tensor>; 3] = Default::default();
                    for (i, (g, like)) in grads.iter_mut().zip([&q, &k, &v]).enumerate() {
                        if need(needs, i) {
                            *g = Some(alloc::output(be, like.shape())?);
                        }
                    }
                    let [dq, dk, dv] = grads.each_mut().map(Option::as_mut);
                    let args = AttentionArgs {
                        q: &q,
                        k: &k,
                        v: &v,
                        lengths: lengths.as_deref(),
                        causal,
                        scale,
                    };
                    ops::attention_backward(
                        be,
                        &args,
                        &saved_out,
                        &lse,
                        &dout,
                        AttentionGrads { dq, dk, dv },
                    )?;
                    Ok(grads.into_iter().collect())
                });
                Ok((out, backward))
            },
        )
    }
}

//! Scaled dot-product attention as one fused op, and its backward.
//!
//! For each of `N` independent entries (batch times heads):
//!
//! ```text
//! s[i, j] = scale * q[i] . k[j]                         (q [Tq, D], k [Tk, D])
//! s[i, j] = -inf  where j >= lengths[n] (or j > i when causal)
//! p = softmax_j(s);   out[i] = sum_j p[i, j] v[j]        (v [Tk, Dv])
//! lse[i] = log sum_j exp(s[i, j])
//! ```
//!
//! Keys of padded frames (`j >= lengths[n]`) never get weight. A query row
//! with no key left (length 0, or nothing causal) outputs 0, gets no gradient,
//! and has `lse = -inf`. Causal alignment is top-left (query `i` sees keys
//! `0..=i`), as RETURNN's `causal_query_spatial_dim` and PyTorch's `is_causal`.
//!
//! # What is kept for the backward
//!
//! The forward keeps only its output and the per-row log-sum-exp `lse [N, Tq]`;
//! the backward recomputes the scores (one more `q k^T` product) and gets the
//! weights as `exp(s - lse)`. Keeping the weights instead would hold an
//! `[N, Tq, Tk]` tensor from the forward to the backward, for every attention
//! layer of a model (at 16 sequences, 8 heads and 1000 frames, 512 MB a layer),
//! while the recomputation costs one GEMM of the five the pair does. So the
//! score tensor is never carried over, and a backend may compute it in blocks
//! (the native one does, one entry per thread).

use super::{check_device, check_dtype, check_f32_on, check_rank, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// The sizes of one attention call, validated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionPlan {
    /// Independent entries `N` (batch times heads).
    pub entries: usize,
    /// Query frames `Tq`.
    pub queries: usize,
    /// Key (and value) frames `Tk`.
    pub keys: usize,
    /// Query/key features `D`.
    pub key_feat: usize,
    /// Value features `Dv`.
    pub value_feat: usize,
    /// Whether per-entry key lengths are given (otherwise all `Tk` keys count).
    pub has_lengths: bool,
    /// Whether query `i` sees only keys `0..=i`.
    pub causal: bool,
    /// The factor on `q . k`.
    pub scale: f32,
}

impl AttentionPlan {
    /// `[N, Tq, Dv]`, the output's shape.
    pub fn output_shape(&self) -> Shape {
        Shape::new([self.entries, self.queries, self.value_feat]).expect("checked by the plan")
    }

    /// `[N, Tq]`, the log-sum-exp's shape.
    pub fn lse_shape(&self) -> Shape {
        Shape::new([self.entries, self.queries]).expect("checked by the plan")
    }

    /// The keys query `i` of entry `n` may see, given that entry's length:
    /// `0..count` (the same rule for every backend and the reference).
    pub fn visible(&self, length: usize, i: usize) -> usize {
        let count = if self.causal {
            (i + 1).min(self.keys)
        } else {
            self.keys
        };
        count.min(length)
    }
}

/// The operands: `q [N, Tq, D]`, `k [N, Tk, D]`, `v [N, Tk, Dv]`, the int32
/// key `lengths [N]` (each in `0..=Tk`), causality and the scale.
#[derive(Clone, Copy, Debug)]
pub struct AttentionArgs<'a> {
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    pub lengths: Option<&'a Tensor>,
    pub causal: bool,
    pub scale: f32,
}

/// The input gradients a backward writes (each only if asked for; overwritten).
#[derive(Debug, Default)]
pub struct AttentionGrads<'a> {
    pub dq: Option<&'a mut Tensor>,
    pub dk: Option<&'a mut Tensor>,
    pub dv: Option<&'a mut Tensor>,
}

/// Validates the operands and returns the plan (the lengths' values are
/// checked by the backends, which read them).
pub fn attention_plan(
    op: &str,
    be: &dyn Backend,
    args: &AttentionArgs<'_>,
) -> Result<AttentionPlan> {
    check_rank(op, "q", args.q, 3, "[N, Tq, D]")?;
    check_rank(op, "k", args.k, 3, "[N, Tk, D]")?;
    check_rank(op, "v", args.v, 3, "[N, Tk, Dv]")?;
    check_f32_on(op, be, &[("q", args.q), ("k", args.k), ("v", args.v)])?;
    let (q, k, v) = (args.q.dims(), args.k.dims(), args.v.dims());
    let (entries, queries, key_feat) = (q[0], q[1], q[2]);
    let keys = k[1];
    check_shape(op, "k", args.k, &Shape::new([entries, keys, key_feat])?)?;
    let value_feat = v[2];
    check_shape(op, "v", args.v, &Shape::new([entries, keys, value_feat])?)?;
    if let Some(l) = args.lengths {
        check_device(op, "lengths", be, l)?;
        check_dtype(op, "lengths", l, DType::I32)?;
        check_shape(op, "lengths", l, &Shape::new([entries])?)?;
    }
    if !args.scale.is_finite() {
        return Err(Error::invalid(
            op,
            format!("scale must be finite, got {}", args.scale),
        ));
    }
    Ok(AttentionPlan {
        entries,
        queries,
        keys,
        key_feat,
        value_feat,
        has_lengths: args.lengths.is_some(),
        causal: args.causal,
        scale: args.scale,
    })
}

/// Fails unless every length is in `0..=keys` (for backends, on host values).
pub fn check_key_lengths(op: &str, lengths: &[i32], keys: usize) -> Result<()> {
    match lengths
        .iter()
        .enumerate()
        .find(|(_, &l)| l < 0 || l as usize > keys)
    {
        Some((n, &l)) => Err(Error::invalid(
            op,
            format!("lengths[{n}] = {l} is outside 0..={keys} (k has {keys} frames)"),
        )),
        None => Ok(()),
    }
}

/// The attention `out [N, Tq, Dv]` and the per-row log-sum-exp `lse [N, Tq]`
/// that its backward reads (see the module docs).
pub fn attention(
    be: &dyn Backend,
    args: &AttentionArgs<'_>,
    out: &mut Tensor,
    lse: &mut Tensor,
) -> Result<()> {
    let op = "attention";
    let plan = attention_plan(op, be, args)?;
    check_f32_on(op, be, &[("out", out), ("lse", lse)])?;
    check_shape(op, "out", out, &plan.output_shape())?;
    check_shape(op, "lse", lse, &plan.lse_shape())?;
    be.attention(&plan, args, out, lse)
}

/// The gradients of [`attention`] from its operands, its `out` and `lse`, and
/// `dout`: `dv = p^T dout`, `ds = p * (dout v^T - rowsum(dout * out))`,
/// `dq = scale ds k`, `dk = scale ds^T q`, with `p` recomputed.
pub fn attention_backward(
    be: &dyn Backend,
    args: &AttentionArgs<'_>,
    out: &Tensor,
    lse: &Tensor,
    dout: &Tensor,
    grads: AttentionGrads<'_>,
) -> Result<()> {
    let op = "attention_backward";
    let plan = attention_plan(op, be, args)?;
    check_f32_on(op, be, &[("out", out), ("lse", lse), ("dout", dout)])?;
    check_shape(op, "out", out, &plan.output_shape())?;
    check_shape(op, "dout", dout, &plan.output_shape())?;
    check_shape(op, "lse", lse, &plan.lse_shape())?;
    for (what, g, like) in [
        ("dq", &grads.dq, args.q),
        ("dk", &grads.dk, args.k),
        ("dv", &grads.dv, args.v),
    ] {
        if let Some(g) = g {
            check_f32_on(op, be, &[(what, g)])?;
            check_shape(op, what, g, like.shape())?;
        }
    }
    be.attention_backward(&plan, args, out, lse, dout, grads)
}

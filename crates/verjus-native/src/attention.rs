//! Fused scaled dot-product attention on the CPU.
//!
//! One entry (a batch element's head) is one task: its scores `[Tq, Tk]` are
//! computed into the thread's scratch buffer by a GEMM, masked and
//! soft-maxed in place, and multiplied into the output by a second GEMM. The
//! entries run in parallel over rayon's pool (each GEMM single-threaded);
//! a single entry lets its GEMMs use the pool instead. So the full
//! `[N, Tq, Tk]` score tensor never exists, in the forward or the backward
//! (which recomputes each entry's weights from the kept log-sum-exp, see
//! [`verjus_core::ops::attention`]).

use crate::gemm::{sgemm_on, MatRef, Threads};
use crate::scratch::Scratch;
use crate::simd::simd;
use rayon::prelude::*;
use verjus_core::math::fast;
use verjus_core::ops::{check_key_lengths, AttentionArgs, AttentionGrads, AttentionPlan};
use verjus_core::{Error, Result, Tensor};

/// The operands as slices, and what every entry's task shares.
struct Entries<'a> {
    plan: &'a AttentionPlan,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    lengths: Option<&'a [i32]>,
    threads: Threads,
}

impl<'a> Entries<'a> {
    fn new(op: &str, plan: &'a AttentionPlan, args: &AttentionArgs<'a>) -> Result<Self> {
        let lengths = args.lengths.map(|l| l.as_slice::<i32>()).transpose()?;
        if let Some(l) = lengths {
            check_key_lengths(op, l, plan.keys)?;
        }
        let threads = if plan.entries > 1 {
            Threads::Single
        } else {
            Threads::Auto
        };
        Ok(Entries {
            plan,
            q: args.q.as_slice()?,
            k: args.k.as_slice()?,
            v: args.v.as_slice()?,
            lengths,
            threads,
        })
    }

    /// Entry `n`'s key length.
    fn length(&self, n: usize) -> usize {
        self.lengths.map_or(self.plan.keys, |l| l[n] as usize)
    }

    /// Entry `n`'s `q`, `k`, `v`.
    fn operands(&self, n: usize) -> (&'a [f32], &'a [f32], &'a [f32]) {
        let p = self.plan;
        let (qn, kn, vn) = (
            p.queries * p.key_feat,
            p.keys * p.key_feat,
            p.keys * p.value_feat,
        );
        (
            &self.q[n * qn..(n + 1) * qn],
            &self.k[n * kn..(n + 1) * kn],
            &self.v[n * vn..(n + 1) * vn],
        )
    }

    /// `s = scale * q_n k_n^T` into `s [Tq, Tk]`.
    fn scores(&self, n: usize, s: &mut [f32]) -> Result<()> {
        let p = self.plan;
        let (q, k, _) = self.operands(n);
        sgemm_on(
            self.threads,
            p.queries,
            p.keys,
            p.key_feat,
            MatRef {
                data: q,
                trans: false,
            },
            MatRef {
                data: k,
                trans: true,
            },
            s,
            p.scale,
            0.0,
        )
    }
}

fn scratch(op: &str, len: usize) -> Result<Scratch> {
    Scratch::take(len).ok_or_else(|| Error::invalid(op, format!("out of memory for {len} scores")))
}

/// The forward: `out` and `lse` (see [`verjus_core::ops::attention`]).
pub(crate) fn forward(
    plan: &AttentionPlan,
    args: &AttentionArgs<'_>,
    out: &mut Tensor,
    lse: &mut Tensor,
) -> Result<()> {
    let op = "attention";
    let e = Entries::new(op, plan, args)?;
    let (tq, tk, dv) = (plan.queries, plan.keys, plan.value_feat);
    let out = out.as_mut_slice::<f32>()?;
    let lse = lse.as_mut_slice::<f32>()?;
    let one = |n: usize, out: &mut [f32], lse: &mut [f32]| -> Result<()> {
        let mut buf = scratch(op, tq * tk)?;
        let s = &mut buf.0[..tq * tk];
        e.scores(n, s)?;
        let length = e.length(n);
        for (i, l) in lse.iter_mut().enumerate() {
            *l = softmax_row(&mut s[i * tk..(i + 1) * tk], plan.visible(length, i));
        }
        let (_, _, v) = e.operands(n);
        let (a, b) = (
            MatRef {
                data: s,
                trans: false,
            },
            MatRef {
                data: v,
                trans: false,
            },
        );
        sgemm_on(e.threads, tq, dv, tk, a, b, out, 1.0, 0.0)
    };
    let n = plan.entries;
    chunks(out, n, tq * dv)
        .into_par_iter()
        .zip(chunks(lse, n, tq))
        .enumerate()
        .with_min_len(1)
        .try_for_each(|(n, (o, l))| one(n, o, l))
}

/// Soft-maxes `row[..visible]` in place, zeroes the rest, and returns the
/// log-sum-exp (`-inf` when nothing is visible).
fn softmax_row(row: &mut [f32], visible: usize) -> f32 {
    let (seen, hidden) = row.split_at_mut(visible);
    hidden.fill(0.0);
    if seen.is_empty() {
        return f32::NEG_INFINITY;
    }
    let max = seen.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    exp_shifted(seen, max);
    let sum: f32 = seen.iter().sum();
    let inv = 1.0 / sum;
    seen.iter_mut().for_each(|x| *x *= inv);
    max + sum.ln()
}

/// `x = e^(x - shift)` over `row`, vectorised (`math::fast::exp`: the library
/// `expf` is a scalar call per score).
fn exp_shifted(row: &mut [f32], shift: f32) {
    simd(
        #[inline(always)]
        || row.iter_mut().for_each(|x| *x = fast::exp(*x - shift)),
    );
}

/// One entry's gradient slices, those asked for.
type EntryGrads<'g> = (
    Option<&'g mut [f32]>,
    Option<&'g mut [f32]>,
    Option<&'g mut [f32]>,
);

/// `n` consecutive pieces of `len` elements of `data` (empty ones when `len` is 0).
fn chunks(data: &mut [f32], n: usize, len: usize) -> Vec<&mut [f32]> {
    if len == 0 {
        return (0..n).map(|_| <&mut [f32]>::default()).collect();
    }
    data.chunks_mut(len).take(n).collect()
}

/// Cuts an optional gradient into `n` entries (all `None` when absent).
fn per_entry(g: Option<&mut Tensor>, n: usize, len: usize) -> Result<Vec<Option<&mut [f32]>>> {
    Ok(match g {
        Some(g) => chunks(g.as_mut_slice::<f32>()?, n, len)
            .into_iter()
            .map(Some)
            .collect(),
        None => (0..n).map(|_| None).collect(),
    })
}

/// The backward (see [`verjus_core::ops::attention_backward`]).
pub(crate) fn backward(
    plan: &AttentionPlan,
    args: &AttentionArgs<'_>,
    out: &Tensor,
    lse: &Tensor,
    dout: &Tensor,
    grads: AttentionGrads<'_>,
) -> Result<()> {
    let op = "attention_backward";
    let e = Entries::new(op, plan, args)?;
    let (tq, tk, d, dv) = (plan.queries, plan.keys, plan.key_feat, plan.value_feat);
    let (out, lse, dout) = (
        out.as_slice::<f32>()?,
        lse.as_slice::<f32>()?,
        dout.as_slice::<f32>()?,
    );
    let n = plan.entries;
    let dq = per_entry(grads.dq, n, tq * d)?;
    let dk = per_entry(grads.dk, n, tk * d)?;
    let dvs = per_entry(grads.dv, n, tk * dv)?;
    let one = |n: usize, (dq, dk, dvn): EntryGrads<'_>| -> Result<()> {
        let mut buf = scratch(op, 2 * tq * tk)?;
        let (p, ds) = buf.0[..2 * tq * tk].split_at_mut(tq * tk);
        e.scores(n, p)?;
        let length = e.length(n);
        let lse_n = &lse[n * tq..(n + 1) * tq];
        for (i, &l) in lse_n.iter().enumerate() {
            let visible = if l == f32::NEG_INFINITY {
                0
            } else {
                plan.visible(length, i)
            };
            let (seen, hidden) = p[i * tk..(i + 1) * tk].split_at_mut(visible);
            exp_shifted(seen, l);
            hidden.fill(0.0);
        }
        let (q, k, v) = e.operands(n);
        let do_n = &dout[n * tq * dv..(n + 1) * tq * dv];
        let mat = |data, trans| MatRef { data, trans };
        if let Some(g) = dvn {
            sgemm_on(
                e.threads,
                tk,
                dv,
                tq,
                mat(p, true),
                mat(do_n, false),
                g,
                1.0,
                0.0,
            )?;
        }
        if dq.is_none() && dk.is_none() {
            return Ok(());
        }
        sgemm_on(
            e.threads,
            tq,
            tk,
            dv,
            mat(do_n, false),
            mat(v, true),
            ds,
            1.0,
            0.0,
        )?;
        let out_n = &out[n * tq * dv..(n + 1) * tq * dv];
        for i in 0..tq {
            let rows = i * dv..(i + 1) * dv;
            let delta: f32 = do_n[rows.clone()]
                .iter()
                .zip(&out_n[rows])
                .map(|(a, b)| a * b)
                .sum();
            let (pr, dr) = (&p[i * tk..(i + 1) * tk], &mut ds[i * tk..(i + 1) * tk]);
            dr.iter_mut()
                .zip(pr)
                .for_each(|(g, &w)| *g = w * (*g - delta));
        }
        if let Some(g) = dq {
            sgemm_on(
                e.threads,
                tq,
                d,
                tk,
                mat(ds, false),
                mat(k, false),
                g,
                plan.scale,
                0.0,
            )?;
        }
        if let Some(g) = dk {
            sgemm_on(
                e.threads,
                tk,
                d,
                tq,
                mat(ds, true),
                mat(q, false),
                g,
                plan.scale,
                0.0,
            )?;
        }
        Ok(())
    };
    dq.into_par_iter()
        .zip(dk)
        .zip(dvs)
        .enumerate()
        .with_min_len(1)
        .try_for_each(|(n, ((a, b), c))| one(n, (a, b, c)))
}

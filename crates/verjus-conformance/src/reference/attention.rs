//! Scaled dot-product attention, naively: each score, weight and sum written
//! out in `f64` loops, with the key mask applied as "skip the key" rather
//! than as `-inf` (so it shares nothing with a backend's masking).

use crate::array::Array;

/// The operands of one call: `q [N, Tq, D]`, `k [N, Tk, D]`, `v [N, Tk, Dv]`,
/// per-entry key lengths, causality (query `i` sees keys `0..=i`), scale.
pub struct Operands<'a> {
    pub q: &'a Array,
    pub k: &'a Array,
    pub v: &'a Array,
    pub lengths: Option<&'a [i32]>,
    pub causal: bool,
    pub scale: f32,
}

impl Operands<'_> {
    fn sizes(&self) -> (usize, usize, usize, usize, usize) {
        let (q, v) = (&self.q.dims, &self.v.dims);
        (q[0], q[1], self.k.dims[1], q[2], v[2])
    }

    /// Whether query `i` of entry `n` sees key `j`.
    fn sees(&self, n: usize, i: usize, j: usize) -> bool {
        let in_length = self.lengths.is_none_or(|l| (j as i64) < i64::from(l[n]));
        in_length && (!self.causal || j <= i)
    }

    /// The weights of entry `n`'s query `i` over all keys (0 where unseen,
    /// all 0 when nothing is seen) and the row's log-sum-exp.
    fn weights(&self, n: usize, i: usize) -> (Vec<f64>, f64) {
        let (_, tq, tk, d, _) = self.sizes();
        let score = |j: usize| -> f64 {
            (0..d)
                .map(|c| {
                    f64::from(self.q.data[(n * tq + i) * d + c])
                        * f64::from(self.k.data[(n * tk + j) * d + c])
                })
                .sum::<f64>()
                * f64::from(self.scale)
        };
        let seen: Vec<usize> = (0..tk).filter(|&j| self.sees(n, i, j)).collect();
        let mut w = vec![0.0; tk];
        if seen.is_empty() {
            return (w, f64::NEG_INFINITY);
        }
        let scores: Vec<f64> = seen.iter().map(|&j| score(j)).collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
        for (&j, s) in seen.iter().zip(&scores) {
            w[j] = (s - max).exp() / sum;
        }
        (w, max + sum.ln())
    }
}

/// `(out [N, Tq, Dv], lse [N, Tq])`.
pub fn attention(o: &Operands<'_>) -> (Array, Array) {
    let (n_len, tq, tk, _, dv) = o.sizes();
    let mut out = Array::zeros([n_len, tq, dv]);
    let mut lse = Array::zeros([n_len, tq]);
    for n in 0..n_len {
        for i in 0..tq {
            let (w, l) = o.weights(n, i);
            lse.data[n * tq + i] = l as f32;
            for c in 0..dv {
                let sum: f64 = (0..tk)
                    .map(|j| w[j] * f64::from(o.v.data[(n * tk + j) * dv + c]))
                    .sum();
                out.data[(n * tq + i) * dv + c] = sum as f32;
            }
        }
    }
    (out, lse)
}

/// `(dq, dk, dv)` for the output gradient `dout [N, Tq, Dv]`, straight from
/// the chain rule through scores, softmax and the weighted sum.
pub fn attention_backward(o: &Operands<'_>, dout: &Array) -> (Array, Array, Array) {
    let (n_len, tq, tk, d, dv) = o.sizes();
    let mut dq = Array::zeros(o.q.dims.clone());
    let mut dk = Array::zeros(o.k.dims.clone());
    let mut dvs = Array::zeros(o.v.dims.clone());
    let scale = f64::from(o.scale);
    for n in 0..n_len {
        for i in 0..tq {
            let (w, _) = o.weights(n, i);
            let g = |c: usize| f64::from(dout.data[(n * tq + i) * dv + c]);
            // dL/dw_j = dout_i . v_j
            let dw: Vec<f64> = (0..tk)
                .map(|j| {
                    (0..dv)
                        .map(|c| g(c) * f64::from(o.v.data[(n * tk + j) * dv + c]))
                        .sum()
                })
                .collect();
            let mean: f64 = (0..tk).map(|j| w[j] * dw[j]).sum();
            for j in 0..tk {
                for c in 0..dv {
                    dvs.data[(n * tk + j) * dv + c] += (w[j] * g(c)) as f32;
                }
                let ds = w[j] * (dw[j] - mean) * scale;
                for c in 0..d {
                    let (qi, kj) = ((n * tq + i) * d + c, (n * tk + j) * d + c);
                    dq.data[qi] += (ds * f64::from(o.k.data[kj])) as f32;
                    dk.data[kj] += (ds * f64::from(o.q.data[qi])) as f32;
                }
            }
        }
    }
    (dq, dk, dvs)
}

//! Reference LSTM: the formulas of `verjus_core::ops::lstm`, one frame, one
//! sequence and one element at a time, in `f64`.
//!
//! ```text
//! gates = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh      (order i, f, g, o)
//! i, f, o = sigmoid(.);  g = tanh(.)
//! c_t = f * c_{t-1} + i * g;   h_t = o * tanh(c_t)
//! ```
//!
//! A sequence `b` runs its first `lengths[b]` frames; at later frames its
//! output is 0 and its state is carried. The backward is backpropagation
//! through time written out by hand from the same formulas: it recomputes the
//! forward, keeping every frame's gates and states, and walks the frames
//! backwards. A step (`lstm_cell`) is a sequence of one frame.

use crate::array::Array;

/// The operands, as in `verjus_core::ops::LstmArgs` (`x [T, B, F]`).
#[derive(Clone, Copy, Debug)]
pub struct Lstm<'a> {
    pub x: &'a Array,
    pub lengths: Option<&'a [i32]>,
    pub h0: Option<&'a Array>,
    pub c0: Option<&'a Array>,
    pub w_ih: &'a Array,
    pub w_hh: &'a Array,
    pub b_ih: Option<&'a Array>,
    pub b_hh: Option<&'a Array>,
}

/// The outputs: `y [T, B, H]` and the final state `h_n`, `c_n [B, H]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Outputs {
    pub y: Array,
    pub h_n: Array,
    pub c_n: Array,
}

/// The gradients of every operand (zeros where an operand is absent: for
/// `h0`/`c0` they are still the gradients of the zero initial state).
#[derive(Clone, Debug, PartialEq)]
pub struct Grads {
    pub dx: Array,
    pub dh0: Array,
    pub dc0: Array,
    pub dw_ih: Array,
    pub dw_hh: Array,
    pub db_ih: Array,
    pub db_hh: Array,
}

/// One frame of one sequence: the gate activations and the states around it.
#[derive(Clone, Debug)]
struct Frame {
    /// `[i | f | g | o]` after the activations, `4H` values.
    gates: Vec<f64>,
    h_prev: Vec<f64>,
    c_prev: Vec<f64>,
    c: Vec<f64>,
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

impl Lstm<'_> {
    /// `(T, B, F, H)`.
    fn sizes(&self) -> (usize, usize, usize, usize) {
        let d = &self.x.dims;
        assert_eq!(d.len(), 3, "reference lstm: x must be [T, B, F]");
        (d[0], d[1], d[2], self.w_hh.dims[1])
    }

    /// Sequence `b`'s length.
    fn length(&self, b: usize) -> usize {
        let steps = self.x.dims[0];
        self.lengths.map_or(steps, |l| {
            assert!(
                (0..=steps as i32).contains(&l[b]),
                "reference lstm: length out of range"
            );
            l[b] as usize
        })
    }

    fn state(a: Option<&Array>, b: usize, h: usize) -> Vec<f64> {
        (0..h)
            .map(|j| a.map_or(0.0, |a| f64::from(a.data[b * h + j])))
            .collect()
    }

    /// The frames sequence `b` runs, in order.
    fn run(&self, b: usize) -> Vec<Frame> {
        let (_, batch, f_len, h_len) = self.sizes();
        let mut h = Self::state(self.h0, b, h_len);
        let mut c = Self::state(self.c0, b, h_len);
        let mut frames = Vec::new();
        for t in 0..self.length(b) {
            let mut gates = vec![0.0; 4 * h_len];
            for (k, gate) in gates.iter_mut().enumerate() {
                let mut v = 0.0;
                if let (Some(bi), Some(bh)) = (self.b_ih, self.b_hh) {
                    v += f64::from(bi.data[k]) + f64::from(bh.data[k]);
                }
                for f in 0..f_len {
                    let x = f64::from(self.x.data[(t * batch + b) * f_len + f]);
                    v += x * f64::from(self.w_ih.data[k * f_len + f]);
                }
                for (j, &hj) in h.iter().enumerate() {
                    v += hj * f64::from(self.w_hh.data[k * h_len + j]);
                }
                *gate = if k / h_len == 2 { v.tanh() } else { sigmoid(v) };
            }
            let mut c_new = vec![0.0; h_len];
            let mut h_new = vec![0.0; h_len];
            for j in 0..h_len {
                let (i, f, g, o) = (
                    gates[j],
                    gates[h_len + j],
                    gates[2 * h_len + j],
                    gates[3 * h_len + j],
                );
                c_new[j] = f * c[j] + i * g;
                h_new[j] = o * c_new[j].tanh();
            }
            frames.push(Frame {
                gates,
                h_prev: h,
                c_prev: c,
                c: c_new.clone(),
            });
            h = h_new;
            c = c_new;
        }
        frames
    }
}

fn to_f32(dims: &[usize], v: &[f64]) -> Array {
    Array::new(dims, v.iter().map(|&x| x as f32).collect())
}

/// The LSTM over a sequence.
pub fn lstm_sequence(a: &Lstm<'_>) -> Outputs {
    let (steps, batch, _, h_len) = a.sizes();
    let mut y = vec![0.0; steps * batch * h_len];
    let mut h_n = vec![0.0; batch * h_len];
    let mut c_n = vec![0.0; batch * h_len];
    for b in 0..batch {
        let mut h = Lstm::state(a.h0, b, h_len);
        let mut c = Lstm::state(a.c0, b, h_len);
        for (t, frame) in a.run(b).iter().enumerate() {
            for j in 0..h_len {
                c[j] = frame.c[j];
                h[j] = frame.gates[3 * h_len + j] * frame.c[j].tanh();
                y[(t * batch + b) * h_len + j] = h[j];
            }
        }
        h_n[b * h_len..(b + 1) * h_len].copy_from_slice(&h);
        c_n[b * h_len..(b + 1) * h_len].copy_from_slice(&c);
    }
    Outputs {
        y: to_f32(&[steps, batch, h_len], &y),
        h_n: to_f32(&[batch, h_len], &h_n),
        c_n: to_f32(&[batch, h_len], &c_n),
    }
}

/// The gradients of [`lstm_sequence`] for the output gradients `dy [T, B, H]`,
/// `dh_n`, `dc_n [B, H]` (absent ones are zero).
pub fn lstm_sequence_backward(
    a: &Lstm<'_>,
    dy: Option<&Array>,
    dh_n: Option<&Array>,
    dc_n: Option<&Array>,
) -> Grads {
    let (steps, batch, f_len, h_len) = a.sizes();
    let g_len = 4 * h_len;
    let mut dx = vec![0.0; steps * batch * f_len];
    let mut dh0 = vec![0.0; batch * h_len];
    let mut dc0 = vec![0.0; batch * h_len];
    let mut dw_ih = vec![0.0; g_len * f_len];
    let mut dw_hh = vec![0.0; g_len * h_len];
    let mut db = vec![0.0; g_len];
    for b in 0..batch {
        let mut dh = Lstm::state(dh_n, b, h_len);
        let mut dc = Lstm::state(dc_n, b, h_len);
        for (t, fr) in a.run(b).iter().enumerate().rev() {
            // Pre-activation gradients of the gates.
            let mut dpre = vec![0.0; g_len];
            for j in 0..h_len {
                let (i, f, g, o) = (
                    fr.gates[j],
                    fr.gates[h_len + j],
                    fr.gates[2 * h_len + j],
                    fr.gates[3 * h_len + j],
                );
                let dh_j =
                    dh[j] + dy.map_or(0.0, |d| f64::from(d.data[(t * batch + b) * h_len + j]));
                let tanh_c = fr.c[j].tanh();
                let dc_j = dc[j] + dh_j * o * (1.0 - tanh_c * tanh_c);
                dpre[j] = dc_j * g * i * (1.0 - i);
                dpre[h_len + j] = dc_j * fr.c_prev[j] * f * (1.0 - f);
                dpre[2 * h_len + j] = dc_j * i * (1.0 - g * g);
                dpre[3 * h_len + j] = dh_j * tanh_c * o * (1.0 - o);
                dc[j] = dc_j * f;
            }
            for (k, &d) in dpre.iter().enumerate() {
                db[k] += d;
                for f in 0..f_len {
                    let x = f64::from(a.x.data[(t * batch + b) * f_len + f]);
                    dw_ih[k * f_len + f] += d * x;
                    dx[(t * batch + b) * f_len + f] += d * f64::from(a.w_ih.data[k * f_len + f]);
                }
                for j in 0..h_len {
                    dw_hh[k * h_len + j] += d * fr.h_prev[j];
                }
            }
            for (j, dh_j) in dh.iter_mut().enumerate() {
                *dh_j = (0..g_len)
                    .map(|k| dpre[k] * f64::from(a.w_hh.data[k * h_len + j]))
                    .sum();
            }
        }
        dh0[b * h_len..(b + 1) * h_len].copy_from_slice(&dh);
        dc0[b * h_len..(b + 1) * h_len].copy_from_slice(&dc);
    }
    Grads {
        dx: to_f32(&[steps, batch, f_len], &dx),
        dh0: to_f32(&[batch, h_len], &dh0),
        dc0: to_f32(&[batch, h_len], &dc0),
        dw_ih: to_f32(&[g_len, f_len], &dw_ih),
        dw_hh: to_f32(&[g_len, h_len], &dw_hh),
        db_ih: to_f32(&[g_len], &db),
        db_hh: to_f32(&[g_len], &db),
    }
}

/// One step: `a.x` is `[B, F]` (and `a.lengths` `None`); returns the new
/// `(h, c)`, each `[B, H]`.
pub fn lstm_cell(a: &Lstm<'_>) -> (Array, Array) {
    let x = as_sequence(a.x);
    let out = lstm_sequence(&Lstm { x: &x, ..*a });
    (out.h_n, out.c_n)
}

/// The gradients of [`lstm_cell`] for the new state's gradients `dh`, `dc`
/// (`dx` is `[B, F]`).
pub fn lstm_cell_backward(a: &Lstm<'_>, dh: Option<&Array>, dc: Option<&Array>) -> Grads {
    let x = as_sequence(a.x);
    let mut g = lstm_sequence_backward(&Lstm { x: &x, ..*a }, None, dh, dc);
    g.dx = g.dx.reshaped(a.x.dims.clone());
    g
}

/// `[B, F]` as a sequence of one frame.
fn as_sequence(x: &Array) -> Array {
    assert_eq!(x.dims.len(), 2, "reference lstm_cell: x must be [B, F]");
    x.clone().reshaped([1, x.dims[0], x.dims[1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    const LN2: f64 = std::f64::consts::LN_2;
    const LN3: f64 = 1.098_612_288_668_109_8;

    fn arr(dims: &[usize], v: &[f64]) -> Array {
        to_f32(dims, v)
    }

    fn near(what: &str, got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (f64::from(g) - w).abs() <= 1e-6 * (1.0 + w.abs()),
                "{what}[{k}]: got {g}, want {w}"
            );
        }
    }

    /// H = F = 1, three copies of one sequence with lengths 2, 1, 0. The
    /// weights make the pre-activations multiples of ln 3 and ln 2, where
    /// sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4 and tanh(ln 2) = 3/5.
    ///
    /// Frame 1 (x = 1, h0 = 0): pre = w_ih + b = (ln 3, -ln 3, ln 2, 0), so
    /// i = 3/4, f = 1/4, g = 3/5, o = 1/2; with c0 = 4 (ln 3 - 0.45),
    /// c1 = c0 / 4 + 0.45 = ln 3 and h1 = tanh(ln 3) / 2 = (8/10) / 2 = 0.4.
    /// Frame 2 (x = 0): pre = w_hh h1 + b = (ln 3, ln 3, ln 2, -ln 3), so
    /// i = f = 3/4, g = 3/5, o = 1/4: c2 = 3/4 ln 3 + 0.45, h2 = tanh(c2) / 4.
    fn hand_case() -> (Array, Array, Array, Array, Array, Array, Array) {
        let x = arr(&[2, 3, 1], &[1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
        let c0 = arr(&[3, 1], &[4.0 * (LN3 - 0.45); 3]);
        let h0 = arr(&[3, 1], &[0.0; 3]);
        let w_ih = arr(&[4, 1], &[LN3, -2.0 * LN3, 0.0, LN3]);
        let w_hh = arr(&[4, 1], &[2.5 * LN3, 0.0, 0.0, 0.0]);
        let b_ih = arr(&[4], &[0.0, LN3, 0.0, 0.0]);
        let b_hh = arr(&[4], &[0.0, 0.0, LN2, -LN3]);
        (x, h0, c0, w_ih, w_hh, b_ih, b_hh)
    }

    #[test]
    fn two_frames_and_lengths_by_hand() {
        let (x, h0, c0, w_ih, w_hh, b_ih, b_hh) = hand_case();
        let lengths = [2, 1, 0];
        let out = lstm_sequence(&Lstm {
            x: &x,
            lengths: Some(&lengths),
            h0: Some(&h0),
            c0: Some(&c0),
            w_ih: &w_ih,
            w_hh: &w_hh,
            b_ih: Some(&b_ih),
            b_hh: Some(&b_hh),
        });
        let c2 = 0.75 * LN3 + 0.45;
        let h2 = c2.tanh() / 4.0;
        let c0v = 4.0 * (LN3 - 0.45);
        // Frame 1: all but the empty sequence; frame 2: only the first.
        near("y", &out.y.data, &[0.4, 0.4, 0.0, h2, 0.0, 0.0]);
        near("h_n", &out.h_n.data, &[h2, 0.4, 0.0]);
        near("c_n", &out.c_n.data, &[c2, LN3, c0v]);
    }

    /// One frame of the hand case, loss = h1: the gradients by the chain rule.
    #[test]
    fn one_frame_gradients_by_hand() {
        let (_, h0, c0, w_ih, w_hh, b_ih, b_hh) = hand_case();
        let x1 = Array::new([1, 1, 1], vec![1.0]);
        let (h0, c0) = (
            Array::new([1, 1], vec![h0.data[0]]),
            Array::new([1, 1], vec![c0.data[0]]),
        );
        let a = Lstm {
            x: &x1,
            lengths: None,
            h0: Some(&h0),
            c0: Some(&c0),
            w_ih: &w_ih,
            w_hh: &w_hh,
            b_ih: Some(&b_ih),
            b_hh: Some(&b_hh),
        };
        let dy = Array::new([1, 1, 1], vec![1.0]);
        let g = lstm_sequence_backward(&a, Some(&dy), None, None);
        // h1 = o tanh(c1), tanh(c1) = 0.8, o = 0.5, i = 0.75, f = 0.25, g = 0.6.
        // dL/dc1 = o (1 - 0.64) = 0.18; the pre-activations' gradients:
        let c0v = f64::from(c0.data[0]);
        let d_i = 0.18 * 0.6 * 0.75 * 0.25;
        let d_f = 0.18 * c0v * 0.25 * 0.75;
        let d_g = 0.18 * 0.75 * (1.0 - 0.36);
        let d_o = 0.8 * 0.5 * 0.5;
        let dpre = [d_i, d_f, d_g, d_o];
        near("db_ih", &g.db_ih.data, &dpre);
        near("db_hh", &g.db_hh.data, &dpre);
        near("dw_ih (x = 1)", &g.dw_ih.data, &dpre);
        near("dw_hh (h0 = 0)", &g.dw_hh.data, &[0.0; 4]);
        near("dc0", &g.dc0.data, &[0.18 * 0.25]);
        let w: Vec<f64> = w_ih.data.iter().map(|&v| f64::from(v)).collect();
        let dx: f64 = dpre.iter().zip(&w).map(|(d, w)| d * w).sum();
        near("dx", &g.dx.data, &[dx]);
        let w: Vec<f64> = w_hh.data.iter().map(|&v| f64::from(v)).collect();
        near("dh0", &g.dh0.data, &[d_i * w[0]]);
    }

    fn uniform(seed: u64, dims: &[usize], scale: f32) -> Array {
        crate::inputs::uniform(seed, dims, -scale, scale)
    }

    /// The backward against central differences of the forward, with lengths
    /// {3, 0, 1, 2} of T = 3 and every output's gradient.
    #[test]
    fn backward_matches_differences_of_the_forward() {
        let (t, b, f, h) = (3, 4, 2, 3);
        let mut inputs = vec![
            uniform(1, &[t, b, f], 1.0),
            uniform(2, &[b, h], 1.0),
            uniform(3, &[b, h], 1.0),
            uniform(4, &[4 * h, f], 0.6),
            uniform(5, &[4 * h, h], 0.6),
            uniform(6, &[4 * h], 0.6),
            uniform(7, &[4 * h], 0.6),
        ];
        let lengths = [3, 0, 1, 2];
        let (ry, rh, rc) = (
            uniform(8, &[t, b, h], 1.0),
            uniform(9, &[b, h], 1.0),
            uniform(10, &[b, h], 1.0),
        );
        fn lstm<'a>(v: &'a [Array], lengths: &'a [i32]) -> Lstm<'a> {
            Lstm {
                x: &v[0],
                lengths: Some(lengths),
                h0: Some(&v[1]),
                c0: Some(&v[2]),
                w_ih: &v[3],
                w_hh: &v[4],
                b_ih: Some(&v[5]),
                b_hh: Some(&v[6]),
            }
        }
        let dot = |a: &Array, r: &Array| -> f64 {
            a.data
                .iter()
                .zip(&r.data)
                .map(|(&p, &q)| f64::from(p) * f64::from(q))
                .sum()
        };
        let loss = |v: &[Array]| {
            let o = lstm_sequence(&lstm(v, &lengths));
            dot(&o.y, &ry) + dot(&o.h_n, &rh) + dot(&o.c_n, &rc)
        };
        let g = lstm_sequence_backward(&lstm(&inputs, &lengths), Some(&ry), Some(&rh), Some(&rc));
        let analytic = [g.dx, g.dh0, g.dc0, g.dw_ih, g.dw_hh, g.db_ih, g.db_hh];
        for (k, want) in analytic.iter().enumerate() {
            for i in 0..want.data.len() {
                let orig = inputs[k].data[i];
                inputs[k].data[i] = orig + 1e-2;
                let up = loss(&inputs);
                inputs[k].data[i] = orig - 1e-2;
                let down = loss(&inputs);
                inputs[k].data[i] = orig;
                let numeric = (up - down) / 2e-2;
                let a = f64::from(want.data[i]);
                assert!(
                    (a - numeric).abs() <= 1e-4 + 1e-3 * numeric.abs(),
                    "input {k}[{i}]: backward {a}, differences {numeric}"
                );
            }
        }
        // Frames past a length get no gradient; an empty sequence passes its
        // state's gradients straight to the initial state.
        assert!(analytic[0].data[f..2 * f].iter().all(|&v| v == 0.0));
        near(
            "dh0 of the empty sequence",
            &analytic[1].data[h..2 * h],
            &rh.data[h..2 * h]
                .iter()
                .map(|&v| f64::from(v))
                .collect::<Vec<_>>(),
        );
    }

    #[test]
    fn a_cell_is_one_frame() {
        let x = uniform(11, &[2, 3], 1.0);
        let (h0, c0) = (uniform(12, &[2, 4], 1.0), uniform(13, &[2, 4], 1.0));
        let (w_ih, w_hh) = (uniform(14, &[16, 3], 0.5), uniform(15, &[16, 4], 0.5));
        let cell = Lstm {
            x: &x,
            lengths: None,
            h0: Some(&h0),
            c0: Some(&c0),
            w_ih: &w_ih,
            w_hh: &w_hh,
            b_ih: None,
            b_hh: None,
        };
        let (h, c) = lstm_cell(&cell);
        let x3 = x.clone().reshaped([1, 2, 3]);
        let seq = lstm_sequence(&Lstm { x: &x3, ..cell });
        assert_eq!((h, c), (seq.y.reshaped([2, 4]), seq.c_n));
        let g = lstm_cell_backward(&cell, Some(&h0), None);
        assert_eq!(g.dx.dims, vec![2, 3]);
    }
}

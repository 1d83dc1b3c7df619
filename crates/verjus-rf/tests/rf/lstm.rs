//! `lstm` by dims: against a naive per-sequence step loop written here (with
//! lengths {0, 1, T-1, T}, two batch dims, lengths over one of them),
//! finite-difference gradients of every input, batched-vs-single-entry,
//! one `single_step_dim` step against the first frame, and bad input.

use crate::common::*;
use verjus_rf::*;

const LENS: [i32; 4] = [3, 1, 0, 2];
const T: usize = 3;
const B: usize = 4;
const F: usize = 3;
const H: usize = 2;

struct Weights {
    gates: Dim,
    in_dim: Dim,
    out_dim: Dim,
    /// `[4H, F]`, `[4H, H]`, `[4H]` row-major (PyTorch's layout).
    ff: Vec<f32>,
    rec: Vec<f32>,
    bias: Vec<f32>,
}

fn weights() -> Weights {
    Weights {
        gates: Dim::new_static(4 * H, "gates"),
        in_dim: Dim::new_static(F, "in"),
        out_dim: Dim::new_static(H, "out"),
        ff: uniform(11, 4 * H * F, -0.8, 0.8),
        rec: uniform(12, 4 * H * H, -0.8, 0.8),
        bias: uniform(13, 4 * H, -0.5, 0.5),
    }
}

impl Weights {
    fn tensors(&self) -> [RfTensor; 3] {
        [
            float(&[&self.gates, &self.in_dim], &[4 * H, F], self.ff.clone()),
            float(
                &[&self.out_dim, &self.gates],
                &[H, 4 * H],
                transpose(&self.rec, 4 * H, H),
            ),
            float(&[&self.gates], &[4 * H], self.bias.clone()),
        ]
    }

    fn params<'a>(&'a self, t: &'a [RfTensor]) -> LstmParams<'a> {
        LstmParams {
            ff_weight: &t[0],
            rec_weight: &t[1],
            bias: Some(&t[2]),
            in_dim: &self.in_dim,
            out_dim: &self.out_dim,
        }
    }

    /// One step of the naive reference: `(h, c)` from `x [F]` and `(h, c)`.
    fn step(&self, x: &[f32], h: &[f32], c: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let sigmoid = |v: f32| 1.0 / (1.0 + (-v).exp());
        let gate = |g: usize, j: usize| {
            let row = g * H + j;
            let mut s = self.bias[row];
            s += (0..F).map(|k| self.ff[row * F + k] * x[k]).sum::<f32>();
            s += (0..H).map(|k| self.rec[row * H + k] * h[k]).sum::<f32>();
            s
        };
        let mut h1 = vec![0.0; H];
        let mut c1 = vec![0.0; H];
        for j in 0..H {
            let (i, f, g, o) = (gate(0, j), gate(1, j), gate(2, j), gate(3, j));
            c1[j] = sigmoid(f) * c[j] + sigmoid(i) * g.tanh();
            h1[j] = sigmoid(o) * c1[j].tanh();
        }
        (h1, c1)
    }
}

fn transpose(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols)
        .flat_map(|j| (0..rows).map(move |i| v[i * cols + j]))
        .collect()
}

/// `[batch, time, in]` source and `[batch, out]` states.
fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        uniform(1, B * T * F, -1.0, 1.0),
        uniform(2, B * H, -1.0, 1.0),
        uniform(3, B * H, -1.0, 1.0),
    )
}

#[test]
fn matches_a_naive_step_loop_with_two_batch_dims() {
    // Source over [beam, batch, time, in], lengths over [batch] only.
    let w = weights();
    let wt = w.tensors();
    let (t, batch, beam) = (time(&LENS), batch_dim(), Dim::new_static(2, "beam"));
    let x = uniform(21, 2 * B * T * F, -1.0, 1.0);
    let h0 = uniform(22, B * H, -1.0, 1.0); // over [batch, out]: broadcast over beam
    let c0 = uniform(23, 2 * B * H, -1.0, 1.0); // over [out, beam, batch]
    let source = float(&[&beam, &batch, &t, &w.in_dim], &[2, B, T, F], x.clone());
    let h = float(&[&batch, &w.out_dim], &[B, H], h0.clone());
    let c = float(&[&w.out_dim, &beam, &batch], &[H, 2, B], c0.clone());
    let (out, h1, c1) = lstm(&source, &h, &c, &w.params(&wt), &t).unwrap();
    assert_eq!(names(&out), ["time", "beam", "batch", "out"]);
    assert_eq!(names(&h1), ["beam", "batch", "out"]);
    assert_eq!(out.feature_dim(), Some(&w.out_dim));
    let (out, h1, c1) = (vals(&out), vals(&h1), vals(&c1));
    for k in 0..2 {
        for b in 0..B {
            let mut hs: Vec<f32> = h0[b * H..(b + 1) * H].to_vec();
            let mut cs: Vec<f32> = (0..H).map(|j| c0[j * 2 * B + k * B + b]).collect();
            for step in 0..T {
                let at = ((step * 2 + k) * B + b) * H;
                let got = &out[at..at + H];
                if step < LENS[b] as usize {
                    let xs = &x[((k * B + b) * T + step) * F..][..F];
                    (hs, cs) = w.step(xs, &hs, &cs);
                    assert_close(&format!("out[{step}, {k}, {b}]"), got, &hs, 1e-5);
                } else {
                    assert_close(
                        &format!("padding out[{step}, {k}, {b}]"),
                        got,
                        &[0.0; H],
                        0.0,
                    );
                }
            }
            let at = (k * B + b) * H;
            assert_close(&format!("h[{k}, {b}]"), &h1[at..at + H], &hs, 1e-5);
            assert_close(&format!("c[{k}, {b}]"), &c1[at..at + H], &cs, 1e-5);
        }
    }
}

#[test]
fn gradients_of_every_input_match_finite_differences() {
    let w = weights();
    let (t, batch) = (time(&LENS), batch_dim());
    let (x, h0, c0) = inputs();
    let ins = vec![
        (
            vec![batch.clone(), t.clone(), w.in_dim.clone()],
            vec![B, T, F],
            x,
        ),
        (vec![batch.clone(), w.out_dim.clone()], vec![B, H], h0),
        (vec![batch.clone(), w.out_dim.clone()], vec![B, H], c0),
        (
            vec![w.gates.clone(), w.in_dim.clone()],
            vec![4 * H, F],
            w.ff.clone(),
        ),
        (
            vec![w.gates.clone(), w.out_dim.clone()],
            vec![4 * H, H],
            w.rec.clone(),
        ),
        (vec![w.gates.clone()], vec![4 * H], w.bias.clone()),
    ];
    // out, h and c all feed the loss.
    gradcheck("lstm", &ins, |v| {
        let p = w.params(&v[3..]);
        let (out, h, c) = lstm(&v[0], &v[1], &v[2], &p, &t).unwrap();
        let hc = combine(&h, verjus_core::ops::BinaryOp::Sub, &c, false).unwrap();
        combine(&out, verjus_core::ops::BinaryOp::Add, &hc, true).unwrap()
    });
}

#[test]
fn each_entry_alone_gives_its_slice() {
    let w = weights();
    let wt = w.tensors();
    let (x, _, _) = inputs();
    let t = time(&LENS);
    let ins = vec![(
        vec![batch_dim(), t.clone(), w.in_dim.clone()],
        vec![B, T, F],
        x,
    )];
    // The state over [out] only, broadcast over the batch.
    let h = float(&[&w.out_dim], &[H], vec![0.5, -0.25]);
    let c = float(&[&w.out_dim], &[H], vec![-0.5, 1.0]);
    check_single_entry("lstm", &LENS, &ins, &t, |v, t| {
        lstm(&v[0], &h, &c, &w.params(&wt), t).unwrap().0
    });
}

#[test]
fn a_single_step_is_the_first_frame() {
    let w = weights();
    let wt = w.tensors();
    let (x, h0, c0) = inputs();
    let (t, batch) = (Dim::new_static(T, "static-time"), batch_dim());
    let source = float(&[&batch, &t, &w.in_dim], &[B, T, F], x.clone());
    let h = float(&[&batch, &w.out_dim], &[B, H], h0);
    let c = float(&[&batch, &w.out_dim], &[B, H], c0);
    let (out, _, _) = lstm(&source, &h, &c, &w.params(&wt), &t).unwrap();
    let first: Vec<f32> = (0..B).flat_map(|b| x[b * T * F..][..F].to_vec()).collect();
    let frame = float(&[&batch, &w.in_dim], &[B, F], first);
    let (y, h1, c1) = lstm(&frame, &h, &c, &w.params(&wt), &single_step_dim()).unwrap();
    assert_eq!(names(&y), ["batch", "out"]);
    assert_close("step output = new h", &vals(&y), &vals(&h1), 0.0);
    assert_close("step = first frame", &vals(&y), &vals(&out)[..B * H], 1e-6);
    assert_eq!(vals(&c1).len(), B * H);
}

#[test]
fn bad_input_is_a_clear_error() {
    let w = weights();
    let wt = w.tensors();
    let (x, h0, _) = inputs();
    let (t, batch) = (time(&LENS), batch_dim());
    let source = float(&[&batch, &t, &w.in_dim], &[B, T, F], x);
    let h = float(&[&batch, &w.out_dim], &[B, H], h0);
    let err = |r: verjus_core::Result<(RfTensor, RfTensor, RfTensor)>| r.err().unwrap().to_string();
    let other = Dim::new_static(F, "other");
    let p = LstmParams {
        in_dim: &other,
        ..w.params(&wt)
    };
    assert!(err(lstm(&source, &h, &h, &p, &t)).contains("dim other is not in"));
    let extra = float(&[&w.out_dim, &other], &[H, F], vec![0.0; H * F]);
    assert!(err(lstm(&source, &extra, &h, &w.params(&wt), &t)).contains("state h"));
    let no_out = float(&[&batch], &[B], vec![0.0; B]);
    assert!(err(lstm(&source, &h, &no_out, &w.params(&wt), &t)).contains("lacks out_dim"));
    let bias = float(&[&w.in_dim], &[F], vec![0.0; F]);
    let p = LstmParams {
        bias: Some(&bias),
        ..w.params(&wt)
    };
    assert!(err(lstm(&source, &h, &h, &p, &t)).contains("bias must be over"));
}

//! A padded batch is its sequences run one at a time: the LSTM over a batch
//! with lengths {0, 1, T-1, T} (shuffled) must give, for each sequence, the
//! outputs, final state and gradients of that sequence run alone without
//! lengths over its own frames; the padding frames must output exactly 0 and
//! get exactly 0 input gradient, and the weight gradients of the batch must be
//! the sums of those of the sequences. Only the backend is involved (no
//! reference), so this pins down the lengths' semantics on their own.
//! Tolerance: `Tolerance::GEMM` (the batch and the single sequences sum their
//! products in different orders), `Tolerance::EXACT` for the padding.

use super::lstm_operands::{backward, forward, Device, Forward, Host, Sizes, Slot};
use crate::array::Array;
use crate::compare::{close, every_case, Failures, Tolerance};
use crate::inputs::uniform;
use crate::transfer::put;
use verjus_core::Backend;

/// Everything one run gives: `y`, `h_n`, `c_n`, then the gradients by [`Slot`].
struct Run {
    outputs: [Vec<f32>; 3],
    grads: [Option<Vec<f32>>; 7],
}

/// Forward and backward of `host` with all output gradients, asking for every
/// input gradient.
fn run(
    be: &dyn Backend,
    what: &str,
    s: &Sizes,
    host: &Host,
    dout: [&Array; 3],
) -> Result<Run, String> {
    let device: Device = host.upload(be, what)?;
    let f: Forward = forward(be, what, s, &device)?;
    let outputs = f.download(be, what)?;
    let [dy, dh, dc] = dout.map(|a| put(be, what, a));
    let (dy, dh, dc) = (dy?, dh?, dc?);
    let grads = backward(
        be,
        what,
        s,
        &device,
        &f,
        [Some(&dy), Some(&dh), Some(&dc)],
        &Slot::ALL,
    )?;
    Ok(Run { outputs, grads })
}

/// Rows `t < len` of sequence `b` in a `[T, B, width]` array.
fn frames(data: &[f32], batch: usize, width: usize, b: usize, len: usize) -> Vec<f32> {
    (0..len)
        .flat_map(|t| data[(t * batch + b) * width..][..width].iter().copied())
        .collect()
}

/// Rows `t >= len` of sequence `b` in a `[T, B, width]` array.
fn padding(
    data: &[f32],
    steps: usize,
    batch: usize,
    width: usize,
    b: usize,
    len: usize,
) -> Vec<f32> {
    (len..steps)
        .flat_map(|t| data[(t * batch + b) * width..][..width].iter().copied())
        .collect()
}

fn row(data: &[f32], width: usize, b: usize) -> &[f32] {
    &data[b * width..(b + 1) * width]
}

fn grad(r: &Run, slot: Slot) -> &[f32] {
    r.grads[slot as usize].as_deref().unwrap_or(&[])
}

/// `lstm_sequence` and its backward over a batch with lengths {0, 1, T-1, T}
/// against each sequence run alone.
pub fn lstm_lengths_equal_sequences_alone(be: &dyn Backend) -> Result<(), String> {
    let cases: [(usize, usize, usize, [i32; 4]); 2] =
        [(5, 3, 5, [4, 0, 5, 1]), (1, 2, 17, [1, 0, 0, 1])];
    every_case(cases, |(steps, input, hidden, lengths)| {
        let batch = lengths.len();
        let s = Sizes {
            steps,
            batch,
            input,
            hidden,
            lengths: true,
            h0: true,
            c0: true,
            bias: true,
            cell: false,
        };
        let what = format!(
            "{} {lengths:?} against each sequence alone",
            s.describe("lstm_sequence")
        );
        let mut host = Host::draw(40, &s);
        host.lengths = Some(lengths.to_vec());
        let dy = uniform(41, &s.y_dims(), -1.0, 1.0);
        let dh = uniform(42, &s.state_dims(), -1.0, 1.0);
        let dc = uniform(43, &s.state_dims(), -1.0, 1.0);
        let all = run(be, &what, &s, &host, [&dy, &dh, &dc])?;
        let [y, h_n, c_n] = &all.outputs;
        let mut failures = Failures::new();
        let mut weight_sums = [Slot::WIh, Slot::WHh, Slot::BIh, Slot::BHh]
            .map(|slot| vec![0f64; grad(&all, slot).len()]);
        for (b, &len) in lengths.iter().enumerate() {
            let len = len as usize;
            let what = format!("{what}: sequence {b} (length {len})");
            let one = Sizes {
                steps: len,
                batch: 1,
                lengths: false,
                ..s
            };
            let pick = |a: &Array, dims: Vec<usize>, width: usize| {
                Array::new(dims, frames(&a.data, batch, width, b, len))
            };
            let state = |a: &Array| Array::new([1, hidden], row(&a.data, hidden, b).to_vec());
            let mut alone = host.clone();
            alone.lengths = None;
            let x = host.get(Slot::X).ok_or("no x")?;
            alone.slots[Slot::X as usize] = Some(pick(x, vec![len, 1, input], input));
            for slot in [Slot::H0, Slot::C0] {
                let a = host.get(slot).ok_or("no state")?;
                alone.slots[slot as usize] = Some(state(a));
            }
            let dout = [
                &pick(&dy, vec![len, 1, hidden], hidden),
                &state(&dh),
                &state(&dc),
            ];
            let single = run(be, &what, &one, &alone, dout)?;
            let [y1, h1, c1] = &single.outputs;
            let mut same = |name: &str, want: &[f32], got: &[f32]| {
                failures.record(close(
                    &format!("{what}: {name}"),
                    &[want.len()],
                    want,
                    got,
                    Tolerance::GEMM,
                ));
            };
            same("y", y1, &frames(y, batch, hidden, b, len));
            same("h_n", h1, row(h_n, hidden, b));
            same("c_n", c1, row(c_n, hidden, b));
            same(
                "dx",
                grad(&single, Slot::X),
                &frames(grad(&all, Slot::X), batch, input, b, len),
            );
            same(
                "dh0",
                grad(&single, Slot::H0),
                row(grad(&all, Slot::H0), hidden, b),
            );
            same(
                "dc0",
                grad(&single, Slot::C0),
                row(grad(&all, Slot::C0), hidden, b),
            );
            let zeros = |width| vec![0.0; (steps - len) * width];
            for (name, data, width) in [("y", &y[..], hidden), ("dx", grad(&all, Slot::X), input)] {
                failures.record(close(
                    &format!("{what}: {name} past the length"),
                    &[steps - len, width],
                    &zeros(width),
                    &padding(data, steps, batch, width, b, len),
                    Tolerance::EXACT,
                ));
            }
            for (sum, slot) in
                weight_sums
                    .iter_mut()
                    .zip([Slot::WIh, Slot::WHh, Slot::BIh, Slot::BHh])
            {
                for (acc, &g) in sum.iter_mut().zip(grad(&single, slot)) {
                    *acc += f64::from(g);
                }
            }
        }
        for (sum, slot) in weight_sums
            .iter()
            .zip([Slot::WIh, Slot::WHh, Slot::BIh, Slot::BHh])
        {
            let want: Vec<f32> = sum.iter().map(|&v| v as f32).collect();
            failures.record(close(
                &format!(
                    "{what}: d{} against the sum over the sequences",
                    slot.name()
                ),
                &[want.len()],
                &want,
                grad(&all, slot),
                Tolerance::GEMM,
            ));
        }
        failures.finish()
    })
}

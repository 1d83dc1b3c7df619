//! The operands of an LSTM call, drawn on the host, uploaded, and run through
//! the backend: what the LSTM checks, gradient checks and error checks share.
//!
//! Inputs are drawn so that the gates are neither saturated nor linear: `x`,
//! `h0`, `c0` uniform on `[-1, 1)`, weights and biases on `[-0.5, 0.5)`.
//! Lengths, when a case has them, cycle through `{0, 1, T-1, T}`.

use crate::array::Array;
use crate::inputs::uniform;
use crate::reference::lstm::Lstm;
use crate::transfer::{get, put, put_vec, zeros, Context};
use verjus_core::ops::{self, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan};
use verjus_core::{Backend, DType, Tensor};

/// The sizes and optional operands of one call. A cell step has `cell` set
/// (`steps` is then 1 and `x` is `[B, F]`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sizes {
    pub steps: usize,
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
    pub lengths: bool,
    pub h0: bool,
    pub c0: bool,
    pub bias: bool,
    pub cell: bool,
}

impl Sizes {
    /// A description for failure messages.
    pub fn describe(&self, op: &str) -> String {
        let mut s = if self.cell {
            format!("{op} B={} F={} H={}", self.batch, self.input, self.hidden)
        } else {
            format!(
                "{op} T={} B={} F={} H={}",
                self.steps, self.batch, self.input, self.hidden
            )
        };
        for (on, name) in [
            (self.lengths, "lengths"),
            (self.h0, "h0"),
            (self.c0, "c0"),
            (self.bias, "biases"),
        ] {
            if on {
                s.push_str(" +");
                s.push_str(name);
            }
        }
        s
    }

    /// `x`'s dimensions.
    pub fn x_dims(&self) -> Vec<usize> {
        if self.cell {
            vec![self.batch, self.input]
        } else {
            vec![self.steps, self.batch, self.input]
        }
    }

    /// `y`'s dimensions (a cell's new `h`).
    pub fn y_dims(&self) -> Vec<usize> {
        if self.cell {
            self.state_dims()
        } else {
            vec![self.steps, self.batch, self.hidden]
        }
    }

    pub fn state_dims(&self) -> Vec<usize> {
        vec![self.batch, self.hidden]
    }
}

/// Lengths cycling through `{0, 1, T-1, T}` from `shift`.
pub(crate) fn mixed_lengths(steps: usize, batch: usize, shift: usize) -> Vec<i32> {
    let pattern = [0, 1.min(steps), steps.saturating_sub(1), steps];
    (0..batch)
        .map(|b| pattern[(b + shift) % 4] as i32)
        .collect()
}

/// The differentiable operands, in the order of `ops::LstmGrads`' fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    X,
    H0,
    C0,
    WIh,
    WHh,
    BIh,
    BHh,
}

impl Slot {
    pub const ALL: [Slot; 7] = [
        Slot::X,
        Slot::H0,
        Slot::C0,
        Slot::WIh,
        Slot::WHh,
        Slot::BIh,
        Slot::BHh,
    ];

    pub fn name(self) -> &'static str {
        ["x", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"][self as usize]
    }
}

/// The operands on the host; absent ones are `None`.
#[derive(Clone, Debug)]
pub(crate) struct Host {
    pub lengths: Option<Vec<i32>>,
    /// Indexed by [`Slot`].
    pub slots: [Option<Array>; 7],
}

impl Host {
    /// Draws the operands of `s` from `seed`.
    pub fn draw(seed: u64, s: &Sizes) -> Host {
        let (b, h, g) = (s.batch, s.hidden, 4 * s.hidden);
        let state = |on: bool, k| on.then(|| uniform(seed + k, &[b, h], -1.0, 1.0));
        let bias = |k| s.bias.then(|| uniform(seed + k, &[g], -0.5, 0.5));
        Host {
            lengths: s.lengths.then(|| mixed_lengths(s.steps, b, seed as usize)),
            slots: [
                Some(uniform(seed, &s.x_dims(), -1.0, 1.0)),
                state(s.h0, 1),
                state(s.c0, 2),
                Some(uniform(seed + 3, &[g, s.input], -0.5, 0.5)),
                Some(uniform(seed + 4, &[g, h], -0.5, 0.5)),
                bias(5),
                bias(6),
            ],
        }
    }

    pub fn get(&self, slot: Slot) -> Option<&Array> {
        self.slots[slot as usize].as_ref()
    }

    /// The same operands with `slot` replaced by `a`.
    pub fn with(&self, slot: Slot, a: &Array) -> Host {
        let mut h = self.clone();
        h.slots[slot as usize] = Some(a.clone());
        h
    }

    /// The reference's view of the operands.
    pub fn reference(&self) -> Lstm<'_> {
        let [x, h0, c0, w_ih, w_hh, b_ih, b_hh] = self.slots.each_ref().map(Option::as_ref);
        let (Some(x), Some(w_ih), Some(w_hh)) = (x, w_ih, w_hh) else {
            panic!("LSTM operands without x or weights (a bug in the suite)");
        };
        Lstm {
            x,
            lengths: self.lengths.as_deref(),
            h0,
            c0,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
        }
    }

    /// Uploads the operands.
    pub fn upload(&self, be: &dyn Backend, what: &str) -> Result<Device, String> {
        let lengths = self
            .lengths
            .as_ref()
            .map(|l| put_vec(be, what, &[l.len()], l.clone()))
            .transpose()?;
        let mut slots: [Option<Tensor>; 7] = Default::default();
        for (t, a) in slots.iter_mut().zip(&self.slots) {
            *t = a.as_ref().map(|a| put(be, what, a)).transpose()?;
        }
        Ok(Device { lengths, slots })
    }
}

/// The operands on the backend.
#[derive(Debug)]
pub(crate) struct Device {
    pub lengths: Option<Tensor>,
    /// Indexed by [`Slot`].
    pub slots: [Option<Tensor>; 7],
}

impl Device {
    pub fn args(&self) -> LstmArgs<'_> {
        let [x, h0, c0, w_ih, w_hh, b_ih, b_hh] = self.slots.each_ref().map(Option::as_ref);
        let (Some(x), Some(w_ih), Some(w_hh)) = (x, w_ih, w_hh) else {
            panic!("LSTM operands without x or weights (a bug in the suite)");
        };
        LstmArgs {
            x,
            lengths: self.lengths.as_ref(),
            h0,
            c0,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
        }
    }
}

/// What a forward on the backend gave: `y` (a cell's new `h`), `h_n` (`None`
/// for a cell), `c_n` and the reserve.
#[derive(Debug)]
pub(crate) struct Forward {
    pub y: Tensor,
    pub h_n: Option<Tensor>,
    pub c_n: Tensor,
    pub reserve: Tensor,
}

impl Forward {
    /// `(y, h_n, c_n)` on the host (`h_n` empty for a cell).
    pub fn download(&self, be: &dyn Backend, what: &str) -> Result<[Vec<f32>; 3], String> {
        let h_n = match &self.h_n {
            Some(t) => get(be, what, t)?,
            None => Vec::new(),
        };
        Ok([get(be, what, &self.y)?, h_n, get(be, what, &self.c_n)?])
    }
}

/// Runs `lstm_sequence` (or `lstm_cell` when `s.cell`) on the backend, into
/// outputs that start as garbage (they must be overwritten).
pub(crate) fn forward(
    be: &dyn Backend,
    what: &str,
    s: &Sizes,
    d: &Device,
) -> Result<Forward, String> {
    let args = d.args();
    let op = if s.cell { "lstm_cell" } else { "lstm_sequence" };
    let plan: LstmPlan = ops::lstm_plan(op, be, &args, s.cell).context(what)?;
    let reserve_len = ops::lstm_reserve_len(be, &plan).context(what)?;
    let garbage = |dims: &[usize]| put(be, what, &uniform(7, dims, 5.0, 6.0));
    let mut f = Forward {
        y: garbage(&s.y_dims())?,
        h_n: (!s.cell).then(|| garbage(&s.state_dims())).transpose()?,
        c_n: garbage(&s.state_dims())?,
        reserve: zeros(be, what, &[reserve_len], DType::F32)?,
    };
    let out = LstmOutputs {
        y: &mut f.y,
        h_n: f.h_n.as_mut(),
        c_n: &mut f.c_n,
        reserve: &mut f.reserve,
    };
    if s.cell {
        ops::lstm_cell(be, &args, out).context(what)?;
    } else {
        ops::lstm_sequence(be, &args, out).context(what)?;
    }
    Ok(f)
}

/// Runs `lstm_sequence_backward` (or `lstm_cell_backward`) after `f` with the
/// output gradients `dout` (`[dy, dh_n, dc_n]`; a cell's `dh_n` is `None`),
/// asking for the gradients of `wanted` in tensors that start as garbage;
/// returns them on the host, indexed by [`Slot`].
pub(crate) fn backward(
    be: &dyn Backend,
    what: &str,
    s: &Sizes,
    d: &Device,
    f: &Forward,
    dout: [Option<&Tensor>; 3],
    wanted: &[Slot],
) -> Result<[Option<Vec<f32>>; 7], String> {
    let args = d.args();
    let mut grads: [Option<Tensor>; 7] = Default::default();
    for (slot, g) in Slot::ALL.into_iter().zip(grads.iter_mut()) {
        if wanted.contains(&slot) {
            let dims = match slot {
                Slot::X => s.x_dims(),
                Slot::H0 | Slot::C0 => s.state_dims(),
                Slot::WIh => vec![4 * s.hidden, s.input],
                Slot::WHh => vec![4 * s.hidden, s.hidden],
                Slot::BIh | Slot::BHh => vec![4 * s.hidden],
            };
            *g = Some(put(be, what, &uniform(8, &dims, 5.0, 6.0))?);
        }
    }
    let [dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh] = grads.each_mut().map(Option::as_mut);
    let into = LstmGrads {
        dx,
        dh0,
        dc0,
        dw_ih,
        dw_hh,
        db_ih,
        db_hh,
    };
    let [dy, dh_n, dc_n] = dout;
    let dout = LstmOutputGrads { dy, dh_n, dc_n };
    if s.cell {
        ops::lstm_cell_backward(be, &args, &f.y, &f.reserve, &dout, into).context(what)?;
    } else {
        ops::lstm_sequence_backward(be, &args, &f.y, &f.reserve, &dout, into).context(what)?;
    }
    let mut out: [Option<Vec<f32>>; 7] = Default::default();
    for (o, g) in out.iter_mut().zip(&grads) {
        *o = g.as_ref().map(|g| get(be, what, g)).transpose()?;
    }
    Ok(out)
}

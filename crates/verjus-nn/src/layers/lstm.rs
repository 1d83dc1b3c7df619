//! LSTM layer: `num_layers` stacked LSTMs over a sequence, optionally
//! bidirectional, with dropout between layers, on the fused
//! `ops::lstm_sequence` / `lstm_sequence_backward` with the call's lengths.
//!
//! Parameters are PyTorch's `torch.nn.LSTM` ones, by the same names
//! (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, and
//! `..._reverse` for the backward direction), so state dicts carry over.
//!
//! Every layer works on time-major `[T, B, F]` buffers of its own (the
//! context's scratch, sized per call): the input is copied in once, each
//! direction writes its output there, and the last layer's (concatenated)
//! output is copied into the network value `[T*B, D*H]`. The backward
//! direction runs the same op on each sequence reversed within its length (a
//! gather of rows that is its own inverse), so padding never enters a
//! sequence's state; its output is gathered back into time order. Frames past
//! a length are 0 in the output and get no gradient, as the op defines.

use super::frames::{reversed_row, write};
use super::{
    expect_inputs, fmt_shape, internal, need_seq, Backward, Built, Forward, FrameScratch, Layer,
    ParamSpec, Params, Seq,
};
use crate::descriptor::Init;
use crate::parameter::default_bound;
use verjus_core::ops::{
    self, BinaryOp, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan,
};
use verjus_core::{Backend, Error, Result, Tensor};

/// The settings of an LSTM layer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub hidden: usize,
    pub layers: usize,
    pub dropout: f32,
    pub bidirectional: bool,
    pub bias: bool,
}

/// A scratch buffer's shape, by what it depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Dims {
    /// `[T, B, n]`.
    Frames(usize),
    /// `[B, H]`.
    State,
    /// The op's reserve for layer `l`.
    Reserve(usize),
    /// int32 `[T*B]`: the reversing order.
    Order,
}

/// Scratch indices of one direction of one layer.
#[derive(Clone, Copy, Debug)]
struct Dir {
    /// Its own input: the layer's input, or (reverse) that input reversed.
    x: usize,
    /// Its output in its own time order.
    y: usize,
    h: usize,
    c: usize,
    /// The initial state when the context carries state from call to call.
    h0: usize,
    c0: usize,
    reserve: usize,
    /// The gradient of `y`.
    dy: usize,
    /// The gradient of `x`.
    dx: usize,
}

/// Scratch indices of one layer.
#[derive(Clone, Copy, Debug)]
struct Stage {
    /// The first layer's input: a copy of the network value (later layers
    /// read the previous one's output, see `Lstm::input_of`).
    input: usize,
    /// The layer's output `[T, B, D*H]` (the forward direction's `y` when
    /// unidirectional).
    out: usize,
    /// The output after dropout (layers but the last, when dropout > 0).
    dropped: Option<usize>,
    /// The gradient of `out`.
    dout: usize,
    fwd: Dir,
    /// Reverse direction, with its output and input gradient in time order.
    rev: Option<(Dir, usize, usize)>,
}

#[derive(Debug)]
pub(crate) struct Lstm {
    path: String,
    s: Settings,
    features: usize,
    stages: Vec<Stage>,
    dims: Vec<Dims>,
    order: Option<usize>,
}

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], s: Settings) -> Result<Built> {
    expect_inputs(path, "LSTM", inputs, 1)?;
    let &[features] = inputs[0].as_slice() else {
        return Err(Error::definition(
            path,
            format!(
                "LSTM expects frames of features [F], got frames of shape {}",
                fmt_shape(&inputs[0])
            ),
        ));
    };
    if s.hidden == 0 || s.layers == 0 || features == 0 {
        return Err(Error::definition(
            path,
            format!(
                "LSTM needs positive sizes, got hidden = {}, num_layers = {}, input features = {features}",
                s.hidden, s.layers
            ),
        ));
    }
    if !(0.0..1.0).contains(&s.dropout) {
        return Err(Error::definition(
            path,
            format!("dropout must be in [0, 1), got {}", s.dropout),
        ));
    }
    let dirs = if s.bidirectional { 2 } else { 1 };
    let init = Init::Uniform {
        bound: default_bound(s.hidden),
    };
    let mut params = Vec::new();
    for l in 0..s.layers {
        let fan_in = if l == 0 { features } else { dirs * s.hidden };
        for suffix in &["", "_reverse"][..dirs] {
            let mut add = |role: &str, shape: Vec<usize>| {
                params.push(ParamSpec {
                    role: format!("{role}_l{l}{suffix}"),
                    shape,
                    init,
                })
            };
            add("weight_ih", vec![4 * s.hidden, fan_in]);
            add("weight_hh", vec![4 * s.hidden, s.hidden]);
            if s.bias {
                add("bias_ih", vec![4 * s.hidden]);
                add("bias_hh", vec![4 * s.hidden]);
            }
        }
    }
    let layer = Lstm::new(path, s, features);
    Ok(Built {
        layer: Box::new(layer),
        output: vec![dirs * s.hidden],
        params,
    })
}

impl Lstm {
    /// Assigns the scratch buffers (their order is the one `frame_scratch` lists).
    fn new(path: &str, s: Settings, features: usize) -> Self {
        let mut dims = Vec::new();
        let mut push = |d: Dims| {
            dims.push(d);
            dims.len() - 1
        };
        let order = s.bidirectional.then(|| push(Dims::Order));
        let width = if s.bidirectional { 2 } else { 1 } * s.hidden;
        let mut stages: Vec<Stage> = Vec::with_capacity(s.layers);
        for l in 0..s.layers {
            let fan_in = if l == 0 { features } else { width };
            let input = match stages.last() {
                None => push(Dims::Frames(features)),
                Some(prev) => prev.dropped.unwrap_or(prev.out),
            };
            let dir = |x: usize, push: &mut dyn FnMut(Dims) -> usize| Dir {
                x,
                y: push(Dims::Frames(s.hidden)),
                h: push(Dims::State),
                c: push(Dims::State),
                h0: push(Dims::State),
                c0: push(Dims::State),
                reserve: push(Dims::Reserve(l)),
                dy: push(Dims::Frames(s.hidden)),
                dx: push(Dims::Frames(fan_in)),
            };
            let fwd = dir(input, &mut push);
            let rev = s.bidirectional.then(|| {
                let x = push(Dims::Frames(fan_in));
                let d = dir(x, &mut push);
                (d, push(Dims::Frames(s.hidden)), push(Dims::Frames(fan_in)))
            });
            let out = if s.bidirectional {
                push(Dims::Frames(width))
            } else {
                fwd.y
            };
            let dout = if s.bidirectional {
                push(Dims::Frames(width))
            } else {
                fwd.dy
            };
            let dropped = (l + 1 < s.layers && s.dropout > 0.0).then(|| push(Dims::Frames(width)));
            stages.push(Stage {
                input,
                out,
                dropped,
                dout,
                fwd,
                rev,
            });
        }
        Lstm {
            path: path.to_string(),
            s,
            features,
            stages,
            dims,
            order,
        }
    }

    fn dirs(&self) -> usize {
        if self.s.bidirectional {
            2
        } else {
            1
        }
    }

    /// Parameters per direction of a layer.
    fn per_dir(&self) -> usize {
        if self.s.bias {
            4
        } else {
            2
        }
    }

    /// The op's operands for the direction whose parameters start at `base`:
    /// input `x`, the carried state when the call carries it, each
    /// sequence's length.
    fn args<'a>(
        &self,
        x: &'a Tensor,
        (h0, c0): (&'a Tensor, &'a Tensor),
        seq: &Seq<'a>,
        params: &Params<'a>,
        base: usize,
    ) -> Result<LstmArgs<'a>> {
        let p = |k: usize| params.get(base + k);
        Ok(LstmArgs {
            x,
            lengths: Some(seq.lengths),
            h0: seq.carry.then_some(h0),
            c0: seq.carry.then_some(c0),
            w_ih: p(0)?,
            w_hh: p(1)?,
            b_ih: if self.s.bias { Some(p(2)?) } else { None },
            b_hh: if self.s.bias { Some(p(3)?) } else { None },
        })
    }

    /// The op's plan for layer `l` (for the reserve's size).
    fn plan(&self, l: usize, time: usize, batch: usize) -> LstmPlan {
        LstmPlan {
            steps: time,
            batch,
            input: if l == 0 {
                self.features
            } else {
                self.dirs() * self.s.hidden
            },
            hidden: self.s.hidden,
            has_lengths: true,
            has_h0: false,
            has_c0: false,
            has_bias: self.s.bias,
        }
    }

    /// The input buffer of layer `l`: the copied network value, or the
    /// previous layer's output (after dropout, in training).
    fn input_of(&self, l: usize, train: bool) -> usize {
        match l.checked_sub(1).and_then(|p| self.stages.get(p)) {
            None => self.stages.first().map_or(0, |s| s.input),
            Some(prev) => prev.dropped.filter(|_| train).unwrap_or(prev.out),
        }
    }

    /// The dropout stream of the output of layer `l`.
    fn dropout_seed(seed: u64, l: usize) -> u64 {
        seed ^ (l as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// `&mut` to `N` different scratch buffers.
fn bufs<const N: usize>(scratch: &mut [Tensor], ids: [usize; N]) -> Result<[&mut Tensor; N]> {
    scratch
        .get_disjoint_mut(ids)
        .map_err(|_| internal("LSTM scratch buffers overlap or are missing"))
}

/// `dst` rows (frames of `[T, B, n]`) gathered from `src` by the reversing order.
fn reverse(
    be: &dyn Backend,
    scratch: &mut [Tensor],
    order: usize,
    src: usize,
    dst: usize,
) -> Result<()> {
    let [order, src, dst] = bufs(scratch, [order, src, dst])?;
    let (sd, dd) = (src.dims().to_vec(), dst.dims().to_vec());
    let rows = |d: &[usize]| vec![d[0] * d[1], d[2]];
    src.reshape_in_place(rows(&sd))?;
    dst.reshape_in_place(rows(&dd))?;
    let result = ops::index_select(be, src, 0, order, dst);
    src.reshape_in_place(sd)?;
    dst.reshape_in_place(dd)?;
    result
}

impl Layer for Lstm {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let seq = need_seq(io.seq, "LSTM")?;
        let scratch = io.scratch;
        if let Some(order) = self.order {
            let o = scratch
                .get_mut(order)
                .ok_or_else(|| internal("scratch missing"))?;
            write(be, o, |row| reversed_row(row, seq.batch, seq.host))?;
        }
        let first = self
            .stages
            .first()
            .ok_or_else(|| internal("no LSTM layers"))?;
        ops::copy(be, io.x.get(0)?, &mut scratch[first.input])?;
        if seq.carry {
            self.check_carry()?;
            // The last call's final state is this call's initial state.
            for st in &self.stages {
                let [h, c, h0, c0] = bufs(scratch, [st.fwd.h, st.fwd.c, st.fwd.h0, st.fwd.c0])?;
                ops::copy(be, h, h0)?;
                ops::copy(be, c, c0)?;
            }
        }
        let per_dir = self.per_dir();
        for (l, st) in self.stages.iter().enumerate() {
            let input = self.input_of(l, io.train);
            let mut dirs = vec![(st.fwd, input)];
            if let (Some((rev, _, _)), Some(order)) = (st.rev, self.order) {
                reverse(be, scratch, order, input, rev.x)?;
                dirs.push((rev, rev.x));
            }
            for (d, (dir, x)) in dirs.into_iter().enumerate() {
                let base = (l * self.dirs() + d) * per_dir;
                let [x, y, h, c, reserve, h0, c0] = bufs(
                    scratch,
                    [x, dir.y, dir.h, dir.c, dir.reserve, dir.h0, dir.c0],
                )?;
                let args = self.args(x, (h0, c0), &seq, &io.params, base)?;
                let out = LstmOutputs {
                    y,
                    h_n: Some(h),
                    c_n: c,
                    reserve,
                };
                ops::lstm_sequence(be, &args, out).map_err(|e| self.named(e))?;
            }
            if let (Some((rev, y_time, _)), Some(order)) = (st.rev, self.order) {
                reverse(be, scratch, order, rev.y, y_time)?;
                let [f, b, out] = bufs(scratch, [st.fwd.y, y_time, st.out])?;
                ops::concat(be, &[f, b], 2, out)?;
            }
            if let (Some(dropped), true) = (st.dropped, io.train) {
                let [out, dst] = bufs(scratch, [st.out, dropped])?;
                let seed = Self::dropout_seed(io.stream.seed, l);
                ops::dropout(be, out, self.s.dropout, seed, io.stream.offset, dst)?;
            }
        }
        let last = self
            .stages
            .last()
            .ok_or_else(|| internal("no LSTM layers"))?;
        ops::copy(be, &scratch[last.out], io.y)
    }

    fn backward(&self, be: &dyn Backend, mut io: Backward<'_>) -> Result<()> {
        let seq = need_seq(io.seq, "LSTM")?;
        let scratch = &mut *io.scratch;
        let last = self
            .stages
            .last()
            .ok_or_else(|| internal("no LSTM layers"))?;
        ops::copy(be, io.dy, &mut scratch[last.dout])?;
        let per_dir = self.per_dir();
        let want_input_grad = io.dx.first().is_some_and(Option::is_some);
        for (l, st) in self.stages.iter().enumerate().rev() {
            let want_dx = l > 0 || want_input_grad;
            if let (Some((rev, y_time, _)), Some(order)) = (st.rev, self.order) {
                // dout = [dy_fwd, dy_rev in time order]; the latter reversed.
                let [dout, dyf, dyr] = bufs(scratch, [st.dout, st.fwd.dy, y_time])?;
                ops::split(be, dout, 2, &mut [dyf, dyr])?;
                reverse(be, scratch, order, y_time, rev.dy)?;
            }
            let input = self.input_of(l, io.train);
            let mut dirs = vec![(st.fwd, input)];
            if let Some((rev, _, _)) = st.rev {
                dirs.push((rev, rev.x));
            }
            for (d, (dir, x)) in dirs.into_iter().enumerate() {
                let base = (l * self.dirs() + d) * per_dir;
                let [x, y, reserve, dy, dx, h0, c0] = bufs(
                    scratch,
                    [x, dir.y, dir.reserve, dir.dy, dir.dx, dir.h0, dir.c0],
                )?;
                let args = self.args(x, (h0, c0), &seq, &io.params, base)?;
                let dout = LstmOutputGrads {
                    dy: Some(dy),
                    dh_n: None,
                    dc_n: None,
                };
                let mut grads = LstmGrads {
                    dx: want_dx.then_some(dx),
                    ..LstmGrads::default()
                };
                let result = if self.s.bias {
                    let [a, b, c, e] = io.dparams.several([base, base + 1, base + 2, base + 3])?;
                    grads.dw_ih = Some(a);
                    grads.dw_hh = Some(b);
                    grads.db_ih = Some(c);
                    grads.db_hh = Some(e);
                    ops::lstm_sequence_backward(be, &args, y, reserve, &dout, grads)
                } else {
                    let [a, b] = io.dparams.several([base, base + 1])?;
                    grads.dw_ih = Some(a);
                    grads.dw_hh = Some(b);
                    ops::lstm_sequence_backward(be, &args, y, reserve, &dout, grads)
                };
                result.map_err(|e| self.named(e))?;
            }
            if !want_dx {
                continue;
            }
            // The gradient of this layer's input, summed over the directions.
            let dx_total = match (st.rev, self.order) {
                (Some((rev, _, dx_time)), Some(order)) => {
                    reverse(be, scratch, order, rev.dx, dx_time)?;
                    let [f, r, sum] = bufs(scratch, [st.fwd.dx, dx_time, rev.x])?;
                    ops::binary(be, BinaryOp::Add, f, r, sum)?;
                    rev.x
                }
                _ => st.fwd.dx,
            };
            if l == 0 {
                if let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) {
                    ops::copy(be, &scratch[dx_total], dx)?;
                }
                continue;
            }
            let prev = &self.stages[l - 1];
            let [src, dst] = bufs(scratch, [dx_total, prev.dout])?;
            match prev.dropped.filter(|_| io.train) {
                Some(_) => {
                    let seed = Self::dropout_seed(io.stream.seed, l - 1);
                    ops::dropout_backward(be, src, self.s.dropout, seed, io.stream.offset, dst)?
                }
                None => ops::copy(be, src, dst)?,
            }
        }
        Ok(())
    }

    fn state(&self) -> Vec<(String, usize)> {
        let mut out = Vec::new();
        for (l, st) in self.stages.iter().enumerate() {
            out.push((format!("h_l{l}"), st.fwd.h));
            out.push((format!("c_l{l}"), st.fwd.c));
        }
        out
    }

    fn frame_scratch(
        &self,
        be: &dyn Backend,
        time: usize,
        batch: usize,
        _needs_dx: &[bool],
    ) -> Result<Vec<FrameScratch>> {
        self.dims
            .iter()
            .map(|d| {
                Ok(match *d {
                    Dims::Frames(n) => FrameScratch::f32(vec![time, batch, n]),
                    Dims::State => FrameScratch::f32(vec![batch, self.s.hidden]),
                    Dims::Reserve(l) => FrameScratch::f32(vec![ops::lstm_reserve_len(
                        be,
                        &self.plan(l, time, batch),
                    )?]),
                    Dims::Order => FrameScratch::i32(vec![time * batch]),
                })
            })
            .collect()
    }
}

impl Lstm {
    /// Carried state runs forward in time only.
    fn check_carry(&self) -> Result<()> {
        if self.s.bidirectional {
            return Err(Error::invalid(
                &self.path,
                "a bidirectional LSTM cannot carry its state from call to call \
                 (its backward direction reads the whole sequence)",
            ));
        }
        Ok(())
    }

    /// An op's error, with this layer's path.
    fn named(&self, e: Error) -> Error {
        Error::invalid(&self.path, e.to_string())
    }
}

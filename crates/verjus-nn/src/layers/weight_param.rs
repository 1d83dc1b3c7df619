//! Weight dropout and weight noise: a layer computes, in training, with a
//! derived value of some of its parameters instead of the stored ones.
//!
//! [`Parametrized`] wraps any layer with parameters. In training its forward
//! draws the derived value of each chosen parameter into a planned scratch
//! buffer of the parameter's shape (the context's, overwritten every step,
//! nothing kept per step) and runs the wrapped layer with [`Params`] that read
//! the derived value in its place:
//!
//! - weight noise: `W + n`, `n ~ N(0, std²)` drawn from the Philox stream;
//! - weight dropout: `dropout(W, p)` (inverted: kept elements scaled by
//!   `1 / (1 - p)`), on `W + n` when the parameter has noise too (RETURNN's
//!   order: the noise is on the parameter, the dropout on what the layer reads).
//!
//! Backward draws the same mask and noise again from the step's stream (the
//! Philox counter the forward used) to form the derived value once more,
//! runs the wrapped layer's backward, which writes the gradient with respect
//! to the derived value, and turns it into the gradient with respect to the
//! stored parameter: through the same mask and scale for dropout, unchanged
//! for noise. In inference the wrapped layer runs as it is.
//!
//! Buffers: one per parameter with dropout only; two with noise (the noise
//! draw and the sum; the op set adds out of place).

use super::{
    Backward, Built, Derived, Forward, FrameScratch, Layer, ParamGrads, Params, Scratch, Stream,
};
use crate::def::{LayerDef, WeightSetting};
use std::fmt;
use verjus_core::ops::{self, BinaryOp, Distribution};
use verjus_core::{Backend, Error, Result, Tensor};

/// One parameter's derivation and its buffers (indices among the wrapper's own).
#[derive(Debug)]
struct Weight {
    /// The parameter's index among the layer's.
    param: usize,
    shape: Vec<usize>,
    /// Drop probability (0: none).
    dropout: f32,
    /// Standard deviation of the noise (0: none).
    noise: f32,
    /// The buffer the derived value ends in.
    value: usize,
    /// The other buffer, with noise.
    spare: Option<usize>,
}

/// A layer whose parameters are derived in training (see the module docs).
pub(crate) struct Parametrized {
    inner: Box<dyn Layer>,
    weights: Vec<Weight>,
    /// Per parameter of the layer: the buffer holding its derived value.
    slot: Vec<Option<usize>>,
    buffers: usize,
}

impl fmt::Debug for Parametrized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parametrized")
            .field("inner", &self.inner)
            .field("weights", &self.weights)
            .finish()
    }
}

/// `built` with `def`'s weight dropout and weight noise applied (unchanged
/// when it has neither), or a definition error naming the layer.
pub(crate) fn wrap(path: &str, def: &LayerDef, built: Built) -> Result<Built> {
    if def.weight_dropout.is_none() && def.weight_noise.is_none() {
        return Ok(built);
    }
    let kind = def.config.kind();
    let roles: Vec<&str> = built.params.iter().map(|p| p.role.as_str()).collect();
    let values = |what: &str, setting: &Option<WeightSetting>| -> Result<Vec<f32>> {
        let Some(setting) = setting else {
            return Ok(vec![0.0; roles.len()]);
        };
        if roles.is_empty() {
            return Err(Error::definition(
                path,
                format!("{what} needs a layer with parameters; a {kind} has none"),
            ));
        }
        setting
            .resolve(&roles)
            .map_err(|e| Error::definition(path, format!("{what}: this {kind} {e}")))
    };
    let dropout = values("weight_dropout", &def.weight_dropout)?;
    let noise = values("weight_noise", &def.weight_noise)?;
    let mut weights = Vec::new();
    let mut slot = vec![None; roles.len()];
    let mut buffers = 0;
    for (j, role) in roles.iter().enumerate() {
        let (p, std) = (dropout[j], noise[j]);
        if !(0.0..1.0).contains(&p) {
            return Err(Error::definition(
                path,
                format!("weight_dropout of {role} must be in [0, 1), got {p}"),
            ));
        }
        if !(std.is_finite() && std >= 0.0) {
            return Err(Error::definition(
                path,
                format!(
                    "weight_noise of {role} must be a finite standard deviation >= 0, got {std}"
                ),
            ));
        }
        if p == 0.0 && std == 0.0 {
            continue;
        }
        // With noise: n into `first`, W + n into `second`, dropout back into `first`.
        let (first, second) = (buffers, buffers + 1);
        let (value, spare) = match (p > 0.0, std > 0.0) {
            (true, false) => (first, None),
            (false, true) => (second, Some(first)),
            _ => (first, Some(second)),
        };
        buffers += if spare.is_some() { 2 } else { 1 };
        slot[j] = Some(value);
        weights.push(Weight {
            param: j,
            shape: built.params[j].shape.clone(),
            dropout: p,
            noise: std,
            value,
            spare,
        });
    }
    if weights.is_empty() {
        return Ok(built);
    }
    Ok(Built {
        layer: Box::new(Parametrized {
            inner: built.layer,
            weights,
            slot,
            buffers,
        }),
        ..built
    })
}

/// Seeds of the dropout mask and of the noise of parameter `param`, apart
/// from every other stream of the layer (SplitMix64 finaliser).
fn seed(stream: Stream, param: usize, noise: bool) -> u64 {
    let salt = 0x5745_4947_4854_0000 ^ ((param as u64) << 1 | u64::from(noise));
    let mut z = (stream.seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Parametrized {
    /// The wrapped layer's scratch and this wrapper's buffers.
    fn split<'s>(&self, scratch: &'s mut [Tensor]) -> Result<(&'s mut [Tensor], &'s mut [Tensor])> {
        let n = scratch
            .len()
            .checked_sub(self.buffers)
            .ok_or_else(|| super::internal("derived weight buffers missing"))?;
        Ok(scratch.split_at_mut(n))
    }

    /// Draws every derived value of this step into `mine`.
    fn derive(
        &self,
        be: &dyn Backend,
        params: Params<'_>,
        mine: &mut [Tensor],
        stream: Stream,
    ) -> Result<()> {
        for w in &self.weights {
            let stored = params.get(w.param)?;
            let drop_seed = seed(stream, w.param, false);
            match w.spare {
                None => ops::dropout(
                    be,
                    stored,
                    w.dropout,
                    drop_seed,
                    stream.offset,
                    &mut mine[w.value],
                )?,
                Some(spare) => {
                    let (n, sum) = if w.dropout > 0.0 {
                        (w.value, spare)
                    } else {
                        (spare, w.value)
                    };
                    let [n, sum] = mine
                        .get_disjoint_mut([n, sum])
                        .map_err(|_| super::internal("derived weight buffers overlap"))?;
                    let dist = Distribution::Normal {
                        mean: 0.0,
                        std: w.noise,
                    };
                    ops::random(be, n, dist, seed(stream, w.param, true), stream.offset)?;
                    ops::binary(be, BinaryOp::Add, stored, n, sum)?;
                    if w.dropout > 0.0 {
                        ops::dropout(be, sum, w.dropout, drop_seed, stream.offset, n)?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Layer for Parametrized {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        if !io.train {
            return self.inner.forward(be, io);
        }
        let (scratch, mine) = self.split(io.scratch)?;
        self.derive(be, io.params, mine, io.stream)?;
        let params = Params {
            derived: Some(Derived {
                slot: &self.slot,
                values: mine,
            }),
            ..io.params
        };
        self.inner.forward(
            be,
            Forward {
                params,
                scratch,
                ..io
            },
        )
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        if !io.train {
            return self.inner.backward(be, io);
        }
        let stream = io.stream;
        let (scratch, mine) = self.split(io.scratch)?;
        self.derive(be, io.params, mine, stream)?;
        let ParamGrads { dst, grads, edges } = io.dparams;
        let params = Params {
            derived: Some(Derived {
                slot: &self.slot,
                values: mine,
            }),
            ..io.params
        };
        self.inner.backward(
            be,
            Backward {
                params,
                dparams: ParamGrads {
                    dst,
                    grads: &mut *grads,
                    edges: &mut *edges,
                },
                scratch,
                ..io
            },
        )?;
        // The gradient with respect to the stored parameter: through the mask
        // for dropout (the derived value's buffer is free again), unchanged for noise.
        let mut dparams = ParamGrads { dst, grads, edges };
        for w in self.weights.iter().filter(|w| w.dropout > 0.0) {
            let dw = dparams.get(w.param)?;
            let buf = &mut mine[w.value];
            ops::copy(be, dw, buf)?;
            ops::dropout_backward(
                be,
                buf,
                w.dropout,
                seed(stream, w.param, false),
                stream.offset,
                dw,
            )?;
        }
        Ok(())
    }

    fn scratch(&self, needs_dx: &[bool]) -> Vec<Scratch> {
        self.inner.scratch(needs_dx)
    }

    fn state(&self) -> Vec<(String, usize)> {
        self.inner.state()
    }

    fn frame_scratch(
        &self,
        be: &dyn Backend,
        time: usize,
        batch: usize,
        needs_dx: &[bool],
    ) -> Result<Vec<FrameScratch>> {
        let mut s = self.inner.frame_scratch(be, time, batch, needs_dx)?;
        for w in &self.weights {
            let n = if w.spare.is_some() { 2 } else { 1 };
            s.extend((0..n).map(|_| FrameScratch::f32(w.shape.clone())));
        }
        Ok(s)
    }
}

//! Inverted dropout, active only while the context is training.
//!
//! The mask is never stored: forward and backward draw it from the same
//! `(seed, offset)` of the Philox stream, which the network derives from the
//! context's seed, this layer's position and the step counter (so every
//! training step draws a fresh mask, and backward regenerates forward's).
//! In inference the layer is the identity.

use super::{expect_inputs, Backward, Built, Forward, Layer};
use verjus_core::ops;
use verjus_core::{Backend, Error, Result};

#[derive(Debug)]
pub(crate) struct Dropout {
    p: f32,
}

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], p: f32) -> Result<Built> {
    expect_inputs(path, "Dropout", inputs, 1)?;
    if !(0.0..1.0).contains(&p) {
        return Err(Error::definition(
            path,
            format!("dropout probability p must be in [0, 1), got {p}"),
        ));
    }
    Ok(Built {
        layer: Box::new(Dropout { p }),
        output: inputs[0].clone(),
        params: Vec::new(),
    })
}

impl Layer for Dropout {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let x = io.x.get(0)?;
        if io.train && self.p > 0.0 {
            ops::dropout(be, x, self.p, io.stream.seed, io.stream.offset, io.y)
        } else {
            ops::copy(be, x, io.y)
        }
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) else {
            return Ok(());
        };
        if io.train && self.p > 0.0 {
            ops::dropout_backward(be, io.dy, self.p, io.stream.seed, io.stream.offset, dx)
        } else {
            ops::copy(be, io.dy, dx)
        }
    }
}

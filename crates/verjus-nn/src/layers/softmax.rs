//! Softmax and log-softmax over one unit axis; the backward pass needs only the
//! output, so the input is not read again.

use super::{expect_inputs, unit_axis, Backward, Built, Forward, Layer};
use verjus_core::ops;
use verjus_core::{Backend, Result};

#[derive(Debug)]
pub(crate) struct Softmax {
    /// The axis of the batched tensor (unit axis + 1).
    axis: usize,
    log: bool,
}

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], axis: isize, log: bool) -> Result<Built> {
    let kind = if log { "LogSoftmax" } else { "Softmax" };
    expect_inputs(path, kind, inputs, 1)?;
    let a = unit_axis(path, axis, &inputs[0])?;
    Ok(Built {
        layer: Box::new(Softmax { axis: a + 1, log }),
        output: inputs[0].clone(),
        params: Vec::new(),
    })
}

impl Layer for Softmax {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        ops::softmax(be, io.x.get(0)?, self.axis, self.log, io.y)
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        if let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) {
            ops::softmax_backward(be, io.y, io.dy, self.axis, self.log, dx)?;
        }
        Ok(())
    }
}

//! Elementwise activations (ReLU, Sigmoid, Tanh, GELU): one unary op forward,
//! its gradient rule (`verjus_core::grad::unary`) backward.

use super::{expect_inputs, Backward, Built, Forward, Layer};
use verjus_core::grad;
use verjus_core::ops::{self, UnaryOp};
use verjus_core::{Backend, Result};

#[derive(Debug)]
pub(crate) struct Activation {
    op: UnaryOp,
}

impl Activation {
    pub fn build(path: &str, kind: &str, inputs: &[Vec<usize>], op: UnaryOp) -> Result<Built> {
        expect_inputs(path, kind, inputs, 1)?;
        Ok(Built {
            layer: Box::new(Activation { op }),
            output: inputs[0].clone(),
            params: Vec::new(),
        })
    }
}

impl Layer for Activation {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        ops::unary(be, self.op, io.x.get(0)?, io.y)
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        if let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) {
            grad::unary(be, self.op, Some((io.x.get(0)?, io.y)), io.dy, dx)?;
        }
        Ok(())
    }
}

//! Elementwise sum of two or more inputs of one shape (residual connections).
//!
//! Forward chains binary adds, alternating between the output and one scratch
//! buffer when there are more than two inputs; backward hands `dy` to every
//! input (a copy each: `grad::sum_to` of equal shapes).

use super::{fmt_shape, scratch_at, Backward, Built, Forward, Layer, Scratch};
use verjus_core::grad;
use verjus_core::ops::{self, BinaryOp};
use verjus_core::{Backend, Error, Result};

#[derive(Debug)]
pub(crate) struct Add {
    unit: Vec<usize>,
    n: usize,
}

pub(crate) fn build(path: &str, inputs: &[Vec<usize>]) -> Result<Built> {
    if inputs.len() < 2 {
        return Err(Error::definition(
            path,
            format!("Add takes two or more inputs, got {}", inputs.len()),
        ));
    }
    for (k, shape) in inputs.iter().enumerate().skip(1) {
        if *shape != inputs[0] {
            return Err(Error::definition(
                path,
                format!(
                    "Add needs inputs of one shape: input 0 has {}, input {k} has {}",
                    fmt_shape(&inputs[0]),
                    fmt_shape(shape)
                ),
            ));
        }
    }
    Ok(Built {
        layer: Box::new(Add {
            unit: inputs[0].clone(),
            n: inputs.len(),
        }),
        output: inputs[0].clone(),
        params: Vec::new(),
    })
}

impl Layer for Add {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let x = io.x;
        ops::binary(be, BinaryOp::Add, x.get(0)?, x.get(1)?, io.y)?;
        if x.len() > 2 {
            let spare = scratch_at(io.scratch, 0)?;
            for k in 2..x.len() {
                ops::binary(be, BinaryOp::Add, io.y, x.get(k)?, spare)?;
                std::mem::swap(io.y, spare);
            }
        }
        Ok(())
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        for dx in io.dx.iter_mut().flatten() {
            grad::sum_to(be, io.dy, dx)?;
        }
        Ok(())
    }

    fn scratch(&self, _needs_dx: &[bool]) -> Vec<Scratch> {
        if self.n > 2 {
            vec![Scratch::batched(self.unit.clone(), 0.0)]
        } else {
            Vec::new()
        }
    }
}

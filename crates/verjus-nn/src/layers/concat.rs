//! Concatenation along a unit axis; the gradient is the split of `dy`.
//!
//! The split op writes every part, so an input that needs no gradient gets a
//! scratch buffer to receive its (discarded) part.

use super::{fmt_shape, internal, unit_axis, Backward, Built, Forward, Layer, Scratch};
use verjus_core::{grad, ops};
use verjus_core::{Backend, Error, Result, Tensor};

#[derive(Debug)]
pub(crate) struct Concat {
    /// The axis of the batched tensors (unit axis + 1).
    axis: usize,
    units: Vec<Vec<usize>>,
}

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], axis: isize) -> Result<Built> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::definition(path, "Concat takes one or more inputs, got 0"))?;
    let a = unit_axis(path, axis, first)?;
    let mut output = first.clone();
    output[a] = 0;
    for (k, shape) in inputs.iter().enumerate() {
        let agrees = shape.len() == first.len()
            && shape
                .iter()
                .zip(first)
                .enumerate()
                .all(|(i, (x, y))| i == a || x == y);
        if !agrees {
            let mut expected: Vec<String> = first.iter().map(usize::to_string).collect();
            expected[a] = "*".into();
            return Err(Error::definition(
                path,
                format!(
                    "Concat on axis {axis}: input {k} has shape {}, expected [{}]",
                    fmt_shape(shape),
                    expected.join(", ")
                ),
            ));
        }
        output[a] += shape[a];
    }
    Ok(Built {
        layer: Box::new(Concat {
            axis: a + 1,
            units: inputs.to_vec(),
        }),
        output,
        params: Vec::new(),
    })
}

impl Layer for Concat {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let parts = (0..io.x.len())
            .map(|k| io.x.get(k))
            .collect::<Result<Vec<&Tensor>>>()?;
        ops::concat(be, &parts, self.axis, io.y)
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        if io.dx.iter().all(Option::is_none) {
            return Ok(());
        }
        let mut spare = io.scratch.iter_mut();
        let mut parts = Vec::with_capacity(io.dx.len());
        for dx in io.dx.iter_mut() {
            match dx {
                Some(t) => parts.push(t),
                None => parts.push(spare.next().ok_or_else(|| internal("concat scratch"))?),
            }
        }
        grad::concat(be, io.dy, self.axis, &mut parts)
    }

    fn scratch(&self, needs_dx: &[bool]) -> Vec<Scratch> {
        if !needs_dx.iter().any(|&n| n) {
            return Vec::new();
        }
        self.units
            .iter()
            .zip(needs_dx)
            .filter(|(_, &n)| !n)
            .map(|(u, _)| Scratch::batched(u.clone(), 0.0))
            .collect()
    }
}

//! Flatten and Reshape: the same elements under another unit shape. Tensors own
//! their storage, so the output is a device copy (cheap next to the layers
//! around it); the gradient is the copy back.

use super::{expect_inputs, fmt_shape, Backward, Built, Forward, Layer};
use verjus_core::{grad, ops};
use verjus_core::{Backend, Error, Result};

#[derive(Debug)]
pub(crate) struct Reshape;

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], shape: Vec<usize>) -> Result<Built> {
    expect_inputs(path, "Reshape", inputs, 1)?;
    let from: usize = inputs[0].iter().product();
    let to = verjus_core::Shape::new(shape.clone())
        .map_err(|e| Error::definition(path, format!("bad target shape: {e}")))?
        .numel();
    if from != to {
        return Err(Error::definition(
            path,
            format!(
                "cannot reshape input {} ({from} elements) to {} ({to} elements)",
                fmt_shape(&inputs[0]),
                fmt_shape(&shape)
            ),
        ));
    }
    Ok(Built {
        layer: Box::new(Reshape),
        output: shape,
        params: Vec::new(),
    })
}

impl Layer for Reshape {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        ops::copy(be, io.x.get(0)?, io.y)
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        if let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) {
            grad::reshape(be, io.dy, dx)?;
        }
        Ok(())
    }
}

//! Max and average 2-D pooling over `[C, H, W]` units; the stride defaults to
//! the window (PyTorch's default).

use super::{expect_inputs, fmt_shape, Backward, Built, Forward, Layer};
use crate::def::Pair;
use verjus_core::ops::{self, Pool2dParams, Pool2dPlan, PoolKind};
use verjus_core::{Backend, Error, Result, Shape};

#[derive(Debug)]
pub(crate) struct Pool2d {
    kind: PoolKind,
    params: Pool2dParams,
}

pub(crate) fn build(
    path: &str,
    inputs: &[Vec<usize>],
    kind: PoolKind,
    kernel: Pair,
    stride: Option<Pair>,
    padding: Pair,
) -> Result<Built> {
    let name = match kind {
        PoolKind::Max => "MaxPool2d",
        PoolKind::Avg => "AvgPool2d",
    };
    expect_inputs(path, name, inputs, 1)?;
    let unit = &inputs[0];
    let &[c, h, w] = unit.as_slice() else {
        return Err(Error::definition(
            path,
            format!("{name} expects input [C, H, W], got {}", fmt_shape(unit)),
        ));
    };
    let params = Pool2dParams {
        kernel: kernel.get(),
        stride: stride.unwrap_or(kernel).get(),
        padding: padding.get(),
    };
    let plan = Shape::new([1, c, h, w])
        .and_then(|x| Pool2dPlan::new(kind, &x, params))
        .map_err(|e| {
            Error::definition(
                path,
                format!(
                    "{name} with kernel {:?}, stride {:?}, padding {:?} does not fit input {}: {e}",
                    params.kernel,
                    params.stride,
                    params.padding,
                    fmt_shape(unit)
                ),
            )
        })?;
    Ok(Built {
        layer: Box::new(Pool2d { kind, params }),
        output: vec![c, plan.oh, plan.ow],
        params: Vec::new(),
    })
}

impl Layer for Pool2d {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        ops::pool2d(be, self.kind, io.x.get(0)?, self.params, io.y)
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        if let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) {
            let x = io.x.get(0)?;
            ops::pool2d_backward(be, self.kind, x, io.y, io.dy, self.params, dx)?;
        }
        Ok(())
    }
}

//! Max and average 2-D pooling over `[C, H, W]` units; the stride defaults to
//! the window (PyTorch's default).
//!
//! A pooling node may also apply a ReLU to its output: that is how a
//! `ReLU -> MaxPool2d` pair runs (see `crate::fuse`), pooling first and
//! rectifying the smaller pooled values, with the pre-ReLU pooled values and
//! their gradient in two scratch buffers.

use super::{expect_inputs, fmt_shape, scratch_at, Backward, Built, Forward, Layer, Scratch};
use crate::def::Pair;
use verjus_core::grad;
use verjus_core::ops::{self, Pool2dParams, Pool2dPlan, PoolKind, UnaryOp};
use verjus_core::{Backend, Error, Result, Shape};

#[derive(Debug)]
pub(crate) struct Pool2d {
    kind: PoolKind,
    params: Pool2dParams,
    /// `Some(pooled unit shape)` when a ReLU follows the pooling in this node;
    /// its scratch then holds the pooled values and their gradient.
    relu_after: Option<Vec<usize>>,
}

pub(crate) fn build(
    path: &str,
    inputs: &[Vec<usize>],
    kind: PoolKind,
    kernel: Pair,
    stride: Option<Pair>,
    padding: Pair,
    relu_after: bool,
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
    let output = vec![c, plan.oh, plan.ow];
    Ok(Built {
        layer: Box::new(Pool2d {
            kind,
            params,
            relu_after: relu_after.then(|| output.clone()),
        }),
        output,
        params: Vec::new(),
    })
}

impl Layer for Pool2d {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let x = io.x.get(0)?;
        if self.relu_after.is_none() {
            return ops::pool2d(be, self.kind, x, self.params, io.y);
        }
        let pooled = scratch_at(io.scratch, 0)?;
        ops::pool2d(be, self.kind, x, self.params, pooled)?;
        ops::unary(be, UnaryOp::Relu, pooled, io.y)
    }

    fn backward(&self, be: &dyn Backend, io: Backward<'_>) -> Result<()> {
        let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) else {
            return Ok(());
        };
        let x = io.x.get(0)?;
        if self.relu_after.is_none() {
            return ops::pool2d_backward(be, self.kind, x, io.y, io.dy, self.params, dx);
        }
        let [pooled, pooled_grad] = io.scratch else {
            return Err(super::internal("pooling scratch missing"));
        };
        grad::unary(be, UnaryOp::Relu, Some((pooled, io.y)), io.dy, pooled_grad)?;
        ops::pool2d_backward(be, self.kind, x, pooled, pooled_grad, self.params, dx)
    }

    fn scratch(&self, _needs_dx: &[bool]) -> Vec<Scratch> {
        match &self.relu_after {
            Some(unit) => vec![
                Scratch::batched(unit.clone(), 0.0),
                Scratch::batched(unit.clone(), 0.0),
            ],
            None => Vec::new(),
        }
    }
}

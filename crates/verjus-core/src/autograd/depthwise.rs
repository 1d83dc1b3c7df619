//! The depthwise 1-D convolution on the tape: its backward reads `x` and
//! the filter (for the filter and input gradients), never its output.

use super::alloc;
use super::node::{need, BackwardFn};
use super::record::{Reads, Saves};
use super::var::Var;
use crate::ops::{self, DepthwiseArgs, DepthwiseGrads};
use crate::{Result, Tensor};
use std::sync::Arc;

impl Var {
    /// Depthwise convolution of `x [N, T, C]` along `T` with `filter [C, K]`
    /// and an optional `bias [C]` (see [`ops::depthwise_conv1d`]): `[N,
    /// T_out, C]`. Gradients flow to `x`, `filter` and `bias`. Inside an
    /// [`autocast`](super::autocast) scope `x` and the filter are rounded to
    /// its dtype first.
    pub fn depthwise_conv1d(
        &self,
        filter: &Var,
        bias: Option<&Var>,
        padding: [usize; 2],
        dilation: usize,
    ) -> Result<Var> {
        match super::autocast::autocast_operands(self, filter)? {
            Some((x, f)) => x.depthwise_of(&f, bias, padding, dilation),
            None => self.depthwise_of(filter, bias, padding, dilation),
        }
    }

    /// [`Var::depthwise_conv1d`] of the operands as they are (rounded ones
    /// widened for the float32 kernels).
    fn depthwise_of(
        &self,
        filter: &Var,
        bias: Option<&Var>,
        padding: [usize; 2],
        dilation: usize,
    ) -> Result<Var> {
        let mut inputs = vec![self, filter];
        inputs.extend(bias);
        let has_bias = bias.is_some();
        let saves = Saves::inputs(Reads::Only(&[0, 1]));
        Var::record(
            "depthwise_conv1d",
            self.backend(),
            &inputs,
            saves,
            move |be, xs| {
                let (wide_x, wide_f) = (alloc::widened(be, &xs[0])?, alloc::widened(be, &xs[1])?);
                let args = DepthwiseArgs {
                    x: wide_x.as_ref().unwrap_or(&xs[0]),
                    filter: wide_f.as_ref().unwrap_or(&xs[1]),
                    bias: xs.get(2).map(|b| &**b),
                    padding,
                    dilation,
                };
                let plan = ops::depthwise_plan("depthwise_conv1d", be, &args)?;
                let mut y = alloc::output(be, &plan.output_shape())?;
                ops::depthwise_conv1d(be, &args, &mut y)?;
                let backward: BackwardFn = Box::new(move |be, dy, inputs, needs| {
                    let (x, filter) = (inputs.get(0)?, inputs.get(1)?);
                    let (wide_x, wide_f) = (alloc::widened(be, &x)?, alloc::widened(be, &filter)?);
                    let (x, filter) = (
                        wide_x.as_ref().unwrap_or(&x),
                        wide_f.as_ref().unwrap_or(&filter),
                    );
                    let mut grads: Vec<Option<Tensor>> =
                        (0..2 + usize::from(has_bias)).map(|_| None).collect();
                    if need(needs, 0) {
                        grads[0] = Some(alloc::output(be, x.shape())?);
                    }
                    if need(needs, 1) {
                        grads[1] = Some(alloc::output(be, filter.shape())?);
                    }
                    if has_bias && need(needs, 2) {
                        grads[2] = Some(alloc::output(be, &crate::Shape::new([x.dims()[2]])?)?);
                    }
                    let mut slots = grads.iter_mut();
                    let dx = slots.next().and_then(Option::as_mut);
                    let dfilter = slots.next().and_then(Option::as_mut);
                    let dbias = slots.next().and_then(Option::as_mut);
                    let args = DepthwiseArgs {
                        x,
                        filter,
                        bias: None,
                        padding,
                        dilation,
                    };
                    ops::depthwise_conv1d_backward(
                        be,
                        &args,
                        &dy,
                        DepthwiseGrads { dx, dfilter, dbias },
                    )?;
                    Ok(grads)
                });
                Ok((Arc::new(y), backward))
            },
        )
    }
}

//! 2-D convolution (NCHW) with an optional bias.

use super::alloc;
use super::node::{need, BackwardFn};
use super::record::{Reads, Saves};
use super::var::Var;
use crate::grad::{self, Conv2dGrads};
use crate::ops::{self, Conv2dParams, Conv2dPlan};
use crate::{Result, Shape};
use std::sync::Arc;

impl Var {
    /// `conv2d(self, weight) + bias`: input `[n, c_in, h, w]`, weight
    /// `[c_out, c_in, kh, kw]`, bias `[c_out]`. Inside an
    /// [`autocast`](super::autocast) scope the input and weight are rounded
    /// to its dtype first.
    pub fn conv2d(&self, weight: &Var, bias: Option<&Var>, params: Conv2dParams) -> Result<Var> {
        match super::autocast::autocast_operands(self, weight)? {
            Some((x, w)) => x.conv2d_of(&w, bias, params),
            None => self.conv2d_of(weight, bias, params),
        }
    }

    /// [`Var::conv2d`] of the operands as they are (rounded ones widened for
    /// the float32 kernels).
    fn conv2d_of(&self, weight: &Var, bias: Option<&Var>, params: Conv2dParams) -> Result<Var> {
        let has_bias = bias.is_some();
        let mut inputs = vec![self, weight];
        inputs.extend(bias);
        let saves = Saves::inputs(Reads::Only(&[0, 1]));
        Var::record("conv2d", self.backend(), &inputs, saves, move |be, xs| {
            let (wide_x, wide_w) = (alloc::widened(be, &xs[0])?, alloc::widened(be, &xs[1])?);
            let (x, w) = (
                wide_x.as_ref().unwrap_or(&xs[0]),
                wide_w.as_ref().unwrap_or(&xs[1]),
            );
            let b = has_bias.then(|| &xs[2]);
            let plan = Conv2dPlan::new(x.shape(), w.shape(), params)?;
            let mut y = alloc::output(be, &plan.output_shape()?)?;
            ops::conv2d(be, x, w, b.map(|b| &**b), params, &mut y)?;
            let bias_shape = b.map(|b| b.shape().clone());
            let backward: BackwardFn = Box::new(move |be, dy, inputs, needs| {
                let (x, w) = (inputs.get(0)?, inputs.get(1)?);
                let (wide_x, wide_w) = (alloc::widened(be, &x)?, alloc::widened(be, &w)?);
                let (x, w) = (wide_x.as_ref().unwrap_or(&x), wide_w.as_ref().unwrap_or(&w));
                let fresh = |i: usize, shape: Option<&Shape>| {
                    shape
                        .filter(|_| need(needs, i))
                        .map(|s| alloc::output(be, s))
                        .transpose()
                };
                let mut dx = fresh(0, Some(x.shape()))?;
                let mut dw = fresh(1, Some(w.shape()))?;
                let mut db = fresh(2, bias_shape.as_ref())?;
                let grads = Conv2dGrads {
                    dx: dx.as_mut(),
                    dw: dw.as_mut(),
                    db: db.as_mut(),
                };
                grad::conv2d(be, x, w, &dy, params, grads)?;
                let mut grads = vec![dx, dw];
                if bias_shape.is_some() {
                    grads.push(db);
                }
                Ok(grads)
            });
            Ok((Arc::new(y), backward))
        })
    }
}

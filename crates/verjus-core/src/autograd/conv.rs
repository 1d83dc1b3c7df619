//! 2-D convolution (NCHW) with an optional bias.

use super::alloc;
use super::node::{need, BackwardFn};
use super::var::Var;
use crate::ops::{self, Conv2dParams, Conv2dPlan};
use crate::Result;
use std::sync::Arc;

impl Var {
    /// `conv2d(self, weight) + bias`: input `[n, c_in, h, w]`, weight
    /// `[c_out, c_in, kh, kw]`, bias `[c_out]`.
    pub fn conv2d(&self, weight: &Var, bias: Option<&Var>, params: Conv2dParams) -> Result<Var> {
        let be = self.backend();
        let (x, w) = (self.value(), weight.value());
        let b = bias.map(Var::value);
        let plan = Conv2dPlan::new(x.shape(), w.shape(), params)?;
        let mut y = alloc::zeros(&**be, &plan.output_shape()?)?;
        ops::conv2d(&**be, &x, &w, b.as_deref(), params, &mut y)?;
        let bias_shape = b.map(|b| b.shape().clone());
        let backward: BackwardFn = Box::new(move |be, dy, needs| {
            let dx = need(needs, 0)
                .then(|| {
                    let mut dx = alloc::zeros(be, x.shape())?;
                    ops::conv2d_backward_data(be, &dy, &w, params, &mut dx).map(|()| dx)
                })
                .transpose()?;
            let dw = need(needs, 1)
                .then(|| {
                    let mut dw = alloc::zeros(be, w.shape())?;
                    ops::conv2d_backward_filter(be, &x, &dy, params, &mut dw).map(|()| dw)
                })
                .transpose()?;
            let mut grads = vec![dx, dw];
            if let Some(shape) = &bias_shape {
                let db = need(needs, 2)
                    .then(|| {
                        let mut db = alloc::zeros(be, shape)?;
                        ops::conv2d_backward_bias(be, &dy, &mut db).map(|()| db)
                    })
                    .transpose()?;
                grads.push(db);
            }
            Ok(grads)
        });
        let mut inputs = vec![self, weight];
        inputs.extend(bias);
        Ok(Var::from_op("conv2d", Arc::new(y), be, &inputs, backward))
    }
}

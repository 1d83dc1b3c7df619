//! 2-D convolution over `[C, H, W]` units (NCHW batches), PyTorch's layout
//! (`weight [out, in, kh, kw]`, `bias [out]`). Backward is the tape's rule,
//! `verjus_core::grad::conv2d` (the op set's filter, bias and data gradients).
//! Under mixed precision (`Forward::precision`) the convolutions read `x`, the
//! weight and `dy` rounded to the reduced float, with float32 accumulation.

use super::{expect_inputs, fmt_shape, Backward, Built, Forward, Layer, Operand, ParamSpec};
use crate::descriptor::Init;
use crate::parameter::default_bound;
use verjus_core::grad::{self, Conv2dGrads};
use verjus_core::ops::{self, Conv2dParams, Conv2dPlan};
use verjus_core::{Backend, Error, Result, Shape};

/// The settings of a Conv2d definition.
pub(crate) struct Settings {
    pub out_channels: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub bias: bool,
}

#[derive(Debug)]
pub(crate) struct Conv2d {
    params: Conv2dParams,
    bias: bool,
}

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], s: Settings) -> Result<Built> {
    expect_inputs(path, "Conv2d", inputs, 1)?;
    let unit = &inputs[0];
    let &[c, h, w] = unit.as_slice() else {
        return Err(Error::definition(
            path,
            format!("Conv2d expects input [C, H, W], got {}", fmt_shape(unit)),
        ));
    };
    if s.out_channels == 0 || c == 0 {
        return Err(Error::definition(
            path,
            format!(
                "Conv2d needs positive channel counts: input {}, out_channels = {}",
                fmt_shape(unit),
                s.out_channels
            ),
        ));
    }
    let params = Conv2dParams {
        stride: s.stride,
        padding: s.padding,
        dilation: s.dilation,
    };
    let weight = vec![s.out_channels, c, s.kernel[0], s.kernel[1]];
    let plan = Shape::new([1, c, h, w])
        .and_then(|x| Conv2dPlan::new(&x, &Shape::new(weight.clone())?, params))
        .map_err(|e| {
            Error::definition(
                path,
                format!(
                    "Conv2d with kernel {:?}, stride {:?}, padding {:?}, dilation {:?} does not fit input {}: {e}",
                    s.kernel,
                    s.stride,
                    s.padding,
                    s.dilation,
                    fmt_shape(unit)
                ),
            )
        })?;
    let fan_in = c * s.kernel[0] * s.kernel[1];
    let init = Init::Uniform {
        bound: default_bound(fan_in),
    };
    let mut specs = vec![ParamSpec {
        role: "weight".into(),
        shape: weight,
        init,
    }];
    if s.bias {
        specs.push(ParamSpec {
            role: "bias".into(),
            shape: vec![s.out_channels],
            init,
        });
    }
    Ok(Built {
        layer: Box::new(Conv2d {
            params,
            bias: s.bias,
        }),
        output: vec![s.out_channels, plan.oh, plan.ow],
        params: specs,
    })
}

impl Layer for Conv2d {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let bias = if self.bias {
            Some(io.params.get(1)?)
        } else {
            None
        };
        let x = Operand::of(be, io.x.get(0)?, io.precision)?;
        let w = Operand::of(be, io.params.get(0)?, io.precision)?;
        ops::conv2d(be, &x, &w, bias, self.params, io.y)
    }

    fn backward(&self, be: &dyn Backend, mut io: Backward<'_>) -> Result<()> {
        let (dw, db) = if self.bias {
            let (dw, db) = io.dparams.pair(0, 1)?;
            (dw, Some(db))
        } else {
            (io.dparams.get(0)?, None)
        };
        let grads = Conv2dGrads {
            dx: io.dx.get_mut(0).and_then(Option::as_mut),
            dw: Some(dw),
            db,
        };
        let x = Operand::of(be, io.x.get(0)?, io.precision)?;
        let w = Operand::of(be, io.params.get(0)?, io.precision)?;
        let dy = Operand::of(be, io.dy, io.precision)?;
        grad::conv2d(be, &x, &w, &dy, self.params, grads)
    }
}

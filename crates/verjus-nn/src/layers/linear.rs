//! Linear: `y = x W^T + b` over the last axis, with PyTorch's layout
//! (`weight [out, in]`, `bias [out]`).
//!
//! Forward broadcasts the bias into `y` (a multiply of a per-context column of
//! ones with `b`) and lets the GEMM accumulate `x W^T` on top, so the output is
//! written once and read once. Backward is the tape's: the matmul gradients
//! of `verjus_core::grad` (`dW = dy^T x`, `dx = dy W`) and the sum of `dy`
//! over the batch for `db` (the gradient of the broadcast bias).
//!
//! Inputs with extra leading unit axes (`[N, T, in]`) run as a batched GEMM
//! forward; for `dW` the matmul rule copies the rows of `dy` and `x` into
//! `[N*T, ...]` matrices so that one GEMM sums over all of them: this layer
//! plans those two matrices as scratch.
//!
//! Under mixed precision (`Forward::precision`) every product reads its
//! operands rounded to the reduced float (`x`, `W` and `dy`), with float32
//! accumulation; the bias is added in float32, and its gradient sums the
//! rounded `dy` (as the convolution's does).

use super::{
    expect_inputs, fmt_shape, internal, scratch_at, Backward, Built, Forward, Layer, Operand,
    ParamSpec, Scratch,
};
use crate::descriptor::Init;
use crate::parameter::default_bound;
use verjus_core::grad::{self, Operand as Factor};
use verjus_core::ops::{self, BinaryOp, GemmSpec};
use verjus_core::{Backend, Error, Result};

#[derive(Debug)]
pub(crate) struct Linear {
    /// Input unit shape (`[..., in]`).
    unit: Vec<usize>,
    out: usize,
    bias: bool,
}

pub(crate) fn build(
    path: &str,
    inputs: &[Vec<usize>],
    in_features: Option<usize>,
    out: usize,
    bias: bool,
) -> Result<Built> {
    expect_inputs(path, "Linear", inputs, 1)?;
    let unit = &inputs[0];
    let Some(&fan_in) = unit.last() else {
        return Err(Error::definition(
            path,
            "Linear needs an input with a feature axis, got shape []",
        ));
    };
    if let Some(expected) = in_features {
        if expected != fan_in {
            return Err(Error::definition(
                path,
                format!(
                    "Linear expects input [*, {expected}] (in_features = {expected}), got {}",
                    fmt_shape(unit)
                ),
            ));
        }
    }
    if out == 0 || fan_in == 0 {
        return Err(Error::definition(
            path,
            format!(
                "Linear needs positive sizes: in_features = {fan_in} (input {}), out_features = {out}",
                fmt_shape(unit)
            ),
        ));
    }
    let mut output = unit.clone();
    if let Some(last) = output.last_mut() {
        *last = out;
    }
    let init = Init::Uniform {
        bound: default_bound(fan_in),
    };
    let mut params = vec![ParamSpec {
        role: "weight".into(),
        shape: vec![out, fan_in],
        init,
    }];
    if bias {
        params.push(ParamSpec {
            role: "bias".into(),
            shape: vec![out],
            init,
        });
    }
    Ok(Built {
        layer: Box::new(Linear {
            unit: unit.clone(),
            out,
            bias,
        }),
        output,
        params,
    })
}

impl Linear {
    /// Whether the input has leading unit axes before the features.
    fn has_leading_axes(&self) -> bool {
        self.unit.len() > 1
    }

    /// Index of the first matrix scratch buffer (after the column of ones).
    fn flat_scratch(&self) -> usize {
        usize::from(self.bias)
    }
}

/// The forward's product `x W^T` (the bias is accumulated onto it).
fn product() -> GemmSpec {
    GemmSpec::new(false, true)
}

impl Layer for Linear {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        let x = Operand::of(be, io.x.get(0)?, io.precision)?;
        let w = Operand::of(be, io.params.get(0)?, io.precision)?;
        let mut spec = product();
        if self.bias {
            let ones = scratch_at(io.scratch, 0)?;
            ops::binary(be, BinaryOp::Mul, ones, io.params.get(1)?, io.y)?;
            spec = spec.accumulate();
        }
        ops::gemm(be, &x, &w, io.y, spec)
    }

    fn backward(&self, be: &dyn Backend, mut io: Backward<'_>) -> Result<()> {
        let x = Operand::of(be, io.x.get(0)?, io.precision)?;
        let w = Operand::of(be, io.params.get(0)?, io.precision)?;
        let dy_product = Operand::of(be, io.dy, io.precision)?;
        let matrices = io
            .scratch
            .get_mut(self.flat_scratch()..)
            .ok_or_else(|| internal("scratch buffer missing"))?;
        let dw = io.dparams.get(0)?;
        grad::matmul(be, Factor::B, &x, &dy_product, product(), dw, matrices)?;
        if self.bias {
            grad::sum_to(be, &dy_product, io.dparams.get(1)?)?;
        }
        if let Some(dx) = io.dx.get_mut(0).and_then(Option::as_mut) {
            grad::matmul(be, Factor::A, &w, &dy_product, product(), dx, &mut [])?;
        }
        Ok(())
    }

    fn scratch(&self, _needs_dx: &[bool]) -> Vec<Scratch> {
        let mut s = Vec::new();
        if self.bias {
            let mut ones = self.unit.clone();
            if let Some(last) = ones.last_mut() {
                *last = 1;
            }
            s.push(Scratch::batched(ones, 1.0));
        }
        if self.has_leading_axes() {
            // `grad::matmul_scratch` of `dW`: `dy` and `x` as matrices.
            let rows: usize = self.unit[..self.unit.len() - 1].iter().product();
            let fan_in = self.unit[self.unit.len() - 1];
            for cols in [self.out, fan_in] {
                s.push(Scratch {
                    unit: vec![rows, cols],
                    merge_batch: true,
                    fill: 0.0,
                });
            }
        }
        s
    }
}

//! Invalid layer norm calls: an input that is not `[N, D]`, a scale or bias
//! of other features, an int input, a negative or non-finite eps, outputs and
//! gradients of the wrong shape. Each error must name the op and the argument.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use verjus_core::ops::{self, LayerNormArgs, LayerNormGrads};
use verjus_core::{Backend, DType, Shape, Tensor};

const N: usize = 3;
const D: usize = 5;

fn call(be: &dyn Backend, args: LayerNormArgs<'_>, y_dims: &[usize]) -> verjus_core::Result<()> {
    let mut y = ops::zeros(be, &Shape::new(y_dims.to_vec())?, DType::F32)?;
    let rows = Shape::new([args.x.dims().first().copied().unwrap_or(0)])?;
    let mut mean = ops::zeros(be, &rows, DType::F32)?;
    let mut rstd = ops::zeros(be, &rows, DType::F32)?;
    ops::layer_norm(be, &args, &mut y, &mut mean, &mut rstd)
}

fn args<'a>(x: &'a Tensor, scale: Option<&'a Tensor>, eps: f32) -> LayerNormArgs<'a> {
    LayerNormArgs {
        x,
        scale,
        bias: None,
        eps,
    }
}

/// Every invalid layer norm call is rejected with an error naming the argument.
pub fn layer_norm(be: &dyn Backend) -> Result<(), String> {
    let x = f32s(be, &[N, D])?;
    let mut f = Failures::new();
    let x3 = f32s(be, &[N, D, 2])?;
    f.record(expect_error("x of rank 3", &["layer_norm", "x"], || {
        call(be, args(&x3, None, 1e-5), &[N, D, 2])
    }));
    let wide = f32s(be, &[D + 1])?;
    f.record(expect_error(
        "scale of other features",
        &["layer_norm", "scale"],
        || call(be, args(&x, Some(&wide), 1e-5), &[N, D]),
    ));
    f.record(expect_error(
        "bias of other features",
        &["layer_norm", "bias"],
        || {
            let a = LayerNormArgs {
                bias: Some(&wide),
                ..args(&x, None, 1e-5)
            };
            call(be, a, &[N, D])
        },
    ));
    let xi = typed(be, &[N, D], DType::I32)?;
    f.record(expect_error("int32 x", &["layer_norm", "x"], || {
        call(be, args(&xi, None, 1e-5), &[N, D])
    }));
    for eps in [-1.0, f32::NAN] {
        f.record(expect_error(
            &format!("eps {eps}"),
            &["layer_norm", "eps"],
            || call(be, args(&x, None, eps), &[N, D]),
        ));
    }
    f.record(expect_error(
        "y of other shape",
        &["layer_norm", "y"],
        || call(be, args(&x, None, 1e-5), &[N, D + 1]),
    ));
    let rows = f32s(be, &[N])?;
    let mut bad_dx = f32s(be, &[N + 1, D])?;
    f.record(expect_error(
        "dx of other shape",
        &["layer_norm_backward", "dx"],
        || {
            let grads = LayerNormGrads {
                dx: Some(&mut bad_dx),
                ..Default::default()
            };
            ops::layer_norm_backward(be, &args(&x, None, 1e-5), &rows, &rows, &x, grads)
        },
    ));
    let short = f32s(be, &[N - 1])?;
    f.record(expect_error(
        "rstd of other rows",
        &["layer_norm_backward", "rstd"],
        || {
            ops::layer_norm_backward(
                be,
                &args(&x, None, 1e-5),
                &rows,
                &short,
                &x,
                LayerNormGrads::default(),
            )
        },
    ));
    f.finish()
}

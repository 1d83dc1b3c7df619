//! Invalid depthwise convolutions: an input that is not `[N, T, C]`, a
//! filter of other channels or no taps, a bias of other channels, dilation
//! 0, an output or gradient of the wrong shape. Each error must name the op
//! and the argument.

use super::{expect_error, f32s};
use crate::compare::Failures;
use verjus_core::ops::{self, DepthwiseArgs, DepthwiseGrads};
use verjus_core::{Backend, DType, Shape, Tensor};

const N: usize = 2;
const T: usize = 6;
const C: usize = 4;
const K: usize = 3;

fn args<'a>(
    x: &'a Tensor,
    filter: &'a Tensor,
    bias: Option<&'a Tensor>,
    dilation: usize,
) -> DepthwiseArgs<'a> {
    DepthwiseArgs {
        x,
        filter,
        bias,
        padding: [1, 1],
        dilation,
    }
}

fn call(be: &dyn Backend, a: DepthwiseArgs<'_>, y_dims: &[usize]) -> verjus_core::Result<()> {
    let mut y = ops::zeros(be, &Shape::new(y_dims.to_vec())?, DType::F32)?;
    ops::depthwise_conv1d(be, &a, &mut y)
}

/// Every invalid depthwise convolution is rejected with an error naming the argument.
pub fn depthwise(be: &dyn Backend) -> Result<(), String> {
    let x = f32s(be, &[N, T, C])?;
    let w = f32s(be, &[C, K])?;
    let out = [N, T, C];
    let mut f = Failures::new();
    let x4 = f32s(be, &[N, T, C, 1])?;
    f.record(expect_error(
        "x of rank 4",
        &["depthwise_conv1d", "x"],
        || call(be, args(&x4, &w, None, 1), &out),
    ));
    let w_wide = f32s(be, &[C + 1, K])?;
    f.record(expect_error(
        "filter of other channels",
        &["depthwise_conv1d", "filter"],
        || call(be, args(&x, &w_wide, None, 1), &out),
    ));
    let w_empty = f32s(be, &[C, 0])?;
    f.record(expect_error(
        "a filter of no taps",
        &["depthwise_conv1d", "taps"],
        || call(be, args(&x, &w_empty, None, 1), &out),
    ));
    let b_wide = f32s(be, &[C + 1])?;
    f.record(expect_error(
        "bias of other channels",
        &["depthwise_conv1d", "bias"],
        || call(be, args(&x, &w, Some(&b_wide), 1), &out),
    ));
    f.record(expect_error(
        "dilation 0",
        &["depthwise_conv1d", "dilation"],
        || call(be, args(&x, &w, None, 0), &out),
    ));
    f.record(expect_error(
        "y of other frames",
        &["depthwise_conv1d", "y"],
        || call(be, args(&x, &w, None, 1), &[N, T + 1, C]),
    ));
    let mut bad_dw = f32s(be, &[C, K + 1])?;
    f.record(expect_error(
        "dfilter of other taps",
        &["depthwise_conv1d_backward", "dfilter"],
        || {
            let grads = DepthwiseGrads {
                dfilter: Some(&mut bad_dw),
                ..Default::default()
            };
            ops::depthwise_conv1d_backward(be, &args(&x, &w, None, 1), &x, grads)
        },
    ));
    let short = f32s(be, &[N, T - 1, C])?;
    f.record(expect_error(
        "dy of other frames",
        &["depthwise_conv1d_backward", "dy"],
        || {
            ops::depthwise_conv1d_backward(
                be,
                &args(&x, &w, None, 1),
                &short,
                DepthwiseGrads::default(),
            )
        },
    ));
    f.finish()
}

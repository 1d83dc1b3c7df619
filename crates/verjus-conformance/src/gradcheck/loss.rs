//! Gradient check of the fused softmax cross-entropy's logits gradient.

use super::{check_input, weighted_sum};
use crate::array::Array;
use crate::compare::every_case;
use crate::inputs::{indices, uniform};
use crate::transfer::{put, put_int, zeros, Context};
use verjus_core::{ops, Backend, DType};

/// `dlogits` against differences of `grad_scale * sum(losses)`: the gradient is
/// documented as the derivative of the per-example losses, scaled by `grad_scale`.
pub fn softmax_cross_entropy(be: &dyn Backend) -> Result<(), String> {
    let cases = [(0.0f32, DType::I64, 1.0f32), (0.1, DType::I32, 0.7)];
    every_case(cases, |(smoothing, dtype, scale)| {
        let (n, classes) = (4, 5);
        let what = format!("gradcheck softmax_cross_entropy [{n}, {classes}] smoothing {smoothing} grad_scale {scale}");
        let logits = uniform(26, &[n, classes], -2.0, 2.0);
        let labels = put_int(be, &what, &indices(27, n, classes), dtype)?;
        let weights = Array::new([n], vec![scale; n]);
        let run = |x: &Array, grad: Option<&mut verjus_core::Tensor>| {
            let tx = put(be, &what, x)?;
            let mut losses = zeros(be, &what, &[n], DType::F32)?;
            ops::softmax_cross_entropy(be, &tx, &labels, smoothing, scale, &mut losses, grad)
                .context(&what)?;
            weighted_sum(be, &what, &losses, &weights)
        };
        let mut tgrad = zeros(be, &what, &[n, classes], DType::F32)?;
        run(&logits, Some(&mut tgrad))?;
        check_input(be, &what, &logits, &tgrad, |v| run(v, None))
    })
}

//! Gradient checks of the convolution's data, filter and bias gradients.

use super::{check_input, weighted_sum};
use crate::array::Array;
use crate::compare::every_case;
use crate::inputs::uniform;
use crate::reference::conv::output_dims;
use crate::transfer::{put, zeros, Context};
use verjus_core::ops::{self, Conv2dParams};
use verjus_core::{Backend, DType};

/// `conv2d_backward_{data,filter,bias}` against differences of `conv2d`, with a
/// plain and a strided, padded, dilated convolution.
pub fn conv2d(be: &dyn Backend) -> Result<(), String> {
    let plain = Conv2dParams::default();
    let odd = Conv2dParams {
        stride: [2, 1],
        padding: [1, 1],
        dilation: [1, 2],
    };
    let cases: [([usize; 4], [usize; 4], Conv2dParams); 2] = [
        ([1, 2, 4, 4], [2, 2, 3, 3], plain),
        ([2, 2, 5, 4], [3, 2, 3, 2], odd),
    ];
    every_case(cases, |(x_dims, w_dims, p)| {
        let what = format!("gradcheck conv2d x {x_dims:?} w {w_dims:?} {p:?}");
        let y_dims = output_dims(&x_dims, &w_dims, p);
        let x = uniform(10, &x_dims, -1.0, 1.0);
        let w = uniform(11, &w_dims, -1.0, 1.0);
        let b = uniform(12, &[w_dims[0]], -1.0, 1.0);
        let r = uniform(13, &y_dims, -1.0, 1.0);
        let loss = |x: &Array, w: &Array, b: &Array| {
            let (tx, tw, tb) = (put(be, &what, x)?, put(be, &what, w)?, put(be, &what, b)?);
            let mut ty = zeros(be, &what, &y_dims, DType::F32)?;
            ops::conv2d(be, &tx, &tw, Some(&tb), p, &mut ty).context(&what)?;
            weighted_sum(be, &what, &ty, &r)
        };
        let (tx, tw, tr) = (
            put(be, &what, &x)?,
            put(be, &what, &w)?,
            put(be, &what, &r)?,
        );
        let mut tdx = zeros(be, &what, &x_dims, DType::F32)?;
        let mut tdw = zeros(be, &what, &w_dims, DType::F32)?;
        let mut tdb = zeros(be, &what, &[w_dims[0]], DType::F32)?;
        ops::conv2d_backward_data(be, &tr, &tw, p, &mut tdx).context(&what)?;
        ops::conv2d_backward_filter(be, &tx, &tr, p, &mut tdw).context(&what)?;
        ops::conv2d_backward_bias(be, &tr, &mut tdb).context(&what)?;
        check_input(be, &format!("{what}: data"), &x, &tdx, |v| loss(v, &w, &b))?;
        check_input(be, &format!("{what}: filter"), &w, &tdw, |v| {
            loss(&x, v, &b)
        })?;
        check_input(be, &format!("{what}: bias"), &b, &tdb, |v| loss(&x, &w, v))
    })
}

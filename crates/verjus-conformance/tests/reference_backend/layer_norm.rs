//! The reference layer norm behind the `Backend` methods of the reference
//! backend, with two planted bugs: a one-pass variance (`E[x^2] - mean^2` in
//! f32, which loses its digits for rows far from 0) and a backward without
//! the `xhat * mean(g * xhat)` term of `dx`.

use verjus_conformance::array::Array;
use verjus_conformance::reference::layer_norm as r;
use verjus_core::ops::{LayerNormArgs, LayerNormGrads};
use verjus_core::{Result, Tensor};

fn array(t: &Tensor) -> Result<Array> {
    Ok(Array::new(t.dims().to_vec(), t.to_vec::<f32>()?))
}

fn opt_array(t: Option<&Tensor>) -> Result<Option<Array>> {
    t.map(array).transpose()
}

pub fn forward(
    args: &LayerNormArgs<'_>,
    y: &mut Tensor,
    mean: &mut Tensor,
    rstd: &mut Tensor,
    one_pass_variance: bool,
) -> Result<()> {
    let x = array(args.x)?;
    let (scale, bias) = (opt_array(args.scale)?, opt_array(args.bias)?);
    let (out, m, s) = if one_pass_variance {
        one_pass(&x, scale.as_ref(), bias.as_ref(), args.eps)
    } else {
        r::layer_norm(&x, scale.as_ref(), bias.as_ref(), args.eps)
    };
    y.as_mut_slice::<f32>()?.copy_from_slice(&out.data);
    mean.as_mut_slice::<f32>()?.copy_from_slice(&m);
    rstd.as_mut_slice::<f32>()?.copy_from_slice(&s);
    Ok(())
}

/// The forward with the variance as `E[x^2] - mean^2`, summed in f32 (the bug).
fn one_pass(
    x: &Array,
    scale: Option<&Array>,
    bias: Option<&Array>,
    eps: f32,
) -> (Array, Vec<f32>, Vec<f32>) {
    let (n, d) = (x.dims[0], x.dims[1]);
    let mut y = Array::zeros(x.dims.clone());
    let (mut means, mut rstds) = (Vec::new(), Vec::new());
    for row in 0..n {
        let xr = &x.data[row * d..(row + 1) * d];
        let dd = d.max(1) as f32;
        let mean = xr.iter().sum::<f32>() / dd;
        let var = (xr.iter().map(|v| v * v).sum::<f32>() / dd - mean * mean).max(0.0);
        let rstd = 1.0 / (var + eps).sqrt();
        for (j, &v) in xr.iter().enumerate() {
            let s = scale.map_or(1.0, |s| s.data[j]);
            let b = bias.map_or(0.0, |b| b.data[j]);
            y.data[row * d + j] = (v - mean) * rstd * s + b;
        }
        means.push(mean);
        rstds.push(rstd);
    }
    (y, means, rstds)
}

pub fn backward(
    args: &LayerNormArgs<'_>,
    dy: &Tensor,
    grads: LayerNormGrads<'_>,
    drop_xhat_term: bool,
) -> Result<()> {
    let (x, dy) = (array(args.x)?, array(dy)?);
    let scale = opt_array(args.scale)?;
    let (mut dx, ds, db) = r::layer_norm_backward(&x, scale.as_ref(), &dy, args.eps);
    if drop_xhat_term {
        // The bug: dx = rstd * (g - mean(g)), as if the rstd did not depend on x.
        let (_, _, rstd) = r::layer_norm(&x, None, None, args.eps);
        let d = x.dims[1];
        for (row, rs) in rstd.iter().enumerate() {
            let g: Vec<f32> = (0..d)
                .map(|j| dy.data[row * d + j] * scale.as_ref().map_or(1.0, |s| s.data[j]))
                .collect();
            let g_mean = g.iter().sum::<f32>() / d as f32;
            for (j, gj) in g.iter().enumerate() {
                dx.data[row * d + j] = rs * (gj - g_mean);
            }
        }
    }
    for (g, a) in [(grads.dx, dx.data), (grads.dscale, ds), (grads.dbias, db)] {
        if let Some(g) = g {
            g.as_mut_slice::<f32>()?.copy_from_slice(&a);
        }
    }
    Ok(())
}

//! [`pool`]: 1-D and 2-D max and average pooling by dims, after RETURNN's
//! `rf.pool` (strides default to the window size there; callers pass them).
//!
//! All other dims are merged into the batch axis of the core's NCHW
//! `pool2d` (a 1-D pool is a 2-D one of height 1). Padding frames never take
//! part: for max, padding (of dynamic dims, and of "same"/explicit
//! padding, added here rather than by the core) is -inf, and out frames
//! past a sequence's end are set to 0 as in RETURNN; for average, the sum
//! over the window is divided by the number of real frames in it (the
//! same pooling run on the 0/1 mask), so a sequence pools as it would
//! alone. Windows dilated by more than 1 are not supported yet.

use crate::binary::combine;
use crate::mask::masked;
use crate::shape::full_like;
use crate::window::{pad_axis, Window};
use crate::{combine_scalar, fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::{BinaryOp, Pool2dParams, PoolKind};
use verjus_core::{Error, Result};

/// `"max"` or `"avg"`.
pub fn parse_pool_mode(mode: &str) -> Result<PoolKind> {
    match mode {
        "max" => Ok(PoolKind::Max),
        "avg" => Ok(PoolKind::Avg),
        other => Err(Error::invalid(
            "pool",
            format!("unknown mode {other:?} (\"max\" or \"avg\")"),
        )),
    }
}

/// Pools `source` over `in_spatial_dims` (1 or 2) with `window`; returns
/// the output and the out spatial dims (`out_spatial_dims` when given).
pub fn pool(
    source: &RfTensor,
    kind: PoolKind,
    window: &Window,
    in_spatial_dims: &[Dim],
    out_spatial_dims: Option<Vec<Dim>>,
) -> Result<(RfTensor, Vec<Dim>)> {
    let op = "pool";
    let spatial = in_spatial_dims;
    if spatial.is_empty() || spatial.len() > 2 {
        return Err(Error::invalid(
            op,
            format!("needs 1 or 2 spatial dims, got {}", fmt_dims(spatial)),
        ));
    }
    window.check(op, spatial)?;
    if window.dilation.iter().any(|&d| d != 1) {
        return Err(Error::invalid(
            op,
            format!(
                "dilation_rate {:?} over {} is not supported yet (only 1)",
                window.dilation,
                fmt_dims(spatial)
            ),
        ));
    }
    for d in spatial {
        source.axis(op, d)?;
    }
    if source.dtype() != RfDType::Float32 {
        return Err(Error::invalid(
            op,
            format!("needs a float32 tensor, got {}", source.dtype()),
        ));
    }
    let fill = match kind {
        PoolKind::Max => f32::NEG_INFINITY,
        PoolKind::Avg => 0.0,
    };
    let x = masked(source, spatial, fill)?;
    let in_sizes: Vec<usize> = spatial
        .iter()
        .map(|d| x.sizes()[x.axis_of(d).unwrap_or(0)])
        .collect();
    let out_dims = window.out_dims(op, spatial, &in_sizes, out_spatial_dims)?;
    let y = pooled(&x, kind, window, spatial, &out_dims, fill)?;
    let y = match kind {
        PoolKind::Max => masked(&y, &out_dims, 0.0)?,
        PoolKind::Avg if needs_count(window, spatial) => {
            let ones = masked(&full_like(source, 1.0)?, spatial, 0.0)?;
            let count = pooled(&ones, kind, window, spatial, &out_dims, 0.0)?;
            // Window counts are multiples of 1 / size; keep empty ones off 0.
            let least = 0.5 / window.size.iter().product::<usize>() as f64;
            let count = combine_scalar(&count, BinaryOp::Max, least, false)?;
            combine(&y, BinaryOp::Div, &count, false)?
        }
        PoolKind::Avg => y,
    };
    Ok((y.keep_feature_dim(source), out_dims))
}

/// The padding of spatial dim `i` (`n` entries, `out` windows) that some
/// window reaches: a stride larger than 1 can leave the right padding
/// unread ("same" pooling of an even length by 2), and padding no window
/// reads is not worth a copy of the whole tensor.
fn reached_pads(window: &Window, i: usize, n: usize, out: usize) -> (usize, usize) {
    let (left, right) = window.pads(i);
    if out == 0 {
        return (left, right);
    }
    let last_end = (out - 1) * window.strides[i] + window.size[i];
    (left, right.min(last_end.saturating_sub(left + n)))
}

/// Whether an average needs the count of real frames (padding or
/// dynamic dims); otherwise the core's average is the answer.
fn needs_count(window: &Window, spatial: &[Dim]) -> bool {
    let padded = (0..spatial.len()).any(|i| window.pads(i) != (0, 0));
    padded || spatial.iter().any(Dim::is_dynamic)
}

/// The core pooling of `x` (padding already masked with `fill`), the
/// window's padding added as `fill`, back in `x`'s other dims.
fn pooled(
    x: &RfTensor,
    kind: PoolKind,
    window: &Window,
    spatial: &[Dim],
    out_dims: &[Dim],
    fill: f32,
) -> Result<RfTensor> {
    let rest: Vec<Dim> = x
        .dims()
        .iter()
        .filter(|d| !spatial.contains(d))
        .cloned()
        .collect();
    let mut order = rest.clone();
    order.extend(spatial.iter().cloned());
    let x = x.copy_transpose(&order)?;
    let sizes = x.sizes();
    let n: usize = sizes[..rest.len()].iter().product();
    let one = spatial.len() == 1;
    let s = &sizes[rest.len()..];
    let (h, w) = if one { (1, s[0]) } else { (s[0], s[1]) };
    let mut var = x.var().reshape([n, 1, h, w])?;
    let out: Vec<usize> = (0..spatial.len())
        .map(|i| window.out_len(i, s[i] as i64) as usize)
        .collect();
    for i in 0..spatial.len() {
        let axis = if one { 3 } else { 2 + i };
        var = pad_axis(&var, axis, reached_pads(window, i, s[i], out[i]), fill)?;
    }
    let pick = |v: &[usize]| if one { [1, v[0]] } else { [v[0], v[1]] };
    let (oh, ow) = if one { (1, out[0]) } else { (out[0], out[1]) };
    let y = if n == 0 || oh == 0 || ow == 0 {
        let shape = verjus_core::Shape::new([n, 1, oh, ow])?;
        let t = verjus_core::ops::zeros(&**x.backend(), &shape, verjus_core::DType::F32)?;
        Var::constant(t, x.backend().clone())?
    } else {
        let params = Pool2dParams {
            kernel: pick(&window.size),
            stride: pick(&window.strides),
            padding: [0, 0],
        };
        var.pool2d(kind, params)?
    };
    let mut shape = sizes[..rest.len()].to_vec();
    shape.extend(&out);
    let mut dims = rest;
    dims.extend(out_dims.iter().cloned());
    RfTensor::new(y.reshape(shape)?, dims, RfDType::Float32)
}

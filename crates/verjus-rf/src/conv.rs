//! [`conv`]: 1-D and 2-D convolution by dims, after RETURNN's `rf.conv`.
//!
//! The source's other dims (batch and anything else) are merged into the
//! batch axis of the core's NCHW `conv2d` and split back; a 1-D conv is a
//! 2-D one of height 1. The padding frames of dynamic spatial dims are set
//! to 0 first, so that each sequence's output equals its output alone
//! (`window.rs` keeps the padding itself independent of the batch). The
//! symmetric part of the padding goes to the core op; the one extra entry
//! on the right of an even window is added as zeros. Groups run as one
//! core conv per group, joined along the channels, except a depthwise conv
//! (one input channel per group): in 1-D with one filter per channel and
//! stride 1 (the Conformer's) the core's channels-last `depthwise_conv1d`,
//! otherwise a few ops for all groups.

use crate::mask::masked;
use crate::window::{pad_axis, Window};
use crate::{fmt_dims, Dim, RfDType, RfTensor};
use verjus_core::autograd::Var;
use verjus_core::ops::{self, Conv2dParams};
use verjus_core::{Error, Result, Shape, Tensor};

/// The arguments of [`conv`] besides the source (RETURNN's keywords).
#[derive(Clone, Debug)]
pub struct ConvArgs {
    pub in_dim: Dim,
    pub out_dim: Dim,
    pub in_spatial_dims: Vec<Dim>,
    pub out_spatial_dims: Option<Vec<Dim>>,
    /// `[out_dim, in_dim (/ groups), filter_size...]` in any order.
    pub filter: RfTensor,
    /// The filter's spatial dims, in the order of `in_spatial_dims`.
    pub filter_size: Vec<Dim>,
    pub window: Window,
    pub groups: usize,
    /// Over `[out_dim]`.
    pub bias: Option<RfTensor>,
}

/// Convolves `source` over `in_spatial_dims` (1 or 2 of them), `in_dim`
/// channels to `out_dim`; returns the output (its feature dim `out_dim`)
/// and the out spatial dims (see `window.rs`).
pub fn conv(source: &RfTensor, args: &ConvArgs) -> Result<(RfTensor, Vec<Dim>)> {
    let op = "conv";
    let spatial = &args.in_spatial_dims;
    let window = &args.window;
    check(source, args)?;
    let x = masked(source, spatial, 0.0)?;
    if is_depthwise_1d(args) {
        return depthwise_1d(&x, args);
    }
    let batch = batch_dims(&x, args);
    let mut order = batch.clone();
    order.push(args.in_dim.clone());
    order.extend(spatial.iter().cloned());
    let x = x.copy_transpose(&order)?;
    let sizes = x.sizes();
    let batch_sizes = &sizes[..batch.len()];
    let n: usize = batch_sizes.iter().product();
    let in_sizes = &sizes[batch.len() + 1..];
    let out_dims = window.out_dims(op, spatial, in_sizes, args.out_spatial_dims.clone())?;
    let out_sizes: Vec<usize> = (0..spatial.len())
        .map(|i| window.out_len(i, in_sizes[i] as i64) as usize)
        .collect();
    // As NCHW (a 1-D conv with height 1), the extra right padding added.
    let one = spatial.len() == 1;
    let (h, w) = if one {
        (1, in_sizes[0])
    } else {
        (in_sizes[0], in_sizes[1])
    };
    let c = sizes[batch.len()];
    let mut var = x.var().reshape([n, c, h, w])?;
    let mut sym = [0usize; 2];
    for i in 0..spatial.len() {
        let (l, r) = window.pads(i);
        let axis = if one { 3 } else { 2 + i };
        sym[axis - 2] = l;
        var = pad_axis(&var, axis, (0, r - l), 0.0)?;
    }
    let pick = |v: &[usize], fill: usize| if one { [fill, v[0]] } else { [v[0], v[1]] };
    let params = Conv2dParams {
        stride: pick(&window.strides, 1),
        padding: sym,
        dilation: pick(&window.dilation, 1),
    };
    let o = args.out_dim.size().unwrap_or(0);
    let (oh, ow) = if one {
        (1, out_sizes[0])
    } else {
        (out_sizes[0], out_sizes[1])
    };
    let y = if oh == 0 || ow == 0 || n == 0 {
        let t = ops::zeros(
            &**x.backend(),
            &Shape::new([n, o, oh, ow])?,
            verjus_core::DType::F32,
        )?;
        Var::constant(t, x.backend().clone())?
    } else {
        grouped(
            &var,
            &filter_4d(args, one)?,
            args.bias.as_ref().map(RfTensor::var),
            params,
            args.groups,
        )?
    };
    let mut shape = batch_sizes.to_vec();
    shape.push(o);
    shape.extend(&out_sizes);
    let mut dims = batch;
    dims.push(args.out_dim.clone());
    dims.extend(out_dims.iter().cloned());
    let out = RfTensor::new(y.reshape(shape)?, dims, RfDType::Float32)?
        .with_feature_dim(Some(args.out_dim.clone()))?;
    Ok((out, out_dims))
}

/// The checks of [`conv`] that name dims.
fn check(source: &RfTensor, args: &ConvArgs) -> Result<()> {
    let op = "conv";
    let spatial = &args.in_spatial_dims;
    if spatial.is_empty() || spatial.len() > 2 {
        return Err(Error::invalid(
            op,
            format!("needs 1 or 2 spatial dims, got {}", fmt_dims(spatial)),
        ));
    }
    args.window.check(op, spatial)?;
    source.axis(op, &args.in_dim)?;
    for d in spatial {
        source.axis(op, d)?;
    }
    if source.dtype() != RfDType::Float32 || args.filter.dtype() != RfDType::Float32 {
        return Err(Error::invalid(op, "source and filter must be float32"));
    }
    let groups = args.groups.max(1);
    let c = args.in_dim.size().unwrap_or(0);
    let filter_in = filter_in_dim(args)?;
    let want = if groups == 1 {
        Some(c)
    } else {
        Some(c / groups)
    };
    let sizes_ok = c.is_multiple_of(groups)
        && (filter_in == args.in_dim || (groups > 1 && filter_in.size() == want))
        && args.out_dim.size().is_some_and(|o| o % groups == 0)
        && args.filter_size.len() == spatial.len()
        && args
            .filter_size
            .iter()
            .zip(&args.window.size)
            .all(|(d, &k)| d.size() == Some(k));
    if !sizes_ok {
        return Err(Error::invalid(
            op,
            format!(
                "filter {} does not fit in_dim {:?}, out_dim {:?}, groups {groups} and filter_size {}",
                fmt_dims(args.filter.dims()),
                args.in_dim,
                args.out_dim,
                fmt_dims(&args.filter_size)
            ),
        ));
    }
    if let Some(b) = &args.bias {
        if b.dims() != std::slice::from_ref(&args.out_dim) {
            return Err(Error::invalid(
                op,
                format!(
                    "bias {} must be over [{}]",
                    fmt_dims(b.dims()),
                    args.out_dim
                ),
            ));
        }
    }
    Ok(())
}

/// The filter's input-channel dim: the one that is neither `out_dim` nor a
/// filter-size dim.
fn filter_in_dim(args: &ConvArgs) -> Result<Dim> {
    let f = args.filter.dims();
    let rest: Vec<&Dim> = f
        .iter()
        .filter(|d| **d != args.out_dim && !args.filter_size.contains(d))
        .collect();
    match rest.as_slice() {
        [d] if f.len() == args.filter_size.len() + 2 => Ok((*d).clone()),
        _ => Err(Error::invalid(
            "conv",
            format!(
                "filter {} must be over out_dim {}, the input channels and filter_size {}",
                fmt_dims(f),
                args.out_dim,
                fmt_dims(&args.filter_size)
            ),
        )),
    }
}

/// The source's dims that are neither its channels nor spatial: merged into
/// the core op's batch axis.
fn batch_dims(x: &RfTensor, args: &ConvArgs) -> Vec<Dim> {
    x.dims()
        .iter()
        .filter(|d| **d != args.in_dim && !args.in_spatial_dims.contains(d))
        .cloned()
        .collect()
}

/// Whether `args` is a 1-D conv with one filter per channel and stride 1
/// (the Conformer's convolution module), which [`depthwise_1d`] runs.
fn is_depthwise_1d(args: &ConvArgs) -> bool {
    let c = args.in_dim.size();
    args.in_spatial_dims.len() == 1
        && c == Some(args.groups)
        && args.out_dim.size() == c
        && args.window.strides == [1]
}

/// A depthwise 1-D conv through the core's channels-last
/// `depthwise_conv1d`: the source as `[batch, time, channels]` (no copy when
/// the channels already come last), every window read in place.
fn depthwise_1d(x: &RfTensor, args: &ConvArgs) -> Result<(RfTensor, Vec<Dim>)> {
    let spatial = &args.in_spatial_dims;
    let mut order = batch_dims(x, args);
    let batch = order.len();
    order.push(spatial[0].clone());
    order.push(args.in_dim.clone());
    let x = x.copy_transpose(&order)?;
    let sizes = x.sizes();
    let n: usize = sizes[..batch].iter().product();
    let (t, c) = (sizes[batch], sizes[batch + 1]);
    let out_dims = args
        .window
        .out_dims("conv", spatial, &[t], args.out_spatial_dims.clone())?;
    let filter = args.filter.copy_transpose(&[
        args.out_dim.clone(),
        filter_in_dim(args)?,
        args.filter_size[0].clone(),
    ])?;
    let k = filter.sizes()[2];
    let (left, right) = args.window.pads(0);
    let y = x.var().reshape([n, t, c])?.depthwise_conv1d(
        &filter.var().reshape([c, k])?,
        args.bias.as_ref().map(RfTensor::var),
        [left, right],
        args.window.dilation[0],
    )?;
    let mut shape = sizes[..batch].to_vec();
    shape.extend([y.shape().dims()[1], c]);
    let mut dims = order[..batch].to_vec();
    dims.extend(out_dims.iter().cloned());
    dims.push(args.out_dim.clone());
    let out = RfTensor::new(y.reshape(shape)?, dims, RfDType::Float32)?
        .with_feature_dim(Some(args.out_dim.clone()))?;
    Ok((out, out_dims))
}

/// The filter as `[out, in / groups, kh, kw]`.
fn filter_4d(args: &ConvArgs, one: bool) -> Result<Var> {
    let mut order = vec![args.out_dim.clone(), filter_in_dim(args)?];
    order.extend(args.filter_size.iter().cloned());
    let f = args.filter.copy_transpose(&order)?;
    let s = f.sizes();
    if one {
        f.var().reshape([s[0], s[1], 1, s[2]])
    } else {
        Ok(f.var().clone())
    }
}

/// A depthwise conv (one input channel per group, `m` outputs each): one
/// gather lays out every window of every channel (`taps` values per output
/// position), then each channel's taps are weighted by its filters and
/// summed. A few ops for all groups, where a conv per group recorded hundreds
/// of small ops on the tape (a Conformer's conv module has a group per model
/// channel).
fn depthwise(x: &Var, filter: &Var, bias: Option<&Var>, params: Conv2dParams) -> Result<Var> {
    let &[b, c, h, w] = x.shape().dims() else {
        unreachable!("the core conv's input is 4-D")
    };
    let &[o, _, kh, kw] = filter.shape().dims() else {
        unreachable!("the core conv's filter is 4-D")
    };
    let [ph, pw] = params.padding;
    let (hp, wp) = (h + 2 * ph, w + 2 * pw);
    let span = |k: usize, d: usize| d * (k - 1) + 1;
    let out = |len: usize, k: usize, i: usize| {
        (len + 1)
            .saturating_sub(span(k, params.dilation[i]))
            .div_ceil(params.stride[i])
    };
    let (oh, ow) = (out(hp, kh, 0), out(wp, kw, 1));
    // Window element (ky, kx) of output (oy, ox), in the padded input: the
    // gather's indices, tap-major.
    let mut idx = Vec::with_capacity(kh * kw * oh * ow);
    for ky in 0..kh {
        for kx in 0..kw {
            for oy in 0..oh {
                for ox in 0..ow {
                    let iy = oy * params.stride[0] + ky * params.dilation[0];
                    let ix = ox * params.stride[1] + kx * params.dilation[1];
                    idx.push((iy * wp + ix) as i64);
                }
            }
        }
    }
    let be = x.backend();
    let idx = ops::upload(&**be, &Tensor::from_vec([idx.len()], idx)?)?;
    let idx = Var::constant(idx, be.clone())?;
    let padded = pad_axis(&pad_axis(x, 2, (ph, ph), 0.0)?, 3, (pw, pw), 0.0)?;
    let (m, taps) = (o / c, kh * kw);
    let windows = padded
        .reshape([b * c, hp * wp])?
        .index_select(1, &idx)?
        .reshape([b, c, 1, taps, oh * ow])?;
    let weights = filter.reshape([1, c, m, taps, 1])?;
    let y = windows
        .mul(&weights)?
        .sum(&[3], false)?
        .reshape([b, o, oh, ow])?;
    match bias {
        Some(bias) => y.add(&bias.reshape([1, o, 1, 1])?),
        None => Ok(y),
    }
}

/// The core conv, one per group (split along the channels), joined.
fn grouped(
    x: &Var,
    filter: &Var,
    bias: Option<&Var>,
    params: Conv2dParams,
    groups: usize,
) -> Result<Var> {
    if groups <= 1 {
        return x.conv2d(filter, bias, params);
    }
    let (c, o) = (x.shape().dims()[1], filter.shape().dims()[0]);
    if groups == c {
        return depthwise(x, filter, bias, params);
    }
    let xs = x.split(1, &vec![c / groups; groups])?;
    let fs = filter.split(0, &vec![o / groups; groups])?;
    let bs = bias
        .map(|b| b.split(0, &vec![o / groups; groups]))
        .transpose()?;
    let outs = (0..groups)
        .map(|g| xs[g].conv2d(&fs[g], bs.as_ref().map(|b| &b[g]), params))
        .collect::<Result<Vec<_>>>()?;
    Var::concat(&outs, 1)
}

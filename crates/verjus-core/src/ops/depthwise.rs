//! Depthwise 1-D convolution, channels last, as one op, and its backward.
//!
//! For `x [N, T, C]`, `filter [C, K]` and an optional `bias [C]`, with
//! `left`/`right` zero padding and dilation `d` (stride 1):
//!
//! ```text
//! y[n, t, c] = bias[c] + sum_k filter[c, k] * x[n, t + k d - left, c]
//! T_out = T + left + right - d (K - 1)        (0 when that is negative)
//! ```
//!
//! (a cross-correlation, as every framework's "convolution"). This is the
//! Conformer's convolution module: one filter per channel over time. Run as a
//! grouped core convolution it is a gather of every window followed by a
//! weighted sum, which moves `K` times the input through memory each way;
//! here a channel-contiguous loop reads each input row `K` times from cache.

use super::{check_f32_on, check_rank, check_shape};
use crate::{Backend, Error, Result, Shape, Tensor};

/// The sizes of one depthwise convolution, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthwisePlan {
    /// Independent sequences `N`.
    pub batch: usize,
    /// Input frames `T`.
    pub frames: usize,
    /// Channels `C` (one filter each).
    pub channels: usize,
    /// Filter taps `K`.
    pub taps: usize,
    /// Output frames `T_out`.
    pub out_frames: usize,
    /// Zero frames before and after the input.
    pub padding: [usize; 2],
    /// The distance between taps.
    pub dilation: usize,
}

impl DepthwisePlan {
    /// `[N, T_out, C]`, the output's shape.
    pub fn output_shape(&self) -> Shape {
        Shape::new([self.batch, self.out_frames, self.channels]).expect("checked by the plan")
    }

    /// The input frame that tap `k` of output frame `t` reads, if inside `0..T`.
    pub fn source(&self, t: usize, k: usize) -> Option<usize> {
        (t + k * self.dilation)
            .checked_sub(self.padding[0])
            .filter(|&s| s < self.frames)
    }
}

/// The operands: `x [N, T, C]`, `filter [C, K]`, optional `bias [C]`, the
/// padding before and after, and the dilation (at least 1).
#[derive(Clone, Copy, Debug)]
pub struct DepthwiseArgs<'a> {
    pub x: &'a Tensor,
    pub filter: &'a Tensor,
    pub bias: Option<&'a Tensor>,
    pub padding: [usize; 2],
    pub dilation: usize,
}

/// The gradients a backward writes (each only if asked for; overwritten).
#[derive(Debug, Default)]
pub struct DepthwiseGrads<'a> {
    pub dx: Option<&'a mut Tensor>,
    pub dfilter: Option<&'a mut Tensor>,
    pub dbias: Option<&'a mut Tensor>,
}

/// Validates the operands and returns the plan.
pub fn depthwise_plan(
    op: &str,
    be: &dyn Backend,
    args: &DepthwiseArgs<'_>,
) -> Result<DepthwisePlan> {
    check_rank(op, "x", args.x, 3, "[N, T, C]")?;
    check_rank(op, "filter", args.filter, 2, "[C, K]")?;
    check_f32_on(op, be, &[("x", args.x), ("filter", args.filter)])?;
    let &[batch, frames, channels] = args.x.dims() else {
        unreachable!("rank checked")
    };
    let taps = args.filter.dims()[1];
    check_shape(op, "filter", args.filter, &Shape::new([channels, taps])?)?;
    if let Some(b) = args.bias {
        check_f32_on(op, be, &[("bias", b)])?;
        check_shape(op, "bias", b, &Shape::new([channels])?)?;
    }
    if taps == 0 || args.dilation == 0 {
        return Err(Error::invalid(
            op,
            format!(
                "filter taps ({taps}) and dilation ({}) must be positive",
                args.dilation
            ),
        ));
    }
    let span = args
        .dilation
        .checked_mul(taps - 1)
        .and_then(|s| s.checked_add(1))
        .ok_or_else(|| Error::invalid(op, "the filter's span overflows"))?;
    let padded = frames
        .checked_add(args.padding[0])
        .and_then(|n| n.checked_add(args.padding[1]))
        .ok_or_else(|| Error::invalid(op, "the padded length overflows"))?;
    Ok(DepthwisePlan {
        batch,
        frames,
        channels,
        taps,
        out_frames: (padded + 1).saturating_sub(span),
        padding: args.padding,
        dilation: args.dilation,
    })
}

/// `y [N, T_out, C]` (see the module docs).
pub fn depthwise_conv1d(be: &dyn Backend, args: &DepthwiseArgs<'_>, y: &mut Tensor) -> Result<()> {
    let op = "depthwise_conv1d";
    let plan = depthwise_plan(op, be, args)?;
    check_f32_on(op, be, &[("y", y)])?;
    check_shape(op, "y", y, &plan.output_shape())?;
    be.depthwise_conv1d(&plan, args, y)
}

/// The gradients of [`depthwise_conv1d`] for the output gradient `dy`:
/// `dx[n, s, c] = sum_{t, k: source(t, k) = s} filter[c, k] dy[n, t, c]`,
/// `dfilter[c, k] = sum_{n, t} dy[n, t, c] x[n, source(t, k), c]`,
/// `dbias[c] = sum_{n, t} dy[n, t, c]`.
pub fn depthwise_conv1d_backward(
    be: &dyn Backend,
    args: &DepthwiseArgs<'_>,
    dy: &Tensor,
    grads: DepthwiseGrads<'_>,
) -> Result<()> {
    let op = "depthwise_conv1d_backward";
    let plan = depthwise_plan(op, be, args)?;
    check_f32_on(op, be, &[("dy", dy)])?;
    check_shape(op, "dy", dy, &plan.output_shape())?;
    for (what, g, like) in [
        ("dx", &grads.dx, args.x.shape()),
        ("dfilter", &grads.dfilter, args.filter.shape()),
        ("dbias", &grads.dbias, &Shape::new([plan.channels])?),
    ] {
        if let Some(g) = g {
            check_f32_on(op, be, &[(what, g)])?;
            check_shape(op, what, g, like)?;
        }
    }
    be.depthwise_conv1d_backward(&plan, args, dy, grads)
}

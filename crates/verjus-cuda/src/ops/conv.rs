//! Convolution through cuDNN, with the empty shapes cuDNN rejects handled here:
//! no input channels (the output is the bias), no batch or no output channels
//! (zero gradients). The bias and its gradient are own kernels
//! (`kernels/conv.cu`): cuDNN's bias gradient ran at a fraction of memory
//! speed on an H100.

use super::memory::fill_f32;
use crate::backend::CudaBackend;
use crate::cudnn::{ConvOperands, Direction};
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{ptr, ptr_mut};
use verjus_core::ops::Conv2dPlan;
use verjus_core::{Result, Tensor};

pub(crate) fn conv2d(
    be: &CudaBackend,
    plan: &Conv2dPlan,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    y: &mut Tensor,
) -> Result<()> {
    let op = "conv2d";
    be.enter(op)?;
    let n = y.numel();
    if n == 0 {
        return Ok(());
    }
    let yp = ptr_mut(op, y)?;
    if plan.c_in == 0 {
        fill_f32(be, op, yp, n, 0.0)?;
    } else {
        let t = ConvOperands {
            x: ptr(op, x)?,
            w: ptr(op, w)?,
            y: yp,
        };
        be.cudnn.convolve(Direction::Forward, plan, be.tf32(), t)?;
    }
    if let Some(b) = bias {
        let bp = ptr(op, b)?;
        let (nn, c, hw) = (plan.n as i64, plan.c_out as i64, (plan.oh * plan.ow) as i64);
        be.launch_n(
            op,
            Module::Conv,
            "add_channel_bias_f32",
            n,
            &mut [arg(&yp), arg(&bp), arg(&nn), arg(&c), arg(&hw)],
        )?;
    }
    Ok(())
}

pub(crate) fn conv2d_backward_data(
    be: &CudaBackend,
    plan: &Conv2dPlan,
    dy: &Tensor,
    w: &Tensor,
    dx: &mut Tensor,
) -> Result<()> {
    let op = "conv2d_backward_data";
    be.enter(op)?;
    let n = dx.numel();
    if n == 0 {
        return Ok(());
    }
    let dxp = ptr_mut(op, dx)?;
    if plan.c_out == 0 {
        return fill_f32(be, op, dxp, n, 0.0);
    }
    let t = ConvOperands {
        x: dxp,
        w: ptr(op, w)?,
        y: ptr(op, dy)?,
    };
    be.cudnn
        .convolve(Direction::BackwardData, plan, be.tf32(), t)
}

pub(crate) fn conv2d_backward_filter(
    be: &CudaBackend,
    plan: &Conv2dPlan,
    x: &Tensor,
    dy: &Tensor,
    dw: &mut Tensor,
) -> Result<()> {
    let op = "conv2d_backward_filter";
    be.enter(op)?;
    let n = dw.numel();
    if n == 0 {
        return Ok(());
    }
    let dwp = ptr_mut(op, dw)?;
    if plan.n == 0 {
        return fill_f32(be, op, dwp, n, 0.0);
    }
    let t = ConvOperands {
        x: ptr(op, x)?,
        w: dwp,
        y: ptr(op, dy)?,
    };
    be.cudnn
        .convolve(Direction::BackwardFilter, plan, be.tf32(), t)
}

pub(crate) fn conv2d_backward_bias(be: &CudaBackend, dy: &Tensor, db: &mut Tensor) -> Result<()> {
    let op = "conv2d_backward_bias";
    be.enter(op)?;
    let c = db.numel();
    if c == 0 {
        return Ok(());
    }
    let dbp = ptr_mut(op, db)?;
    if dy.numel() == 0 {
        return fill_f32(be, op, dbp, c, 0.0);
    }
    let d = dy.dims();
    let (n, hw) = (d[0], d[2] * d[3]);
    let split = ChannelSplit::new(n, c, be.gpu.sm_count);
    let part = be.scratch(op, 4 * c * split.chunks)?;
    let (pp, dyp) = (part.ptr(), ptr(op, dy)?);
    let (nn, cc, hh, per, chunks) = (
        n as i64,
        c as i64,
        hw as i64,
        split.per as i64,
        split.chunks as i64,
    );
    be.launch(
        op,
        Module::Conv,
        "channel_sum_partial_f32",
        (c * split.chunks) as u32,
        &mut [arg(&dyp), arg(&pp), arg(&nn), arg(&cc), arg(&hh), arg(&per)],
    )?;
    be.launch_n(
        op,
        Module::Conv,
        "channel_sum_finish_f32",
        32 * c,
        &mut [arg(&pp), arg(&dbp), arg(&cc), arg(&chunks)],
    )
}

/// How the bias gradient's first pass splits the samples: `chunks` blocks per
/// channel, `per` samples each, so that channels times chunks blocks fill the
/// GPU a few times over (one block per channel left most of an H100 idle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ChannelSplit {
    chunks: usize,
    per: usize,
}

impl ChannelSplit {
    /// Blocks per multiprocessor the first pass aims for.
    const WAVES: usize = 4;

    fn new(samples: usize, channels: usize, sm_count: u32) -> Self {
        let want = (Self::WAVES * sm_count as usize).div_ceil(channels.max(1));
        let chunks = want.clamp(1, samples.max(1));
        let per = samples.max(1).div_ceil(chunks);
        // Drop chunks that the rounding of `per` left without samples.
        ChannelSplit {
            chunks: samples.max(1).div_ceil(per),
            per,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ChannelSplit;

    /// Every sample lies in exactly one chunk, no chunk is empty, and the
    /// blocks fill an H100 (132 multiprocessors) about four times.
    #[test]
    fn the_bias_gradient_split_covers_every_sample_once() {
        for (n, c, sm) in [
            (1024, 32, 132),
            (1024, 64, 132),
            (1, 3, 132),
            (7, 1000, 132),
            (100, 1, 2),
        ] {
            let s = ChannelSplit::new(n, c, sm);
            assert!(s.chunks >= 1 && s.per >= 1, "{n} {c}: {s:?}");
            assert!(s.chunks * s.per >= n, "{n} {c}: {s:?} misses samples");
            assert!(
                (s.chunks - 1) * s.per < n,
                "{n} {c}: {s:?} has an empty chunk"
            );
        }
        let s = ChannelSplit::new(1024, 32, 132);
        assert_eq!((s.chunks, s.per), (17, 61));
        assert!(32 * s.chunks >= 4 * 132 - 32);
    }
}

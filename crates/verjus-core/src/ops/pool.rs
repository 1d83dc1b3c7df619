//! Max and average 2-D pooling (NCHW) and their gradients.

use super::{check_f32_on, check_rank, check_shape, conv::output_len};
use crate::{Backend, Error, Result, Shape, Tensor};

/// Max or average.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average over the window; padding counts as zeros in the divisor
    /// (PyTorch's default `count_include_pad=True`).
    Avg,
}

/// Window, stride and zero padding per spatial axis (height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dParams {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl Pool2dParams {
    /// A `k x k` window with stride `k` and no padding (the usual downsampling).
    pub fn square(k: usize) -> Self {
        Pool2dParams {
            kernel: [k, k],
            stride: [k, k],
            padding: [0, 0],
        }
    }
}

/// Validated sizes of a pooling: `x [n, c, h, w] -> y [n, c, oh, ow]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Pool2dPlan {
    pub kind: PoolKind,
    pub params: Pool2dParams,
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
}

impl Pool2dPlan {
    /// Checks the input shape and window.
    pub fn new(kind: PoolKind, x: &Shape, params: Pool2dParams) -> Result<Self> {
        let op = name(kind);
        if x.rank() != 4 {
            return Err(Error::shape(op, "input", "rank 4 [N, C, H, W]", x));
        }
        let p = params;
        for (axis, i) in [("height", 0), ("width", 1)] {
            if p.padding[i] > p.kernel[i] / 2 {
                return Err(Error::invalid(
                    op,
                    format!(
                        "{axis}: padding {} is more than half the window {}",
                        p.padding[i], p.kernel[i]
                    ),
                ));
            }
        }
        let d = x.dims();
        let oh = output_len(
            op,
            "height",
            d[2],
            p.kernel[0],
            p.stride[0],
            p.padding[0],
            1,
        )?;
        let ow = output_len(op, "width", d[3], p.kernel[1], p.stride[1], p.padding[1], 1)?;
        Ok(Pool2dPlan {
            kind,
            params,
            n: d[0],
            c: d[1],
            h: d[2],
            w: d[3],
            oh,
            ow,
        })
    }

    /// `[n, c, oh, ow]`.
    pub fn output_shape(&self) -> Result<Shape> {
        Shape::new([self.n, self.c, self.oh, self.ow])
    }
}

fn name(kind: PoolKind) -> &'static str {
    match kind {
        PoolKind::Max => "max_pool2d",
        PoolKind::Avg => "avg_pool2d",
    }
}

/// `y = pool(x)`.
pub fn pool2d(
    be: &dyn Backend,
    kind: PoolKind,
    x: &Tensor,
    params: Pool2dParams,
    y: &mut Tensor,
) -> Result<()> {
    let op = name(kind);
    let plan = Pool2dPlan::new(kind, x.shape(), params)?;
    check_f32_on(op, be, &[("input", x), ("output", y)])?;
    check_shape(op, "output", y, &plan.output_shape()?)?;
    be.pool2d(&plan, x, y)
}

/// `dx` from `dy`: max pooling routes each window's gradient to its first maximum,
/// average pooling spreads it evenly over the window.
pub fn pool2d_backward(
    be: &dyn Backend,
    kind: PoolKind,
    x: &Tensor,
    y: &Tensor,
    dy: &Tensor,
    params: Pool2dParams,
    dx: &mut Tensor,
) -> Result<()> {
    let op = format!("{}_backward", name(kind));
    check_rank(&op, "input", x, 4, "[N, C, H, W]")?;
    let plan = Pool2dPlan::new(kind, x.shape(), params)?;
    check_f32_on(
        &op,
        be,
        &[
            ("input", x),
            ("output", y),
            ("output gradient", dy),
            ("input gradient", dx),
        ],
    )?;
    let out = plan.output_shape()?;
    check_shape(&op, "output", y, &out)?;
    check_shape(&op, "output gradient", dy, &out)?;
    check_shape(&op, "input gradient", dx, x.shape())?;
    be.pool2d_backward(&plan, x, y, dy, dx)
}

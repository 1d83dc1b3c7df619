//! 2-D convolution (cross-correlation, as in PyTorch) in NCHW layout, and its
//! three backward ops: data, filter and bias.

use super::{check_f32_on, check_rank, check_shape};
use crate::{Backend, Error, Result, Shape, Tensor};

/// Stride, zero padding and dilation per spatial axis (height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dParams {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Conv2dParams {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
        }
    }
}

/// Validated sizes of a convolution: `x [n, c_in, h, w] * w [c_out, c_in, kh, kw]
/// -> y [n, c_out, oh, ow]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2dPlan {
    pub params: Conv2dParams,
    pub n: usize,
    pub c_in: usize,
    pub h: usize,
    pub w: usize,
    pub c_out: usize,
    pub kh: usize,
    pub kw: usize,
    pub oh: usize,
    pub ow: usize,
}

/// Output length of one spatial axis, or an error naming the axis.
pub(crate) fn output_len(
    op: &str,
    axis: &str,
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Result<usize> {
    if kernel == 0 || stride == 0 || dilation == 0 {
        return Err(Error::invalid(
            op,
            format!("{axis}: kernel ({kernel}), stride ({stride}) and dilation ({dilation}) must be positive"),
        ));
    }
    let span = dilation
        .checked_mul(kernel - 1)
        .and_then(|s| s.checked_add(1))
        .ok_or_else(|| Error::invalid(op, format!("{axis}: kernel span overflows")))?;
    let padded = input
        .checked_add(padding.saturating_mul(2))
        .ok_or_else(|| Error::invalid(op, format!("{axis}: padding overflows")))?;
    if padded < span {
        return Err(Error::invalid(
            op,
            format!(
                "{axis}: the kernel span {span} (kernel {kernel}, dilation {dilation}) is larger than the padded input {padded} (input {input}, padding {padding})"
            ),
        ));
    }
    Ok((padded - span) / stride + 1)
}

impl Conv2dPlan {
    /// Checks `x [n, c, h, w]` against `w [o, c, kh, kw]`.
    pub fn new(x: &Shape, w: &Shape, params: Conv2dParams) -> Result<Self> {
        let op = "conv2d";
        if x.rank() != 4 {
            return Err(Error::shape(op, "input", "rank 4 [N, C, H, W]", x));
        }
        if w.rank() != 4 {
            return Err(Error::shape(
                op,
                "weight",
                "rank 4 [C_out, C_in, KH, KW]",
                w,
            ));
        }
        let (xd, wd) = (x.dims(), w.dims());
        if xd[1] != wd[1] {
            return Err(Error::shape(
                op,
                "input channels",
                format!("C_in = {} from weight {w}", wd[1]),
                format!("C = {} in input {x}", xd[1]),
            ));
        }
        let p = params;
        let oh = output_len(
            op,
            "height",
            xd[2],
            wd[2],
            p.stride[0],
            p.padding[0],
            p.dilation[0],
        )?;
        let ow = output_len(
            op,
            "width",
            xd[3],
            wd[3],
            p.stride[1],
            p.padding[1],
            p.dilation[1],
        )?;
        Ok(Conv2dPlan {
            params,
            n: xd[0],
            c_in: xd[1],
            h: xd[2],
            w: xd[3],
            c_out: wd[0],
            kh: wd[2],
            kw: wd[3],
            oh,
            ow,
        })
    }

    /// `[n, c_in, h, w]`.
    pub fn input_shape(&self) -> Shape {
        Shape::new([self.n, self.c_in, self.h, self.w]).expect("checked")
    }

    /// `[c_out, c_in, kh, kw]`.
    pub fn weight_shape(&self) -> Shape {
        Shape::new([self.c_out, self.c_in, self.kh, self.kw]).expect("checked")
    }

    /// `[n, c_out, oh, ow]`.
    pub fn output_shape(&self) -> Result<Shape> {
        Shape::new([self.n, self.c_out, self.oh, self.ow])
    }
}

/// `y = conv2d(x, w) + bias`.
pub fn conv2d(
    be: &dyn Backend,
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    params: Conv2dParams,
    y: &mut Tensor,
) -> Result<()> {
    let op = "conv2d";
    let plan = Conv2dPlan::new(x.shape(), w.shape(), params)?;
    check_f32_on(op, be, &[("input", x), ("weight", w), ("output", y)])?;
    if let Some(b) = bias {
        check_f32_on(op, be, &[("bias", b)])?;
        check_shape(op, "bias", b, &Shape::new([plan.c_out])?)?;
    }
    check_shape(op, "output", y, &plan.output_shape()?)?;
    be.conv2d(&plan, x, w, bias, y)
}

/// `dx = conv2d_transpose(dy, w)`: the gradient wrt the input.
pub fn conv2d_backward_data(
    be: &dyn Backend,
    dy: &Tensor,
    w: &Tensor,
    params: Conv2dParams,
    dx: &mut Tensor,
) -> Result<()> {
    let op = "conv2d_backward_data";
    check_rank(op, "input gradient", dx, 4, "[N, C, H, W]")?;
    let plan = Conv2dPlan::new(dx.shape(), w.shape(), params)?;
    check_f32_on(
        op,
        be,
        &[
            ("output gradient", dy),
            ("weight", w),
            ("input gradient", dx),
        ],
    )?;
    check_shape(op, "output gradient", dy, &plan.output_shape()?)?;
    be.conv2d_backward_data(&plan, dy, w, dx)
}

/// `dw = correlate(x, dy)`: the gradient wrt the weight (overwrites `dw`).
pub fn conv2d_backward_filter(
    be: &dyn Backend,
    x: &Tensor,
    dy: &Tensor,
    params: Conv2dParams,
    dw: &mut Tensor,
) -> Result<()> {
    let op = "conv2d_backward_filter";
    let plan = Conv2dPlan::new(x.shape(), dw.shape(), params)?;
    check_f32_on(
        op,
        be,
        &[
            ("input", x),
            ("output gradient", dy),
            ("weight gradient", dw),
        ],
    )?;
    check_shape(op, "output gradient", dy, &plan.output_shape()?)?;
    be.conv2d_backward_filter(&plan, x, dy, dw)
}

/// `db[o] = sum over n, h, w of dy[n, o, h, w]` (overwrites `db`).
pub fn conv2d_backward_bias(be: &dyn Backend, dy: &Tensor, db: &mut Tensor) -> Result<()> {
    let op = "conv2d_backward_bias";
    check_f32_on(op, be, &[("output gradient", dy), ("bias gradient", db)])?;
    check_rank(op, "output gradient", dy, 4, "[N, C_out, OH, OW]")?;
    check_shape(op, "bias gradient", db, &Shape::new([dy.dims()[1]])?)?;
    be.conv2d_backward_bias(dy, db)
}

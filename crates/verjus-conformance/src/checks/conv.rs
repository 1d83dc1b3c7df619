//! Checks of 2-D convolution and its data, filter and bias gradients with
//! stride, padding and dilation (per axis), empty batches, zero input or output
//! channels and long inner products. Tolerance: `Tolerance::GEMM`.

use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::conv as reference;
use crate::transfer::{get, put, zeros, Context};
use verjus_core::ops::{self, Conv2dParams};
use verjus_core::{Backend, DType};

/// One convolution: input dims, weight dims, parameters, and whether it has a bias.
#[derive(Clone, Copy, Debug)]
struct Case {
    x: [usize; 4],
    w: [usize; 4],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    bias: bool,
}

impl Case {
    fn params(&self) -> Conv2dParams {
        Conv2dParams {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
        }
    }

    fn describe(&self, op: &str) -> String {
        format!(
            "{op} x {:?} w {:?} stride {:?} padding {:?} dilation {:?}{}",
            self.x,
            self.w,
            self.stride,
            self.padding,
            self.dilation,
            if self.bias { " with bias" } else { "" }
        )
    }
}

const fn case(
    x: [usize; 4],
    w: [usize; 4],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    bias: bool,
) -> Case {
    Case {
        x,
        w,
        stride,
        padding,
        dilation,
        bias,
    }
}

const CASES: [Case; 12] = [
    case([1, 1, 1, 1], [1, 1, 1, 1], [1, 1], [0, 0], [1, 1], true),
    case([2, 3, 7, 13], [5, 3, 3, 3], [1, 1], [1, 1], [1, 1], true),
    case([1, 2, 17, 9], [3, 2, 2, 5], [2, 3], [1, 2], [2, 1], false),
    case([0, 3, 5, 5], [4, 3, 3, 3], [1, 1], [0, 0], [1, 1], true),
    case([2, 1, 31, 7], [1, 1, 1, 7], [1, 1], [0, 0], [1, 1], true),
    case([1, 2, 33, 33], [3, 2, 3, 3], [2, 2], [1, 1], [1, 1], true),
    case([3, 0, 4, 4], [2, 0, 3, 3], [1, 1], [0, 0], [1, 1], true),
    case([2, 3, 5, 5], [0, 3, 3, 3], [1, 1], [0, 0], [1, 1], true),
    case([1, 13, 6, 5], [7, 13, 3, 2], [1, 2], [2, 0], [2, 2], false),
    case([1, 65, 3, 3], [17, 65, 3, 3], [1, 1], [1, 1], [1, 1], true),
    // Strided along the height only, output as wide as the input: consecutive
    // output rows are not consecutive input rows.
    case([2, 3, 9, 6], [4, 3, 3, 3], [2, 1], [1, 1], [1, 1], true),
    case([1, 2, 8, 5], [3, 2, 3, 1], [2, 1], [0, 0], [1, 1], false),
];

fn cases() -> impl Iterator<Item = (u64, Case)> {
    CASES
        .into_iter()
        .enumerate()
        .map(|(i, c)| (i as u64 * 10, c))
}

/// `ops::conv2d` with and without bias.
pub fn conv2d(be: &dyn Backend) -> Result<(), String> {
    every_case(cases(), |(seed, c)| {
        let what = c.describe("conv2d");
        let x = uniform(seed, &c.x, -1.0, 1.0);
        let w = uniform(seed + 1, &c.w, -1.0, 1.0);
        let b = uniform(seed + 2, &[c.w[0]], -1.0, 1.0);
        let bias = c.bias.then_some(&b);
        let expected = reference::conv2d(&x, &w, bias, c.params());
        let (tx, tw, tb) = (
            put(be, &what, &x)?,
            put(be, &what, &w)?,
            put(be, &what, &b)?,
        );
        let mut ty = zeros(be, &what, &expected.dims, DType::F32)?;
        ops::conv2d(be, &tx, &tw, c.bias.then_some(&tb), c.params(), &mut ty).context(&what)?;
        close(
            &what,
            &expected.dims,
            &expected.data,
            &get(be, &what, &ty)?,
            Tolerance::GEMM,
        )
    })
}

/// `ops::conv2d_backward_data`.
pub fn conv2d_backward_data(be: &dyn Backend) -> Result<(), String> {
    every_case(cases(), |(seed, c)| {
        let what = c.describe("conv2d_backward_data");
        let w = uniform(seed + 3, &c.w, -1.0, 1.0);
        let dy = uniform(
            seed + 4,
            &reference::output_dims(&c.x, &c.w, c.params()),
            -1.0,
            1.0,
        );
        let (tdy, tw) = (put(be, &what, &dy)?, put(be, &what, &w)?);
        let mut tdx = zeros(be, &what, &c.x, DType::F32)?;
        ops::conv2d_backward_data(be, &tdy, &tw, c.params(), &mut tdx).context(&what)?;
        let expected = reference::conv2d_backward_data(&dy, &w, &c.x, c.params());
        close(
            &what,
            &c.x,
            &expected.data,
            &get(be, &what, &tdx)?,
            Tolerance::GEMM,
        )
    })
}

/// `ops::conv2d_backward_filter` (overwrites `dw`, which starts non-zero here).
pub fn conv2d_backward_filter(be: &dyn Backend) -> Result<(), String> {
    every_case(cases(), |(seed, c)| {
        let what = c.describe("conv2d_backward_filter");
        let x = uniform(seed + 5, &c.x, -1.0, 1.0);
        let dy = uniform(
            seed + 6,
            &reference::output_dims(&c.x, &c.w, c.params()),
            -1.0,
            1.0,
        );
        let (tx, tdy) = (put(be, &what, &x)?, put(be, &what, &dy)?);
        let mut tdw = put(be, &what, &uniform(seed + 7, &c.w, 5.0, 6.0))?;
        ops::conv2d_backward_filter(be, &tx, &tdy, c.params(), &mut tdw).context(&what)?;
        let expected = reference::conv2d_backward_filter(&x, &dy, &c.w, c.params());
        close(
            &what,
            &c.w,
            &expected.data,
            &get(be, &what, &tdw)?,
            Tolerance::GEMM,
        )
    })
}

/// `ops::conv2d_backward_bias` (overwrites `db`, which starts non-zero here).
pub fn conv2d_backward_bias(be: &dyn Backend) -> Result<(), String> {
    every_case(cases(), |(seed, c)| {
        let what = c.describe("conv2d_backward_bias");
        let dy = uniform(
            seed + 8,
            &reference::output_dims(&c.x, &c.w, c.params()),
            -1.0,
            1.0,
        );
        let tdy = put(be, &what, &dy)?;
        let mut tdb = put(be, &what, &uniform(seed + 9, &[c.w[0]], 5.0, 6.0))?;
        ops::conv2d_backward_bias(be, &tdy, &mut tdb).context(&what)?;
        let expected = reference::conv2d_backward_bias(&dy);
        close(
            &what,
            &[c.w[0]],
            &expected.data,
            &get(be, &what, &tdb)?,
            Tolerance::GEMM,
        )
    })
}

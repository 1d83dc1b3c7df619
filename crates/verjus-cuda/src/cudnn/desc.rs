//! cuDNN descriptors built from verjus plans, and the keys they are cached
//! under (one set per shape, created on the shape's first call).
//!
//! A size that does not fit cuDNN's `int` is an error naming the op here,
//! before any descriptor is made.

use super::raw::{
    self, ConvDesc, DropoutDesc, Failure, FilterDesc, Handle, PoolDesc, RnnDataDesc, RnnDesc,
    TensorDesc,
};
use super::rnn_layout::{LstmKey, SeqLengths};
use crate::device::Gpu;
use cudarc::cudnn::sys as dnn;
use verjus_core::ops::{Conv2dPlan, Pool2dPlan};
use verjus_core::{Error, Result};

/// What identifies a convolution's descriptors: its sizes, stride, padding,
/// dilation and whether TF32 is allowed (the descriptor's math type).
pub(super) type ConvKey = [usize; 14];

pub(super) fn conv_key(p: &Conv2dPlan, tf32: bool) -> ConvKey {
    let q = p.params;
    [
        p.n,
        p.c_in,
        p.h,
        p.w,
        p.c_out,
        p.kh,
        p.kw,
        q.stride[0],
        q.stride[1],
        q.padding[0],
        q.padding[1],
        q.dilation[0],
        q.dilation[1],
        tf32 as usize,
    ]
}

/// What identifies a pooling's descriptors: its input sizes and window.
pub(super) type PoolKey = [usize; 10];

pub(super) fn pool_key(p: &Pool2dPlan) -> PoolKey {
    let q = p.params;
    [
        p.n,
        p.c,
        p.h,
        p.w,
        q.kernel[0],
        q.kernel[1],
        q.stride[0],
        q.stride[1],
        q.padding[0],
        q.padding[1],
    ]
}

/// The math type a convolution descriptor starts with: without TF32 it asks
/// for `CUDNN_FMA_MATH`, i.e. full fp32 (cuDNN's default would allow TF32
/// tensor cores on Ampere and later).
pub(super) fn initial_math(tf32: bool) -> dnn::cudnnMathType_t {
    if tf32 {
        dnn::cudnnMathType_t::CUDNN_DEFAULT_MATH
    } else {
        dnn::cudnnMathType_t::CUDNN_FMA_MATH
    }
}

/// Sizes as cuDNN's `int`s, or an error naming `op`.
struct Ints<'a> {
    gpu: &'a Gpu,
    op: &'a str,
}

impl Ints<'_> {
    fn of<const N: usize>(&self, v: [usize; N]) -> Result<[i32; N]> {
        let mut out = [0; N];
        for (o, v) in out.iter_mut().zip(v) {
            *o = i32::try_from(v)
                .map_err(|_| crate::error::too_large(self.gpu.device, self.op, "a size", v))?;
        }
        Ok(out)
    }

    fn failed(&self) -> impl Fn(Failure) -> Error + '_ {
        |f| self.gpu.error(self.op, f.call, f.err)
    }
}

/// The descriptors of one convolution `x [n, c_in, h, w] * w [c_out, c_in, kh, kw]
/// -> y [n, c_out, oh, ow]`, shared by its three directions.
#[derive(Debug)]
pub(super) struct ConvDescs {
    pub x: TensorDesc,
    pub w: FilterDesc,
    pub y: TensorDesc,
    pub conv: ConvDesc,
}

impl ConvDescs {
    pub fn new(gpu: &Gpu, op: &str, p: &Conv2dPlan, tf32: bool) -> Result<Self> {
        let (i, q) = (Ints { gpu, op }, p.params);
        let fail = i.failed();
        Ok(ConvDescs {
            x: TensorDesc::nchw(i.of([p.n, p.c_in, p.h, p.w])?).map_err(&fail)?,
            y: TensorDesc::nchw(i.of([p.n, p.c_out, p.oh, p.ow])?).map_err(&fail)?,
            w: FilterDesc::kcrs(i.of([p.c_out, p.c_in, p.kh, p.kw])?).map_err(&fail)?,
            conv: ConvDesc::new(
                i.of(q.padding)?,
                i.of(q.stride)?,
                i.of(q.dilation)?,
                initial_math(tf32),
            )
            .map_err(&fail)?,
        })
    }
}

/// The descriptors of one average pooling `x [n, c, h, w] -> y [n, c, oh, ow]`.
#[derive(Debug)]
pub(super) struct PoolDescs {
    pub x: TensorDesc,
    pub y: TensorDesc,
    pub pool: PoolDesc,
}

impl PoolDescs {
    pub fn new(gpu: &Gpu, op: &str, p: &Pool2dPlan) -> Result<Self> {
        let (i, q) = (Ints { gpu, op }, p.params);
        let fail = i.failed();
        Ok(PoolDescs {
            x: TensorDesc::nchw(i.of([p.n, p.c, p.h, p.w])?).map_err(&fail)?,
            y: TensorDesc::nchw(i.of([p.n, p.c, p.oh, p.ow])?).map_err(&fail)?,
            pool: PoolDesc::average(i.of(q.kernel)?, i.of(q.padding)?, i.of(q.stride)?)
                .map_err(&fail)?,
        })
    }
}

/// The descriptors of one LSTM shape, kept between calls: the RNN's (which
/// refers to the dropout descriptor, so it is dropped first) and the size of
/// its weight space.
#[derive(Debug)]
pub(super) struct RnnDescs {
    pub rnn: RnnDesc,
    /// Kept alive for `rnn`.
    _dropout: DropoutDesc,
    pub weight_bytes: usize,
}

impl RnnDescs {
    pub fn new(gpu: &Gpu, op: &str, h: &Handle, key: &LstmKey) -> Result<Self> {
        let i = Ints { gpu, op };
        let fail = i.failed();
        let [input, hidden, _gates] = i.of([key.cudnn_input(), key.hidden, 4 * key.hidden])?;
        let dropout = DropoutDesc::none(h).map_err(&fail)?;
        let rnn = RnnDesc::lstm(input, hidden, key.bias, initial_math(key.tf32), &dropout)
            .map_err(&fail)?;
        let weight_bytes = raw::weight_space_size(h, &rnn).map_err(&fail)?;
        Ok(RnnDescs {
            rnn,
            _dropout: dropout,
            weight_bytes,
        })
    }
}

/// The data descriptors of one LSTM call: `x [T, B, F]` and `y [T, B, H]`
/// with the call's sequence lengths, and the state `[1, B, H]` (`h` and `c`).
#[derive(Debug)]
pub(super) struct SeqDescs {
    pub x: RnnDataDesc,
    pub y: RnnDataDesc,
    pub state: TensorDesc,
}

impl SeqDescs {
    pub fn new(gpu: &Gpu, op: &str, key: &LstmKey, lengths: &SeqLengths) -> Result<Self> {
        let i = Ints { gpu, op };
        let fail = i.failed();
        let batch = lengths.batch();
        let [steps, b, input, hidden, _state] = i.of([
            lengths.steps,
            batch,
            key.cudnn_input(),
            key.hidden,
            batch * key.hidden,
        ])?;
        Ok(SeqDescs {
            x: RnnDataDesc::seq_major(steps, input, &lengths.cudnn).map_err(&fail)?,
            y: RnnDataDesc::seq_major(steps, hidden, &lengths.cudnn).map_err(&fail)?,
            state: TensorDesc::packed3([1, b, hidden]).map_err(&fail)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::ops::{Conv2dParams, Pool2dParams, PoolKind};
    use verjus_core::Shape;

    fn shape(d: [usize; 4]) -> Shape {
        Shape::new(d.to_vec()).expect("a valid shape")
    }

    fn conv(x: [usize; 4], w: [usize; 4], params: Conv2dParams) -> Conv2dPlan {
        Conv2dPlan::new(&shape(x), &shape(w), params).expect("a valid convolution")
    }

    /// Two convolutions share descriptors and algorithms exactly when every
    /// size, stride, padding, dilation and the TF32 setting agree.
    #[test]
    fn the_conv_key_tells_every_setting_apart() {
        let base = Conv2dParams {
            stride: [1, 1],
            padding: [1, 1],
            dilation: [1, 1],
        };
        let plans = [
            conv([2, 3, 8, 8], [4, 3, 3, 3], base),
            conv([1, 3, 8, 8], [4, 3, 3, 3], base),
            conv([2, 1, 8, 8], [4, 1, 3, 3], base),
            conv([2, 3, 7, 8], [4, 3, 3, 3], base),
            conv([2, 3, 8, 7], [4, 3, 3, 3], base),
            conv([2, 3, 8, 8], [5, 3, 3, 3], base),
            conv([2, 3, 8, 8], [4, 3, 2, 3], base),
            conv([2, 3, 8, 8], [4, 3, 3, 2], base),
            conv(
                [2, 3, 8, 8],
                [4, 3, 3, 3],
                Conv2dParams {
                    stride: [2, 1],
                    ..base
                },
            ),
            conv(
                [2, 3, 8, 8],
                [4, 3, 3, 3],
                Conv2dParams {
                    stride: [1, 2],
                    ..base
                },
            ),
            conv(
                [2, 3, 8, 8],
                [4, 3, 3, 3],
                Conv2dParams {
                    padding: [0, 1],
                    ..base
                },
            ),
            conv(
                [2, 3, 8, 8],
                [4, 3, 3, 3],
                Conv2dParams {
                    padding: [1, 0],
                    ..base
                },
            ),
            conv(
                [2, 3, 8, 8],
                [4, 3, 3, 3],
                Conv2dParams {
                    dilation: [2, 1],
                    ..base
                },
            ),
            conv(
                [2, 3, 8, 8],
                [4, 3, 3, 3],
                Conv2dParams {
                    dilation: [1, 2],
                    ..base
                },
            ),
        ];
        let mut keys: Vec<ConvKey> = plans.iter().map(|p| conv_key(p, false)).collect();
        keys.push(conv_key(&plans[0], true));
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(
            conv_key(&plans[0], false),
            conv_key(&plans[0].clone(), false)
        );
    }

    #[test]
    fn the_pool_key_tells_every_setting_apart() {
        let base = Pool2dParams {
            kernel: [2, 2],
            stride: [2, 2],
            padding: [0, 0],
        };
        let pool = |x: [usize; 4], params| {
            Pool2dPlan::new(PoolKind::Avg, &shape(x), params).expect("a valid pooling")
        };
        let plans = [
            pool([2, 3, 8, 8], base),
            pool([1, 3, 8, 8], base),
            pool([2, 4, 8, 8], base),
            pool([2, 3, 6, 8], base),
            pool([2, 3, 8, 6], base),
            pool(
                [2, 3, 8, 8],
                Pool2dParams {
                    kernel: [3, 2],
                    ..base
                },
            ),
            pool(
                [2, 3, 8, 8],
                Pool2dParams {
                    kernel: [2, 3],
                    ..base
                },
            ),
            pool(
                [2, 3, 8, 8],
                Pool2dParams {
                    stride: [1, 2],
                    ..base
                },
            ),
            pool(
                [2, 3, 8, 8],
                Pool2dParams {
                    stride: [2, 1],
                    ..base
                },
            ),
            pool(
                [2, 3, 8, 8],
                Pool2dParams {
                    padding: [1, 0],
                    ..base
                },
            ),
            pool(
                [2, 3, 8, 8],
                Pool2dParams {
                    padding: [0, 1],
                    ..base
                },
            ),
        ];
        let keys: Vec<PoolKey> = plans.iter().map(pool_key).collect();
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn full_fp32_unless_tf32_is_allowed() {
        assert_eq!(initial_math(false), dnn::cudnnMathType_t::CUDNN_FMA_MATH);
        assert_eq!(initial_math(true), dnn::cudnnMathType_t::CUDNN_DEFAULT_MATH);
    }
}

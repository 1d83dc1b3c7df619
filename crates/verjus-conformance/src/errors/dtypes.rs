//! Wrong element types: integer tensors where float32 is required, float
//! indices and labels, mismatched dtypes in permute and copy.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use crate::transfer::put_int;
use verjus_core::ops::{
    self, BinaryOp, Conv2dParams, Distribution, GemmSpec, Pool2dParams, PoolKind, ReduceOp, UnaryOp,
};
use verjus_core::{Backend, DType};

/// Every op rejects operands of the wrong dtype.
pub fn wrong_dtypes(be: &dyn Backend) -> Result<(), String> {
    let t = |d: &[usize]| f32s(be, d);
    let i64s = |d: &[usize]| typed(be, d, DType::I64);
    let i32s = |d: &[usize]| typed(be, d, DType::I32);
    let mut f = Failures::new();

    let (a, b_int) = (t(&[2, 3])?, i64s(&[3, 4])?);
    let mut c = t(&[2, 4])?;
    f.record(expect_error("gemm: int64 B", &["gemm"], || {
        ops::gemm(be, &a, &b_int, &mut c, GemmSpec::default())
    }));
    let x_i32 = i32s(&[2, 3])?;
    let mut y = t(&[2, 3])?;
    f.record(expect_error("relu: int32 x", &["relu"], || {
        ops::unary(be, UnaryOp::Relu, &x_i32, &mut y)
    }));
    let mut y_i64 = i64s(&[2, 3])?;
    f.record(expect_error("neg: int64 y", &["neg"], || {
        ops::unary(be, UnaryOp::Neg, &a, &mut y_i64)
    }));
    let mut dx = t(&[2, 3])?;
    f.record(expect_error(
        "tanh_backward: int32 dy",
        &["tanh_backward"],
        || ops::unary_backward(be, UnaryOp::Tanh, &a, &a, &x_i32, &mut dx),
    ));
    f.record(expect_error("add: int32 b", &["add"], || {
        ops::binary(be, BinaryOp::Add, &a, &x_i32, &mut y)
    }));
    let mut da_i64 = i64s(&[2, 3])?;
    f.record(expect_error(
        "mul_backward: int64 da",
        &["mul_backward"],
        || ops::binary_backward(be, BinaryOp::Mul, &a, &a, &a, Some(&mut da_i64), None),
    ));
    let mut r = t(&[3])?;
    f.record(expect_error("reduce_sum: int64 x", &["reduce_sum"], || {
        ops::reduce(be, ReduceOp::Sum, &y_i64, &[0], &mut r)
    }));
    let mut am_f32 = t(&[2])?;
    f.record(expect_error("argmax: float32 y", &["argmax"], || {
        ops::argmax(be, &a, 1, &mut am_f32)
    }));
    let mut am_i32 = i32s(&[2])?;
    f.record(expect_error("argmax: int32 y", &["argmax"], || {
        ops::argmax(be, &a, 1, &mut am_i32)
    }));
    f.record(expect_error("softmax: int64 x", &["softmax"], || {
        ops::softmax(be, &y_i64, 1, false, &mut y)
    }));
    f.record(expect_error(
        "log_softmax_backward: int32 dy",
        &["log_softmax_backward"],
        || ops::softmax_backward(be, &a, &x_i32, 1, true, &mut dx),
    ));

    let p = Conv2dParams::default();
    let (x4, w_int, w) = (t(&[1, 2, 4, 4])?, i64s(&[3, 2, 3, 3])?, t(&[3, 2, 3, 3])?);
    let mut y4 = t(&[1, 3, 2, 2])?;
    f.record(expect_error("conv2d: int64 weight", &["conv2d"], || {
        ops::conv2d(be, &x4, &w_int, None, p, &mut y4)
    }));
    let bias_i32 = i32s(&[3])?;
    f.record(expect_error("conv2d: int32 bias", &["conv2d"], || {
        ops::conv2d(be, &x4, &w, Some(&bias_i32), p, &mut y4)
    }));
    let dy_int = i64s(&[1, 3, 2, 2])?;
    let mut dx4 = t(&[1, 2, 4, 4])?;
    f.record(expect_error(
        "conv2d_backward_data: int64 dy",
        &["conv2d_backward_data"],
        || ops::conv2d_backward_data(be, &dy_int, &w, p, &mut dx4),
    ));
    let mut dw_int = i64s(&[3, 2, 3, 3])?;
    f.record(expect_error(
        "conv2d_backward_filter: int64 dw",
        &["conv2d_backward_filter"],
        || ops::conv2d_backward_filter(be, &x4, &y4, p, &mut dw_int),
    ));
    let mut db_int = i32s(&[3])?;
    f.record(expect_error(
        "conv2d_backward_bias: int32 db",
        &["conv2d_backward_bias"],
        || ops::conv2d_backward_bias(be, &y4, &mut db_int),
    ));
    let x4_int = i32s(&[1, 2, 4, 4])?;
    let mut py = t(&[1, 2, 2, 2])?;
    f.record(expect_error(
        "max_pool2d: int32 input",
        &["max_pool2d"],
        || ops::pool2d(be, PoolKind::Max, &x4_int, Pool2dParams::square(2), &mut py),
    ));
    let py_int = i64s(&[1, 2, 2, 2])?;
    f.record(expect_error(
        "avg_pool2d_backward: int64 dy",
        &["avg_pool2d_backward"],
        || {
            ops::pool2d_backward(
                be,
                PoolKind::Avg,
                &x4,
                &py,
                &py_int,
                Pool2dParams::square(2),
                &mut dx4,
            )
        },
    ));
    f.record(expect_error("dropout: int64 x", &["dropout"], || {
        ops::dropout(be, &y_i64, 0.5, 0, 0, &mut y)
    }));

    let idx_f32 = t(&[2])?;
    let mut sel = t(&[2, 3])?;
    f.record(expect_error(
        "index_select: float32 indices",
        &["index_select"],
        || ops::index_select(be, &a, 0, &idx_f32, &mut sel),
    ));
    let idx = put_int(be, "setup", &[0, 1], DType::I64)?;
    f.record(expect_error(
        "index_select: int64 x",
        &["index_select"],
        || ops::index_select(be, &y_i64, 0, &idx, &mut sel),
    ));
    let mut dst = t(&[2, 3])?;
    f.record(expect_error("index_add: int32 src", &["index_add"], || {
        ops::index_add(be, &x_i32, 0, &idx, &mut dst)
    }));
    let mut whole = t(&[4, 3])?;
    f.record(expect_error("concat: int64 part", &["concat"], || {
        ops::concat(be, &[&a, &y_i64], 0, &mut whole)
    }));
    let mut part_int = i32s(&[2, 3])?;
    let mut part = t(&[2, 3])?;
    f.record(expect_error("split: int32 part", &["split"], || {
        ops::split(be, &whole, 0, &mut [&mut part, &mut part_int])
    }));
    let mut perm_y = i64s(&[3, 2])?;
    f.record(expect_error(
        "permute: float32 x into int64 y",
        &["permute"],
        || ops::permute(be, &a, &[1, 0], &mut perm_y),
    ));
    f.record(expect_error("copy: float32 into int64", &["copy"], || {
        ops::copy(be, &a, &mut y_i64)
    }));
    f.record(expect_error("random: int64 dst", &["random"], || {
        ops::random(
            be,
            &mut y_i64,
            Distribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            0,
            0,
        )
    }));

    let sgd = ops::SgdHyper {
        lr: 0.1,
        momentum: 0.0,
        dampening: 0.0,
        nesterov: false,
        weight_decay: 0.0,
        grad_scale: 1.0,
        first_step: true,
    };
    let mut p_int = i64s(&[2, 3])?;
    f.record(expect_error(
        "sgd_update: int64 param",
        &["sgd_update"],
        || ops::sgd_update(be, &sgd, &mut p_int, &a, None),
    ));
    let adam = ops::AdamHyper {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: false,
        step: 1,
        grad_scale: 1.0,
    };
    let (mut pa, mut m, mut v) = (t(&[2, 3])?, t(&[2, 3])?, t(&[2, 3])?);
    f.record(expect_error(
        "adam_update: int32 grad",
        &["adam_update"],
        || ops::adam_update(be, &adam, &mut pa, &x_i32, &mut m, &mut v),
    ));

    let op = "softmax_cross_entropy";
    let labels_f32 = t(&[2])?;
    let mut losses = t(&[2])?;
    f.record(expect_error(
        "softmax_cross_entropy: float32 labels",
        &[op],
        || ops::softmax_cross_entropy(be, &a, &labels_f32, 0.0, 1.0, &mut losses, None),
    ));
    f.record(expect_error(
        "softmax_cross_entropy: int64 logits",
        &[op],
        || ops::softmax_cross_entropy(be, &y_i64, &idx, 0.0, 1.0, &mut losses, None),
    ));
    f.finish()
}

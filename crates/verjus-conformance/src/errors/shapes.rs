//! Wrong shapes for every op: mismatched operands, outputs of the wrong shape,
//! wrong ranks, kernels that do not fit.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use crate::transfer::put_int;
use verjus_core::ops::{
    self, BinaryOp, Conv2dParams, GemmSpec, Pool2dParams, PoolKind, ReduceOp, UnaryOp,
};
use verjus_core::{Backend, DType, Tensor};

/// Every op rejects operands whose shapes do not fit together.
pub fn wrong_shapes(be: &dyn Backend) -> Result<(), String> {
    let t = |d: &[usize]| f32s(be, d);
    let mut f = Failures::new();
    let spec = GemmSpec::default();

    let (a23, b45, b35) = (t(&[2, 3])?, t(&[4, 5])?, t(&[3, 5])?);
    let mut c25 = t(&[2, 5])?;
    f.record(expect_error(
        "gemm: inner dimensions 3 and 4",
        &["gemm"],
        || ops::gemm(be, &a23, &b45, &mut c25, spec),
    ));
    let v3 = t(&[3])?;
    f.record(expect_error("gemm: rank-1 A", &["gemm"], || {
        ops::gemm(be, &v3, &b35, &mut c25, spec)
    }));
    let mut c24 = t(&[2, 4])?;
    f.record(expect_error(
        "gemm: C [2, 4] for [2, 3] @ [3, 5]",
        &["gemm"],
        || ops::gemm(be, &a23, &b35, &mut c24, spec),
    ));
    let (ab, bb) = (t(&[2, 2, 3])?, t(&[3, 3, 4])?);
    let mut cb = t(&[2, 2, 4])?;
    f.record(expect_error(
        "gemm: batch axes [2] and [3]",
        &["gemm"],
        || ops::gemm(be, &ab, &bb, &mut cb, spec),
    ));
    let mut c25b = t(&[2, 5])?;
    f.record(expect_error("gemm: trans_a makes k = 2", &["gemm"], || {
        ops::gemm(be, &a23, &b35, &mut c25b, GemmSpec::new(true, false))
    }));

    let mut y4 = t(&[4])?;
    f.record(expect_error("relu: y [4] for x [3]", &["relu"], || {
        ops::unary(be, UnaryOp::Relu, &v3, &mut y4)
    }));
    let (x3, d2) = (t(&[3])?, t(&[2])?);
    let mut dx3 = t(&[3])?;
    f.record(expect_error(
        "exp_backward: dy [2] for x [3]",
        &["exp_backward"],
        || ops::unary_backward(be, UnaryOp::Exp, &x3, &x3, &d2, &mut dx3),
    ));
    let mut dx2 = t(&[2])?;
    f.record(expect_error(
        "exp_backward: dx [2] for x [3]",
        &["exp_backward"],
        || ops::unary_backward(be, UnaryOp::Exp, &x3, &x3, &x3, &mut dx2),
    ));

    let v4 = t(&[4])?;
    let mut c3 = t(&[3])?;
    f.record(expect_error("add: [3] with [4]", &["add"], || {
        ops::binary(be, BinaryOp::Add, &v3, &v4, &mut c3)
    }));
    let col = t(&[2, 1])?;
    let mut c32 = t(&[3, 2])?;
    f.record(expect_error(
        "mul: c [3, 2] for [3] with [2, 1]",
        &["mul"],
        || ops::binary(be, BinaryOp::Mul, &v3, &col, &mut c32),
    ));
    let dy23 = t(&[2, 3])?;
    let mut da_bad = t(&[2])?;
    f.record(expect_error(
        "sub_backward: da [2] for a [3]",
        &["sub_backward"],
        || ops::binary_backward(be, BinaryOp::Sub, &v3, &col, &dy23, Some(&mut da_bad), None),
    ));
    let mut db = t(&[2, 1])?;
    f.record(expect_error(
        "sub_backward: dy [3] for output [2, 3]",
        &["sub_backward"],
        || ops::binary_backward(be, BinaryOp::Sub, &v3, &col, &v3, None, Some(&mut db)),
    ));
    f.record(expect_error("div_backward: [3] with [4]", &["div"], || {
        ops::binary_backward(be, BinaryOp::Div, &v3, &v4, &v3, None, None)
    }));

    let mut y2 = t(&[2])?;
    f.record(expect_error(
        "reduce_sum: y [2] for [2, 3] over axis 0",
        &["reduce_sum"],
        || ops::reduce(be, ReduceOp::Sum, &a23, &[0], &mut y2),
    ));
    let (y3, mut dx_bad) = (t(&[3])?, t(&[3, 2])?);
    f.record(expect_error(
        "reduce_max_backward: dx [3, 2] for x [2, 3]",
        &["reduce_max_backward"],
        || ops::reduce_backward(be, ReduceOp::Max, &a23, &[0], &y3, &y3, &mut dx_bad),
    ));
    f.record(expect_error(
        "reduce_mean_backward: dy [2] for y [3]",
        &["reduce_mean"],
        || ops::reduce_backward(be, ReduceOp::Mean, &a23, &[0], &y3, &d2, &mut dx3),
    ));
    let mut am = typed(be, &[3], DType::I64)?;
    f.record(expect_error(
        "argmax: y [3] for [2, 3] along axis 1",
        &["argmax"],
        || ops::argmax(be, &a23, 1, &mut am),
    ));

    let mut s32 = t(&[3, 2])?;
    f.record(expect_error(
        "softmax: y [3, 2] for x [2, 3]",
        &["softmax"],
        || ops::softmax(be, &a23, 1, false, &mut s32),
    ));
    f.record(expect_error(
        "log_softmax: y [3, 2] for x [2, 3]",
        &["log_softmax"],
        || ops::softmax(be, &a23, 1, true, &mut s32),
    ));
    let mut s23 = t(&[2, 3])?;
    f.record(expect_error(
        "softmax_backward: dy [3, 2] for y [2, 3]",
        &["softmax_backward"],
        || ops::softmax_backward(be, &a23, &s32, 1, false, &mut s23),
    ));

    let p = Conv2dParams::default();
    let (x4, w_bad) = (t(&[1, 2, 5, 5])?, t(&[3, 4, 3, 3])?);
    let mut y_conv = t(&[1, 3, 3, 3])?;
    f.record(expect_error(
        "conv2d: 2 input channels, weight for 4",
        &["conv2d"],
        || ops::conv2d(be, &x4, &w_bad, None, p, &mut y_conv),
    ));
    let (x_r3, w) = (t(&[2, 5, 5])?, t(&[3, 2, 3, 3])?);
    f.record(expect_error("conv2d: rank-3 input", &["conv2d"], || {
        ops::conv2d(be, &x_r3, &w, None, p, &mut y_conv)
    }));
    let bias2 = t(&[2])?;
    f.record(expect_error(
        "conv2d: bias [2] for 3 output channels",
        &["conv2d"],
        || ops::conv2d(be, &x4, &w, Some(&bias2), p, &mut y_conv),
    ));
    let (x_small, mut y_small) = (t(&[1, 2, 2, 2])?, t(&[1, 3, 1, 1])?);
    f.record(expect_error(
        "conv2d: 3x3 kernel on a 2x2 input",
        &["conv2d"],
        || ops::conv2d(be, &x_small, &w, None, p, &mut y_small),
    ));
    let mut y_wrong = t(&[1, 3, 5, 5])?;
    f.record(expect_error(
        "conv2d: output [1, 3, 5, 5] instead of [1, 3, 3, 3]",
        &["conv2d"],
        || ops::conv2d(be, &x4, &w, None, p, &mut y_wrong),
    ));
    let mut dx4 = t(&[1, 2, 5, 5])?;
    f.record(expect_error(
        "conv2d_backward_data: dy [1, 3, 5, 5]",
        &["conv2d_backward_data"],
        || ops::conv2d_backward_data(be, &y_wrong, &w, p, &mut dx4),
    ));
    let mut dx_r3 = t(&[2, 5, 5])?;
    f.record(expect_error(
        "conv2d_backward_data: rank-3 dx",
        &["conv2d_backward_data"],
        || ops::conv2d_backward_data(be, &y_conv, &w, p, &mut dx_r3),
    ));
    let mut dw = t(&[3, 2, 3, 3])?;
    f.record(expect_error(
        "conv2d_backward_filter: dy [1, 3, 5, 5]",
        &["conv2d_backward_filter"],
        || ops::conv2d_backward_filter(be, &x4, &y_wrong, p, &mut dw),
    ));
    let mut dw_bad = t(&[3, 4, 3, 3])?;
    f.record(expect_error(
        "conv2d_backward_filter: dw with 4 input channels",
        &["conv2d"],
        || ops::conv2d_backward_filter(be, &x4, &y_conv, p, &mut dw_bad),
    ));
    let mut db2 = t(&[2])?;
    f.record(expect_error(
        "conv2d_backward_bias: db [2] for 3 channels",
        &["conv2d_backward_bias"],
        || ops::conv2d_backward_bias(be, &y_conv, &mut db2),
    ));
    f.record(expect_error(
        "conv2d_backward_bias: rank-2 dy",
        &["conv2d_backward_bias"],
        || ops::conv2d_backward_bias(be, &a23, &mut db2),
    ));

    let pp = Pool2dParams::square(2);
    let mut py = t(&[1, 2, 2, 2])?;
    f.record(expect_error(
        "max_pool2d: rank-3 input",
        &["max_pool2d"],
        || ops::pool2d(be, PoolKind::Max, &x_r3, pp, &mut py),
    ));
    let mut py_bad = t(&[1, 2, 3, 3])?;
    f.record(expect_error(
        "max_pool2d: output [1, 2, 3, 3] instead of [1, 2, 2, 2]",
        &["max_pool2d"],
        || ops::pool2d(be, PoolKind::Max, &x4, pp, &mut py_bad),
    ));
    let mut py1 = t(&[1, 2, 1, 1])?;
    f.record(expect_error(
        "avg_pool2d: 3x3 window on a 2x2 input",
        &["avg_pool2d"],
        || {
            ops::pool2d(
                be,
                PoolKind::Avg,
                &x_small,
                Pool2dParams::square(3),
                &mut py1,
            )
        },
    ));
    f.record(expect_error(
        "max_pool2d_backward: dy [1, 2, 3, 3]",
        &["max_pool2d_backward"],
        || ops::pool2d_backward(be, PoolKind::Max, &x4, &py, &py_bad, pp, &mut dx4),
    ));
    let mut pdx_bad = t(&[1, 2, 4, 4])?;
    f.record(expect_error(
        "avg_pool2d_backward: dx [1, 2, 4, 4]",
        &["avg_pool2d_backward"],
        || ops::pool2d_backward(be, PoolKind::Avg, &x4, &py, &py, pp, &mut pdx_bad),
    ));

    f.record(expect_error(
        "dropout: y [4] for x [3]",
        &["dropout"],
        || ops::dropout(be, &v3, 0.5, 1, 0, &mut y4),
    ));
    f.record(expect_error(
        "dropout_backward: dx [4] for dy [3]",
        &["dropout_backward"],
        || ops::dropout_backward(be, &v3, 0.5, 1, 0, &mut y4),
    ));

    let idx = put_int(be, "setup", &[0, 1], DType::I64)?;
    let idx2d = typed(be, &[2, 1], DType::I64)?;
    let mut sel = t(&[2, 3])?;
    f.record(expect_error(
        "index_select: rank-2 indices",
        &["index_select"],
        || ops::index_select(be, &a23, 0, &idx2d, &mut sel),
    ));
    let mut sel_bad = t(&[3, 3])?;
    f.record(expect_error(
        "index_select: y [3, 3] for 2 indices",
        &["index_select"],
        || ops::index_select(be, &a23, 0, &idx, &mut sel_bad),
    ));
    let mut dst = t(&[2, 3])?;
    f.record(expect_error(
        "index_add: src [3, 3] for 2 indices",
        &["index_add"],
        || ops::index_add(be, &sel_bad, 0, &idx, &mut dst),
    ));

    let (p1, p2) = (t(&[2, 3])?, t(&[3, 3])?);
    let mut whole = t(&[2, 6])?;
    f.record(expect_error(
        "concat: parts [2, 3] and [3, 3] along axis 1",
        &["concat"],
        || ops::concat(be, &[&p1, &p2], 1, &mut whole),
    ));
    let mut whole_bad = t(&[2, 7])?;
    f.record(expect_error(
        "concat: output [2, 7] for two [2, 3]",
        &["concat"],
        || ops::concat(be, &[&p1, &p1], 1, &mut whole_bad),
    ));
    let (mut q1, mut q2) = (t(&[2, 3])?, t(&[2, 2])?);
    f.record(expect_error(
        "split: parts of 3 and 2 from 6",
        &["split"],
        || ops::split(be, &whole, 1, &mut [&mut q1, &mut q2]),
    ));
    let mut q3 = t(&[2, 3, 1])?;
    f.record(expect_error(
        "split: parts of different rank",
        &["split"],
        || ops::split(be, &whole, 1, &mut [&mut q1, &mut q3]),
    ));

    let mut perm_bad = t(&[2, 3])?;
    f.record(expect_error(
        "permute: y [2, 3] for [1, 0] of [2, 3]",
        &["permute"],
        || ops::permute(be, &a23, &[1, 0], &mut perm_bad),
    ));
    let mut cp = t(&[7])?;
    f.record(expect_error("copy: 6 elements into 7", &["copy"], || {
        ops::copy(be, &a23, &mut cp)
    }));
    let mut cast_dst = typed(be, &[3, 2], DType::I64)?;
    f.record(expect_error("cast: [2, 3] into [3, 2]", &["cast"], || {
        ops::cast(be, &a23, &mut cast_dst)
    }));

    optimizer_and_loss_shapes(be, &mut f, &v3, &v4)?;
    f.finish()
}

fn optimizer_and_loss_shapes(
    be: &dyn Backend,
    f: &mut Failures,
    v3: &Tensor,
    v4: &Tensor,
) -> Result<(), String> {
    let t = |d: &[usize]| f32s(be, d);
    let sgd = ops::SgdHyper {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.0,
        nesterov: false,
        weight_decay: 0.0,
        grad_scale: 1.0,
        first_step: false,
    };
    let mut p = t(&[3])?;
    let mut vel = t(&[3])?;
    f.record(expect_error(
        "sgd_update: grad [4] for param [3]",
        &["sgd_update"],
        || ops::sgd_update(be, &sgd, &mut p, v4, Some(&mut vel)),
    ));
    let mut vel4 = t(&[4])?;
    f.record(expect_error(
        "sgd_update: velocity [4] for param [3]",
        &["sgd_update"],
        || ops::sgd_update(be, &sgd, &mut p, v3, Some(&mut vel4)),
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
    let (mut m, mut v) = (t(&[3])?, t(&[3])?);
    f.record(expect_error(
        "adam_update: m [4] for param [3]",
        &["adam_update"],
        || ops::adam_update(be, &adam, &mut p, v3, &mut vel4, &mut v),
    ));
    f.record(expect_error(
        "adam_update: v [4] for param [3]",
        &["adam_update"],
        || ops::adam_update(be, &adam, &mut p, v3, &mut m, &mut vel4),
    ));

    let op = "softmax_cross_entropy";
    let (logits, labels) = (t(&[2, 3])?, put_int(be, "setup", &[0, 1], DType::I64)?);
    let labels3 = put_int(be, "setup", &[0, 1, 2], DType::I64)?;
    let mut losses = t(&[2])?;
    f.record(expect_error(
        "softmax_cross_entropy: rank-1 logits",
        &[op],
        || ops::softmax_cross_entropy(be, v3, &labels, 0.0, 1.0, &mut losses, None),
    ));
    f.record(expect_error(
        "softmax_cross_entropy: 3 labels for 2 rows",
        &[op],
        || ops::softmax_cross_entropy(be, &logits, &labels3, 0.0, 1.0, &mut losses, None),
    ));
    let mut losses3 = t(&[3])?;
    f.record(expect_error(
        "softmax_cross_entropy: losses [3] for 2 rows",
        &[op],
        || ops::softmax_cross_entropy(be, &logits, &labels, 0.0, 1.0, &mut losses3, None),
    ));
    let mut grad_bad = t(&[3, 2])?;
    f.record(expect_error(
        "softmax_cross_entropy: dlogits [3, 2] for logits [2, 3]",
        &[op],
        || {
            ops::softmax_cross_entropy(
                be,
                &logits,
                &labels,
                0.0,
                1.0,
                &mut losses,
                Some(&mut grad_bad),
            )
        },
    ));
    Ok(())
}

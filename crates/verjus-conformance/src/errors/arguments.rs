//! Out-of-range scalar arguments: probabilities, distribution parameters,
//! optimizer hyperparameters, smoothing, zero strides and kernels, reductions
//! over empty axes, gradients of comparisons, empty part lists.

use super::{expect_error, f32s, typed};
use crate::compare::Failures;
use crate::transfer::put_int;
use verjus_core::ops::{
    self, AdamHyper, BinaryOp, Conv2dParams, Distribution, Pool2dParams, PoolKind, ReduceOp,
    SgdHyper,
};
use verjus_core::{Backend, DType, Tensor};

/// Every op with a scalar argument rejects values outside its documented range.
pub fn invalid_arguments(be: &dyn Backend) -> Result<(), String> {
    let t = |d: &[usize]| f32s(be, d);
    let mut f = Failures::new();
    let x = t(&[2, 3])?;
    let mut y = t(&[2, 3])?;
    for p in [1.0, -0.1, 1.5, f32::NAN] {
        f.record(expect_error(
            &format!("dropout: p = {p}"),
            &["dropout"],
            || ops::dropout(be, &x, p, 0, 0, &mut y),
        ));
        f.record(expect_error(
            &format!("dropout_backward: p = {p}"),
            &["dropout"],
            || ops::dropout_backward(be, &x, p, 0, 0, &mut y),
        ));
    }
    let dists = [
        Distribution::Uniform {
            low: 1.0,
            high: 0.0,
        },
        Distribution::Uniform {
            low: f32::NAN,
            high: 1.0,
        },
        Distribution::Uniform {
            low: 0.0,
            high: f32::INFINITY,
        },
        Distribution::Normal {
            mean: 0.0,
            std: -1.0,
        },
        Distribution::Normal {
            mean: f32::INFINITY,
            std: 1.0,
        },
        Distribution::Normal {
            mean: 0.0,
            std: f32::NAN,
        },
    ];
    for d in dists {
        f.record(expect_error(&format!("random: {d:?}"), &["random"], || {
            ops::random(be, &mut y, d, 0, 0)
        }));
    }
    optimizer_arguments(be, &mut f)?;

    let logits = t(&[2, 3])?;
    let labels = put_int(be, "setup", &[0, 1], DType::I64)?;
    let mut losses = t(&[2])?;
    for s in [1.0, -0.1, f32::NAN] {
        f.record(expect_error(
            &format!("softmax_cross_entropy: smoothing {s}"),
            &["softmax_cross_entropy"],
            || ops::softmax_cross_entropy(be, &logits, &labels, s, 1.0, &mut losses, None),
        ));
    }
    let no_classes = t(&[2, 0])?;
    f.record(expect_error(
        "softmax_cross_entropy: zero classes",
        &["softmax_cross_entropy"],
        || ops::softmax_cross_entropy(be, &no_classes, &labels, 0.0, 1.0, &mut losses, None),
    ));

    let empty = t(&[0, 3])?;
    let mut r3 = t(&[3])?;
    for op in [ReduceOp::Max, ReduceOp::Min] {
        f.record(expect_error(
            &format!("{}: over an empty axis", op.name()),
            &[op.name()],
            || ops::reduce(be, op, &empty, &[0], &mut r3),
        ));
    }
    let mut am = typed(be, &[3], DType::I64)?;
    f.record(expect_error(
        "argmax: over an empty axis",
        &["argmax"],
        || ops::argmax(be, &empty, 0, &mut am),
    ));
    for op in [
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
    ] {
        let name = format!("{}_backward", op.name());
        let mut da = t(&[2, 3])?;
        f.record(expect_error(
            &format!("{name}: comparisons have no gradient"),
            &[&name],
            || ops::binary_backward(be, op, &x, &x, &x, Some(&mut da), None),
        ));
    }

    let (x4, w) = (t(&[1, 1, 5, 5])?, t(&[1, 1, 3, 3])?);
    let mut y4 = t(&[1, 1, 3, 3])?;
    let bad_conv = [
        Conv2dParams {
            stride: [0, 1],
            ..Conv2dParams::default()
        },
        Conv2dParams {
            dilation: [1, 0],
            ..Conv2dParams::default()
        },
    ];
    for p in bad_conv {
        f.record(expect_error(&format!("conv2d: {p:?}"), &["conv2d"], || {
            ops::conv2d(be, &x4, &w, None, p, &mut y4)
        }));
    }
    let w_empty = t(&[1, 1, 0, 3])?;
    f.record(expect_error(
        "conv2d: zero-height kernel",
        &["conv2d"],
        || ops::conv2d(be, &x4, &w_empty, None, Conv2dParams::default(), &mut y4),
    ));
    let bad_pool = [
        (
            PoolKind::Max,
            Pool2dParams {
                kernel: [0, 2],
                stride: [1, 1],
                padding: [0, 0],
            },
        ),
        (
            PoolKind::Avg,
            Pool2dParams {
                kernel: [2, 2],
                stride: [1, 0],
                padding: [0, 0],
            },
        ),
        (
            PoolKind::Max,
            Pool2dParams {
                kernel: [3, 3],
                stride: [1, 1],
                padding: [2, 1],
            },
        ),
    ];
    for (kind, p) in bad_pool {
        let name = if kind == PoolKind::Max {
            "max_pool2d"
        } else {
            "avg_pool2d"
        };
        f.record(expect_error(&format!("{name}: {p:?}"), &[name], || {
            ops::pool2d(be, kind, &x4, p, &mut y4)
        }));
    }
    let none: [&Tensor; 0] = [];
    f.record(expect_error("concat: no parts", &["concat"], || {
        ops::concat(be, &none, 0, &mut y)
    }));
    f.record(expect_error("split: no parts", &["split"], || {
        ops::split(be, &x, 0, &mut [])
    }));
    f.finish()
}

fn optimizer_arguments(be: &dyn Backend, f: &mut Failures) -> Result<(), String> {
    let t = |d: &[usize]| f32s(be, d);
    let (mut p, g, mut vel) = (t(&[3])?, t(&[3])?, t(&[3])?);
    let sgd = SgdHyper {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.0,
        nesterov: false,
        weight_decay: 0.0,
        grad_scale: 1.0,
        first_step: false,
    };
    f.record(expect_error(
        "sgd_update: momentum without a velocity buffer",
        &["sgd_update"],
        || ops::sgd_update(be, &sgd, &mut p, &g, None),
    ));
    let bad = [
        SgdHyper {
            nesterov: true,
            momentum: 0.0,
            ..sgd
        },
        SgdHyper {
            nesterov: true,
            dampening: 0.1,
            ..sgd
        },
    ];
    for hp in bad {
        f.record(expect_error(
            &format!("sgd_update: {hp:?}"),
            &["sgd_update"],
            || ops::sgd_update(be, &hp, &mut p, &g, Some(&mut vel)),
        ));
    }
    let adam = AdamHyper {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: false,
        step: 1,
        grad_scale: 1.0,
    };
    let bad = [
        AdamHyper { step: 0, ..adam },
        AdamHyper { beta1: 1.0, ..adam },
        AdamHyper {
            beta2: -0.1,
            ..adam
        },
        AdamHyper {
            beta1: f32::NAN,
            ..adam
        },
    ];
    let (mut m, mut v) = (t(&[3])?, t(&[3])?);
    for hp in bad {
        f.record(expect_error(
            &format!("adam_update: {hp:?}"),
            &["adam_update"],
            || ops::adam_update(be, &hp, &mut p, &g, &mut m, &mut v),
        ));
    }
    Ok(())
}

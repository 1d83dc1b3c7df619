//! Tensors from another device. A backend must never try to read another
//! device's memory: every op names the op and the foreign device instead.
//!
//! The foreign tensors are stand-ins whose storage claims a device the backend
//! does not run on (a CUDA ordinal for a CPU backend, the next ordinal for a
//! CUDA one); for device backends, host tensors are foreign too.

use super::{expect_error, f32s};
use crate::compare::Failures;
use crate::transfer::{put_int, Context};
use std::any::Any;
use verjus_core::ops::{
    self, AdamHyper, BinaryOp, Conv2dParams, Distribution, GemmSpec, Pool2dParams, PoolKind,
    ReduceOp, SgdHyper, UnaryOp,
};
use verjus_core::{Backend, DType, Device, DeviceStorage, Shape, Storage, Tensor};

/// Storage that only claims to live on `device`; it holds no memory.
#[derive(Debug)]
struct Elsewhere(Device);

impl DeviceStorage for Elsewhere {
    fn device(&self) -> Device {
        self.0
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Devices other than the backend's.
fn foreign_devices_for(be: &dyn Backend) -> Vec<Device> {
    match be.device() {
        Device::Cpu => vec![Device::Cuda(0)],
        Device::Cuda(n) => vec![Device::Cuda(n + 1), Device::Cpu],
    }
}

/// A tensor of `dims` and `dtype` that lives on `device`.
fn foreign(device: Device, dims: &[usize], dtype: DType) -> Result<Tensor, String> {
    let shape = Shape::new(dims.to_vec()).context("foreign tensor")?;
    match device {
        Device::Cpu => Tensor::zeros_host(&shape, dtype).context("foreign tensor"),
        other => Tensor::from_storage(shape, dtype, Storage::Device(Box::new(Elsewhere(other))))
            .context("foreign tensor"),
    }
}

/// Every op rejects an operand that lives on another device, and names it.
pub fn foreign_devices(be: &dyn Backend) -> Result<(), String> {
    let mut f = Failures::new();
    for device in foreign_devices_for(be) {
        cases(be, device, &mut f)?;
    }
    f.finish()
}

fn cases(be: &dyn Backend, device: Device, f: &mut Failures) -> Result<(), String> {
    let dev = device.to_string();
    let t = |d: &[usize]| f32s(be, d);
    let far = |d: &[usize]| foreign(device, d, DType::F32);
    let mut check = |op: &str, what: &str, call: &mut dyn FnMut() -> verjus_core::Result<()>| {
        f.record(expect_error(
            &format!("{op}: {what} on {dev}"),
            &[op, &dev],
            call,
        ));
    };

    let (a, b, far_b) = (t(&[2, 3])?, t(&[3, 4])?, far(&[3, 4])?);
    let mut c = t(&[2, 4])?;
    check("gemm", "B", &mut || {
        ops::gemm(be, &a, &far_b, &mut c, GemmSpec::default())
    });
    let mut far_c = far(&[2, 4])?;
    check("gemm", "C", &mut || {
        ops::gemm(be, &a, &b, &mut far_c, GemmSpec::default())
    });
    let (x, far_x) = (t(&[2, 3])?, far(&[2, 3])?);
    let mut y = t(&[2, 3])?;
    let mut far_y = far(&[2, 3])?;
    check("sigmoid", "y", &mut || {
        ops::unary(be, UnaryOp::Sigmoid, &x, &mut far_y)
    });
    check("sigmoid_backward", "dy", &mut || {
        ops::unary_backward(be, UnaryOp::Sigmoid, &x, &x, &far_x, &mut y)
    });
    check("mul", "a", &mut || {
        ops::binary(be, BinaryOp::Mul, &far_x, &x, &mut y)
    });
    check("mul_backward", "db", &mut || {
        ops::binary_backward(be, BinaryOp::Mul, &x, &x, &x, None, Some(&mut far_y))
    });
    let mut r = t(&[3])?;
    check("reduce_sum", "x", &mut || {
        ops::reduce(be, ReduceOp::Sum, &far_x, &[0], &mut r)
    });
    let far_r = far(&[3])?;
    check("reduce_min_backward", "dy", &mut || {
        ops::reduce_backward(be, ReduceOp::Min, &x, &[0], &r, &far_r, &mut y)
    });
    let mut far_am = foreign(device, &[2], DType::I64)?;
    check("argmax", "y", &mut || ops::argmax(be, &x, 1, &mut far_am));
    check("softmax", "x", &mut || {
        ops::softmax(be, &far_x, 1, false, &mut y)
    });
    check("log_softmax_backward", "y", &mut || {
        ops::softmax_backward(be, &far_x, &x, 1, true, &mut y)
    });

    let p = Conv2dParams::default();
    let (x4, w) = (t(&[1, 2, 4, 4])?, t(&[3, 2, 3, 3])?);
    let far_bias = far(&[3])?;
    let mut y4 = t(&[1, 3, 2, 2])?;
    check("conv2d", "bias", &mut || {
        ops::conv2d(be, &x4, &w, Some(&far_bias), p, &mut y4)
    });
    let (far_w, mut dx4) = (far(&[3, 2, 3, 3])?, t(&[1, 2, 4, 4])?);
    check("conv2d_backward_data", "weight", &mut || {
        ops::conv2d_backward_data(be, &y4, &far_w, p, &mut dx4)
    });
    let (far_x4, mut dw) = (far(&[1, 2, 4, 4])?, t(&[3, 2, 3, 3])?);
    check("conv2d_backward_filter", "input", &mut || {
        ops::conv2d_backward_filter(be, &far_x4, &y4, p, &mut dw)
    });
    let mut far_db = far(&[3])?;
    check("conv2d_backward_bias", "db", &mut || {
        ops::conv2d_backward_bias(be, &y4, &mut far_db)
    });
    let pp = Pool2dParams::square(2);
    let mut far_py = far(&[1, 2, 2, 2])?;
    check("max_pool2d", "output", &mut || {
        ops::pool2d(be, PoolKind::Max, &x4, pp, &mut far_py)
    });
    let (py, mut far_dx4) = (t(&[1, 2, 2, 2])?, far(&[1, 2, 4, 4])?);
    check("avg_pool2d_backward", "dx", &mut || {
        ops::pool2d_backward(be, PoolKind::Avg, &x4, &py, &py, pp, &mut far_dx4)
    });
    check("dropout", "x", &mut || {
        ops::dropout(be, &far_x, 0.5, 0, 0, &mut y)
    });
    check("dropout_backward", "dx", &mut || {
        ops::dropout_backward(be, &x, 0.5, 0, 0, &mut far_y)
    });

    let far_idx = foreign(device, &[2], DType::I64)?;
    let mut sel = t(&[2, 3])?;
    check("index_select", "indices", &mut || {
        ops::index_select(be, &x, 0, &far_idx, &mut sel)
    });
    let idx = put_int(be, "setup", &[0, 1], DType::I64)?;
    check("index_add", "dst", &mut || {
        ops::index_add(be, &x, 0, &idx, &mut far_y)
    });
    let mut whole = t(&[4, 3])?;
    check("concat", "part 1", &mut || {
        ops::concat(be, &[&x, &far_x], 0, &mut whole)
    });
    let mut part = t(&[2, 3])?;
    check("split", "part 0", &mut || {
        ops::split(be, &whole, 0, &mut [&mut far_y, &mut part])
    });
    let mut yt = t(&[3, 2])?;
    check("permute", "x", &mut || {
        ops::permute(be, &far_x, &[1, 0], &mut yt)
    });
    check("copy", "dst", &mut || ops::copy(be, &x, &mut far_y));
    check("fill", "dst", &mut || ops::fill(be, &mut far_y, 1.0));
    check("cast", "src", &mut || ops::cast(be, &far_x, &mut y));
    check("random", "dst", &mut || {
        ops::random(
            be,
            &mut far_y,
            Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            0,
            0,
        )
    });
    check("download", "source", &mut || {
        ops::download(be, &far_x).map(drop)
    });
    if device != Device::Cpu {
        check("upload", "source", &mut || {
            ops::upload(be, &far_x).map(drop)
        });
    }

    let sgd = SgdHyper {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.0,
        nesterov: false,
        weight_decay: 0.0,
        grad_scale: 1.0,
        first_step: false,
    };
    let (mut prm, g) = (t(&[2, 3])?, t(&[2, 3])?);
    check("sgd_update", "velocity", &mut || {
        ops::sgd_update(be, &sgd, &mut prm, &g, Some(&mut far_y))
    });
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
    let mut v = t(&[2, 3])?;
    check("adam_update", "m", &mut || {
        ops::adam_update(be, &adam, &mut prm, &g, &mut far_y, &mut v)
    });
    let mut losses = t(&[2])?;
    check("softmax_cross_entropy", "labels", &mut || {
        ops::softmax_cross_entropy(be, &x, &far_idx, 0.0, 1.0, &mut losses, None)
    });
    Ok(())
}

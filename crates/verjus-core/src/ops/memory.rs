//! Allocation, host transfer, copy, fill and cast.

use super::{check_device, check_shape};
use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// A zero-filled tensor on the backend's device.
pub fn zeros(be: &dyn Backend, shape: &Shape, dtype: DType) -> Result<Tensor> {
    be.alloc_zeroed(shape, dtype)
}

/// A fresh tensor for an op to overwrite entirely (its elements are
/// unspecified until then; see [`Backend::alloc_output`]): cheaper than
/// [`zeros`] for an op's output.
pub fn output(be: &dyn Backend, shape: &Shape, dtype: DType) -> Result<Tensor> {
    be.alloc_output(shape, dtype)
}

/// Copies a host tensor to the backend's device.
pub fn upload(be: &dyn Backend, host: &Tensor) -> Result<Tensor> {
    if host.device() != crate::Device::Cpu {
        return Err(Error::invalid(
            "upload",
            format!("source lives on {}, not the host", host.device()),
        ));
    }
    be.upload(host)
}

/// Copies a tensor of the backend's device to the host (synchronises).
pub fn download(be: &dyn Backend, t: &Tensor) -> Result<Tensor> {
    check_device("download", "source", be, t)?;
    be.download(t)
}

/// `dst = src`; shapes (element counts) and dtypes must agree.
pub fn copy(be: &dyn Backend, src: &Tensor, dst: &mut Tensor) -> Result<()> {
    check_device("copy", "src", be, src)?;
    check_device("copy", "dst", be, dst)?;
    if src.numel() != dst.numel() {
        return Err(Error::shape("copy", "dst", src.shape(), dst.shape()));
    }
    super::check_dtype("copy", "dst", dst, src.dtype())?;
    be.copy(src, dst)
}

/// Sets every element of `dst` to `value` (converted to its dtype).
pub fn fill(be: &dyn Backend, dst: &mut Tensor, value: f64) -> Result<()> {
    check_device("fill", "dst", be, dst)?;
    be.fill(dst, value)
}

/// `dst = src` converted to `dst`'s dtype (float to int truncates toward zero).
pub fn cast(be: &dyn Backend, src: &Tensor, dst: &mut Tensor) -> Result<()> {
    check_device("cast", "src", be, src)?;
    check_device("cast", "dst", be, dst)?;
    check_shape("cast", "dst", dst, src.shape())?;
    be.cast(src, dst)
}

/// `src`'s values rounded to the reduced-precision float `dtype` (bfloat16 or
/// float16), as a fresh float32 tensor: what a product of `dtype` operands
/// reads, for ops that run in float32 on rounded inputs (the static graph's
/// mixed precision).
pub fn rounded(be: &dyn Backend, src: &Tensor, dtype: DType) -> Result<Tensor> {
    dtype.mixed_precision("rounded")?;
    super::check_dtype("rounded", "src", src, DType::F32)?;
    let mut narrow = be.alloc_output(src.shape(), dtype)?;
    cast(be, src, &mut narrow)?;
    let mut wide = be.alloc_output(src.shape(), DType::F32)?;
    cast(be, &narrow, &mut wide)?;
    Ok(wide)
}

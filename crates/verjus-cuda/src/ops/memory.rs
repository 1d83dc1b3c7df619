//! Allocation, transfers, copy, fill and cast.

use crate::backend::CudaBackend;
use crate::device::arg;
use crate::kernels::Module;
use crate::storage::{host_bytes, host_bytes_mut, ptr, ptr_mut};
use cudarc::driver::result as drv;
use verjus_core::half::{bf16, f16};
use verjus_core::{DType, Error, HostData, Result, Shape, Storage, Tensor};

/// A zero-filled tensor (an asynchronous memset).
pub(crate) fn alloc_zeroed(be: &CudaBackend, shape: &Shape, dtype: DType) -> Result<Tensor> {
    let op = "alloc_zeroed";
    be.enter(op)?;
    let mut t = be.empty(op, shape, dtype)?;
    let bytes = t.numel() * dtype.size_in_bytes();
    zero_bytes(be, op, ptr_mut(op, &mut t)?, bytes)?;
    Ok(t)
}

/// A block for an op to overwrite entirely: no memset.
pub(crate) fn alloc_output(be: &CudaBackend, shape: &Shape, dtype: DType) -> Result<Tensor> {
    let op = "alloc_output";
    be.enter(op)?;
    be.empty(op, shape, dtype)
}

/// Zeroes `bytes` bytes at `p` (an asynchronous memset; nothing for 0).
pub(crate) fn zero_bytes(be: &CudaBackend, op: &str, p: u64, bytes: usize) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: every caller passes an allocation of at least `bytes` bytes.
    unsafe { drv::memset_d8_async(p, 0, bytes, be.gpu.stream()) }
        .map_err(|e| be.gpu.error(op, "cuMemsetD8Async", e))
}

/// Host to device through pinned staging; returns before the copy is done.
pub(crate) fn upload(be: &CudaBackend, host: &Tensor) -> Result<Tensor> {
    let op = "upload";
    be.enter(op)?;
    let bytes = host_bytes(host)?;
    let mut t = be.empty(op, host.shape(), host.dtype())?;
    if !bytes.is_empty() {
        let p = ptr_mut(op, &mut t)?;
        be.staging.upload(op, bytes, p)?;
    }
    Ok(t)
}

/// Device to host; waits for the queued work that produces `t`.
pub(crate) fn download(be: &CudaBackend, t: &Tensor) -> Result<Tensor> {
    let op = "download";
    be.enter(op)?;
    let mut data = HostData::zeros(t.dtype(), t.numel())?;
    let dst = host_bytes_mut(&mut data);
    if !dst.is_empty() {
        be.read_back(op, ptr(op, t)?, dst)?;
    }
    Tensor::from_storage(t.shape().clone(), t.dtype(), Storage::Host(data))
}

/// `dst = src` (device to device, asynchronous).
pub(crate) fn copy(be: &CudaBackend, src: &Tensor, dst: &mut Tensor) -> Result<()> {
    let op = "copy";
    be.enter(op)?;
    let bytes = src.numel() * src.dtype().size_in_bytes();
    copy_bytes(be, op, ptr_mut(op, dst)?, ptr(op, src)?, bytes)
}

/// `bytes` bytes from `src` to `dst` (device to device, asynchronous; nothing for 0).
pub(crate) fn copy_bytes(
    be: &CudaBackend,
    op: &str,
    dst: u64,
    src: u64,
    bytes: usize,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: every caller passes allocations holding `bytes` bytes from
    // `src` and `dst` (for `copy`: same dtype and count, validated).
    unsafe { drv::memcpy_dtod_async(dst, src, bytes, be.gpu.stream()) }
        .map_err(|e| be.gpu.error(op, "cuMemcpyDtoDAsync", e))
}

/// Every element set to `value`, converted as Rust's `as` converts.
pub(crate) fn fill(be: &CudaBackend, dst: &mut Tensor, value: f64) -> Result<()> {
    let op = "fill";
    be.enter(op)?;
    let n = dst.numel();
    let (p, count) = (ptr_mut(op, dst)?, n as i64);
    match dst.dtype() {
        DType::F32 => {
            let v = value as f32;
            be.launch_n(
                op,
                Module::Memory,
                "fill_f32",
                n,
                &mut [arg(&p), arg(&count), arg(&v)],
            )
        }
        DType::I64 => {
            let v = value as i64;
            be.launch_n(
                op,
                Module::Memory,
                "fill_i64",
                n,
                &mut [arg(&p), arg(&count), arg(&v)],
            )
        }
        DType::I32 => {
            let v = value as i32;
            be.launch_n(
                op,
                Module::Memory,
                "fill_i32",
                n,
                &mut [arg(&p), arg(&count), arg(&v)],
            )
        }
        DType::BF16 | DType::F16 => {
            let v = if dst.dtype() == DType::BF16 {
                bf16::from_f64(value).to_bits()
            } else {
                f16::from_f64(value).to_bits()
            };
            be.launch_n(
                op,
                Module::Memory,
                "fill_u16",
                n,
                &mut [arg(&p), arg(&count), arg(&v)],
            )
        }
        other => Err(Error::unsupported(format!("fill of {other}"), "cuda")),
    }
}

/// Fills an f32 buffer of `n` elements at `p` with `v` (for ops' edge cases).
pub(crate) fn fill_f32(be: &CudaBackend, op: &str, p: u64, n: usize, v: f32) -> Result<()> {
    let count = n as i64;
    be.launch_n(
        op,
        Module::Memory,
        "fill_f32",
        n,
        &mut [arg(&p), arg(&count), arg(&v)],
    )
}

/// `dst = src` converted to `dst`'s dtype (Rust `as` semantics; bf16 and f16
/// round to nearest even and convert to and from other types through f32).
pub(crate) fn cast(be: &CudaBackend, src: &Tensor, dst: &mut Tensor) -> Result<()> {
    let op = "cast";
    if src.dtype() == dst.dtype() {
        return copy(be, src, dst);
    }
    be.enter(op)?;
    let name = match (src.dtype(), dst.dtype()) {
        (DType::F32, DType::I32) => "cast_f32_i32",
        (DType::F32, DType::I64) => "cast_f32_i64",
        (DType::I32, DType::F32) => "cast_i32_f32",
        (DType::I64, DType::F32) => "cast_i64_f32",
        (DType::I32, DType::I64) => "cast_i32_i64",
        (DType::I64, DType::I32) => "cast_i64_i32",
        (DType::F32, DType::BF16) => "cast_f32_bf16",
        (DType::I32, DType::BF16) => "cast_i32_bf16",
        (DType::I64, DType::BF16) => "cast_i64_bf16",
        (DType::F16, DType::BF16) => "cast_f16_bf16",
        (DType::BF16, DType::F32) => "cast_bf16_f32",
        (DType::BF16, DType::I32) => "cast_bf16_i32",
        (DType::BF16, DType::I64) => "cast_bf16_i64",
        (DType::BF16, DType::F16) => "cast_bf16_f16",
        (DType::F32, DType::F16) => "cast_f32_f16",
        (DType::I32, DType::F16) => "cast_i32_f16",
        (DType::I64, DType::F16) => "cast_i64_f16",
        (DType::F16, DType::F32) => "cast_f16_f32",
        (DType::F16, DType::I32) => "cast_f16_i32",
        (DType::F16, DType::I64) => "cast_f16_i64",
        (s, d) => return Err(Error::unsupported(format!("cast from {s} to {d}"), "cuda")),
    };
    let n = src.numel();
    let (x, y, count) = (ptr(op, src)?, ptr_mut(op, dst)?, n as i64);
    be.launch_n(
        op,
        Module::Memory,
        name,
        n,
        &mut [arg(&x), arg(&y), arg(&count)],
    )
}

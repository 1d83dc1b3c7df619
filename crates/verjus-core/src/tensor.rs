//! Tensors: a shape, an element type and storage on one device.
//!
//! Tensors are always dense and row-major; a permutation is an op that copies
//! (`ops::permute`), a reshape is free. Host tensors (`Device::Cpu`) keep their
//! elements in a `Vec`; a device backend keeps its buffers behind the
//! [`DeviceStorage`] trait and recovers its own type with `as_any`. A read-only
//! host tensor can also borrow its elements from the caller ([`Tensor::view`],
//! in `view.rs`) or share another tensor's ([`Tensor::alias`]: the autograd
//! tape's reshape of a value it keeps).
//!
//! Backends write into tensors the caller owns (`&mut Tensor` outputs), so a
//! static graph can allocate its activation buffers once and reuse them step after
//! step; the eager frontend allocates fresh outputs with [`crate::ops::output`]
//! (no zero fill: [`Tensor::output_host`] on the host).

use crate::host_memory;
use crate::host_pool;
use crate::view::BorrowedHost;
use crate::{DType, Device, Element, Error, Result, Shape};
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// Elements of a host tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    F32(Vec<f32>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    BF16(Vec<half::bf16>),
    F16(Vec<half::f16>),
}

impl HostData {
    /// Zero-filled elements; fails cleanly (no abort) when the memory is not there.
    pub fn zeros(dtype: DType, len: usize) -> Result<Self> {
        fn zeroed<T: Element>(len: usize) -> Result<Vec<T>> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|e| Error::Device {
                device: "cpu".into(),
                msg: format!("cannot allocate {len} elements of {}: {e}", T::DTYPE.name()),
            })?;
            v.resize(len, T::default());
            Ok(v)
        }
        Ok(match dtype {
            DType::F32 => HostData::F32(zeroed(len)?),
            DType::I64 => HostData::I64(zeroed(len)?),
            DType::I32 => HostData::I32(zeroed(len)?),
            DType::BF16 => HostData::BF16(zeroed(len)?),
            DType::F16 => HostData::F16(zeroed(len)?),
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::F32(_) => DType::F32,
            HostData::I64(_) => DType::I64,
            HostData::I32(_) => DType::I32,
            HostData::BF16(_) => DType::BF16,
            HostData::F16(_) => DType::F16,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(v) => v.len(),
            HostData::I64(v) => v.len(),
            HostData::I32(v) => v.len(),
            HostData::BF16(v) => v.len(),
            HostData::F16(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Storage that a device backend owns (for example a CUDA allocation).
pub trait DeviceStorage: Send + Sync + fmt::Debug {
    /// The device holding the memory.
    fn device(&self) -> Device;
    /// For the owning backend to recover its concrete type.
    fn as_any(&self) -> &dyn Any;
    /// For the owning backend to recover its concrete type mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// Where a tensor's elements are.
#[derive(Debug)]
pub enum Storage {
    Host(HostData),
    /// Host elements borrowed read-only from the caller (see [`Tensor::view`]).
    Borrowed(BorrowedHost),
    /// Another host tensor's elements, read-only, under this tensor's shape:
    /// a reshape that copies nothing (see [`Tensor::alias`]).
    Alias(Arc<Tensor>),
    Device(Box<dyn DeviceStorage>),
}

/// A dense row-major tensor on one device.
#[derive(Debug)]
pub struct Tensor {
    shape: Shape,
    dtype: DType,
    storage: Storage,
    /// Host bytes this tensor added to [`crate::host_memory_stats`] (taken off on drop).
    counted: usize,
}

impl Drop for Tensor {
    fn drop(&mut self) {
        host_memory::freed(self.counted);
        if let Storage::Host(HostData::F32(v)) = &mut self.storage {
            host_pool::give(std::mem::take(v));
        }
    }
}

impl Tensor {
    /// A host tensor from a vector; the length must match the shape.
    pub fn from_vec<T: Element>(shape: impl Into<Vec<usize>>, data: Vec<T>) -> Result<Self> {
        let shape = Shape::new(shape)?;
        if shape.numel() != data.len() {
            return Err(Error::shape(
                "Tensor::from_vec",
                "data length",
                format!("{} elements for shape {shape}", shape.numel()),
                format!("{} elements", data.len()),
            ));
        }
        Ok(Tensor::build(
            shape,
            T::DTYPE,
            Storage::Host(T::into_host(data)),
        ))
    }

    /// A tensor from checked parts (for constructors elsewhere in this crate).
    pub(crate) fn from_parts(shape: Shape, dtype: DType, storage: Storage) -> Self {
        Tensor::build(shape, dtype, storage)
    }

    /// Every tensor is made here: owned host elements are counted.
    fn build(shape: Shape, dtype: DType, storage: Storage) -> Self {
        let counted = match &storage {
            Storage::Host(h) => h.len() * h.dtype().size_in_bytes(),
            Storage::Borrowed(_) | Storage::Alias(_) | Storage::Device(_) => 0,
        };
        host_memory::allocated(counted);
        Tensor {
            shape,
            dtype,
            storage,
            counted,
        }
    }

    /// A zero-filled host tensor.
    pub fn zeros_host(shape: &Shape, dtype: DType) -> Result<Self> {
        let data = HostData::zeros(dtype, shape.numel())?;
        Ok(Tensor::build(shape.clone(), dtype, Storage::Host(data)))
    }

    /// A host tensor for an op to overwrite entirely: its elements are
    /// unspecified (a recycled buffer's stale values, or zeros; NaN with
    /// `VERJUS_POISON_OUTPUTS=1`), which saves the zero fill of
    /// [`Tensor::zeros_host`] (see `host_pool.rs`).
    pub fn output_host(shape: &Shape, dtype: DType) -> Result<Self> {
        let data = match dtype {
            DType::F32 => match host_pool::take(shape.numel()) {
                Some(v) => HostData::F32(v),
                None => {
                    let mut data = HostData::zeros(dtype, shape.numel())?;
                    if let HostData::F32(v) = &mut data {
                        host_pool::poison(v);
                    }
                    data
                }
            },
            _ => HostData::zeros(dtype, shape.numel())?,
        };
        Ok(Tensor::build(shape.clone(), dtype, Storage::Host(data)))
    }

    /// A tensor over storage a backend made; the backend guarantees the size.
    pub fn from_storage(shape: Shape, dtype: DType, storage: Storage) -> Result<Self> {
        let host = match &storage {
            Storage::Host(h) => Some((h.dtype(), h.len())),
            Storage::Borrowed(b) => Some((b.dtype(), b.len())),
            Storage::Alias(t) => Some((t.dtype(), t.numel())),
            Storage::Device(_) => None,
        };
        if let Some((host_dtype, len)) = host {
            if host_dtype != dtype || len != shape.numel() {
                return Err(Error::shape(
                    "Tensor::from_storage",
                    "host storage",
                    format!("{} elements of {dtype}", shape.numel()),
                    format!("{len} elements of {host_dtype}"),
                ));
            }
        }
        Ok(Tensor::build(shape, dtype, storage))
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The device holding the elements.
    pub fn device(&self) -> Device {
        match &self.storage {
            Storage::Host(_) | Storage::Borrowed(_) => Device::Cpu,
            Storage::Alias(t) => t.device(),
            Storage::Device(d) => d.device(),
        }
    }

    /// The storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The storage, mutably.
    pub fn storage_mut(&mut self) -> &mut Storage {
        &mut self.storage
    }

    /// Host elements as a slice of `T`; an error for device tensors or another dtype.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        match &self.storage {
            Storage::Host(h) => T::host_slice(h).ok_or_else(|| self.dtype_error::<T>()),
            Storage::Borrowed(b) => b.as_slice::<T>().ok_or_else(|| self.dtype_error::<T>()),
            Storage::Alias(t) => t.as_slice::<T>(),
            Storage::Device(d) => Err(not_on_host(d.device())),
        }
    }

    /// Host elements as a mutable slice of `T`; an error for device tensors,
    /// another dtype and read-only views.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        let err = self.dtype_error::<T>();
        match &mut self.storage {
            Storage::Host(h) => T::host_slice_mut(h).ok_or(err),
            Storage::Borrowed(_) => Err(Error::invalid(
                "host access",
                "the tensor is a read-only view of borrowed memory",
            )),
            Storage::Alias(_) => Err(Error::invalid(
                "host access",
                "the tensor is a read-only alias of another tensor's elements",
            )),
            Storage::Device(d) => Err(not_on_host(d.device())),
        }
    }

    /// A copy of the host elements.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.as_slice::<T>().map(<[T]>::to_vec)
    }

    /// The same elements under a new shape of equal element count (no copy).
    pub fn reshape(mut self, dims: impl Into<Vec<usize>>) -> Result<Self> {
        self.shape = self.shape.reshape("reshape", dims)?;
        Ok(self)
    }

    /// `source`'s elements under `dims` without a copy, when `source` is on
    /// the host (`None` for a device tensor: copy it instead). The result is
    /// read-only and keeps `source` alive; tensors shared through an `Arc`
    /// (the autograd tape's values) are never written, so both stay equal.
    pub fn alias(source: &Arc<Tensor>, dims: impl Into<Vec<usize>>) -> Result<Option<Tensor>> {
        let shape = source.shape.reshape("reshape", dims)?;
        let root = match &source.storage {
            Storage::Alias(root) => root.clone(),
            Storage::Host(_) | Storage::Borrowed(_) => source.clone(),
            Storage::Device(_) => return Ok(None),
        };
        Ok(Some(Tensor::build(
            shape,
            source.dtype,
            Storage::Alias(root),
        )))
    }

    /// Changes the shape in place (no copy); the element count must match.
    pub fn reshape_in_place(&mut self, dims: impl Into<Vec<usize>>) -> Result<()> {
        self.shape = self.shape.reshape("reshape", dims)?;
        Ok(())
    }

    /// A deep copy of a host tensor (a view's copy owns its elements); device
    /// tensors are copied with `ops::copy`.
    pub fn try_clone_host(&self) -> Result<Self> {
        let data = match &self.storage {
            Storage::Host(h) => h.clone(),
            Storage::Borrowed(b) => b.to_host_data()?,
            Storage::Alias(t) => {
                let mut copy = t.try_clone_host()?;
                copy.reshape_in_place(self.dims().to_vec())?;
                return Ok(copy);
            }
            Storage::Device(d) => return Err(not_on_host(d.device())),
        };
        Ok(Tensor::build(
            self.shape.clone(),
            self.dtype,
            Storage::Host(data),
        ))
    }

    fn dtype_error<T: Element>(&self) -> Error {
        Error::DTypeMismatch {
            op: "tensor access".into(),
            what: "tensor".into(),
            expected: T::DTYPE,
            actual: self.dtype,
        }
    }
}

fn not_on_host(device: Device) -> Error {
    Error::WrongDevice {
        op: "host access".into(),
        what: "tensor".into(),
        expected: Device::Cpu,
        actual: device,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_vec_checks_length() {
        let t = Tensor::from_vec([2, 3], vec![0f32; 6]).unwrap();
        assert_eq!(t.dims(), &[2, 3]);
        assert_eq!(t.dtype(), DType::F32);
        let err = Tensor::from_vec([2, 3], vec![0f32; 5])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("6 elements") && err.contains("5 elements"),
            "{err}"
        );
    }

    #[test]
    fn slices_check_dtype() {
        let t = Tensor::from_vec([2], vec![1i64, 2]).unwrap();
        assert_eq!(t.as_slice::<i64>().unwrap(), &[1, 2]);
        assert!(t.as_slice::<f32>().is_err());
    }

    #[test]
    fn reshape_keeps_elements() {
        let t = Tensor::from_vec([2, 3], (0..6).map(|i| i as f32).collect()).unwrap();
        let t = t.reshape([3, 2]).unwrap();
        assert_eq!(t.dims(), &[3, 2]);
        assert_eq!(t.to_vec::<f32>().unwrap()[5], 5.0);
    }

    #[test]
    fn an_alias_shares_elements_read_only_and_copies_into_its_own_shape() {
        let source =
            Arc::new(Tensor::from_vec([2, 3], (0..6).map(|i| i as f32).collect()).unwrap());
        let alias = Tensor::alias(&source, [3, 2]).unwrap().unwrap();
        assert_eq!(alias.dims(), &[3, 2]);
        let (a, s) = (
            alias.as_slice::<f32>().unwrap(),
            source.as_slice::<f32>().unwrap(),
        );
        assert_eq!(a.as_ptr(), s.as_ptr(), "no copy");
        // An alias of an alias points at the elements' owner.
        let again = Arc::new(alias);
        let flat = Tensor::alias(&again, [6]).unwrap().unwrap();
        assert!(matches!(flat.storage(), Storage::Alias(root) if Arc::ptr_eq(root, &source)));
        let mut flat = flat;
        let err = flat.as_mut_slice::<f32>().unwrap_err().to_string();
        assert!(err.contains("read-only alias"), "{err}");
        let mut owned = flat.try_clone_host().unwrap();
        assert_eq!(owned.dims(), &[6]);
        owned.as_mut_slice::<f32>().unwrap()[0] = 9.0;
        assert_eq!(source.as_slice::<f32>().unwrap()[0], 0.0);
        assert!(Tensor::alias(&source, [4]).is_err());
    }
}

//! Zero-copy, read-only tensors over memory the caller owns.
//!
//! The Python bindings feed numpy arrays to networks: copying every input batch
//! into a fresh `Vec` would cost a pass over memory per call for nothing, since
//! the network copies its inputs into its own buffers anyway. [`Tensor::view`]
//! wraps a borrowed slice instead. The result, a [`HostView`], hands out only
//! `&Tensor` (never `&mut Tensor`, never an owned `Tensor`), so the borrowed
//! memory cannot be written through it or outlive the borrow:
//!
//! - [`Tensor::as_slice`] reads it; [`Tensor::as_mut_slice`] is an error;
//! - [`Tensor::try_clone_host`] (and so `ops::upload` on the native backend)
//!   copies it into an owned `Vec`.
//!
//! All `unsafe` for this lives in [`BorrowedHost`]: a pointer, a length and the
//! `TypeId` of the element type it was made from.

use crate::{DType, Element, Error, HostData, Result, Shape, Storage, Tensor};
use std::any::TypeId;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

/// Host elements borrowed from outside the tensor (the storage of a [`HostView`]).
///
/// Only [`Tensor::view`] makes one, and only inside a [`HostView`] whose
/// lifetime is that of the borrowed slice; the type has no public constructor
/// and is not `Clone`, so nothing can carry the pointer beyond the borrow.
pub struct BorrowedHost {
    ptr: NonNull<()>,
    len: usize,
    dtype: DType,
    /// The Rust element type the slice had; reads check it, so memory is only
    /// ever reinterpreted as the type it was written as.
    elem: TypeId,
    /// A copy of the elements as owned host data (monomorphised at construction).
    to_owned: fn(&BorrowedHost) -> Option<HostData>,
}

// SAFETY: a `BorrowedHost` stands for a `&'a [T]` with `T: Element`, which is
// `Send + Sync` (the trait requires both); it only ever reads through the
// pointer, so sharing or sending it is as safe as sharing or sending that slice.
// The lifetime `'a` is enforced by the `HostView<'a>` that owns it.
unsafe impl Send for BorrowedHost {}
// SAFETY: see `Send` above.
unsafe impl Sync for BorrowedHost {}

impl BorrowedHost {
    fn new<T: Element>(data: &[T]) -> Self {
        BorrowedHost {
            ptr: NonNull::from(data).cast(),
            len: data.len(),
            dtype: T::DTYPE,
            elem: TypeId::of::<T>(),
            to_owned: |b| b.as_slice::<T>().map(|s| T::into_host(s.to_vec())),
        }
    }

    /// The elements as `T`, when the view was made from a `[T]`.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        if TypeId::of::<T>() != self.elem {
            return None;
        }
        // SAFETY: `ptr` and `len` come from a `&[T]` (same `T`: checked by
        // `TypeId` above) that the owning `HostView<'a>` borrows for `'a`; this
        // `&self` cannot outlive that view (it is reachable only through the
        // view's `&Tensor`), so the memory is valid, aligned and initialised for
        // the returned lifetime, and nothing writes to it through verjus.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.cast::<T>().as_ptr(), self.len) })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// An owned copy of the elements.
    pub fn to_host_data(&self) -> Result<HostData> {
        (self.to_owned)(self).ok_or_else(|| {
            Error::invalid("host view", format!("cannot copy a view of {}", self.dtype))
        })
    }
}

impl fmt::Debug for BorrowedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BorrowedHost")
            .field("len", &self.len)
            .field("dtype", &self.dtype)
            .finish()
    }
}

/// A read-only tensor over a borrowed slice; derefs to `&Tensor`. See the module docs.
#[derive(Debug)]
pub struct HostView<'a> {
    tensor: Tensor,
    _borrow: PhantomData<&'a [()]>,
}

impl Deref for HostView<'_> {
    type Target = Tensor;
    fn deref(&self) -> &Tensor {
        &self.tensor
    }
}

impl Tensor {
    /// A read-only host tensor of shape `shape` over `data`, without copying;
    /// the length must match the shape.
    pub fn view<'a, T: Element>(
        shape: impl Into<Vec<usize>>,
        data: &'a [T],
    ) -> Result<HostView<'a>> {
        let shape = Shape::new(shape)?;
        if shape.numel() != data.len() {
            return Err(Error::shape(
                "Tensor::view",
                "data length",
                format!("{} elements for shape {shape}", shape.numel()),
                format!("{} elements", data.len()),
            ));
        }
        Ok(HostView {
            tensor: Tensor::from_parts(shape, T::DTYPE, Storage::Borrowed(BorrowedHost::new(data))),
            _borrow: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    #[test]
    fn views_read_without_copying() {
        let data: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let view = Tensor::view([2, 3], &data).unwrap();
        assert_eq!(view.dims(), &[2, 3]);
        assert_eq!(view.dtype(), DType::F32);
        assert_eq!(view.device(), Device::Cpu);
        let slice = view.as_slice::<f32>().unwrap();
        assert_eq!(slice, &data[..]);
        assert_eq!(slice.as_ptr(), data.as_ptr(), "the view must not copy");
        assert!(view.as_slice::<i64>().is_err());
        assert_eq!(view.to_vec::<f32>().unwrap(), data);
    }

    #[test]
    fn views_are_read_only_and_clone_into_owned_storage() {
        let data = vec![1i64, 2, 3];
        let view = Tensor::view([3], &data).unwrap();
        let mut owned = view.try_clone_host().unwrap();
        assert!(matches!(owned.storage(), Storage::Host(HostData::I64(_))));
        owned.as_mut_slice::<i64>().unwrap()[0] = 7;
        assert_eq!(data[0], 1);
        assert_eq!(view.as_slice::<i64>().unwrap(), &[1, 2, 3]);
        match view.storage() {
            Storage::Borrowed(b) => {
                assert_eq!((b.len(), b.dtype(), b.is_empty()), (3, DType::I64, false));
                assert!(b.as_slice::<i32>().is_none());
                assert_eq!(b.to_host_data().unwrap(), HostData::I64(data.clone()));
            }
            other => panic!("expected borrowed storage, got {other:?}"),
        }
    }

    #[test]
    fn mutable_access_to_a_view_is_an_error() {
        let data = vec![0f32; 4];
        let view = Tensor::view([4], &data).unwrap();
        // Only `&Tensor` is reachable; an owned copy is writable, the view is not.
        let mut copy = view.try_clone_host().unwrap();
        assert!(copy.as_mut_slice::<f32>().is_ok());
        let mut moved = Tensor::from_parts(
            Shape::new([4]).unwrap(),
            DType::F32,
            Storage::Borrowed(BorrowedHost::new(&data)),
        );
        let err = moved.as_mut_slice::<f32>().unwrap_err().to_string();
        assert!(err.contains("read-only"), "{err}");
    }

    #[test]
    fn view_checks_length_and_shape() {
        let data = vec![0f32; 5];
        let err = Tensor::view([2, 3], &data).unwrap_err().to_string();
        assert!(
            err.contains("6 elements") && err.contains("5 elements"),
            "{err}"
        );
        assert!(Tensor::view([usize::MAX, 2], &data).is_err());
        let empty: [f32; 0] = [];
        assert_eq!(Tensor::view([0, 3], &empty).unwrap().numel(), 0);
    }
}

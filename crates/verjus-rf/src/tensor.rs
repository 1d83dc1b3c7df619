//! [`RfTensor`]: a value on the autograd tape with its axes named by dims.

use crate::{fmt_dims, Dim, RfDType};
use verjus_core::autograd::Var;
use verjus_core::{BackendRef, Error, Result, Shape, Tensor};

/// An autograd [`Var`] whose raw axes are named by `dims` (in order), with a
/// user dtype and optional `sparse_dim` (the class dim of integer labels)
/// and `feature_dim`. Cheap to clone: the value is shared.
#[derive(Clone)]
pub struct RfTensor {
    var: Var,
    dims: Vec<Dim>,
    dtype: RfDType,
    sparse_dim: Option<Dim>,
    feature_dim: Option<Dim>,
}

impl RfTensor {
    /// A tensor over `var` with axes `dims`. Checks the rank, the sizes of
    /// dims whose size is known, that no dim repeats, and that `dtype` is
    /// stored as `var`'s element type.
    pub fn new(var: Var, dims: Vec<Dim>, dtype: RfDType) -> Result<RfTensor> {
        check_layout("Tensor", &var.shape(), &dims)?;
        if dtype.storage() != var.dtype() {
            return Err(Error::invalid(
                "Tensor",
                format!("dtype {dtype} cannot hold a {} value", var.dtype()),
            ));
        }
        Ok(RfTensor::from_parts(var, dims, dtype))
    }

    /// A tensor from parts an op has already made consistent.
    pub(crate) fn from_parts(var: Var, dims: Vec<Dim>, dtype: RfDType) -> RfTensor {
        RfTensor {
            var,
            dims,
            dtype,
            sparse_dim: None,
            feature_dim: None,
        }
    }

    /// A tensor holding `value` (a host tensor is uploaded to `backend`).
    /// Only float32 values can require a gradient.
    pub fn from_tensor(
        value: Tensor,
        dims: Vec<Dim>,
        dtype: Option<RfDType>,
        backend: BackendRef,
        requires_grad: bool,
    ) -> Result<RfTensor> {
        let dtype = match dtype {
            Some(d) => d,
            None => RfDType::of_storage(value.dtype())?,
        };
        let var = Var::new(value, backend, requires_grad)?;
        let t = RfTensor::new(var, dims, dtype)?;
        for (d, n) in t.dims.iter().zip(t.var.shape().dims()) {
            d.note_data_size(*n);
        }
        Ok(t)
    }

    /// A float32 scalar constant on `backend`.
    pub(crate) fn scalar(value: f32, backend: &BackendRef) -> Result<RfTensor> {
        let var = Var::constant(Tensor::from_vec(Vec::new(), vec![value])?, backend.clone())?;
        Ok(RfTensor::from_parts(var, Vec::new(), RfDType::Float32))
    }

    /// The same tensor with `sparse_dim` set (integer tensors only: the dim
    /// whose entries the values index).
    pub fn with_sparse_dim(mut self, dim: Option<Dim>) -> Result<RfTensor> {
        if dim.is_some() && !self.dtype.is_int() {
            return Err(Error::invalid(
                "Tensor",
                format!("sparse_dim needs an integer tensor, got {}", self.dtype),
            ));
        }
        self.sparse_dim = dim;
        Ok(self)
    }

    /// The same tensor with `feature_dim` set (one of its dims).
    pub fn with_feature_dim(mut self, dim: Option<Dim>) -> Result<RfTensor> {
        if let Some(d) = &dim {
            if !self.dims.contains(d) {
                return Err(Error::invalid(
                    "Tensor",
                    format!("feature_dim {d} is not one of {}", fmt_dims(&self.dims)),
                ));
            }
        }
        self.feature_dim = dim;
        Ok(self)
    }

    /// The autograd value.
    pub fn var(&self) -> &Var {
        &self.var
    }

    /// The dims, in raw-axis order.
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// The user dtype.
    pub fn dtype(&self) -> RfDType {
        self.dtype
    }

    /// The class dim of integer labels.
    pub fn sparse_dim(&self) -> Option<&Dim> {
        self.sparse_dim.as_ref()
    }

    /// The feature dim, when set and still one of the dims.
    pub fn feature_dim(&self) -> Option<&Dim> {
        self.feature_dim.as_ref()
    }

    /// The backend holding the value.
    pub fn backend(&self) -> &BackendRef {
        self.var.backend()
    }

    /// The raw axis of `dim`.
    pub fn axis_of(&self, dim: &Dim) -> Option<usize> {
        self.dims.iter().position(|d| d == dim)
    }

    /// The raw axis of `dim`, or an error naming `op` and the dims.
    pub fn axis(&self, op: &str, dim: &Dim) -> Result<usize> {
        self.axis_of(dim).ok_or_else(|| {
            Error::invalid(
                op,
                format!(
                    "dim {dim} is not in the tensor's dims {}",
                    fmt_dims(&self.dims)
                ),
            )
        })
    }

    /// The raw sizes, in dims order.
    pub fn sizes(&self) -> Vec<usize> {
        self.var.shape().dims().to_vec()
    }

    /// A host copy of the value (bools as float32 0/1).
    pub fn to_host(&self) -> Result<Tensor> {
        self.var.to_host()
    }

    /// The same values with the axes in the order of `dims` (the same set of
    /// dims); no copy when the order already is that.
    pub fn copy_transpose(&self, dims: &[Dim]) -> Result<RfTensor> {
        if dims.len() != self.dims.len() || dims.iter().any(|d| !self.dims.contains(d)) {
            return Err(Error::invalid(
                "copy_transpose",
                format!(
                    "dims {} are not a permutation of the tensor's dims {}",
                    fmt_dims(dims),
                    fmt_dims(&self.dims)
                ),
            ));
        }
        let var = crate::align::permuted(self, dims)?;
        Ok(self.with_value(var, dims.to_vec()))
    }

    /// A result of an elementwise op: `var` with `dims`, this tensor's dtype
    /// and metadata (the feature dim kept when still present).
    pub(crate) fn with_value(&self, var: Var, dims: Vec<Dim>) -> RfTensor {
        let mut t = RfTensor::from_parts(var, dims, self.dtype).keep_feature_dim(self);
        t.sparse_dim = self.sparse_dim.clone();
        t
    }

    /// This tensor with `from`'s feature dim, when it is one of its dims.
    pub(crate) fn keep_feature_dim(mut self, from: &RfTensor) -> RfTensor {
        self.feature_dim = from.feature_dim.clone().filter(|f| self.dims.contains(f));
        self
    }
}

impl std::fmt::Debug for RfTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({}, {})", fmt_dims(&self.dims), self.dtype)
    }
}

/// Checks that `shape` fits `dims`: the rank, known sizes, no repeated dim.
fn check_layout(op: &str, shape: &Shape, dims: &[Dim]) -> Result<()> {
    let sizes = shape.dims();
    let bad = sizes.len() != dims.len()
        || dims
            .iter()
            .zip(sizes)
            .any(|(d, &n)| d.size().is_some_and(|s| s != n));
    if bad {
        let expected: Vec<String> = dims
            .iter()
            .map(|d| match d.size() {
                Some(s) => format!("{d}={s}"),
                None => format!("{d}=?"),
            })
            .collect();
        return Err(Error::shape(
            op,
            "value",
            format!("[{}]", expected.join(", ")),
            shape,
        ));
    }
    for (i, d) in dims.iter().enumerate() {
        if dims[..i].contains(d) {
            return Err(Error::invalid(
                op,
                format!("dim {d} appears twice in {}", fmt_dims(dims)),
            ));
        }
    }
    Ok(())
}

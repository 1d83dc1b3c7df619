//! Moving data between the host and the backend under test, with errors turned
//! into messages that say which op and case they belong to.
//!
//! Inputs go up with `ops::upload` and results come back with `ops::download`,
//! the same path a user takes, so a backend is tested through its public surface.

use crate::array::Array;
use verjus_core::{ops, Backend, DType, Element, Shape, Tensor};

/// Prefixes a verjus error with the op and case it came from.
pub trait Context<T> {
    /// The error as `"{what}: {error}"`.
    fn context(self, what: &str) -> Result<T, String>;
}

impl<T> Context<T> for verjus_core::Result<T> {
    fn context(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// Uploads `data` with `dims` to the backend.
pub fn put_vec<T: Element>(
    be: &dyn Backend,
    what: &str,
    dims: &[usize],
    data: Vec<T>,
) -> Result<Tensor, String> {
    let host = Tensor::from_vec(dims.to_vec(), data).context(what)?;
    ops::upload(be, &host).context(&format!("{what}: upload"))
}

/// Uploads an `f32` array to the backend.
pub fn put(be: &dyn Backend, what: &str, a: &Array) -> Result<Tensor, String> {
    put_vec(be, what, &a.dims, a.data.clone())
}

/// Uploads indices or labels as `dtype` (int64 or int32).
pub fn put_int(
    be: &dyn Backend,
    what: &str,
    values: &[i64],
    dtype: DType,
) -> Result<Tensor, String> {
    let dims = [values.len()];
    match dtype {
        DType::I32 => put_vec(
            be,
            what,
            &dims,
            values.iter().map(|&v| v as i32).collect::<Vec<i32>>(),
        ),
        _ => put_vec(be, what, &dims, values.to_vec()),
    }
}

/// A zero-filled tensor on the backend.
pub fn zeros(be: &dyn Backend, what: &str, dims: &[usize], dtype: DType) -> Result<Tensor, String> {
    let shape = Shape::new(dims.to_vec()).context(what)?;
    ops::zeros(be, &shape, dtype).context(&format!("{what}: allocate"))
}

/// Downloads a tensor's elements as `T`.
pub fn get<T: Element>(be: &dyn Backend, what: &str, t: &Tensor) -> Result<Vec<T>, String> {
    let host = ops::download(be, t).context(&format!("{what}: download"))?;
    host.to_vec::<T>().context(what)
}

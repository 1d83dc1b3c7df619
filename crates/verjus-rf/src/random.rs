//! Random tensors and dropout from the shared Philox stream.
//!
//! One process-wide state, `(seed, offset)`: every draw takes the next
//! `rng::blocks_for(n)` blocks, so draws never overlap and a run is
//! reproducible after [`set_random_seed`]. The stream is the one every
//! backend implements, so values do not depend on the device.

use crate::binary::combine;
use crate::{fmt_dims, Dim, RfDType, RfTensor};
use std::sync::atomic::{AtomicU64, Ordering};
use verjus_core::autograd::Var;
use verjus_core::ops::{BinaryOp, Distribution};
use verjus_core::{rng, BackendRef, Error, Result, Shape};

static SEED: AtomicU64 = AtomicU64::new(0);
static OFFSET: AtomicU64 = AtomicU64::new(0);

/// Restarts the stream at `seed`.
pub fn set_random_seed(seed: u64) {
    SEED.store(seed, Ordering::SeqCst);
    OFFSET.store(0, Ordering::SeqCst);
}

/// The stream's state `(seed, offset)`, for [`restore_random_state`]: reading
/// it draws nothing.
pub fn random_state() -> (u64, u64) {
    (SEED.load(Ordering::SeqCst), OFFSET.load(Ordering::SeqCst))
}

/// Continues the stream from a state [`random_state`] returned: the draws
/// that followed it come again.
pub fn restore_random_state(seed: u64, offset: u64) {
    SEED.store(seed, Ordering::SeqCst);
    OFFSET.store(offset, Ordering::SeqCst);
}

/// The `(seed, offset)` of a draw of `n` values, advancing the stream.
fn take(n: usize) -> (u64, u64) {
    let offset = OFFSET.fetch_add(rng::blocks_for(n), Ordering::SeqCst);
    (SEED.load(Ordering::SeqCst), offset)
}

fn sizes_of(op: &str, dims: &[Dim]) -> Result<Shape> {
    let sizes = dims
        .iter()
        .map(|d| {
            d.size_or_seen()
                .ok_or_else(|| Error::invalid(op, format!("dim {d} has no known size")))
        })
        .collect::<Result<Vec<_>>>()?;
    Shape::new(sizes)
}

fn draw(op: &str, dims: &[Dim], dist: Distribution, backend: &BackendRef) -> Result<RfTensor> {
    let shape = sizes_of(op, dims)?;
    let (seed, offset) = take(shape.numel());
    // A recorded draw: in a gradient checkpoint scope it is drawn again in
    // backward instead of kept.
    let t = Var::random(&shape, dist, seed, offset, backend)?;
    RfTensor::new(t, dims.to_vec(), RfDType::Float32)
}

/// Uniform values in `[minval, maxval)` over `dims` (of known sizes).
pub fn random_uniform(
    dims: &[Dim],
    minval: f32,
    maxval: f32,
    backend: &BackendRef,
) -> Result<RfTensor> {
    draw(
        "random_uniform",
        dims,
        Distribution::Uniform {
            low: minval,
            high: maxval,
        },
        backend,
    )
}

/// Normal values over `dims` (of known sizes).
pub fn random_normal(
    dims: &[Dim],
    mean: f32,
    stddev: f32,
    backend: &BackendRef,
) -> Result<RfTensor> {
    draw(
        "random_normal",
        dims,
        Distribution::Normal { mean, std: stddev },
        backend,
    )
}

/// Inverted dropout when `train` (identity otherwise): zeroes entries with
/// probability `drop_prob` and scales the rest by `1 / (1 - drop_prob)`.
/// With `axis`, the mask varies only over those dims and is shared along
/// the others (RETURNN's noise shape).
pub fn dropout(
    source: &RfTensor,
    drop_prob: f32,
    axis: Option<&[Dim]>,
    train: bool,
) -> Result<RfTensor> {
    if !train || drop_prob == 0.0 {
        return Ok(source.clone());
    }
    let Some(axis) = axis else {
        let (seed, offset) = take(source.var().shape().numel());
        let var = source.var().dropout(drop_prob, seed, offset)?;
        return Ok(source.with_value(var, source.dims().to_vec()));
    };
    if let Some(d) = axis.iter().find(|d| source.axis_of(d).is_none()) {
        return Err(Error::invalid(
            "dropout",
            format!("axis dim {d} is not in {}", fmt_dims(source.dims())),
        ));
    }
    let ones = crate::full(axis, 1.0, RfDType::Float32, source.backend())?;
    let mask = dropout(&ones, drop_prob, None, true)?;
    combine(source, BinaryOp::Mul, &mask, false)
}

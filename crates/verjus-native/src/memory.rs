//! Copy, fill, cast and random fills on host memory.
//!
//! All four are bandwidth-bound loops over contiguous slices, split over the
//! pool for large tensors. Random fills work sixteen Philox blocks (four
//! elements each) at a time (`random_batch.rs`) and start every task on a
//! block boundary, so a parallel fill produces the elements of the sequential
//! definition (`rng::word_at` exactly, `rng::normal_at` within the
//! cross-device tolerance) while hashing each block once.

use crate::parallel::for_rows;
use crate::random_batch::{self, BLOCKS, VALUES};
use verjus_core::half::{bf16, f16};
use verjus_core::ops::Distribution;
use verjus_core::{DType, Element, Error, Result, Tensor};

/// `dst = src` (same dtype and element count, checked by the caller).
pub(crate) fn copy(src: &Tensor, dst: &mut Tensor) -> Result<()> {
    match src.dtype() {
        DType::F32 => copy_as::<f32>(src, dst),
        DType::I64 => copy_as::<i64>(src, dst),
        DType::I32 => copy_as::<i32>(src, dst),
        DType::BF16 => copy_as::<bf16>(src, dst),
        DType::F16 => copy_as::<f16>(src, dst),
        other => Err(unsupported("copy", other)),
    }
}

/// The error for a dtype added to verjus-core that this backend does not know yet.
fn unsupported(op: &str, dtype: DType) -> Error {
    Error::unsupported(format!("{op} of {dtype}"), "native")
}

fn copy_as<T: Element>(src: &Tensor, dst: &mut Tensor) -> Result<()> {
    let src = src.as_slice::<T>()?;
    for_rows(dst.as_mut_slice::<T>()?, 1, 1, |start, out| {
        out.copy_from_slice(&src[start..start + out.len()]);
    });
    Ok(())
}

/// Every element of `dst` set to `value`, converted as `as` converts (floats to
/// integers truncate toward zero and saturate; bf16 and f16 round to nearest even).
pub(crate) fn fill(dst: &mut Tensor, value: f64) -> Result<()> {
    match dst.dtype() {
        DType::F32 => fill_with(dst.as_mut_slice::<f32>()?, value as f32),
        DType::I64 => fill_with(dst.as_mut_slice::<i64>()?, value as i64),
        DType::I32 => fill_with(dst.as_mut_slice::<i32>()?, value as i32),
        DType::BF16 => fill_with(dst.as_mut_slice::<bf16>()?, bf16::from_f64(value)),
        DType::F16 => fill_with(dst.as_mut_slice::<f16>()?, f16::from_f64(value)),
        other => return Err(unsupported("fill", other)),
    }
    Ok(())
}

fn fill_with<T: Element>(dst: &mut [T], value: T) {
    for_rows(dst, 1, 1, |_, out| out.fill(value));
}

/// `dst = src` converted to `dst`'s dtype with Rust's `as` (float to integer
/// truncates toward zero, saturates, and maps NaN to 0; i64 to i32 wraps).
/// bf16 and f16 convert to and from every other type through f32, rounding to
/// nearest even and keeping NaN and infinities (the `half` crate's conversions).
pub(crate) fn cast(src: &Tensor, dst: &mut Tensor) -> Result<()> {
    macro_rules! convert {
        ($s:ty => $d:ty) => {
            convert_with(src.as_slice::<$s>()?, dst.as_mut_slice::<$d>()?, |v| {
                v as $d
            })
        };
    }
    match (src.dtype(), dst.dtype()) {
        (s, d) if s == d => return copy(src, dst),
        (DType::BF16 | DType::F16, _) | (_, DType::BF16 | DType::F16) => {
            return match src.dtype() {
                DType::F32 => through_f32(src.as_slice::<f32>()?, dst),
                DType::I64 => through_f32(src.as_slice::<i64>()?, dst),
                DType::I32 => through_f32(src.as_slice::<i32>()?, dst),
                DType::BF16 => through_f32(src.as_slice::<bf16>()?, dst),
                DType::F16 => through_f32(src.as_slice::<f16>()?, dst),
                other => Err(unsupported("cast", other)),
            }
        }
        (DType::F32, DType::I64) => convert!(f32 => i64),
        (DType::F32, DType::I32) => convert!(f32 => i32),
        (DType::I64, DType::F32) => convert!(i64 => f32),
        (DType::I64, DType::I32) => convert!(i64 => i32),
        (DType::I32, DType::F32) => convert!(i32 => f32),
        (DType::I32, DType::I64) => convert!(i32 => i64),
        (_, other) => return Err(unsupported("cast", other)),
    }
    Ok(())
}

/// A float32 copy of a bfloat16 or float16 tensor (exact); `None` for any
/// other, which is used as it is.
pub(crate) fn widened(t: &Tensor) -> Result<Option<Tensor>> {
    if !t.dtype().is_reduced_float() {
        return Ok(None);
    }
    let mut wide = Tensor::output_host(t.shape(), DType::F32)?;
    cast(t, &mut wide)?;
    Ok(Some(wide))
}

/// An element type's conversions to and from f32 (`as` for the primitive types).
trait ViaF32: Element {
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

macro_rules! via_f32_as {
    ($($t:ty),*) => {$(
        impl ViaF32 for $t {
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn from_f32(v: f32) -> Self {
                v as $t
            }
        }
    )*};
}
via_f32_as!(f32, i64, i32);

macro_rules! via_f32_half {
    ($($t:ty),*) => {$(
        impl ViaF32 for $t {
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
        }
    )*};
}
via_f32_half!(bf16, f16);

/// `dst = src` converted through f32, for casts to or from bf16 and f16.
fn through_f32<S: ViaF32>(src: &[S], dst: &mut Tensor) -> Result<()> {
    fn to<S: ViaF32, D: ViaF32>(src: &[S], dst: &mut [D]) {
        convert_with(src, dst, |v| D::from_f32(v.to_f32()));
    }
    match dst.dtype() {
        DType::F32 => to(src, dst.as_mut_slice::<f32>()?),
        DType::I64 => to(src, dst.as_mut_slice::<i64>()?),
        DType::I32 => to(src, dst.as_mut_slice::<i32>()?),
        DType::BF16 => to(src, dst.as_mut_slice::<bf16>()?),
        DType::F16 => to(src, dst.as_mut_slice::<f16>()?),
        other => return Err(unsupported("cast", other)),
    }
    Ok(())
}

fn convert_with<S: Element, D: Element>(
    src: &[S],
    dst: &mut [D],
    f: impl Fn(S) -> D + Sync + Send,
) {
    for_rows(dst, 1, 1, |start, out| {
        for (o, &v) in out.iter_mut().zip(&src[start..]) {
            *o = f(v);
        }
    });
}

/// Elements per Philox block.
const BLOCK: usize = 4;

/// Fills `dst` from the Philox stream at `(seed, offset)`: element `i` is
/// `low + (high - low) * unit_uniform(word_at(seed, offset, i))` or
/// `mean + std * normal_at(seed, offset, i)` (within the cross-device
/// tolerance: the Box–Muller transform uses polynomial `ln`, `sin`, `cos`).
pub(crate) fn random(dst: &mut Tensor, dist: Distribution, seed: u64, offset: u64) -> Result<()> {
    let dst = dst.as_mut_slice::<f32>()?;
    match dist {
        Distribution::Uniform { low, high } => fill_batches(dst, offset, |counter| {
            random_batch::uniform(seed, counter, low, high)
        }),
        Distribution::Normal { mean, std } => fill_batches(dst, offset, |counter| {
            random_batch::normal(seed, counter, mean, std)
        }),
    }
    Ok(())
}

/// Writes `f(offset + b)` (the values of blocks `offset + b..offset + b +
/// BLOCKS`) to elements `4b..4b + VALUES` of `dst` for `b = 0, BLOCKS, ...`,
/// the last batch truncated; tasks cover whole blocks.
fn fill_batches(dst: &mut [f32], offset: u64, f: impl Fn(u64) -> [f32; VALUES] + Sync + Send) {
    // A block costs about as much as 16 element-operations of a plain loop.
    for_rows(dst, BLOCK, 4 * BLOCK, |first_block, out| {
        for (i, chunk) in out.chunks_mut(VALUES).enumerate() {
            let counter = offset.wrapping_add((first_block + i * BLOCKS) as u64);
            let values = f(counter);
            chunk.copy_from_slice(&values[..chunk.len()]);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use verjus_core::rng;

    fn random_vec(n: usize, dist: Distribution) -> Vec<f32> {
        let mut t = Tensor::from_vec([n], vec![0f32; n]).unwrap();
        random(&mut t, dist, 42, 7).unwrap();
        t.to_vec().unwrap()
    }

    #[test]
    fn parallel_random_matches_the_sequential_definition() {
        // Large enough to split over the pool, and not a multiple of 4.
        let n = 100_003;
        let u = random_vec(
            n,
            Distribution::Uniform {
                low: -2.0,
                high: 3.0,
            },
        );
        let z = random_vec(
            n,
            Distribution::Normal {
                mean: 1.0,
                std: 0.5,
            },
        );
        for i in (0..n).step_by(997).chain([n - 1]) {
            let ui = -2.0 + 5.0 * rng::unit_uniform(rng::word_at(42, 7, i));
            assert_eq!(u[i].to_bits(), ui.to_bits(), "uniform element {i}");
            // Within the conformance suite's tolerance (polynomial ln, sin, cos).
            let zi = 1.0 + 0.5 * rng::normal_at(42, 7, i);
            assert!(
                (z[i] - zi).abs() <= 1e-5 * (1.0 + zi.abs()),
                "normal element {i}"
            );
        }
    }

    #[test]
    fn cast_truncates_toward_zero() {
        let src = Tensor::from_vec([4], vec![-1.7f32, 2.9, -0.5, 3.0]).unwrap();
        let mut dst = Tensor::from_vec([4], vec![0i64; 4]).unwrap();
        cast(&src, &mut dst).unwrap();
        assert_eq!(dst.to_vec::<i64>().unwrap(), [-1, 2, 0, 3]);
        let mut back = Tensor::from_vec([4], vec![0f32; 4]).unwrap();
        cast(&dst, &mut back).unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), [-1.0, 2.0, 0.0, 3.0]);
    }

    #[test]
    fn fill_converts_and_copy_copies() {
        let mut t = Tensor::from_vec([3], vec![0i32; 3]).unwrap();
        fill(&mut t, -2.8).unwrap();
        assert_eq!(t.to_vec::<i32>().unwrap(), [-2, -2, -2]);
        let mut u = Tensor::from_vec([3], vec![9i32; 3]).unwrap();
        copy(&t, &mut u).unwrap();
        assert_eq!(u.to_vec::<i32>().unwrap(), [-2, -2, -2]);
    }
}

//! Reference fill and cast. (Copy needs no reference: the destination must hold
//! the source's elements in order, whatever its shape.)

use verjus_core::half::{bf16, f16};
use verjus_core::{DType, HostData};

/// `len` elements of `dtype` equal to `value` converted with Rust's `as` rules
/// (rounding to nearest for `f32`, truncation toward zero for integers; ties to
/// even for bf16 and f16).
pub fn fill(dtype: DType, len: usize, value: f64) -> HostData {
    match dtype {
        DType::F32 => HostData::F32(vec![value as f32; len]),
        DType::I64 => HostData::I64(vec![value as i64; len]),
        DType::I32 => HostData::I32(vec![value as i32; len]),
        DType::BF16 | DType::F16 => narrow(dtype, &vec![round_to(dtype, value); len]),
        other => panic!("reference fill: no reference for {other}"),
    }
}

/// `value` rounded to the nearest `dtype` (bf16 or f16) value, ties to even,
/// beyond the largest finite value to infinity, NaN and infinities kept. Done
/// in f64 on the grid of the type's exponent (independent of the `half`
/// crate the backends convert with).
pub fn round_to(dtype: DType, value: f64) -> f32 {
    let (fraction_bits, min_exp, max_finite) = match dtype {
        DType::BF16 => (7, -126, (2.0 - 2f64.powi(-7)) * 2f64.powi(127)),
        DType::F16 => (10, -14, 65504.0),
        other => panic!("round_to: {other} is not a reduced-precision float"),
    };
    if !value.is_finite() || value == 0.0 {
        return value as f32;
    }
    let exponent = ((value.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let quantum = 2f64.powi(exponent.max(min_exp) - fraction_bits);
    let rounded = (value / quantum).round_ties_even() * quantum;
    if rounded.abs() > max_finite {
        return f32::INFINITY.copysign(value as f32);
    }
    rounded as f32
}

/// Values already on `dtype`'s grid, as that dtype's host data.
fn narrow(dtype: DType, exact: &[f32]) -> HostData {
    match dtype {
        DType::BF16 => HostData::BF16(exact.iter().map(|&v| bf16::from_f32(v)).collect()),
        DType::F16 => HostData::F16(exact.iter().map(|&v| f16::from_f32(v)).collect()),
        other => panic!("narrow: {other} is not a reduced-precision float"),
    }
}

/// `src` converted to `to`: float to int truncates toward zero, int to float rounds
/// to nearest, int64 to int32 keeps the low 32 bits; to and from bf16 and f16
/// through f32 (exact from them, rounded to nearest even into them).
pub fn cast(src: &HostData, to: DType) -> HostData {
    fn conv<S: Copy, T>(v: &[S], f: impl Fn(S) -> T) -> Vec<T> {
        v.iter().map(|&x| f(x)).collect()
    }
    if src.dtype().is_reduced_float() || to.is_reduced_float() {
        let wide = match src {
            HostData::F32(v) => v.clone(),
            HostData::I64(v) => conv(v, |x| x as f32),
            HostData::I32(v) => conv(v, |x| x as f32),
            HostData::BF16(v) => conv(v, bf16::to_f32),
            HostData::F16(v) => conv(v, f16::to_f32),
        };
        return match to {
            DType::BF16 | DType::F16 => {
                let rounded = conv(&wide, |x| round_to(to, f64::from(x)));
                narrow(to, &rounded)
            }
            other => cast(&HostData::F32(wide), other),
        };
    }
    match (src, to) {
        (HostData::F32(v), DType::F32) => HostData::F32(v.clone()),
        (HostData::F32(v), DType::I64) => HostData::I64(conv(v, |x| x as i64)),
        (HostData::F32(v), DType::I32) => HostData::I32(conv(v, |x| x as i32)),
        (HostData::I64(v), DType::F32) => HostData::F32(conv(v, |x| x as f32)),
        (HostData::I64(v), DType::I64) => HostData::I64(v.clone()),
        (HostData::I64(v), DType::I32) => HostData::I32(conv(v, |x| x as i32)),
        (HostData::I32(v), DType::F32) => HostData::F32(conv(v, |x| x as f32)),
        (HostData::I32(v), DType::I64) => HostData::I64(conv(v, i64::from)),
        (HostData::I32(v), DType::I32) => HostData::I32(v.clone()),
        (_, other) => panic!("reference cast: no reference for {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_cast_by_hand() {
        assert_eq!(fill(DType::I32, 2, -3.0), HostData::I32(vec![-3, -3]));
        assert_eq!(fill(DType::F32, 1, 0.1), HostData::F32(vec![0.1]));
        let src = HostData::F32(vec![-2.7, 2.7, 0.5, -0.5]);
        assert_eq!(cast(&src, DType::I64), HostData::I64(vec![-2, 2, 0, 0]));
        assert_eq!(
            cast(&HostData::I64(vec![-5, 1 << 40]), DType::F32),
            HostData::F32(vec![-5.0, 1_099_511_627_776.0])
        );
    }
}

//! Reference fill and cast. (Copy needs no reference: the destination must hold
//! the source's elements in order, whatever its shape.)

use verjus_core::{DType, HostData};

/// `len` elements of `dtype` equal to `value` converted with Rust's `as` rules
/// (rounding to nearest for `f32`, truncation toward zero for integers).
pub fn fill(dtype: DType, len: usize, value: f64) -> HostData {
    match dtype {
        DType::F32 => HostData::F32(vec![value as f32; len]),
        DType::I64 => HostData::I64(vec![value as i64; len]),
        DType::I32 => HostData::I32(vec![value as i32; len]),
        other => panic!("reference fill: no reference for {other}"),
    }
}

/// `src` converted to `to`: float to int truncates toward zero, int to float rounds
/// to nearest, int64 to int32 keeps the low 32 bits.
pub fn cast(src: &HostData, to: DType) -> HostData {
    fn conv<S: Copy, T>(v: &[S], f: impl Fn(S) -> T) -> Vec<T> {
        v.iter().map(|&x| f(x)).collect()
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

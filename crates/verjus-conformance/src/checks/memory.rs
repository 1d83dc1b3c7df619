//! Checks of fill, cast and copy: exact results for every dtype.

use crate::compare::{equal, every_case};
use crate::reference::memory as reference;
use crate::transfer::{get, put_vec, zeros, Context};
use verjus_core::{ops, Backend, DType, HostData, Tensor};

const SHAPES: [&[usize]; 5] = [&[0], &[1], &[17], &[3, 5], &[]];

const DTYPES: [DType; 5] = [DType::F32, DType::I64, DType::I32, DType::BF16, DType::F16];

/// f32 values whose rounding to bf16 and f16 pins down the rules: ties to even
/// (and just above a tie), f16's overflow to infinity at 65520, subnormals of
/// both, signed zero, NaN and infinities.
const ROUNDING_CASES: [f32; 16] = [
    1.003_906_3,    // 1 + 2^-8: a bf16 tie, to 1
    1.011_718_8,    // 1 + 3 * 2^-8: a bf16 tie, to 1 + 2^-6
    1.000_488_3,    // 1 + 2^-11: an f16 tie, to 1
    1.001_464_8,    // 1 + 3 * 2^-11: an f16 tie, to 1 + 2^-9
    65519.0,        // f16: 65504
    65520.0,        // f16: the tie with 65536, to infinity
    -1.0e6,         // f16: -infinity
    2.980_232_2e-8, // 2^-25: f16's half-smallest subnormal, to 0
    8.940_697e-8,   // 3 * 2^-25: to f16's 2^-23
    1.0e-40,        // an f32 subnormal: bf16 subnormal
    -0.0,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    3.389_531_4e38, // above bf16's largest finite value: infinity
    -2.5,
];

/// Host data of `dtype` with distinct, exactly representable values.
fn sample(dtype: DType, n: usize, seed: u64) -> HostData {
    let f = crate::inputs::uniform(seed, &[n], -100.0, 100.0).data;
    match dtype {
        DType::I64 => HostData::I64(f.iter().map(|&v| (v * 1000.0) as i64).collect()),
        DType::I32 => HostData::I32(f.iter().map(|&v| (v * 1000.0) as i32).collect()),
        DType::BF16 | DType::F16 => reference::cast(&sample(DType::F32, n, seed), dtype),
        // Halves too, to pin down truncation toward zero in casts.
        _ => HostData::F32(
            f.iter()
                .enumerate()
                .map(|(i, &v)| if i % 3 == 0 { v.round() + 0.5 } else { v })
                .collect(),
        ),
    }
}

/// `data` uploaded as a tensor of its own dtype.
pub(super) fn upload(
    be: &dyn Backend,
    what: &str,
    dims: &[usize],
    data: HostData,
) -> Result<Tensor, String> {
    match data {
        HostData::F32(v) => put_vec(be, what, dims, v),
        HostData::I64(v) => put_vec(be, what, dims, v),
        HostData::I32(v) => put_vec(be, what, dims, v),
        HostData::BF16(v) => put_vec(be, what, dims, v),
        HostData::F16(v) => put_vec(be, what, dims, v),
    }
}

fn download(be: &dyn Backend, what: &str, t: &Tensor) -> Result<HostData, String> {
    Ok(match t.dtype() {
        DType::I64 => HostData::I64(get(be, what, t)?),
        DType::I32 => HostData::I32(get(be, what, t)?),
        DType::BF16 => HostData::BF16(get(be, what, t)?),
        DType::F16 => HostData::F16(get(be, what, t)?),
        _ => HostData::F32(get(be, what, t)?),
    })
}

/// A float's bits, every NaN alike (backends may give a NaN another payload).
fn bits_up_to_nan(v: f32) -> u32 {
    if v.is_nan() {
        u32::MAX
    } else {
        v.to_bits()
    }
}

/// Exact equality of host data (f32 compared by value; bf16 and f16 by bits,
/// signed zeros apart, any NaN equal to any NaN).
fn same(what: &str, dims: &[usize], expected: &HostData, actual: &HostData) -> Result<(), String> {
    let bits = |v: &[f32]| v.iter().map(|&x| bits_up_to_nan(x)).collect::<Vec<_>>();
    let wide = |h: &HostData| match h {
        HostData::BF16(v) => bits(&v.iter().map(|x| x.to_f32()).collect::<Vec<_>>()),
        HostData::F16(v) => bits(&v.iter().map(|x| x.to_f32()).collect::<Vec<_>>()),
        _ => Vec::new(),
    };
    match (expected, actual) {
        (HostData::F32(e), HostData::F32(a)) => equal(what, dims, e, a),
        (HostData::I64(e), HostData::I64(a)) => equal(what, dims, e, a),
        (HostData::I32(e), HostData::I32(a)) => equal(what, dims, e, a),
        (HostData::BF16(_), HostData::BF16(_)) | (HostData::F16(_), HostData::F16(_)) => {
            equal(what, dims, &wide(expected), &wide(actual))
        }
        _ => Err(format!(
            "{what}: expected {} elements, got {}",
            expected.dtype(),
            actual.dtype()
        )),
    }
}

/// `ops::fill` overwrites every element with the value converted to the dtype.
pub fn fill(be: &dyn Backend) -> Result<(), String> {
    let values = [
        (DType::F32, 0.1),
        (DType::F32, -2.5e3),
        (DType::I64, -3.0),
        (DType::I32, 7.0),
        (DType::BF16, 0.1),
        (DType::BF16, -3.0e38),
        (DType::F16, 0.1),
        (DType::F16, 7.0e4),
    ];
    let cases = values
        .iter()
        .flat_map(|&v| SHAPES.iter().map(move |&s| (v, s)));
    every_case(cases, |((dtype, value), dims)| {
        let what = format!("fill {dtype} {dims:?} with {value}");
        let n = crate::array::numel(dims);
        let mut dst = upload(be, &what, dims, sample(dtype, n, 1))?;
        ops::fill(be, &mut dst, value).context(&what)?;
        same(
            &what,
            dims,
            &reference::fill(dtype, n, value),
            &download(be, &what, &dst)?,
        )
    })
}

/// `ops::cast` between every pair of dtypes (float to int truncates toward
/// zero), and the rounding into bf16 and f16 at ties, range ends and specials.
pub fn cast(be: &dyn Backend) -> Result<(), String> {
    every_case([DType::BF16, DType::F16], |to| {
        let what = format!("cast float32 -> {to} of rounding cases");
        let src_data = HostData::F32(ROUNDING_CASES.to_vec());
        let dims = [ROUNDING_CASES.len()];
        let src = upload(be, &what, &dims, src_data.clone())?;
        let mut dst = zeros(be, &what, &dims, to)?;
        ops::cast(be, &src, &mut dst).context(&what)?;
        same(
            &what,
            &dims,
            &reference::cast(&src_data, to),
            &download(be, &what, &dst)?,
        )
    })?;
    let cases = DTYPES.iter().flat_map(|&from| {
        DTYPES
            .iter()
            .flat_map(move |&to| SHAPES.iter().map(move |&s| (from, to, s)))
    });
    every_case(cases, |(from, to, dims)| {
        let what = format!("cast {from} -> {to} {dims:?}");
        let src_data = sample(from, crate::array::numel(dims), 2);
        let src = upload(be, &what, dims, src_data.clone())?;
        let mut dst = zeros(be, &what, dims, to)?;
        ops::cast(be, &src, &mut dst).context(&what)?;
        same(
            &what,
            dims,
            &reference::cast(&src_data, to),
            &download(be, &what, &dst)?,
        )
    })
}

/// `ops::copy` keeps the element order, also into a destination of another shape.
pub fn copy(be: &dyn Backend) -> Result<(), String> {
    let shapes: [(&[usize], &[usize]); 4] = [
        (&[2, 3], &[3, 2]),
        (&[17], &[17]),
        (&[0], &[0, 4]),
        (&[1], &[]),
    ];
    let cases = DTYPES
        .into_iter()
        .flat_map(|d| shapes.iter().map(move |&s| (d, s)));
    every_case(cases, |(dtype, (src_dims, dst_dims))| {
        let what = format!("copy {dtype} {src_dims:?} -> {dst_dims:?}");
        let data = sample(dtype, crate::array::numel(src_dims), 3);
        let src = upload(be, &what, src_dims, data.clone())?;
        let mut dst = zeros(be, &what, dst_dims, dtype)?;
        ops::copy(be, &src, &mut dst).context(&what)?;
        same(&what, dst_dims, &data, &download(be, &what, &dst)?)
    })
}

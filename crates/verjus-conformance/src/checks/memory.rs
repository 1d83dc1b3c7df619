//! Checks of fill, cast and copy: exact results for every dtype.

use crate::compare::{equal, every_case};
use crate::reference::memory as reference;
use crate::transfer::{get, put_vec, zeros, Context};
use verjus_core::{ops, Backend, DType, HostData, Tensor};

const SHAPES: [&[usize]; 5] = [&[0], &[1], &[17], &[3, 5], &[]];

/// Host data of `dtype` with distinct, exactly representable values.
fn sample(dtype: DType, n: usize, seed: u64) -> HostData {
    let f = crate::inputs::uniform(seed, &[n], -100.0, 100.0).data;
    match dtype {
        DType::I64 => HostData::I64(f.iter().map(|&v| (v * 1000.0) as i64).collect()),
        DType::I32 => HostData::I32(f.iter().map(|&v| (v * 1000.0) as i32).collect()),
        // Halves too, to pin down truncation toward zero in casts.
        _ => HostData::F32(
            f.iter()
                .enumerate()
                .map(|(i, &v)| if i % 3 == 0 { v.round() + 0.5 } else { v })
                .collect(),
        ),
    }
}

fn upload(be: &dyn Backend, what: &str, dims: &[usize], data: HostData) -> Result<Tensor, String> {
    match data {
        HostData::F32(v) => put_vec(be, what, dims, v),
        HostData::I64(v) => put_vec(be, what, dims, v),
        HostData::I32(v) => put_vec(be, what, dims, v),
    }
}

fn download(be: &dyn Backend, what: &str, t: &Tensor) -> Result<HostData, String> {
    Ok(match t.dtype() {
        DType::I64 => HostData::I64(get(be, what, t)?),
        DType::I32 => HostData::I32(get(be, what, t)?),
        _ => HostData::F32(get(be, what, t)?),
    })
}

/// Exact equality of host data (f32 compared by value).
fn same(what: &str, dims: &[usize], expected: &HostData, actual: &HostData) -> Result<(), String> {
    match (expected, actual) {
        (HostData::F32(e), HostData::F32(a)) => equal(what, dims, e, a),
        (HostData::I64(e), HostData::I64(a)) => equal(what, dims, e, a),
        (HostData::I32(e), HostData::I32(a)) => equal(what, dims, e, a),
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

/// `ops::cast` between every pair of dtypes (float to int truncates toward zero).
pub fn cast(be: &dyn Backend) -> Result<(), String> {
    let dtypes = [DType::F32, DType::I64, DType::I32];
    let cases = dtypes.iter().flat_map(|&from| {
        dtypes
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
    let cases = [DType::F32, DType::I64, DType::I32]
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

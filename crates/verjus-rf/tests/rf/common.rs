//! Helpers shared by the RF tests: tensors on the native backend, host
//! values, deterministic random data, entry slicing for the
//! batched-vs-single-entry checks, and a finite-difference gradient check.

use verjus_core::{rng, BackendRef, Tensor};
use verjus_rf::{batch_dim, Dim, RfDType, RfTensor};

pub fn be() -> BackendRef {
    verjus_native::backend()
}

/// Deterministic values uniform in `[lo, hi)`.
pub fn uniform(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n)
        .map(|i| lo + (hi - lo) * rng::unit_uniform(rng::word_at(seed, 0, i)))
        .collect()
}

/// A float32 tensor with `dims` of raw `shape`.
pub fn float(dims: &[&Dim], shape: &[usize], data: Vec<f32>) -> RfTensor {
    let dims = dims.iter().map(|d| (*d).clone()).collect();
    let value = Tensor::from_vec(shape.to_vec(), data).unwrap();
    RfTensor::from_tensor(value, dims, None, be(), false).unwrap()
}

/// Like [`float`], requiring a gradient.
pub fn leaf(dims: &[&Dim], shape: &[usize], data: Vec<f32>) -> RfTensor {
    let dims = dims.iter().map(|d| (*d).clone()).collect();
    let value = Tensor::from_vec(shape.to_vec(), data).unwrap();
    RfTensor::from_tensor(value, dims, None, be(), true).unwrap()
}

/// Lengths over `[batch]` (int32).
pub fn lengths(values: &[i32]) -> RfTensor {
    let value = Tensor::from_vec([values.len()], values.to_vec()).unwrap();
    RfTensor::from_tensor(value, vec![batch_dim()], None, be(), false).unwrap()
}

/// A dynamic time dim over the batch.
pub fn time(values: &[i32]) -> Dim {
    Dim::new_dynamic(lengths(values), "time").unwrap()
}

/// The values as f32 (bools as 0/1, ints converted).
pub fn vals(t: &RfTensor) -> Vec<f32> {
    let host = t.to_host().unwrap();
    match t.dtype() {
        RfDType::Float32 | RfDType::Bool => host.to_vec::<f32>().unwrap(),
        RfDType::Int32 => host
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .map(|&v| v as f32)
            .collect(),
        RfDType::Int64 => host
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .map(|&v| v as f32)
            .collect(),
        RfDType::BFloat16 => host
            .to_vec::<verjus_core::half::bf16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect(),
        RfDType::Float16 => host
            .to_vec::<verjus_core::half::f16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect(),
    }
}

pub fn names(t: &RfTensor) -> Vec<String> {
    t.dims().iter().map(|d| d.name().to_owned()).collect()
}

pub fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: lengths differ: {got:?} vs {want:?}"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g == w) || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// The entries of `data` (raw `sizes` over `dims`) with batch index `b`
/// and, when `dims` has `time`, time index below `len`, in row-major order;
/// and the sizes of that slice.
pub fn slice_entry(
    data: &[f32],
    dims: &[Dim],
    sizes: &[usize],
    b: usize,
    time: Option<(&Dim, usize)>,
) -> (Vec<f32>, Vec<usize>) {
    let batch = batch_dim();
    // The size of each axis in the slice; an index is kept when below it
    // (the batch axis keeps exactly `b`).
    let keep_below: Vec<usize> = dims
        .iter()
        .zip(sizes)
        .map(|(d, &n)| match time {
            Some((t, len)) if t == d => len,
            _ => n,
        })
        .collect();
    let mut out = Vec::new();
    let mut index = vec![0usize; sizes.len()];
    for &v in data {
        let keep = dims
            .iter()
            .zip(&index)
            .zip(&keep_below)
            .all(|((d, &i), &n)| if *d == batch { i == b } else { i < n });
        if keep {
            out.push(v);
        }
        for k in (0..sizes.len()).rev() {
            index[k] += 1;
            if index[k] < sizes[k] {
                break;
            }
            index[k] = 0;
        }
    }
    let new_sizes = dims
        .iter()
        .zip(keep_below)
        .map(|(d, n)| if *d == batch { 1 } else { n })
        .collect();
    (out, new_sizes)
}

/// The batched-vs-single-entry check: `f` on inputs over `[batch, time,
/// ...]` (time dynamic with `lens`) must give, for every entry `b`, the
/// same values on the entry alone (batch of 1, time cut to its own length,
/// a new time dim) as the batched output's slice.
pub fn check_single_entry(
    name: &str,
    lens: &[i32],
    inputs: &[(Vec<Dim>, Vec<usize>, Vec<f32>)],
    time: &Dim,
    f: impl Fn(&[RfTensor], &Dim) -> RfTensor,
) {
    check_single_entry_new_dim(name, lens, inputs, time, |x, t| (f(x, t), t.clone()));
}

fn tensor(dims: &[Dim], sizes: &[usize], v: &[f32]) -> RfTensor {
    let value = Tensor::from_vec(sizes.to_vec(), v.to_vec()).unwrap();
    RfTensor::from_tensor(value, dims.to_vec(), None, be(), false).unwrap()
}

/// Checks the tape's gradients of `L = sum(f(inputs) * r)` over the finite
/// outputs, for fixed random weights `r`, against central differences.
pub fn gradcheck(
    name: &str,
    inputs: &[(Vec<Dim>, Vec<usize>, Vec<f32>)],
    f: impl Fn(&[RfTensor]) -> RfTensor,
) {
    const EPS: f32 = 1e-2;
    let make = |values: &[Vec<f32>], grad: bool| -> Vec<RfTensor> {
        inputs
            .iter()
            .zip(values)
            .map(|((d, s, _), v)| {
                let value = Tensor::from_vec(s.to_vec(), v.clone()).unwrap();
                RfTensor::from_tensor(value, d.clone(), None, be(), grad).unwrap()
            })
            .collect()
    };
    let base: Vec<Vec<f32>> = inputs.iter().map(|(_, _, v)| v.clone()).collect();
    let leaves = make(&base, true);
    let y = f(&leaves);
    let yv = vals(&y);
    let r: Vec<f32> = uniform(77, yv.len(), -1.0, 1.0)
        .into_iter()
        .zip(&yv)
        .map(|(r, y)| if y.is_finite() { r } else { 0.0 })
        .collect();
    let loss = |values: &[Vec<f32>]| -> f64 {
        let y = vals(&f(&make(values, false)));
        y.iter()
            .zip(&r)
            .filter(|(y, _)| y.is_finite())
            .map(|(&y, &r)| y as f64 * r as f64)
            .sum()
    };
    let seed = Tensor::from_vec(y.sizes(), r.clone()).unwrap();
    y.var().backward_with(seed).unwrap();
    for (k, x) in leaves.iter().enumerate() {
        let analytic = x
            .var()
            .grad()
            .map(|g| g.to_vec::<f32>().unwrap())
            .unwrap_or_else(|| vec![0.0; base[k].len()]);
        for i in 0..base[k].len() {
            let mut plus = base.clone();
            plus[k][i] += EPS;
            let mut minus = base.clone();
            minus[k][i] -= EPS;
            let numeric = ((loss(&plus) - loss(&minus)) / (2.0 * EPS as f64)) as f32;
            let a = analytic[i];
            assert!(
                a.is_finite() && (a - numeric).abs() <= 2e-2 * (1.0 + numeric.abs()),
                "{name}: input {k} element {i}: tape {a}, finite differences {numeric}"
            );
        }
    }
}

/// The lengths of `dim` per batch entry (`n` entries): its lengths, or its
/// static size for every entry.
pub fn dim_lengths(dim: &Dim, n: usize) -> Vec<usize> {
    match dim.lengths() {
        Some(l) => vals(&l).iter().map(|&v| v as usize).collect(),
        None => vec![dim.size().unwrap(); n],
    }
}

/// [`check_single_entry`] for ops that make a new dim from `time`: `f`
/// returns the output and its new dim (which may be `time` itself). For
/// every entry, the entry alone must give a new dim of the entry's length
/// in the batched new dim, and the same values within it.
pub fn check_single_entry_new_dim(
    name: &str,
    lens: &[i32],
    inputs: &[(Vec<Dim>, Vec<usize>, Vec<f32>)],
    time: &Dim,
    f: impl Fn(&[RfTensor], &Dim) -> (RfTensor, Dim),
) {
    let batched: Vec<RfTensor> = inputs.iter().map(|(d, s, v)| tensor(d, s, v)).collect();
    let (y, yd) = f(&batched, time);
    let (yv, ysizes) = (vals(&y), y.sizes());
    let out_lens = dim_lengths(&yd, lens.len());
    for (b, &len) in lens.iter().enumerate() {
        let len = len as usize;
        let t1 = Dim::new_dynamic(lengths(&[len as i32]), "time1").unwrap();
        let swap = |dims: &[Dim]| -> Vec<Dim> {
            dims.iter()
                .map(|d| if d == time { t1.clone() } else { d.clone() })
                .collect()
        };
        let single: Vec<RfTensor> = inputs
            .iter()
            .map(|(d, s, v)| {
                let (v1, s1) = slice_entry(v, d, s, b, Some((time, len)));
                tensor(&swap(d), &s1, &v1)
            })
            .collect();
        let (y1, y1d) = f(&single, &t1);
        let what = format!("{name}, entry {b} (length {len})");
        assert_eq!(dim_lengths(&y1d, 1)[0], out_lens[b], "{what}: new length");
        let order: Vec<Dim> = swap(y.dims())
            .into_iter()
            .map(|d| if d == yd { y1d.clone() } else { d })
            .collect();
        let y1 = y1
            .copy_transpose(&order)
            .unwrap_or_else(|e| panic!("{what}: dims {:?} vs {:?}: {e}", y1.dims(), y.dims()));
        let (got, _) = slice_entry(
            &vals(&y1),
            &order,
            &y1.sizes(),
            0,
            Some((&y1d, out_lens[b])),
        );
        let (want, _) = slice_entry(&yv, y.dims(), &ysizes, b, Some((&yd, out_lens[b])));
        assert_close(&what, &got, &want, 1e-5);
    }
}

//! Autocast of matrix products (`verjus_core::autograd::autocast`): the
//! product of the rounded operands, float32 gradients through the rounded
//! values, and half the tape bytes for the activations matrix products keep.
//! One test in its own binary: the tape's counters are process-wide.

use verjus_core::autograd::{autocast, reset_tape_saved_peak, tape_saved_stats, Var};
use verjus_core::half::{bf16, f16};
use verjus_core::{BackendRef, DType, Tensor};

fn be() -> BackendRef {
    verjus_native::backend()
}

fn values(dims: [usize; 2], seed: u32) -> Vec<f32> {
    (0..dims[0] * dims[1])
        .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 333.0 - 1.5)
        .collect()
}

/// `loss = sum(((x @ w0) @ w)^2)`: the loss's value, `dx`, `dw0`, `dw`, and
/// the tape bytes saved after the forward.
fn step(x: &[f32], w0: &[f32], w: &[f32]) -> (Vec<f32>, [Vec<f32>; 3], usize) {
    let leaf = |dims: [usize; 2], v: &[f32]| {
        Var::leaf(Tensor::from_vec(dims, v.to_vec()).unwrap(), be()).unwrap()
    };
    let (x, w0, w) = (leaf(X, x), leaf(W0, w0), leaf(W, w));
    let before = tape_saved_stats().current;
    let h = x.matmul(&w0).unwrap();
    let y = h.matmul(&w).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    let loss = y.mul(&y).unwrap().sum_all().unwrap();
    drop((h, y));
    let saved = tape_saved_stats().current - before;
    loss.backward().unwrap();
    let grad = |v: &Var| v.grad().unwrap().to_vec::<f32>().unwrap();
    let value = loss.value().to_vec::<f32>().unwrap();
    (value, [grad(&x), grad(&w0), grad(&w)], saved)
}

const X: [usize; 2] = [64, 16];
const W0: [usize; 2] = [16, 16];
const W: [usize; 2] = [16, 4];

#[test]
fn autocast_multiplies_rounded_operands_with_float32_gradients() {
    reset_tape_saved_peak();
    let (x, w0, w) = (values(X, 7), values(W0, 3), values(W, 11));
    let (_, _, saved_f32) = step(&x, &w0, &w);
    for (dtype, round) in [
        (
            DType::BF16,
            (|v: f32| bf16::from_f32(v).to_f32()) as fn(f32) -> f32,
        ),
        (DType::F16, |v: f32| f16::from_f32(v).to_f32()),
    ] {
        let rounded = |v: &[f32]| v.iter().map(|&a| round(a)).collect::<Vec<_>>();
        let (loss, grads, saved) = {
            let _scope = autocast(Some(dtype)).unwrap();
            step(&x, &w0, &w)
        };
        // By hand, in float32 on the rounded values: h = round(x_r @ w0_r),
        // y = h @ w_r, and the gradients through them (the casts hand
        // gradients on unchanged).
        let leaf = |dims: [usize; 2], v: Vec<f32>| {
            Var::leaf(Tensor::from_vec(dims, v).unwrap(), be()).unwrap()
        };
        let (xr, w0r) = (leaf(X, rounded(&x)), leaf(W0, rounded(&w0)));
        let h_exact = xr.matmul(&w0r).unwrap();
        let hr = leaf([64, 16], rounded(&h_exact.value().to_vec::<f32>().unwrap()));
        let wr = leaf(W, rounded(&w));
        let y = hr.matmul(&wr).unwrap();
        let expected = y.mul(&y).unwrap().sum_all().unwrap();
        assert_eq!(loss, expected.value().to_vec::<f32>().unwrap(), "{dtype}");
        expected.backward().unwrap();
        h_exact
            .backward_with(hr.grad().unwrap().try_clone_host().unwrap())
            .unwrap();
        let grad = |v: &Var| v.grad().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(grads, [grad(&xr), grad(&w0r), grad(&wr)], "{dtype}");
        // The tape keeps the hidden activation in 2 bytes instead of 4, and
        // 2-byte copies of the three float32 leaves (which it otherwise shares).
        let numel = |d: [usize; 2]| d[0] * d[1];
        let leaves = 2 * (numel(X) + numel(W0) + numel(W));
        assert_eq!(saved + 2 * numel([64, 16]), saved_f32 + leaves, "{dtype}");
    }
    // Outside the scope, float32 again; a non-reduced dtype is refused.
    assert_eq!(step(&x, &w0, &w).2, saved_f32);
    let err = autocast(Some(DType::I32)).unwrap_err().to_string();
    assert!(
        err.contains("bfloat16 or float16") && err.contains("int32"),
        "{err}"
    );
}

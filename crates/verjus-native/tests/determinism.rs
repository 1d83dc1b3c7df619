//! The native ops that sum partial results across threads give the same bits
//! run after run and with any number of threads: their partials cover fixed
//! groups and are merged in order, never grouped by rayon's work stealing
//! (which made two identical trainings differ in the last bits).

use verjus_conformance::inputs::uniform;
use verjus_core::ops::{self, Conv2dParams, ReduceOp};
use verjus_core::{DType, Shape, Tensor};

fn tensor(seed: u64, dims: &[usize]) -> Tensor {
    Tensor::from_vec(dims.to_vec(), uniform(seed, dims, -1.0, 1.0).data).unwrap()
}

/// `f()`'s result, each time on a new pool of `threads` threads.
fn on_threads(threads: usize, f: impl Fn() -> Vec<f32> + Send + Sync) -> Vec<f32> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(f)
}

fn same_bits_everywhere(what: &str, f: impl Fn() -> Vec<f32> + Send + Sync + Copy) {
    let first = on_threads(1, f);
    for threads in [2, 3, 4, 7] {
        for _ in 0..5 {
            let again = on_threads(threads, f);
            let same = first
                .iter()
                .zip(&again)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{what}: other bits on {threads} threads");
        }
    }
}

#[test]
fn conv2d_filter_gradient_is_the_same_on_any_threads() {
    let be = verjus_native::backend();
    let (x, dy) = (tensor(1, &[37, 3, 9, 9]), tensor(2, &[37, 5, 9, 9]));
    let params = Conv2dParams {
        padding: [1, 1],
        ..Conv2dParams::default()
    };
    same_bits_everywhere("conv2d_backward_filter", || {
        let mut dw = ops::zeros(&*be, &Shape::new([5, 3, 3, 3]).unwrap(), DType::F32).unwrap();
        ops::conv2d_backward_filter(&*be, &x, &dy, params, &mut dw).unwrap();
        dw.to_vec::<f32>().unwrap()
    });
}

#[test]
fn a_sum_over_a_long_axis_is_the_same_on_any_threads() {
    let be = verjus_native::backend();
    let x = tensor(3, &[40_000, 3]);
    same_bits_everywhere("reduce sum", || {
        let mut y = ops::zeros(&*be, &Shape::new([3]).unwrap(), DType::F32).unwrap();
        ops::reduce(&*be, ReduceOp::Sum, &x, &[0], &mut y).unwrap();
        y.to_vec::<f32>().unwrap()
    });
}

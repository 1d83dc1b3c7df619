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
    same_bits(what, f, true);
}

/// `f()` gives the same bits run after run on 1, 2, 3, 4 and 7 threads, and
/// (`across_threads`) the same on all of them.
fn same_bits(what: &str, f: impl Fn() -> Vec<f32> + Send + Sync + Copy, across_threads: bool) {
    let first = on_threads(1, f);
    for threads in [1, 2, 3, 4, 7] {
        let want = if across_threads {
            first.clone()
        } else {
            on_threads(threads, f)
        };
        for _ in 0..5 {
            let again = on_threads(threads, f);
            let same = want
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

#[test]
fn an_lstm_and_its_gradients_are_the_same_on_any_threads() {
    // Not yet with AVX-512: each thread runs its own rows and sums their
    // weight gradients, merged per thread (lstm::Split::Rows), so its bits
    // are checked run after run on each number of threads only.
    let row_split = cfg!(target_arch = "x86_64") && std::arch::is_x86_feature_detected!("avx512f");
    if row_split {
        eprintln!("AVX-512: the LSTM's bits are compared on equal numbers of threads only");
    }
    let be = verjus_native::backend();
    let dev = &*be;
    // Blocked and threaded (B = 64, H = 72 with a partial last block), lengths mixed.
    let (t, b, f, h) = (6, 64, 7, 72);
    let g = 4 * h;
    let [x, w_ih, w_hh, b_ih, b_hh, dy] = [
        tensor(4, &[t, b, f]),
        tensor(5, &[g, f]),
        tensor(6, &[g, h]),
        tensor(7, &[g]),
        tensor(8, &[g]),
        tensor(9, &[t, b, h]),
    ];
    let lengths: Vec<i32> = (0..b).map(|i| (i % (t + 1)) as i32).collect();
    let lengths = Tensor::from_vec([b], lengths).unwrap();
    same_bits(
        "lstm_sequence and its backward",
        || {
            let args = ops::LstmArgs {
                x: &x,
                lengths: Some(&lengths),
                h0: None,
                c0: None,
                w_ih: &w_ih,
                w_hh: &w_hh,
                b_ih: Some(&b_ih),
                b_hh: Some(&b_hh),
            };
            let zeros =
                |dims: &[usize]| ops::zeros(dev, &Shape::new(dims).unwrap(), DType::F32).unwrap();
            let plan = ops::lstm_plan("lstm_sequence", dev, &args, false).unwrap();
            let mut reserve = zeros(&[ops::lstm_reserve_len(dev, &plan).unwrap()]);
            let (mut y, mut h_n, mut c_n) = (zeros(&[t, b, h]), zeros(&[b, h]), zeros(&[b, h]));
            let out = ops::LstmOutputs {
                y: &mut y,
                h_n: Some(&mut h_n),
                c_n: &mut c_n,
                reserve: &mut reserve,
            };
            ops::lstm_sequence(dev, &args, out).unwrap();
            let mut grads = [
                zeros(&[t, b, f]),
                zeros(&[g, f]),
                zeros(&[g, h]),
                zeros(&[g]),
            ];
            let [dx, dw_ih, dw_hh, db_ih] = grads.each_mut();
            let dout = ops::LstmOutputGrads {
                dy: Some(&dy),
                dh_n: None,
                dc_n: None,
            };
            let want = ops::LstmGrads {
                dx: Some(dx),
                dh0: None,
                dc0: None,
                dw_ih: Some(dw_ih),
                dw_hh: Some(dw_hh),
                db_ih: Some(db_ih),
                db_hh: None,
            };
            ops::lstm_sequence_backward(dev, &args, &y, &reserve, &dout, want).unwrap();
            [&y, &h_n, &c_n]
                .into_iter()
                .chain(&grads)
                .flat_map(|t| t.to_vec::<f32>().unwrap())
                .collect()
        },
        !row_split,
    );
}

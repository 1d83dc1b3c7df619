//! Which ops a gradient checkpoint scope runs again in backward: only the
//! scope's own, never an op after it that reads a value made in it (the matmul
//! reading a noisy weight, the LSTM reading a dropped-out recurrent weight).
//! A backend that counts its kernel calls wraps the native one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use verjus_core::autograd::{checkpoint_scope, LstmVars, Var};
use verjus_core::ops::{
    BinaryPlan, Distribution, DropoutPlan, GemmPlan, LstmArgs, LstmGrads, LstmOutputGrads,
    LstmOutputs, LstmPlan, ReducePlan,
};
use verjus_core::{rng, Backend, BackendRef, DType, Device, Result, Shape, Tensor};

/// How often each counted kernel ran.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    gemm: usize,
    random: usize,
    binary: usize,
    dropout: usize,
    lstm_sequence: usize,
}

/// The native backend, counting the kernels of [`Counts`].
#[derive(Debug)]
struct Counting {
    inner: BackendRef,
    gemm: AtomicUsize,
    random: AtomicUsize,
    binary: AtomicUsize,
    dropout: AtomicUsize,
    lstm_sequence: AtomicUsize,
}

impl Counting {
    fn new() -> Arc<Counting> {
        Arc::new(Counting {
            inner: verjus_native::backend(),
            gemm: AtomicUsize::new(0),
            random: AtomicUsize::new(0),
            binary: AtomicUsize::new(0),
            dropout: AtomicUsize::new(0),
            lstm_sequence: AtomicUsize::new(0),
        })
    }

    fn counts(&self) -> Counts {
        Counts {
            gemm: self.gemm.load(Ordering::SeqCst),
            random: self.random.load(Ordering::SeqCst),
            binary: self.binary.load(Ordering::SeqCst),
            dropout: self.dropout.load(Ordering::SeqCst),
            lstm_sequence: self.lstm_sequence.load(Ordering::SeqCst),
        }
    }
}

fn tick(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::SeqCst);
}

impl Backend for Counting {
    fn name(&self) -> &str {
        "counting-native"
    }
    fn device(&self) -> Device {
        self.inner.device()
    }
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        self.inner.alloc_zeroed(shape, dtype)
    }
    fn upload(&self, host: &Tensor) -> Result<Tensor> {
        self.inner.upload(host)
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        self.inner.download(t)
    }
    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        self.inner.copy(src, dst)
    }
    fn fill(&self, dst: &mut Tensor, value: f64) -> Result<()> {
        self.inner.fill(dst, value)
    }
    fn random(&self, dst: &mut Tensor, dist: Distribution, seed: u64, offset: u64) -> Result<()> {
        tick(&self.random);
        self.inner.random(dst, dist, seed, offset)
    }
    fn gemm(&self, plan: &GemmPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        tick(&self.gemm);
        self.inner.gemm(plan, a, b, c)
    }
    fn binary(&self, plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        tick(&self.binary);
        self.inner.binary(plan, a, b, c)
    }
    fn binary_backward(
        &self,
        plan: &BinaryPlan,
        a: &Tensor,
        b: &Tensor,
        dy: &Tensor,
        da: Option<&mut Tensor>,
        db: Option<&mut Tensor>,
    ) -> Result<()> {
        self.inner.binary_backward(plan, a, b, dy, da, db)
    }
    fn reduce(&self, plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        self.inner.reduce(plan, x, y)
    }
    fn reduce_backward(
        &self,
        plan: &ReducePlan,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        self.inner.reduce_backward(plan, x, y, dy, dx)
    }
    fn dropout(&self, plan: &DropoutPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        tick(&self.dropout);
        self.inner.dropout(plan, x, y)
    }
    fn lstm_reserve_len(&self, plan: &LstmPlan) -> Result<usize> {
        self.inner.lstm_reserve_len(plan)
    }
    fn lstm_sequence(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        out: LstmOutputs<'_>,
    ) -> Result<()> {
        tick(&self.lstm_sequence);
        self.inner.lstm_sequence(plan, args, out)
    }
    fn lstm_sequence_backward(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        y: &Tensor,
        reserve: &Tensor,
        dout: &LstmOutputGrads<'_>,
        grads: LstmGrads<'_>,
    ) -> Result<()> {
        self.inner
            .lstm_sequence_backward(plan, args, y, reserve, dout, grads)
    }
}

fn value(be: &BackendRef, seed: u64, dims: &[usize], requires_grad: bool) -> Var {
    let n = dims.iter().product();
    let data = (0..n)
        .map(|i| rng::unit_uniform(rng::word_at(seed, 0, i)) - 0.5)
        .collect();
    let t = Tensor::from_vec(dims.to_vec(), data).unwrap();
    Var::new(t, be.clone(), requires_grad).unwrap()
}

/// The kernel counts of one forward and backward of `f` on a fresh counting
/// backend, plain and with `f`'s scope on.
fn counts(f: impl Fn(&BackendRef, bool) -> Result<Var>) -> (Counts, Counts) {
    let run = |scoped| {
        let counting = Counting::new();
        let be: BackendRef = counting.clone();
        let loss = f(&be, scoped).unwrap();
        loss.backward().unwrap();
        counting.counts()
    };
    (run(false), run(true))
}

/// `x @ (w + noise)` summed, the noisy weight made in a scope when `scoped`.
fn noisy_linear(be: &BackendRef, scoped: bool, x_needs_grad: bool) -> Result<Var> {
    let (x, w) = (
        value(be, 1, &[4, 8], x_needs_grad),
        value(be, 2, &[8, 6], true),
    );
    let w = {
        let _scope = scoped.then(checkpoint_scope);
        let std = Distribution::Normal {
            mean: 0.0,
            std: 0.1,
        };
        w.add(&Var::random(&w.shape(), std, 3, 0, be)?)?
    };
    x.matmul(&w)?.sum_all()
}

#[test]
fn the_matmul_after_a_weight_noise_scope_is_not_run_again() {
    let (plain, scoped) = counts(|be, scoped| noisy_linear(be, scoped, true));
    // One forward gemm and one per operand gradient, with or without the scope.
    assert_eq!(plain.gemm, 3, "{plain:?}");
    assert_eq!(scoped.gemm, plain.gemm, "{scoped:?} vs {plain:?}");
    // The scope's own ops run once more: the noise draw and the sum, each
    // once (the noise is held for the sum's backward, not drawn again).
    assert_eq!(scoped.random, plain.random + 1, "{scoped:?} vs {plain:?}");
    assert_eq!(scoped.binary, plain.binary + 1, "{scoped:?} vs {plain:?}");
}

#[test]
fn a_value_made_in_a_scope_is_recomputed_only_when_a_backward_reads_it() {
    // `x` needs no gradient, so the matmul's backward reads only `x`: the
    // noisy weight is not made again, only the noise the sum's backward reads.
    let (plain, scoped) = counts(|be, scoped| noisy_linear(be, scoped, false));
    assert_eq!(plain.gemm, 2, "{plain:?}");
    assert_eq!(scoped.gemm, plain.gemm, "{scoped:?} vs {plain:?}");
    assert_eq!(scoped.binary, plain.binary, "{scoped:?} vs {plain:?}");
    assert_eq!(scoped.random, plain.random + 1, "{scoped:?} vs {plain:?}");
}

#[test]
fn the_lstm_reading_a_dropped_out_weight_is_not_run_again() {
    let (plain, scoped) = counts(|be, scoped| {
        let x = value(be, 4, &[5, 2, 3], true);
        let (w_ih, w_hh) = (value(be, 5, &[16, 3], true), value(be, 6, &[16, 4], true));
        let w = {
            let _scope = scoped.then(checkpoint_scope);
            w_hh.dropout(0.3, 7, 0)?
        };
        let vars = LstmVars {
            x: &x,
            lengths: None,
            h0: None,
            c0: None,
            w_ih: &w_ih,
            w_hh: &w,
            b_ih: None,
            b_hh: None,
        };
        let (y, _, _) = Var::lstm_sequence(&vars)?;
        y.sum_all()
    });
    assert_eq!(plain.lstm_sequence, 1, "{plain:?}");
    assert_eq!(scoped.lstm_sequence, 1, "{scoped:?}");
    // The dropout (forward and backward are one kernel) runs once more.
    assert_eq!(scoped.dropout, plain.dropout + 1, "{scoped:?} vs {plain:?}");
}

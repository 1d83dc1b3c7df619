//! The suite tested on itself: a backend built from the reference
//! implementations must pass every check, and the same backend with one
//! deliberate bug must fail the checks that are meant to catch that bug.
//!
//! This is what makes a green run on a real backend mean something: the checks
//! are satisfiable (no check demands something the documented semantics do not),
//! and they are sharp (a plausible kernel bug does not slip through).

#[path = "reference_backend/attention.rs"]
mod attention;
#[path = "reference_backend/ctc.rs"]
mod ctc;
#[path = "reference_backend/depthwise.rs"]
mod depthwise;
#[path = "reference_backend/layer_norm.rs"]
mod layer_norm;
#[path = "reference_backend/lstm.rs"]
mod lstm;

use std::sync::{Arc, Mutex};
use verjus_conformance::array::Array;
use verjus_conformance::reference as r;
use verjus_conformance::{checks, errors, gradcheck, proptests};
use verjus_core::ops::{
    AdamHyper, AttentionArgs, AttentionGrads, AttentionPlan, AxisPlan, BinaryPlan, ConcatPlan,
    Conv2dPlan, CrossEntropyPlan, DepthwiseArgs, DepthwiseGrads, DepthwisePlan, Distribution,
    DropoutPlan, GemmPlan, GemmSpec, IndexPlan, LayerNormArgs, LayerNormGrads, LayerNormPlan,
    LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan, PermutePlan, Pool2dPlan, PoolKind,
    ReducePlan, SelectPlan, SgdHyper, UnaryOp,
};
use verjus_core::{
    Backend, BackendRef, DType, Device, Error, HostData, Result, Shape, Storage, Tensor,
};

/// A deliberate bug, each of the kind a real kernel might have.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bug {
    /// `C = alpha * A @ B`, ignoring `beta`.
    GemmIgnoresBeta,
    /// Max pooling's gradient goes to the last maximum of a window with ties.
    MaxPoolLastMaximum,
    /// The filter gradient is off by a factor of two.
    HalfFilterGradient,
    /// Softmax backward forgets the `- sum(dy * y)` term.
    SoftmaxBackwardWithoutCorrection,
    /// Dropout ignores the stream offset.
    DropoutIgnoresOffset,
    /// index_select clamps out-of-range indices instead of failing.
    IndexSelectClamps,
    /// Reductions panic on empty inputs.
    ReducePanicsOnEmpty,
    /// The GELU derivative omits the `x * pdf(x)` term.
    GeluDerivativeIsCdf,
    /// Binary backward overwrites instead of summing over broadcast axes: the
    /// first element of `da` keeps a single broadcast copy's contribution.
    BinaryBackwardOverwrites,
    /// The LSTM forward runs every sequence for all `T` frames (the length
    /// mask is ignored).
    LstmIgnoresLengths,
    /// The LSTM backward ignores the gradient of the final cell state.
    LstmBackwardDropsCellGradient,
    /// Attention lets padded keys take weight (the key lengths are ignored).
    AttentionIgnoresLengths,
    /// Layer norm's variance as `E[x^2] - mean^2` in f32 (digits lost far from 0).
    LayerNormOnePassVariance,
    /// Layer norm's `dx` without the `xhat * mean(g * xhat)` term.
    LayerNormBackwardDropsXhatTerm,
    /// The depthwise convolution reverses its filter (a true convolution).
    DepthwiseFlipsFilter,
    /// The CTC loss runs every entry over all `T` frames.
    CtcIgnoresInputLengths,
    /// A deferred range error is dropped instead of reported at the next read.
    DeferredErrorLost,
    /// Of two deferred range errors, the later one is reported.
    DeferredLastErrorWins,
    /// Not a bug: the LSTM's reserve is larger with biases than without, as
    /// the CUDA backend's is (cuDNN's packed weight space holds the biases).
    ReserveSizedByBiases,
}

/// The reference implementations behind the `Backend` trait, on host memory.
#[derive(Debug)]
struct ReferenceBackend {
    bug: Option<Bug>,
    /// `Some` when out-of-range indices and labels are not errors of the op
    /// but kept here (the first) and reported at the next download or
    /// synchronize, as a GPU backend that checks on the device may do.
    deferred: Option<Mutex<Option<Error>>>,
}

fn backend(bug: Option<Bug>) -> BackendRef {
    Arc::new(ReferenceBackend {
        bug,
        deferred: None,
    })
}

/// The reference backend reporting range errors at the next read.
fn deferring_backend(bug: Option<Bug>) -> BackendRef {
    Arc::new(ReferenceBackend {
        bug,
        deferred: Some(Mutex::new(None)),
    })
}

/// The values of a float tensor (bfloat16 and float16 widened exactly).
fn array(t: &Tensor) -> Result<Array> {
    let values = match r::memory::cast(&host(t)?, DType::F32) {
        HostData::F32(v) => v,
        _ => unreachable!("a cast to float32 gives float32"),
    };
    Ok(Array::new(t.dims().to_vec(), values))
}

fn store(t: &mut Tensor, data: &[f32]) -> Result<()> {
    t.as_mut_slice::<f32>()?.copy_from_slice(data);
    Ok(())
}

fn host(t: &Tensor) -> Result<HostData> {
    Ok(match t.dtype() {
        DType::I64 => HostData::I64(t.to_vec()?),
        DType::I32 => HostData::I32(t.to_vec()?),
        DType::BF16 => HostData::BF16(t.to_vec()?),
        DType::F16 => HostData::F16(t.to_vec()?),
        _ => HostData::F32(t.to_vec()?),
    })
}

/// Integer indices, each checked against `len`.
fn checked_indices(op: &str, t: &Tensor, len: usize) -> Result<Vec<i64>> {
    let values: Vec<i64> = match host(t)? {
        HostData::I64(v) => v,
        HostData::I32(v) => v.into_iter().map(i64::from).collect(),
        HostData::F32(_) | HostData::BF16(_) | HostData::F16(_) => {
            return Err(Error::invalid(op, "float indices"))
        }
    };
    match values.iter().find(|&&v| v < 0 || v as usize >= len) {
        Some(v) => Err(Error::invalid(
            op,
            format!("index {v} is out of range for length {len}"),
        )),
        None => Ok(values),
    }
}

fn permute_typed<T: verjus_core::Element>(
    x: &Tensor,
    perm: &[usize],
    y: &mut Tensor,
) -> Result<()> {
    let (_, data) = r::permute::permute(x.dims(), x.as_slice::<T>()?, perm);
    y.as_mut_slice::<T>()?.copy_from_slice(&data);
    Ok(())
}

impl ReferenceBackend {
    fn has(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }

    /// [`checked_indices`]; when deferring, an error is kept for the next read
    /// and `None` tells the op to skip its work.
    fn range_checked(&self, op: &str, t: &Tensor, len: usize) -> Result<Option<Vec<i64>>> {
        match (checked_indices(op, t, len), &self.deferred) {
            (Ok(v), _) => Ok(Some(v)),
            (Err(e), None) => Err(e),
            (Err(e), Some(kept)) => {
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                let keep = if self.has(Bug::DeferredLastErrorWins) {
                    true
                } else {
                    kept.is_none() && !self.has(Bug::DeferredErrorLost)
                };
                if keep {
                    *kept = Some(e);
                }
                Ok(None)
            }
        }
    }

    /// The kept range error, if any (taken: reported once).
    fn report(&self) -> Result<()> {
        let Some(kept) = &self.deferred else {
            return Ok(());
        };
        match kept.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Backend for ReferenceBackend {
    fn name(&self) -> &str {
        "reference"
    }
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        Tensor::zeros_host(shape, dtype)
    }
    fn upload(&self, host: &Tensor) -> Result<Tensor> {
        host.try_clone_host()
    }
    fn synchronize(&self) -> Result<()> {
        self.report()
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        self.report()?;
        t.try_clone_host()
    }
    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        *dst.storage_mut() = Storage::Host(host(src)?);
        Ok(())
    }
    fn fill(&self, dst: &mut Tensor, value: f64) -> Result<()> {
        *dst.storage_mut() = Storage::Host(r::memory::fill(dst.dtype(), dst.numel(), value));
        Ok(())
    }
    fn cast(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        *dst.storage_mut() = Storage::Host(r::memory::cast(&host(src)?, dst.dtype()));
        Ok(())
    }
    fn random(&self, dst: &mut Tensor, dist: Distribution, seed: u64, offset: u64) -> Result<()> {
        store(dst, &r::random::random(dst.numel(), dist, seed, offset))
    }
    fn gemm(&self, plan: &GemmPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        let spec = if self.has(Bug::GemmIgnoresBeta) {
            GemmSpec {
                beta: 0.0,
                ..plan.spec
            }
        } else {
            plan.spec
        };
        let out = r::gemm::gemm(&array(a)?, &array(b)?, &array(c)?, spec);
        store(c, &out.data)
    }
    fn unary(&self, op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
        store(y, &r::elementwise::unary(op, &array(x)?).data)
    }
    fn unary_backward(
        &self,
        op: UnaryOp,
        x: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        let mut out = r::elementwise::unary_backward(op, &array(x)?, &array(dy)?);
        if op == UnaryOp::Gelu && self.has(Bug::GeluDerivativeIsCdf) {
            let (xv, g) = (array(x)?, array(dy)?);
            for i in 0..out.data.len() {
                out.data[i] =
                    g.data[i] * (0.5 * (1.0 + verjus_core::math::erf(xv.data[i] / 2f32.sqrt())));
            }
        }
        store(dx, &out.data)
    }
    fn binary(&self, plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        store(
            c,
            &r::elementwise::binary(plan.op, &array(a)?, &array(b)?).data,
        )
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
        let (aa, ab, ady) = (array(a)?, array(b)?, array(dy)?);
        let (mut ga, gb) = r::elementwise::binary_backward(plan.op, &aa, &ab, &ady);
        if self.has(Bug::BinaryBackwardOverwrites)
            && aa.data.len() < ady.data.len()
            && !aa.data.is_empty()
        {
            let n = aa.data.len();
            let (pa, _) = plan.op.partials(aa.data[0], ab.data[0]);
            ga.data[0] = ady.data[ady.data.len() - n] * pa;
        }
        if let Some(da) = da {
            store(da, &ga.data)?;
        }
        if let Some(db) = db {
            store(db, &gb.data)?;
        }
        Ok(())
    }
    fn reduce(&self, plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        if self.has(Bug::ReducePanicsOnEmpty) {
            assert!(x.numel() > 0, "reduce of an empty tensor");
        }
        let axes: Vec<usize> = (0..plan.reduced.len())
            .filter(|&i| plan.reduced[i])
            .collect();
        store(y, &r::reduce::reduce(plan.op, &array(x)?, &axes).data)
    }
    fn reduce_backward(
        &self,
        plan: &ReducePlan,
        x: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        let axes: Vec<usize> = (0..plan.reduced.len())
            .filter(|&i| plan.reduced[i])
            .collect();
        store(
            dx,
            &r::reduce::reduce_backward(plan.op, &array(x)?, &axes, &dy.to_vec::<f32>()?).data,
        )
    }
    fn argmax(&self, plan: &AxisPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        let (_, idx) = r::reduce::argmax(&array(x)?, plan.axis);
        y.as_mut_slice::<i64>()?.copy_from_slice(&idx);
        Ok(())
    }
    fn softmax(&self, plan: &AxisPlan, log: bool, x: &Tensor, y: &mut Tensor) -> Result<()> {
        store(y, &r::softmax::softmax(&array(x)?, plan.axis, log).data)
    }
    fn softmax_backward(
        &self,
        plan: &AxisPlan,
        log: bool,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        let (ay, ady) = (array(y)?, array(dy)?);
        if !log && self.has(Bug::SoftmaxBackwardWithoutCorrection) {
            let data: Vec<f32> = ay.data.iter().zip(&ady.data).map(|(a, b)| a * b).collect();
            return store(dx, &data);
        }
        store(
            dx,
            &r::softmax::softmax_backward(&ay, &ady, plan.axis, log).data,
        )
    }
    fn conv2d(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        y: &mut Tensor,
    ) -> Result<()> {
        let b = bias.map(array).transpose()?;
        store(
            y,
            &r::conv::conv2d(&array(x)?, &array(w)?, b.as_ref(), plan.params).data,
        )
    }
    fn conv2d_backward_data(
        &self,
        plan: &Conv2dPlan,
        dy: &Tensor,
        w: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        let dims = dx.dims().to_vec();
        store(
            dx,
            &r::conv::conv2d_backward_data(&array(dy)?, &array(w)?, &dims, plan.params).data,
        )
    }
    fn conv2d_backward_filter(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        dy: &Tensor,
        dw: &mut Tensor,
    ) -> Result<()> {
        let dims = dw.dims().to_vec();
        let mut out = r::conv::conv2d_backward_filter(&array(x)?, &array(dy)?, &dims, plan.params);
        if self.has(Bug::HalfFilterGradient) {
            out.data.iter_mut().for_each(|v| *v *= 0.5);
        }
        store(dw, &out.data)
    }
    fn conv2d_backward_bias(&self, dy: &Tensor, db: &mut Tensor) -> Result<()> {
        store(db, &r::conv::conv2d_backward_bias(&array(dy)?).data)
    }
    fn pool2d(&self, plan: &Pool2dPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        store(y, &r::pool::pool2d(plan.kind, &array(x)?, plan.params).data)
    }
    fn pool2d_backward(
        &self,
        plan: &Pool2dPlan,
        x: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        let (ax, ady) = (array(x)?, array(dy)?);
        if plan.kind == PoolKind::Max && self.has(Bug::MaxPoolLastMaximum) {
            return store(dx, &last_max_pool_backward(&ax, &ady, plan));
        }
        store(
            dx,
            &r::pool::pool2d_backward(plan.kind, &ax, &ady, plan.params).data,
        )
    }
    fn dropout(&self, plan: &DropoutPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        let offset = if self.has(Bug::DropoutIgnoresOffset) {
            0
        } else {
            plan.offset
        };
        store(
            y,
            &r::dropout::dropout(&array(x)?, plan.p, plan.seed, offset).data,
        )
    }
    fn index_select(
        &self,
        plan: &IndexPlan,
        x: &Tensor,
        indices: &Tensor,
        y: &mut Tensor,
    ) -> Result<()> {
        let idx = if self.has(Bug::IndexSelectClamps) {
            let len = plan.len as i64;
            let raw: Vec<i64> = match host(indices)? {
                HostData::I32(v) => v.into_iter().map(i64::from).collect(),
                HostData::I64(v) => v,
                HostData::F32(_) | HostData::BF16(_) | HostData::F16(_) => Vec::new(),
            };
            raw.into_iter()
                .map(|v| v.clamp(0, (len - 1).max(0)))
                .collect()
        } else {
            match self.range_checked("index_select", indices, plan.len)? {
                Some(idx) => idx,
                None => return Ok(()),
            }
        };
        store(y, &r::index::index_select(&array(x)?, plan.axis, &idx).data)
    }
    fn index_add(
        &self,
        plan: &IndexPlan,
        src: &Tensor,
        indices: &Tensor,
        dst: &mut Tensor,
    ) -> Result<()> {
        let Some(idx) = self.range_checked("index_add", indices, plan.len)? else {
            return Ok(());
        };
        let out = r::index::index_add(&array(dst)?, &array(src)?, plan.axis, &idx);
        store(dst, &out.data)
    }
    fn concat(&self, plan: &ConcatPlan, parts: &[&Tensor], y: &mut Tensor) -> Result<()> {
        let arrays = parts.iter().map(|p| array(p)).collect::<Result<Vec<_>>>()?;
        store(
            y,
            &r::concat::concat(&arrays.iter().collect::<Vec<_>>(), plan.axis).data,
        )
    }
    fn split(&self, plan: &ConcatPlan, x: &Tensor, parts: &mut [&mut Tensor]) -> Result<()> {
        for (p, out) in parts
            .iter_mut()
            .zip(r::concat::split(&array(x)?, plan.axis, &plan.sizes))
        {
            store(p, &out.data)?;
        }
        Ok(())
    }
    fn select(
        &self,
        _plan: &SelectPlan,
        cond: &Tensor,
        x: &Tensor,
        y: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        let selected = r::elementwise::select(&array(cond)?, &array(x)?, &array(y)?);
        store(out, &selected.data)
    }
    fn permute(&self, plan: &PermutePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        match x.dtype() {
            DType::I64 => permute_typed::<i64>(x, &plan.perm, y),
            DType::I32 => permute_typed::<i32>(x, &plan.perm, y),
            _ => permute_typed::<f32>(x, &plan.perm, y),
        }
    }
    fn sgd_update(
        &self,
        hp: &SgdHyper,
        param: &mut Tensor,
        grad: &Tensor,
        velocity: Option<&mut Tensor>,
    ) -> Result<()> {
        let v_in = velocity.as_ref().map(|v| v.to_vec::<f32>()).transpose()?;
        let (p, v) = r::optim::sgd(
            hp,
            &param.to_vec::<f32>()?,
            &grad.to_vec::<f32>()?,
            v_in.as_deref(),
        );
        store(param, &p)?;
        if let (Some(t), Some(v)) = (velocity, v) {
            store(t, &v)?;
        }
        Ok(())
    }
    fn adam_update(
        &self,
        hp: &AdamHyper,
        param: &mut Tensor,
        grad: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
    ) -> Result<()> {
        let (p2, m2, v2) = r::optim::adam(
            hp,
            &param.to_vec()?,
            &grad.to_vec()?,
            &m.to_vec()?,
            &v.to_vec()?,
        );
        store(param, &p2)?;
        store(m, &m2)?;
        store(v, &v2)
    }
    fn softmax_cross_entropy(
        &self,
        plan: &CrossEntropyPlan,
        logits: &Tensor,
        labels: &Tensor,
        grad_scale: f32,
        losses: &mut Tensor,
        dlogits: Option<&mut Tensor>,
    ) -> Result<()> {
        let Some(labels) = self.range_checked("softmax_cross_entropy", labels, plan.classes)?
        else {
            return Ok(());
        };
        let (l, g) =
            r::loss::softmax_cross_entropy(&array(logits)?, &labels, plan.smoothing, grad_scale);
        store(losses, &l)?;
        if let Some(d) = dlogits {
            store(d, &g.data)?;
        }
        Ok(())
    }
    fn ctc_loss(
        &self,
        plan: &verjus_core::ops::CtcPlan,
        inputs: &verjus_core::ops::CtcInputs<'_>,
        losses: &mut Tensor,
        grad: Option<&mut Tensor>,
    ) -> Result<()> {
        let bug = self.has(Bug::CtcIgnoresInputLengths);
        ctc::ctc_loss(plan, inputs, losses, grad, bug)
    }
    fn lstm_reserve_len(&self, plan: &LstmPlan) -> Result<usize> {
        let biases = self.bug == Some(Bug::ReserveSizedByBiases) && plan.has_bias;
        Ok(if biases { 8 * plan.hidden } else { 0 })
    }
    fn lstm_sequence(
        &self,
        _plan: &LstmPlan,
        args: &LstmArgs<'_>,
        out: LstmOutputs<'_>,
    ) -> Result<()> {
        lstm::forward(
            "lstm_sequence",
            args,
            out,
            self.has(Bug::LstmIgnoresLengths),
        )
    }
    fn lstm_sequence_backward(
        &self,
        _plan: &LstmPlan,
        args: &LstmArgs<'_>,
        _y: &Tensor,
        _reserve: &Tensor,
        dout: &LstmOutputGrads<'_>,
        grads: LstmGrads<'_>,
    ) -> Result<()> {
        let drop_dc = self.has(Bug::LstmBackwardDropsCellGradient);
        lstm::backward("lstm_sequence_backward", args, dout, grads, false, drop_dc)
    }
    fn lstm_cell(&self, _plan: &LstmPlan, args: &LstmArgs<'_>, out: LstmOutputs<'_>) -> Result<()> {
        lstm::forward("lstm_cell", args, out, false)
    }
    fn lstm_cell_backward(
        &self,
        _plan: &LstmPlan,
        args: &LstmArgs<'_>,
        _h: &Tensor,
        _reserve: &Tensor,
        dout: &LstmOutputGrads<'_>,
        grads: LstmGrads<'_>,
    ) -> Result<()> {
        let drop_dc = self.has(Bug::LstmBackwardDropsCellGradient);
        lstm::backward("lstm_cell_backward", args, dout, grads, true, drop_dc)
    }
    fn attention(
        &self,
        _plan: &AttentionPlan,
        args: &AttentionArgs<'_>,
        out: &mut Tensor,
        lse: &mut Tensor,
    ) -> Result<()> {
        attention::forward(args, out, lse, self.has(Bug::AttentionIgnoresLengths))
    }
    fn attention_backward(
        &self,
        _plan: &AttentionPlan,
        args: &AttentionArgs<'_>,
        _out: &Tensor,
        _lse: &Tensor,
        dout: &Tensor,
        grads: AttentionGrads<'_>,
    ) -> Result<()> {
        attention::backward(args, dout, grads, self.has(Bug::AttentionIgnoresLengths))
    }
    fn layer_norm(
        &self,
        _plan: &LayerNormPlan,
        args: &LayerNormArgs<'_>,
        y: &mut Tensor,
        mean: &mut Tensor,
        rstd: &mut Tensor,
    ) -> Result<()> {
        let one_pass = self.has(Bug::LayerNormOnePassVariance);
        layer_norm::forward(args, y, mean, rstd, one_pass)
    }
    fn layer_norm_backward(
        &self,
        _plan: &LayerNormPlan,
        args: &LayerNormArgs<'_>,
        _mean: &Tensor,
        _rstd: &Tensor,
        dy: &Tensor,
        grads: LayerNormGrads<'_>,
    ) -> Result<()> {
        let drop = self.has(Bug::LayerNormBackwardDropsXhatTerm);
        layer_norm::backward(args, dy, grads, drop)
    }
    fn depthwise_conv1d(
        &self,
        _plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        y: &mut Tensor,
    ) -> Result<()> {
        depthwise::forward(args, y, self.has(Bug::DepthwiseFlipsFilter))
    }
    fn depthwise_conv1d_backward(
        &self,
        _plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        dy: &Tensor,
        grads: DepthwiseGrads<'_>,
    ) -> Result<()> {
        depthwise::backward(args, dy, grads, self.has(Bug::DepthwiseFlipsFilter))
    }
}

/// Max pooling's gradient routed to the *last* maximum of each window (the bug).
fn last_max_pool_backward(x: &Array, dy: &Array, plan: &Pool2dPlan) -> Vec<f32> {
    let p = plan.params;
    let mut dx = vec![0.0; x.data.len()];
    let mut o = 0;
    for plane in 0..plan.n * plan.c {
        for oy in 0..plan.oh {
            for ox in 0..plan.ow {
                let mut best: Option<usize> = None;
                for ky in 0..p.kernel[0] {
                    for kx in 0..p.kernel[1] {
                        let iy = (oy * p.stride[0] + ky)
                            .checked_sub(p.padding[0])
                            .filter(|&i| i < plan.h);
                        let ix = (ox * p.stride[1] + kx)
                            .checked_sub(p.padding[1])
                            .filter(|&i| i < plan.w);
                        if let (Some(iy), Some(ix)) = (iy, ix) {
                            let i = (plane * plan.h + iy) * plan.w + ix;
                            if best.is_none_or(|b| x.data[i] >= x.data[b]) {
                                best = Some(i);
                            }
                        }
                    }
                }
                if let Some(b) = best {
                    dx[b] += dy.data[o];
                }
                o += 1;
            }
        }
    }
    dx
}

mod correct {
    verjus_conformance::conformance_suite!(super::backend(None));
}

/// `check` passes on the correct backend and fails with `bug`.
fn catches(bug: Bug, check: fn(&dyn Backend) -> std::result::Result<(), String>) {
    assert!(
        check(&*backend(None)).is_ok(),
        "{bug:?}: the check fails on the correct backend"
    );
    let err = check(&*backend(Some(bug))).expect_err(&format!("{bug:?} went unnoticed"));
    assert!(err.contains("case(s) failed"), "{bug:?}: {err}");
}

#[test]
fn gemm_check_catches_an_ignored_beta() {
    catches(Bug::GemmIgnoresBeta, checks::gemm);
}

#[test]
fn max_pool_check_catches_the_last_maximum() {
    catches(Bug::MaxPoolLastMaximum, checks::max_pool2d_backward);
}

#[test]
fn filter_gradient_checks_catch_a_scaled_gradient() {
    catches(Bug::HalfFilterGradient, checks::conv2d_backward_filter);
    catches(Bug::HalfFilterGradient, gradcheck::conv2d);
}

#[test]
fn softmax_gradient_checks_catch_a_missing_term() {
    catches(
        Bug::SoftmaxBackwardWithoutCorrection,
        checks::softmax_backward,
    );
    catches(Bug::SoftmaxBackwardWithoutCorrection, gradcheck::softmax);
}

#[test]
fn dropout_check_catches_an_ignored_offset() {
    catches(Bug::DropoutIgnoresOffset, checks::dropout);
}

#[test]
fn index_error_check_catches_clamping() {
    catches(Bug::IndexSelectClamps, errors::out_of_range_indices);
}

#[test]
fn index_error_check_accepts_an_error_reported_at_the_next_read() {
    let be = deferring_backend(None);
    assert_eq!(errors::out_of_range_indices(&*be), Ok(()));
    // Not at the call itself: the deferral really is exercised.
    let x = Tensor::from_vec([4, 3], vec![0f32; 12]).unwrap();
    let idx = Tensor::from_vec([2], vec![0i64, 9]).unwrap();
    let mut y = Tensor::from_vec([2, 3], vec![0f32; 6]).unwrap();
    verjus_core::ops::index_select(&*be, &x, 0, &idx, &mut y).unwrap();
    let e = be.synchronize().unwrap_err().to_string();
    assert!(e.contains("index_select") && e.contains('9'), "{e}");
    be.synchronize().unwrap();
}

#[test]
fn index_error_check_catches_a_deferred_error_lost_or_the_last_reported() {
    for bug in [Bug::DeferredErrorLost, Bug::DeferredLastErrorWins] {
        let err = errors::out_of_range_indices(&*deferring_backend(Some(bug)))
            .expect_err(&format!("{bug:?} went unnoticed"));
        assert!(err.contains("case(s) failed"), "{bug:?}: {err}");
    }
}

/// A bias gradient asked of an LSTM without biases is named as such on a
/// backend whose reserve size depends on the biases too (on an H100 the CUDA
/// backend answered with a reserve-size mismatch: the reserve was checked
/// before the gradients).
#[test]
fn lstm_error_checks_hold_when_the_reserve_size_depends_on_the_biases() {
    assert_eq!(
        errors::lstm(&*backend(Some(Bug::ReserveSizedByBiases))),
        Ok(())
    );
}

#[test]
fn proptests_catch_a_panic_on_empty_input() {
    catches(Bug::ReducePanicsOnEmpty, proptests::no_panic_on_any_shape);
}

#[test]
fn unary_gradient_checks_catch_a_wrong_gelu_derivative() {
    catches(Bug::GeluDerivativeIsCdf, checks::unary_backward);
    catches(Bug::GeluDerivativeIsCdf, gradcheck::unary);
}

#[test]
fn binary_gradient_checks_catch_a_missing_broadcast_sum() {
    catches(Bug::BinaryBackwardOverwrites, checks::binary_backward);
    catches(Bug::BinaryBackwardOverwrites, gradcheck::binary);
}

#[test]
fn lstm_checks_catch_an_ignored_length_mask() {
    catches(Bug::LstmIgnoresLengths, checks::lstm_sequence);
    catches(
        Bug::LstmIgnoresLengths,
        checks::lstm_lengths_equal_sequences_alone,
    );
    catches(Bug::LstmIgnoresLengths, gradcheck::lstm_sequence);
}

#[test]
fn lstm_gradient_checks_catch_a_dropped_cell_gradient() {
    catches(
        Bug::LstmBackwardDropsCellGradient,
        checks::lstm_sequence_backward,
    );
    catches(
        Bug::LstmBackwardDropsCellGradient,
        checks::lstm_cell_backward,
    );
    catches(Bug::LstmBackwardDropsCellGradient, gradcheck::lstm_sequence);
    catches(Bug::LstmBackwardDropsCellGradient, gradcheck::lstm_cell);
}

#[test]
fn attention_checks_catch_an_ignored_key_mask() {
    catches(Bug::AttentionIgnoresLengths, checks::attention);
    catches(Bug::AttentionIgnoresLengths, checks::attention_backward);
}

#[test]
fn layer_norm_checks_catch_a_one_pass_variance_and_a_missing_term() {
    catches(Bug::LayerNormOnePassVariance, checks::layer_norm);
    catches(
        Bug::LayerNormBackwardDropsXhatTerm,
        checks::layer_norm_backward,
    );
    catches(Bug::LayerNormBackwardDropsXhatTerm, gradcheck::layer_norm);
}

#[test]
fn depthwise_checks_catch_a_flipped_filter() {
    catches(Bug::DepthwiseFlipsFilter, checks::depthwise_conv1d);
    catches(Bug::DepthwiseFlipsFilter, checks::depthwise_conv1d_backward);
}

#[test]
fn ctc_ignoring_input_lengths_is_caught() {
    catches(Bug::CtcIgnoresInputLengths, checks::ctc_loss);
}

//! [`NativeBackend`]: the trait implementation, dispatching to one module per op group.

use crate::{
    attention, concat, conv, depthwise, dropout, elementwise, gemm, index, layer_norm, loss, lstm,
    memory, optim, permute, pool, reduce, select, softmax,
};
use verjus_core::ops::{
    AdamHyper, AttentionArgs, AttentionGrads, AttentionPlan, AxisPlan, BinaryPlan, ConcatPlan,
    Conv2dPlan, CrossEntropyPlan, DepthwiseArgs, DepthwiseGrads, DepthwisePlan, Distribution,
    DropoutPlan, GemmPlan, IndexPlan, LayerNormArgs, LayerNormGrads, LayerNormPlan, LstmArgs,
    LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan, NAdamStep, PermutePlan, Pool2dPlan,
    ReducePlan, SelectPlan, SgdHyper, UnaryOp,
};
use verjus_core::{Backend, DType, Device, Result, Shape, Tensor};

/// The CPU backend. Stateless: threads come from rayon's global pool.
#[derive(Debug, Default, Clone, Copy)]
pub struct NativeBackend;

impl NativeBackend {
    /// The CPU backend (on glibc, it also keeps freed host memory in the
    /// process for reuse: see `malloc_tuning`).
    pub fn new() -> Self {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        crate::malloc_tuning::keep_freed_memory();
        NativeBackend
    }
}

impl Backend for NativeBackend {
    fn name(&self) -> &str {
        "native"
    }
    fn device(&self) -> Device {
        Device::Cpu
    }
    /// Runs `f` on a rayon worker: called from outside the pool, the caller would
    /// otherwise block while the workers run each parallel kernel, and between
    /// kernels the workers spin for work while the caller runs the sequential
    /// parts: three threads on two cores (measured: the MLP training step
    /// 15-20 % faster on 2 cores, small ops about 2x).
    fn run_scoped(&self, f: &mut (dyn FnMut() + Send)) {
        rayon::scope(|_| f());
    }
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        Tensor::zeros_host(shape, dtype)
    }
    fn alloc_output(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        Tensor::output_host(shape, dtype)
    }
    fn upload(&self, host: &Tensor) -> Result<Tensor> {
        host.try_clone_host()
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        t.try_clone_host()
    }
    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        memory::copy(src, dst)
    }
    fn fill(&self, dst: &mut Tensor, value: f64) -> Result<()> {
        memory::fill(dst, value)
    }
    fn cast(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        memory::cast(src, dst)
    }
    fn random(&self, dst: &mut Tensor, dist: Distribution, seed: u64, offset: u64) -> Result<()> {
        memory::random(dst, dist, seed, offset)
    }
    fn gemm(&self, plan: &GemmPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        gemm::gemm(plan, a, b, c)
    }
    fn unary(&self, op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
        elementwise::unary(op, x, y)
    }
    fn unary_backward(
        &self,
        op: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        elementwise::unary_backward(op, x, y, dy, dx)
    }
    fn binary(&self, plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        elementwise::binary(plan, a, b, c)
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
        elementwise::binary_backward(plan, a, b, dy, da, db)
    }
    fn select(
        &self,
        plan: &SelectPlan,
        cond: &Tensor,
        x: &Tensor,
        y: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        select::select(plan, cond, x, y, out)
    }
    fn reduce(&self, plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        reduce::reduce(plan, x, y)
    }
    fn reduce_backward(
        &self,
        plan: &ReducePlan,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        reduce::reduce_backward(plan, x, y, dy, dx)
    }
    fn argmax(&self, plan: &AxisPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        reduce::argmax(plan, x, y)
    }
    fn softmax(&self, plan: &AxisPlan, log: bool, x: &Tensor, y: &mut Tensor) -> Result<()> {
        softmax::softmax(plan, log, x, y)
    }
    fn softmax_backward(
        &self,
        plan: &AxisPlan,
        log: bool,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        softmax::softmax_backward(plan, log, y, dy, dx)
    }
    fn conv2d(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        y: &mut Tensor,
    ) -> Result<()> {
        conv::conv2d(plan, x, w, bias, y)
    }
    fn conv2d_backward_data(
        &self,
        plan: &Conv2dPlan,
        dy: &Tensor,
        w: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        conv::conv2d_backward_data(plan, dy, w, dx)
    }
    fn conv2d_backward_filter(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        dy: &Tensor,
        dw: &mut Tensor,
    ) -> Result<()> {
        conv::conv2d_backward_filter(plan, x, dy, dw)
    }
    fn conv2d_backward_bias(&self, dy: &Tensor, db: &mut Tensor) -> Result<()> {
        conv::conv2d_backward_bias(dy, db)
    }
    fn pool2d(&self, plan: &Pool2dPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        pool::pool2d(plan, x, y)
    }
    fn pool2d_backward(
        &self,
        plan: &Pool2dPlan,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        pool::pool2d_backward(plan, x, y, dy, dx)
    }
    fn dropout(&self, plan: &DropoutPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        dropout::dropout(plan, x, y)
    }
    fn index_select(
        &self,
        plan: &IndexPlan,
        x: &Tensor,
        indices: &Tensor,
        y: &mut Tensor,
    ) -> Result<()> {
        index::index_select(plan, x, indices, y)
    }
    fn index_add(
        &self,
        plan: &IndexPlan,
        src: &Tensor,
        indices: &Tensor,
        dst: &mut Tensor,
    ) -> Result<()> {
        index::index_add(plan, src, indices, dst)
    }
    fn concat(&self, plan: &ConcatPlan, parts: &[&Tensor], y: &mut Tensor) -> Result<()> {
        concat::concat(plan, parts, y)
    }
    fn split(&self, plan: &ConcatPlan, x: &Tensor, parts: &mut [&mut Tensor]) -> Result<()> {
        concat::split(plan, x, parts)
    }
    fn permute(&self, plan: &PermutePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        permute::permute(plan, x, y)
    }
    fn sgd_update(
        &self,
        hp: &SgdHyper,
        param: &mut Tensor,
        grad: &Tensor,
        velocity: Option<&mut Tensor>,
    ) -> Result<()> {
        optim::sgd_update(hp, param, grad, velocity)
    }
    fn adam_update(
        &self,
        hp: &AdamHyper,
        param: &mut Tensor,
        grad: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
    ) -> Result<()> {
        optim::adam_update(hp, param, grad, m, v)
    }
    fn nadam_update(
        &self,
        step: &NAdamStep,
        param: &mut Tensor,
        grad: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
    ) -> Result<()> {
        optim::nadam_update(step, param, grad, m, v)
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
        loss::softmax_cross_entropy(plan, logits, labels, grad_scale, losses, dlogits)
    }

    fn ctc_loss(
        &self,
        plan: &verjus_core::ops::CtcPlan,
        inputs: &verjus_core::ops::CtcInputs<'_>,
        losses: &mut Tensor,
        grad: Option<&mut Tensor>,
    ) -> Result<()> {
        crate::ctc::ctc_loss(plan, inputs, losses, grad)
    }

    fn lstm_reserve_len(&self, plan: &LstmPlan) -> Result<usize> {
        Ok(lstm::reserve_len(plan))
    }

    fn lstm_sequence(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        out: LstmOutputs<'_>,
    ) -> Result<()> {
        lstm::forward("lstm_sequence", plan, args, out)
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
        lstm::backward(
            "lstm_sequence_backward",
            plan,
            args,
            y,
            reserve,
            dout,
            grads,
        )
    }

    fn lstm_cell(&self, plan: &LstmPlan, args: &LstmArgs<'_>, out: LstmOutputs<'_>) -> Result<()> {
        lstm::forward("lstm_cell", plan, args, out)
    }

    fn lstm_cell_backward(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        h: &Tensor,
        reserve: &Tensor,
        dout: &LstmOutputGrads<'_>,
        grads: LstmGrads<'_>,
    ) -> Result<()> {
        lstm::backward("lstm_cell_backward", plan, args, h, reserve, dout, grads)
    }

    fn attention(
        &self,
        plan: &AttentionPlan,
        args: &AttentionArgs<'_>,
        out: &mut Tensor,
        lse: &mut Tensor,
    ) -> Result<()> {
        attention::forward(plan, args, out, lse)
    }

    fn attention_backward(
        &self,
        plan: &AttentionPlan,
        args: &AttentionArgs<'_>,
        out: &Tensor,
        lse: &Tensor,
        dout: &Tensor,
        grads: AttentionGrads<'_>,
    ) -> Result<()> {
        attention::backward(plan, args, out, lse, dout, grads)
    }

    fn layer_norm(
        &self,
        plan: &LayerNormPlan,
        args: &LayerNormArgs<'_>,
        y: &mut Tensor,
        mean: &mut Tensor,
        rstd: &mut Tensor,
    ) -> Result<()> {
        layer_norm::forward(plan, args, y, mean, rstd)
    }

    fn layer_norm_backward(
        &self,
        plan: &LayerNormPlan,
        args: &LayerNormArgs<'_>,
        mean: &Tensor,
        rstd: &Tensor,
        dy: &Tensor,
        grads: LayerNormGrads<'_>,
    ) -> Result<()> {
        layer_norm::backward(plan, args, mean, rstd, dy, grads)
    }

    fn depthwise_conv1d(
        &self,
        plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        y: &mut Tensor,
    ) -> Result<()> {
        depthwise::forward(plan, args, y)
    }

    fn depthwise_conv1d_backward(
        &self,
        plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        dy: &Tensor,
        grads: DepthwiseGrads<'_>,
    ) -> Result<()> {
        depthwise::backward(plan, args, dy, grads)
    }
}

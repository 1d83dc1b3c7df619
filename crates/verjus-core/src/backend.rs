//! The Backend op set: what a device must implement.
//!
//! Callers use the validated functions in [`crate::ops`]; those check devices,
//! dtypes and shapes once and call the methods here with a *plan* (the sizes a
//! kernel needs). A backend can therefore trust its arguments and concentrate on
//! speed. Every method has a default that returns [`Error::Unsupported`], so a
//! backend that lacks an op reports it instead of panicking.
//!
//! Outputs are caller-owned `&mut Tensor`s that the op overwrites (except
//! `index_add`, which accumulates, and the optimizer updates, which update in place).

use crate::ops::{
    AdamHyper, AttentionArgs, AttentionGrads, AttentionPlan, AxisPlan, BinaryPlan, ConcatPlan,
    Conv2dPlan, CrossEntropyPlan, DepthwiseArgs, DepthwiseGrads, DepthwisePlan, Distribution,
    DropoutPlan, GemmPlan, IndexPlan, LayerNormArgs, LayerNormGrads, LayerNormPlan, LstmArgs,
    LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan, NAdamStep, PermutePlan, Pool2dPlan,
    ReducePlan, SelectPlan, SgdHyper, UnaryOp,
};
use crate::{DType, Device, Error, Result, Shape, Tensor};
use std::fmt;
use std::sync::Arc;

/// A shared handle to a backend, as selected at run time.
pub type BackendRef = Arc<dyn Backend>;

/// Runs `f` through [`Backend::run_scoped`] and returns its result.
pub fn scoped<T: Send>(be: &dyn Backend, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    let mut f = Some(f);
    let mut result = None;
    be.run_scoped(&mut || result = f.take().map(|f| f()));
    result.unwrap_or_else(|| {
        Err(Error::Device {
            device: be.device().to_string(),
            msg: format!("the {} backend did not run the scoped work", be.name()),
        })
    })
}

macro_rules! unsupported {
    ($self:ident, $op:literal) => {
        Err(Error::unsupported($op, $self.name()))
    };
}

/// The op set a device implements. See the module docs.
#[allow(unused_variables)] // the default bodies ignore their arguments
pub trait Backend: Send + Sync + fmt::Debug {
    /// A short name for messages (`native`, `cuda`).
    fn name(&self) -> &str;
    /// The device this backend computes on.
    fn device(&self) -> Device;
    /// Waits for queued work to finish (a no-op on synchronous backends).
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    /// Runs `f` where this backend's work is best issued from, returning when it
    /// is done. Callers that issue many ops in a row (a training step, an
    /// inference pass) wrap them in it. The default runs `f` in place; the native
    /// backend runs it on one of its pool's threads, so the caller's thread does
    /// not compete for the cores with the pool's workers between parallel kernels.
    fn run_scoped(&self, f: &mut (dyn FnMut() + Send)) {
        f()
    }

    /// A zero-filled tensor on this device.
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor>;
    /// A tensor for an op to overwrite entirely (every op's output but
    /// `index_add`'s): its elements are unspecified until then, which lets a
    /// backend skip the zero fill. The default zero-fills.
    fn alloc_output(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        self.alloc_zeroed(shape, dtype)
    }
    /// Copies a host tensor to this device.
    fn upload(&self, host: &Tensor) -> Result<Tensor>;
    /// Copies a tensor of this device to the host.
    fn download(&self, t: &Tensor) -> Result<Tensor>;
    /// `dst = src` (same dtype and element count).
    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        unsupported!(self, "copy")
    }
    /// Every element of `dst` set to `value`.
    fn fill(&self, dst: &mut Tensor, value: f64) -> Result<()> {
        unsupported!(self, "fill")
    }
    /// `dst = src` converted to `dst`'s dtype.
    fn cast(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        unsupported!(self, "cast")
    }
    /// Random fill from the shared Philox stream.
    fn random(&self, dst: &mut Tensor, dist: Distribution, seed: u64, offset: u64) -> Result<()> {
        unsupported!(self, "random")
    }

    /// Batched GEMM.
    fn gemm(&self, plan: &GemmPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        unsupported!(self, "gemm")
    }

    /// Elementwise unary op.
    fn unary(&self, op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
        unsupported!(self, "unary")
    }
    /// `dx = dy * op'(x)`.
    fn unary_backward(
        &self,
        op: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "unary_backward")
    }
    /// Broadcasting binary op.
    fn binary(&self, plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        unsupported!(self, "binary")
    }
    /// Gradients of a broadcasting binary op, reduced to each operand's shape.
    fn binary_backward(
        &self,
        plan: &BinaryPlan,
        a: &Tensor,
        b: &Tensor,
        dy: &Tensor,
        da: Option<&mut Tensor>,
        db: Option<&mut Tensor>,
    ) -> Result<()> {
        unsupported!(self, "binary_backward")
    }

    /// Elementwise choice `where(cond != 0, x, y)` with broadcasting.
    fn select(
        &self,
        plan: &SelectPlan,
        cond: &Tensor,
        x: &Tensor,
        y: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "select")
    }

    /// Reduction over the plan's axes.
    fn reduce(&self, plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        unsupported!(self, "reduce")
    }
    /// Gradient of a reduction.
    fn reduce_backward(
        &self,
        plan: &ReducePlan,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "reduce_backward")
    }
    /// Index of the first maximum along an axis (int64 output).
    fn argmax(&self, plan: &AxisPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        unsupported!(self, "argmax")
    }

    /// Softmax or log-softmax along an axis.
    fn softmax(&self, plan: &AxisPlan, log: bool, x: &Tensor, y: &mut Tensor) -> Result<()> {
        unsupported!(self, "softmax")
    }
    /// Gradient of softmax or log-softmax from its output.
    fn softmax_backward(
        &self,
        plan: &AxisPlan,
        log: bool,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "softmax_backward")
    }

    /// 2-D convolution with optional bias.
    fn conv2d(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        y: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "conv2d")
    }
    /// Gradient of a convolution wrt its input.
    fn conv2d_backward_data(
        &self,
        plan: &Conv2dPlan,
        dy: &Tensor,
        w: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "conv2d_backward_data")
    }
    /// Gradient of a convolution wrt its weight.
    fn conv2d_backward_filter(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        dy: &Tensor,
        dw: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "conv2d_backward_filter")
    }
    /// Gradient of a convolution wrt its bias.
    fn conv2d_backward_bias(&self, dy: &Tensor, db: &mut Tensor) -> Result<()> {
        unsupported!(self, "conv2d_backward_bias")
    }

    /// Max or average pooling.
    fn pool2d(&self, plan: &Pool2dPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        unsupported!(self, "pool2d")
    }
    /// Gradient of pooling.
    fn pool2d_backward(
        &self,
        plan: &Pool2dPlan,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "pool2d_backward")
    }

    /// Inverted dropout; also its own backward (same mask applied to `dy`).
    fn dropout(&self, plan: &DropoutPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        unsupported!(self, "dropout")
    }

    /// Gather of slices along an axis.
    fn index_select(
        &self,
        plan: &IndexPlan,
        x: &Tensor,
        indices: &Tensor,
        y: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "index_select")
    }
    /// Scatter-add of slices along an axis (accumulates into `dst`).
    fn index_add(
        &self,
        plan: &IndexPlan,
        src: &Tensor,
        indices: &Tensor,
        dst: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "index_add")
    }

    /// Concatenation along an axis.
    fn concat(&self, plan: &ConcatPlan, parts: &[&Tensor], y: &mut Tensor) -> Result<()> {
        unsupported!(self, "concat")
    }
    /// Split along an axis.
    fn split(&self, plan: &ConcatPlan, x: &Tensor, parts: &mut [&mut Tensor]) -> Result<()> {
        unsupported!(self, "split")
    }
    /// Axis permutation.
    fn permute(&self, plan: &PermutePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        unsupported!(self, "permute")
    }

    /// Fused SGD step.
    fn sgd_update(
        &self,
        hp: &SgdHyper,
        param: &mut Tensor,
        grad: &Tensor,
        velocity: Option<&mut Tensor>,
    ) -> Result<()> {
        unsupported!(self, "sgd_update")
    }
    /// Fused Adam/AdamW step.
    fn adam_update(
        &self,
        hp: &AdamHyper,
        param: &mut Tensor,
        grad: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "adam_update")
    }

    /// Fused NAdam step; a backend without it gets the step composed from its
    /// elementwise ops (`ops::nadam_update`).
    fn nadam_update(
        &self,
        step: &NAdamStep,
        param: &mut Tensor,
        grad: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "nadam_update")
    }

    /// Fused softmax cross-entropy: per-example losses and optionally the logits' gradient.
    fn softmax_cross_entropy(
        &self,
        plan: &CrossEntropyPlan,
        logits: &Tensor,
        labels: &Tensor,
        grad_scale: f32,
        losses: &mut Tensor,
        dlogits: Option<&mut Tensor>,
    ) -> Result<()> {
        unsupported!(self, "softmax_cross_entropy")
    }

    /// CTC losses and optionally their gradient (see [`crate::ops::ctc_loss`]).
    fn ctc_loss(
        &self,
        plan: &crate::ops::CtcPlan,
        inputs: &crate::ops::CtcInputs<'_>,
        losses: &mut Tensor,
        grad: Option<&mut Tensor>,
    ) -> Result<()> {
        unsupported!(self, "ctc_loss")
    }

    /// The f32 elements of the reserve an LSTM call of `plan` writes for its
    /// backward (gate activations, cell states, or cuDNN's reserve space).
    fn lstm_reserve_len(&self, plan: &LstmPlan) -> Result<usize> {
        unsupported!(self, "lstm_reserve_len")
    }

    /// The LSTM over a sequence (see [`crate::ops::lstm_sequence`]).
    fn lstm_sequence(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        out: LstmOutputs<'_>,
    ) -> Result<()> {
        unsupported!(self, "lstm_sequence")
    }

    /// The gradients of [`Backend::lstm_sequence`].
    fn lstm_sequence_backward(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        y: &Tensor,
        reserve: &Tensor,
        dout: &LstmOutputGrads<'_>,
        grads: LstmGrads<'_>,
    ) -> Result<()> {
        unsupported!(self, "lstm_sequence_backward")
    }

    /// One LSTM step (see [`crate::ops::lstm_cell`]).
    fn lstm_cell(&self, plan: &LstmPlan, args: &LstmArgs<'_>, out: LstmOutputs<'_>) -> Result<()> {
        unsupported!(self, "lstm_cell")
    }

    /// The gradients of [`Backend::lstm_cell`]; `h` is the step's new `h`.
    fn lstm_cell_backward(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        h: &Tensor,
        reserve: &Tensor,
        dout: &LstmOutputGrads<'_>,
        grads: LstmGrads<'_>,
    ) -> Result<()> {
        unsupported!(self, "lstm_cell_backward")
    }

    /// Fused scaled dot-product attention (see [`crate::ops::attention`]).
    fn attention(
        &self,
        plan: &AttentionPlan,
        args: &AttentionArgs<'_>,
        out: &mut Tensor,
        lse: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "attention")
    }

    /// The gradients of [`Backend::attention`] (see [`crate::ops::attention_backward`]).
    fn attention_backward(
        &self,
        plan: &AttentionPlan,
        args: &AttentionArgs<'_>,
        out: &Tensor,
        lse: &Tensor,
        dout: &Tensor,
        grads: AttentionGrads<'_>,
    ) -> Result<()> {
        unsupported!(self, "attention_backward")
    }

    /// Fused layer normalisation over the last axis (see [`crate::ops::layer_norm`]).
    fn layer_norm(
        &self,
        plan: &LayerNormPlan,
        args: &LayerNormArgs<'_>,
        y: &mut Tensor,
        mean: &mut Tensor,
        rstd: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "layer_norm")
    }

    /// The gradients of [`Backend::layer_norm`] (see [`crate::ops::layer_norm_backward`]).
    fn layer_norm_backward(
        &self,
        plan: &LayerNormPlan,
        args: &LayerNormArgs<'_>,
        mean: &Tensor,
        rstd: &Tensor,
        dy: &Tensor,
        grads: LayerNormGrads<'_>,
    ) -> Result<()> {
        unsupported!(self, "layer_norm_backward")
    }

    /// Depthwise 1-D convolution, channels last (see [`crate::ops::depthwise_conv1d`]).
    fn depthwise_conv1d(
        &self,
        plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        y: &mut Tensor,
    ) -> Result<()> {
        unsupported!(self, "depthwise_conv1d")
    }

    /// The gradients of [`Backend::depthwise_conv1d`].
    fn depthwise_conv1d_backward(
        &self,
        plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        dy: &Tensor,
        grads: DepthwiseGrads<'_>,
    ) -> Result<()> {
        unsupported!(self, "depthwise_conv1d_backward")
    }
}

//! The op set, validated.
//!
//! Every op is a free function here that checks devices, dtypes and shapes once,
//! builds a small *plan* (the sizes a kernel needs) and hands it to the
//! [`Backend`]. Backends receive only validated plans, so the checks live in one
//! place for every device and no backend can disagree with another about what is
//! legal. Outputs are written into caller-owned tensors (`&mut Tensor`), so a
//! static graph reuses its buffers; [`zeros`] allocates a fresh one.
//!
//! Each forward op that has a gradient has its backward op beside it
//! (`conv2d` / `conv2d_backward_data` / `conv2d_backward_filter`, ...).

mod attention;
mod concat;
mod conv;
mod ctc;
mod depthwise;
mod dropout;
mod elementwise;
mod gemm;
mod index;
mod layer_norm;
mod loss;
mod lstm;
mod memory;
mod nadam;
mod optim;
mod permute;
mod pool;
mod random;
mod reduce;
mod select;
mod softmax;

pub use attention::{
    attention, attention_backward, attention_plan, check_key_lengths, AttentionArgs,
    AttentionGrads, AttentionPlan,
};
pub use concat::{concat, split, ConcatPlan};
pub use conv::{
    conv2d, conv2d_backward_bias, conv2d_backward_data, conv2d_backward_filter, Conv2dParams,
    Conv2dPlan,
};
pub use ctc::{ctc_check, ctc_loss, ctc_plan, CtcInputs, CtcPlan};
pub use depthwise::{
    depthwise_conv1d, depthwise_conv1d_backward, depthwise_plan, DepthwiseArgs, DepthwiseGrads,
    DepthwisePlan,
};
pub use dropout::{dropout, dropout_backward, DropoutPlan};
pub use elementwise::{
    binary, binary_backward, binary_kernels, unary, unary_backward, unary_kernels, BinaryDomain,
    BinaryKernel, BinaryOp, BinaryPlan, BinaryVisitor, UnaryDomain, UnaryGrad, UnaryKernel,
    UnaryOp, UnaryVisitor,
};
pub use gemm::{gemm, GemmPlan, GemmSpec};
pub use index::{index_add, index_select, IndexPlan};
pub use layer_norm::{
    layer_norm, layer_norm_backward, layer_norm_plan, LayerNormArgs, LayerNormGrads, LayerNormPlan,
};
pub use loss::{softmax_cross_entropy, CrossEntropyPlan};
pub use lstm::{
    check_lengths, lstm_cell, lstm_cell_backward, lstm_plan, lstm_reserve_len, lstm_sequence,
    lstm_sequence_backward, LstmArgs, LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan,
};
pub use memory::{cast, copy, download, fill, output, rounded, upload, zeros};
pub use nadam::{nadam_update, NAdamStep};
pub use optim::{adam_update, sgd_update, AdamHyper, SgdHyper};
pub use permute::{permute, PermutePlan};
pub use pool::{pool2d, pool2d_backward, Pool2dParams, Pool2dPlan, PoolKind};
pub use random::{random, Distribution};
pub use reduce::{argmax, reduce, reduce_backward, AxisPlan, ReduceOp, ReducePlan};
pub use select::{select, SelectPlan};
pub use softmax::{softmax, softmax_backward};

use crate::{Backend, DType, Error, Result, Shape, Tensor};

/// Fails unless `t` lives on the backend's device.
pub(crate) fn check_device(op: &str, what: &str, be: &dyn Backend, t: &Tensor) -> Result<()> {
    if t.device() != be.device() {
        return Err(Error::WrongDevice {
            op: op.into(),
            what: what.into(),
            expected: be.device(),
            actual: t.device(),
        });
    }
    Ok(())
}

/// Fails unless `t` has element type `dtype`.
pub(crate) fn check_dtype(op: &str, what: &str, t: &Tensor, dtype: DType) -> Result<()> {
    if t.dtype() != dtype {
        return Err(Error::DTypeMismatch {
            op: op.into(),
            what: what.into(),
            expected: dtype,
            actual: t.dtype(),
        });
    }
    Ok(())
}

/// Fails unless `t` has exactly `shape`.
pub(crate) fn check_shape(op: &str, what: &str, t: &Tensor, shape: &Shape) -> Result<()> {
    if t.shape() != shape {
        return Err(Error::shape(op, what, shape, t.shape()));
    }
    Ok(())
}

/// Device and f32 checks for a list of named operands.
pub(crate) fn check_f32_on(op: &str, be: &dyn Backend, operands: &[(&str, &Tensor)]) -> Result<()> {
    for (what, t) in operands {
        check_device(op, what, be, t)?;
        check_dtype(op, what, t, DType::F32)?;
    }
    Ok(())
}

/// Fails unless `t` has rank `rank`; `layout` names the axes for the message.
pub(crate) fn check_rank(
    op: &str,
    what: &str,
    t: &Tensor,
    rank: usize,
    layout: &str,
) -> Result<()> {
    if t.shape().rank() != rank {
        return Err(Error::shape(
            op,
            what,
            format!("rank {rank} {layout}"),
            t.shape(),
        ));
    }
    Ok(())
}

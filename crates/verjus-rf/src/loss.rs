//! [`cross_entropy`] against sparse (class index) or dense (probability)
//! targets.

use crate::binary::select_into;
use crate::index::one_hot;
use crate::reduce::{reduce, ReduceMode};
use crate::softmax::log_softmax;
use crate::unary::activation;
use crate::{fmt_dims, matmul, Dim, RfDType, RfTensor};
use verjus_core::ops::UnaryOp;
use verjus_core::{Error, Result};

/// What [`cross_entropy`]'s `estimated` holds over the class dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EstimatedType {
    Logits,
    LogProbs,
    Probs,
}

impl EstimatedType {
    /// RETURNN's names: `"logits"`, `"log-probs"`, `"probs"`.
    pub fn parse(name: &str) -> Result<EstimatedType> {
        match name {
            "logits" => Ok(EstimatedType::Logits),
            "log-probs" => Ok(EstimatedType::LogProbs),
            "probs" => Ok(EstimatedType::Probs),
            other => Err(Error::invalid(
                "cross_entropy",
                format!("unknown estimated_type {other:?} (logits, log-probs or probs)"),
            )),
        }
    }
}

/// `-sum over axis of target * log p` per entry, `estimated` over `axis`
/// (the class dim) holding logits, log-probs or probs: `target` is either
/// class indices whose `sparse_dim` is `axis` (then `-log p(target)`), or
/// float32 probabilities over `axis` (as RETURNN: `-matmul(target, log p,
/// reduce=axis)`, so the result has the target's dims first). The result
/// lacks `axis`; the padding of dynamic dims is left for the caller's
/// masked reduction.
pub fn cross_entropy(
    estimated: &RfTensor,
    target: &RfTensor,
    axis: &Dim,
    estimated_type: EstimatedType,
) -> Result<RfTensor> {
    estimated.axis("cross_entropy", axis)?;
    let dense = target.sparse_dim().is_none();
    if dense && (target.axis_of(axis).is_none() || target.dtype() != RfDType::Float32) {
        return Err(Error::invalid(
            "cross_entropy",
            format!(
                "a dense target must be float32 probabilities over the class dim {axis}; got {} {}",
                target.dtype(),
                fmt_dims(target.dims())
            ),
        ));
    }
    if !dense && target.sparse_dim() != Some(axis) {
        return Err(Error::invalid(
            "cross_entropy",
            format!(
                "target {} must have sparse_dim {axis} (the class dim of estimated {})",
                fmt_dims(target.dims()),
                fmt_dims(estimated.dims())
            ),
        ));
    }
    let log_probs = match estimated_type {
        EstimatedType::Logits => log_softmax(estimated, axis, true)?,
        EstimatedType::LogProbs => estimated.clone(),
        EstimatedType::Probs => activation(estimated, UnaryOp::Log)?,
    };
    if dense {
        let dot = matmul(target, &log_probs, std::slice::from_ref(axis), true)?;
        return activation(&dot, UnaryOp::Neg);
    }
    // Pick the target's entry with `where`, so -inf elsewhere stays out.
    let hit = one_hot(target)?;
    let out = crate::align::union(log_probs.dims(), hit.dims());
    let zero = RfTensor::scalar(0.0, estimated.backend())?;
    let picked = select_into(out, &hit, &log_probs, &zero)?;
    let sum = reduce(&picked, ReduceMode::Sum, std::slice::from_ref(axis), false)?;
    activation(&sum, UnaryOp::Neg)
}

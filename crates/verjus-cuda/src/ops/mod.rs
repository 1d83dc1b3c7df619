//! The op set on the GPU, one file per group, mirroring `verjus_core::ops`.
//! Plans arrive validated; each function binds the context, turns tensors
//! into device addresses and issues library calls or kernel launches on the
//! device's stream without waiting (except where noted).

pub(crate) mod attention;
mod attention_gemm;
pub(crate) mod concat;
pub(crate) mod conv;
pub(crate) mod ctc;
pub(crate) mod depthwise;
pub(crate) mod dropout;
pub(crate) mod elementwise;
pub(crate) mod gemm;
pub(crate) mod index;
pub(crate) mod layer_norm;
pub(crate) mod loss;
pub(crate) mod lstm;
mod lstm_cell;
mod lstm_cudnn;
pub(crate) mod memory;
pub(crate) mod optim;
pub(crate) mod permute;
pub(crate) mod pool;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod softmax;

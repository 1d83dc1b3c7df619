//! The LSTM over a padded batch of sequences through cuDNN 9's RNN API.
//!
//! Per LSTM shape ([`LstmKey`]) the RNN descriptor and the layout of its
//! packed weight space are made once and cached; each call describes its
//! sequences (`T`, `B` and the lengths) with fresh RNN-data descriptors,
//! takes cuDNN's workspace from the shared [`super::workspace::Workspace`]
//! and works in the caller's reserve, which holds the packed weights and
//! cuDNN's reserve space ([`ReserveLayout`]). The op (`ops/lstm.rs`) packs the
//! weights, handles what cuDNN cannot (no frames, sequences of length 0) and
//! unpacks the gradients; the arithmetic is in `rnn_layout.rs`.

use super::desc::{RnnDescs, SeqDescs};
use super::raw::{self, Handle, Part, RnnSpaces, Scratch};
use super::rnn_layout::{
    LinLayer, LstmKey, Reported, ReserveLayout, SeqLengths, WeightLayout, LSTM_LIN_LAYERS,
};
use super::workspace::Workspace;
use super::{cached, Cudnn, State};
use crate::device::Gpu;
use cudarc::driver::sys::CUdeviceptr;
use verjus_core::Result;

/// Device addresses of a training forward. States of address 0 are absent:
/// `hx`, `cx` are then zeros, `hy`, `cy` not written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LstmForwardPtrs {
    pub x: CUdeviceptr,
    pub y: CUdeviceptr,
    pub hx: CUdeviceptr,
    pub cx: CUdeviceptr,
    pub hy: CUdeviceptr,
    pub cy: CUdeviceptr,
}

/// Device addresses of a backward: the forward's operands and outputs, the
/// output gradients (`dy` required; `dhy`, `dcy` 0 for zeros) and the input
/// gradients (`dx` required; `dhx`, `dcx` 0 when not wanted).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LstmBackwardPtrs {
    pub x: CUdeviceptr,
    pub y: CUdeviceptr,
    pub hx: CUdeviceptr,
    pub cx: CUdeviceptr,
    pub dy: CUdeviceptr,
    pub dhy: CUdeviceptr,
    pub dcy: CUdeviceptr,
    pub dx: CUdeviceptr,
    pub dhx: CUdeviceptr,
    pub dcx: CUdeviceptr,
}

/// An LSTM shape's cached cuDNN state.
#[derive(Debug)]
pub(super) struct Lstm {
    descs: RnnDescs,
    layout: WeightLayout,
}

impl Lstm {
    fn new(gpu: &Gpu, op: &str, h: &Handle, ws: &mut Workspace, key: &LstmKey) -> Result<Self> {
        let descs = RnnDescs::new(gpu, op, h, key)?;
        // cuDNN reports addresses inside a weight space; any buffer of its
        // size serves, and the offsets hold for every other.
        let space = ws.get(op, descs.weight_bytes)?;
        let fail = |f: raw::Failure| gpu.error(op, f.call, f.err);
        let at = |id: usize, part: Part| -> Result<Reported> {
            let (addr, dims) =
                raw::weight_param(h, &descs.rnn, space, id as i32, part).map_err(fail)?;
            let offset = addr.checked_sub(space.ptr).ok_or_else(|| {
                gpu.error(
                    op,
                    "cudnnGetRNNWeightParams",
                    format!("linear layer {id} lies before the weight space"),
                )
            })?;
            Ok(Reported {
                offset: offset as usize,
                dims,
            })
        };
        let mut layers = Vec::with_capacity(LSTM_LIN_LAYERS);
        for id in 0..LSTM_LIN_LAYERS {
            layers.push(LinLayer {
                matrix: at(id, Part::Matrix)?,
                bias: key.bias.then(|| at(id, Part::Bias)).transpose()?,
            });
        }
        let layout = WeightLayout::new(key, descs.weight_bytes, &layers)
            .map_err(|msg| gpu.error(op, "reading cuDNN's LSTM weight layout", msg))?;
        Ok(Lstm { descs, layout })
    }
}

/// The layouts one LSTM shape and size works with.
#[derive(Clone, Debug)]
pub(crate) struct LstmSpace {
    /// Where the packed weights' gate blocks go.
    pub weights: WeightLayout,
    /// Where the packed weights and cuDNN's reserve space lie in the reserve.
    pub reserve: ReserveLayout,
}

impl Cudnn {
    /// The layouts of `key` over `steps` frames of `batch` sequences (both
    /// positive), sized for sequences of full length (the most any lengths
    /// need).
    pub fn lstm_space(
        &self,
        op: &str,
        key: &LstmKey,
        steps: usize,
        batch: usize,
    ) -> Result<LstmSpace> {
        let mut guard = self.lock();
        let State {
            handle,
            lstms,
            workspace,
            ..
        } = &mut *guard;
        let lstm = cached(lstms, *key, || {
            Lstm::new(&self.gpu, op, handle, workspace, key)
        })?;
        let full = SeqLengths::new(None, steps, batch);
        let seq = SeqDescs::new(&self.gpu, op, key, &full)?;
        let (_, reserve) =
            raw::temp_space_sizes(handle, &lstm.descs.rnn, &seq.x).map_err(self.failed(op))?;
        Ok(LstmSpace {
            weights: lstm.layout.clone(),
            reserve: ReserveLayout::new(lstm.descs.weight_bytes, reserve),
        })
    }

    /// The training forward over the sequences of `lengths`, in the reserve
    /// at `reserve` laid out as `space` (the packed weights already there).
    pub fn lstm_forward(
        &self,
        op: &str,
        key: &LstmKey,
        lengths: &SeqLengths,
        space: &ReserveLayout,
        t: &LstmForwardPtrs,
        reserve: CUdeviceptr,
    ) -> Result<()> {
        self.with_spaces(op, key, lengths, space, reserve, |handle, lstm, seq, sp| {
            raw::rnn_forward(handle, &lstm.descs, seq, t, sp).map_err(self.failed(op))
        })
    }

    /// The backward of [`Cudnn::lstm_forward`] with the same lengths and
    /// reserve: the input gradients, and with `dweights` (a zeroed buffer laid
    /// out as the weight space) the weight and bias gradients added into it.
    #[allow(clippy::too_many_arguments)] // the forward's arguments plus the gradient space
    pub fn lstm_backward(
        &self,
        op: &str,
        key: &LstmKey,
        lengths: &SeqLengths,
        space: &ReserveLayout,
        t: &LstmBackwardPtrs,
        reserve: CUdeviceptr,
        dweights: Option<CUdeviceptr>,
    ) -> Result<()> {
        self.with_spaces(op, key, lengths, space, reserve, |handle, lstm, seq, sp| {
            let fail = self.failed(op);
            raw::rnn_backward_data(handle, &lstm.descs, seq, t, sp).map_err(&fail)?;
            if let Some(dw) = dweights {
                let weights = Scratch {
                    ptr: dw,
                    bytes: space.weight_bytes,
                };
                let sp = RnnSpaces { weights, ..sp };
                raw::rnn_backward_weights(handle, &lstm.descs, seq, t, sp).map_err(&fail)?;
            }
            Ok(())
        })
    }

    /// Runs `f` with the locked handle, the cached LSTM of `key`, the
    /// sequence descriptors of `lengths`, and the weights and reserve space
    /// inside the reserve at `reserve` plus the workspace; fails if these
    /// lengths need more reserve space than `space` holds. The forward and
    /// both backwards share this set-up.
    fn with_spaces<R>(
        &self,
        op: &str,
        key: &LstmKey,
        lengths: &SeqLengths,
        space: &ReserveLayout,
        reserve: CUdeviceptr,
        f: impl FnOnce(&Handle, &Lstm, &SeqDescs, RnnSpaces) -> Result<R>,
    ) -> Result<R> {
        let mut guard = self.lock();
        let State {
            handle,
            lstms,
            workspace,
            ..
        } = &mut *guard;
        let lstm = cached(lstms, *key, || {
            Lstm::new(&self.gpu, op, handle, workspace, key)
        })?;
        let seq = SeqDescs::new(&self.gpu, op, key, lengths)?;
        let (work, need) =
            raw::temp_space_sizes(handle, &lstm.descs.rnn, &seq.x).map_err(self.failed(op))?;
        if need > space.cudnn_bytes {
            return Err(self.gpu.error(
                op,
                "sizing cuDNN's reserve space",
                format!(
                    "these lengths need {need} bytes, more than the {} the reserve holds",
                    space.cudnn_bytes
                ),
            ));
        }
        let spaces = RnnSpaces {
            weights: Scratch {
                ptr: reserve,
                bytes: space.weight_bytes,
            },
            work: workspace.get(op, work)?,
            reserve: Scratch {
                ptr: reserve + space.cudnn_at as u64,
                bytes: space.cudnn_bytes,
            },
        };
        f(handle, lstm, &seq, spaces)
    }
}

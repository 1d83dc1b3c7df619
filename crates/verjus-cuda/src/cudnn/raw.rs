//! Every cuDNN library call the ops make: the one place in `cudnn/` with `unsafe`.
//!
//! cuDNN's C API hands out a handle and descriptors that must be destroyed
//! exactly once, and takes untyped device addresses. Here each handle and
//! descriptor is a type that destroys itself when dropped (its raw pointer
//! never leaves this file), and each call is a safe function over those types.
//! What makes the calls sound holds for every caller, so it is stated once:
//! - the descriptors were created here, so they are live and of the right kind;
//! - device addresses come from tensors whose shapes the op's plan validated,
//!   and the descriptors are built from the same plan; a workspace holds at
//!   least the bytes passed with it;
//! - `Cudnn` uses a handle and its descriptors only under its lock, with the
//!   device's context current, on the device's one stream.
//!
//! The cuDNN RNN calls of the LSTM (`cudnnRNNForward`,
//! `cudnnRNNBackwardData_v8`, `cudnnRNNBackwardWeights_v8`, the RNN, RNN-data
//! and dropout descriptors, the size and weight-layout queries) are here too,
//! beside the convolution's; for them the plan's sizes also bound the weight
//! space, workspace and reserve space passed with each call (see
//! `rnn_layout.rs`), and host arrays (the sequence lengths) are read only
//! during the call.

use super::algo::{Algo, Direction, Found};
use super::conv::ConvOperands;
use super::desc::{ConvDescs, RnnDescs, SeqDescs};
use super::rnn::{LstmBackwardPtrs, LstmForwardPtrs};
use cudarc::cudnn::result::CudnnError;
use cudarc::cudnn::sys as dnn;
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use std::ffi::c_void;

/// A failed call: the cuDNN function and its status.
#[derive(Debug)]
pub(super) struct Failure {
    pub call: &'static str,
    pub err: CudnnError,
}

fn check(call: &'static str, status: dnn::cudnnStatus_t) -> Result<(), Failure> {
    status.result().map_err(|err| Failure { call, err })
}

/// Device scratch memory lent to one call: `bytes` at `ptr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Scratch {
    pub ptr: CUdeviceptr,
    pub bytes: usize,
}

/// A cuDNN object owned by the value: created by `$create`, destroyed by
/// `$destroy` on drop.
macro_rules! owned {
    ($(#[$doc:meta])* $name:ident($raw:ty), $create:ident, $destroy:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub(super) struct $name($raw);

        // SAFETY: a cuDNN object may be used from any thread with the context
        // current; `Cudnn` uses it under its lock only (it is not `Sync`).
        unsafe impl Send for $name {}

        impl $name {
            fn create() -> Result<Self, Failure> {
                let mut raw = std::ptr::null_mut();
                // SAFETY: a valid out-pointer.
                check(stringify!($create), unsafe { dnn::$create(&mut raw) })?;
                Ok($name(raw))
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: created by `create` and destroyed only here; a
                // destructor cannot report an error.
                let _ = unsafe { dnn::$destroy(self.0) };
            }
        }
    };
}

owned!(
    /// The cuDNN handle of one device, issuing on its stream.
    Handle(dnn::cudnnHandle_t),
    cudnnCreate,
    cudnnDestroy
);
owned!(
    /// An fp32 NCHW tensor descriptor.
    TensorDesc(dnn::cudnnTensorDescriptor_t),
    cudnnCreateTensorDescriptor,
    cudnnDestroyTensorDescriptor
);
owned!(
    /// An fp32 `[out, in, kh, kw]` filter descriptor.
    FilterDesc(dnn::cudnnFilterDescriptor_t),
    cudnnCreateFilterDescriptor,
    cudnnDestroyFilterDescriptor
);
owned!(
    /// A 2-D cross-correlation descriptor with its math type.
    ConvDesc(dnn::cudnnConvolutionDescriptor_t),
    cudnnCreateConvolutionDescriptor,
    cudnnDestroyConvolutionDescriptor
);
owned!(
    /// A 2-D average-pooling descriptor (padding counts in the divisor).
    PoolDesc(dnn::cudnnPoolingDescriptor_t),
    cudnnCreatePoolingDescriptor,
    cudnnDestroyPoolingDescriptor
);

owned!(
    /// A dropout descriptor (the LSTM's has no dropout; cuDNN still wants one).
    DropoutDesc(dnn::cudnnDropoutDescriptor_t),
    cudnnCreateDropoutDescriptor,
    cudnnDestroyDropoutDescriptor
);
owned!(
    /// A one-layer, unidirectional fp32 LSTM.
    RnnDesc(dnn::cudnnRNNDescriptor_t),
    cudnnCreateRNNDescriptor,
    cudnnDestroyRNNDescriptor
);
owned!(
    /// A sequence-major, padded batch of sequences with their lengths.
    RnnDataDesc(dnn::cudnnRNNDataDescriptor_t),
    cudnnCreateRNNDataDescriptor,
    cudnnDestroyRNNDataDescriptor
);

/// `CUDNN_RNN_PADDED_IO_ENABLED` (a `#define` of `cudnn_adv.h`, so not in the
/// bindings): the unpacked layouts with padding between sequences.
const RNN_PADDED_IO_ENABLED: u32 = 1;

impl Handle {
    /// A handle issuing its work on `stream`.
    pub fn new(stream: CUstream) -> Result<Self, Failure> {
        let h = Handle::create()?;
        // SAFETY: a fresh handle and the device's live stream.
        check("cudnnSetStream", unsafe {
            dnn::cudnnSetStream(h.0, stream as dnn::cudaStream_t)
        })?;
        Ok(h)
    }
}

impl TensorDesc {
    pub fn nchw(d: [i32; 4]) -> Result<Self, Failure> {
        let t = TensorDesc::create()?;
        // SAFETY: a fresh descriptor.
        check("cudnnSetTensor4dDescriptor", unsafe {
            dnn::cudnnSetTensor4dDescriptor(
                t.0,
                dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
                d[0],
                d[1],
                d[2],
                d[3],
            )
        })?;
        Ok(t)
    }

    /// A fully packed `[d0, d1, d2]` descriptor (an RNN state `[layers, B, H]`).
    pub fn packed3(d: [i32; 3]) -> Result<Self, Failure> {
        let t = TensorDesc::create()?;
        let strides = [d[1].saturating_mul(d[2]), d[2], 1];
        // SAFETY: a fresh descriptor; both arrays hold the 3 dims passed.
        check("cudnnSetTensorNdDescriptor", unsafe {
            dnn::cudnnSetTensorNdDescriptor(
                t.0,
                dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
                3,
                d.as_ptr(),
                strides.as_ptr(),
            )
        })?;
        Ok(t)
    }

    /// The dims cuDNN set on the descriptor (at most 3 are read).
    fn dims(&self) -> Result<Vec<i32>, Failure> {
        let (mut dims, mut strides) = ([0i32; 3], [0i32; 3]);
        let mut nb = 0;
        let mut dtype = dnn::cudnnDataType_t::CUDNN_DATA_FLOAT;
        // SAFETY: a live descriptor; the arrays hold the 3 dims requested.
        check("cudnnGetTensorNdDescriptor", unsafe {
            dnn::cudnnGetTensorNdDescriptor(
                self.0,
                3,
                &mut dtype,
                &mut nb,
                dims.as_mut_ptr(),
                strides.as_mut_ptr(),
            )
        })?;
        Ok(dims[..usize::try_from(nb).unwrap_or(0).min(3)].to_vec())
    }
}

impl FilterDesc {
    pub fn kcrs(d: [i32; 4]) -> Result<Self, Failure> {
        let f = FilterDesc::create()?;
        // SAFETY: a fresh descriptor.
        check("cudnnSetFilter4dDescriptor", unsafe {
            dnn::cudnnSetFilter4dDescriptor(
                f.0,
                dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
                dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                d[0],
                d[1],
                d[2],
                d[3],
            )
        })?;
        Ok(f)
    }
}

impl ConvDesc {
    /// `(height, width)` padding, stride and dilation.
    pub fn new(
        padding: [i32; 2],
        stride: [i32; 2],
        dilation: [i32; 2],
        math: dnn::cudnnMathType_t,
    ) -> Result<Self, Failure> {
        let c = ConvDesc::create()?;
        // SAFETY: a fresh descriptor.
        check("cudnnSetConvolution2dDescriptor", unsafe {
            dnn::cudnnSetConvolution2dDescriptor(
                c.0,
                padding[0],
                padding[1],
                stride[0],
                stride[1],
                dilation[0],
                dilation[1],
                dnn::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
            )
        })?;
        c.set_math(math)?;
        Ok(c)
    }

    pub fn set_math(&self, math: dnn::cudnnMathType_t) -> Result<(), Failure> {
        // SAFETY: a live descriptor.
        check("cudnnSetConvolutionMathType", unsafe {
            dnn::cudnnSetConvolutionMathType(self.0, math)
        })
    }
}

impl PoolDesc {
    /// `(height, width)` window, padding and stride.
    pub fn average(window: [i32; 2], padding: [i32; 2], stride: [i32; 2]) -> Result<Self, Failure> {
        let p = PoolDesc::create()?;
        // SAFETY: a fresh descriptor.
        check("cudnnSetPooling2dDescriptor", unsafe {
            dnn::cudnnSetPooling2dDescriptor(
                p.0,
                dnn::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                dnn::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                window[0],
                window[1],
                padding[0],
                padding[1],
                stride[0],
                stride[1],
            )
        })?;
        Ok(p)
    }
}

/// How many results one algorithm search asks for.
const SEARCH_RESULTS: usize = 8;

/// An input address as cuDNN takes it.
fn input(p: CUdeviceptr) -> *const c_void {
    p as *const c_void
}

/// An output address as cuDNN takes it.
fn out(p: CUdeviceptr) -> *mut c_void {
    p as *mut c_void
}

/// `1` and `0`, the `alpha` and `beta` of an overwriting call.
static ONE: f32 = 1.0;
static ZERO: f32 = 0.0;

fn scale(v: &'static f32) -> *const c_void {
    (v as *const f32).cast()
}

/// [`find`] and [`convolve`] from one line per direction: its search, its
/// run, its perf-result type, and the [`ConvDescs`] / [`ConvOperands`] fields
/// it reads and writes, in cuDNN's argument order (`[in, in -> out]`).
macro_rules! conv_calls {
    ($($dir:ident: $find:ident, $run:ident, $perf:ident, [$a:ident, $b:ident -> $c:ident];)*) => {
        /// `cudnnFind*AlgorithmEx` for `dir`: times the candidates on the real
        /// buffers (overwriting the direction's output) and returns cuDNN's
        /// results, fastest first.
        pub(super) fn find(
            h: &Handle,
            dir: Direction,
            d: &ConvDescs,
            t: ConvOperands,
            ws: Scratch,
        ) -> Result<Vec<Found>, Failure> {
            match dir {
                $(Direction::$dir => {
                    // SAFETY: all zeros is a valid perf struct (every enum
                    // field has a 0 variant).
                    let mut perf: [dnn::$perf; SEARCH_RESULTS] = unsafe { std::mem::zeroed() };
                    let mut found = 0;
                    // SAFETY: see the module doc; `perf` holds SEARCH_RESULTS results.
                    check(stringify!($find), unsafe {
                        dnn::$find(
                            h.0, d.$a.0, input(t.$a), d.$b.0, input(t.$b), d.conv.0,
                            d.$c.0, out(t.$c), SEARCH_RESULTS as i32, &mut found,
                            perf.as_mut_ptr(), out(ws.ptr), ws.bytes,
                        )
                    })?;
                    let found = usize::try_from(found).unwrap_or(0).min(SEARCH_RESULTS);
                    Ok(perf[..found]
                        .iter()
                        .map(|r| Found::new(r.status, r.mathType, Algo::$dir(r.algo), r.memory))
                        .collect())
                })*
            }
        }

        /// Runs `algo` in its direction, overwriting the direction's output.
        pub(super) fn convolve(
            h: &Handle,
            d: &ConvDescs,
            algo: Algo,
            t: ConvOperands,
            ws: Scratch,
        ) -> Result<(), Failure> {
            match algo {
                // SAFETY: see the module doc; `algo` came from this
                // direction's search on these descriptors.
                $(Algo::$dir(a) => check(stringify!($run), unsafe {
                    dnn::$run(
                        h.0, scale(&ONE), d.$a.0, input(t.$a), d.$b.0, input(t.$b), d.conv.0,
                        a, out(ws.ptr), ws.bytes, scale(&ZERO), d.$c.0, out(t.$c),
                    )
                }),)*
            }
        }
    };
}

conv_calls! {
    Forward: cudnnFindConvolutionForwardAlgorithmEx, cudnnConvolutionForward,
        cudnnConvolutionFwdAlgoPerf_t, [x, w -> y];
    BackwardData: cudnnFindConvolutionBackwardDataAlgorithmEx, cudnnConvolutionBackwardData,
        cudnnConvolutionBwdDataAlgoPerf_t, [w, y -> x];
    BackwardFilter: cudnnFindConvolutionBackwardFilterAlgorithmEx, cudnnConvolutionBackwardFilter,
        cudnnConvolutionBwdFilterAlgoPerf_t, [x, y -> w];
}

/// `y = pool(x)`.
pub(super) fn pool_forward(
    h: &Handle,
    pool: &PoolDesc,
    (x_desc, x): (&TensorDesc, CUdeviceptr),
    (y_desc, y): (&TensorDesc, CUdeviceptr),
) -> Result<(), Failure> {
    // SAFETY: see the module doc.
    check("cudnnPoolingForward", unsafe {
        dnn::cudnnPoolingForward(
            h.0,
            pool.0,
            scale(&ONE),
            x_desc.0,
            input(x),
            scale(&ZERO),
            y_desc.0,
            out(y),
        )
    })
}

/// `dx` from the forward's `x`, `y` and `dy` (`dy` shares `y`'s descriptor,
/// `dx` `x`'s).
pub(super) fn pool_backward(
    h: &Handle,
    pool: &PoolDesc,
    (x_desc, x, dx): (&TensorDesc, CUdeviceptr, CUdeviceptr),
    (y_desc, y, dy): (&TensorDesc, CUdeviceptr, CUdeviceptr),
) -> Result<(), Failure> {
    // SAFETY: see the module doc.
    check("cudnnPoolingBackward", unsafe {
        dnn::cudnnPoolingBackward(
            h.0,
            pool.0,
            scale(&ONE),
            y_desc.0,
            input(y),
            y_desc.0,
            input(dy),
            x_desc.0,
            input(x),
            scale(&ZERO),
            x_desc.0,
            out(dx),
        )
    })
}

impl DropoutDesc {
    /// Dropout 0 without random states: a one-layer RNN applies no dropout,
    /// but its descriptor must name one.
    pub fn none(h: &Handle) -> Result<Self, Failure> {
        let d = DropoutDesc::create()?;
        // SAFETY: a fresh descriptor and a live handle; without states (null,
        // 0 bytes) cuDNN keeps no device pointer.
        check("cudnnSetDropoutDescriptor", unsafe {
            dnn::cudnnSetDropoutDescriptor(d.0, h.0, 0.0, std::ptr::null_mut(), 0, 0)
        })?;
        Ok(d)
    }
}

impl RnnDesc {
    /// A one-layer, unidirectional fp32 LSTM of `input` features and `hidden`
    /// units without projection, with PyTorch's two biases (`b_ih`, `b_hh`)
    /// or none, over padded sequence-major data. It refers to `dropout`,
    /// which must outlive it.
    pub fn lstm(
        input: i32,
        hidden: i32,
        bias: bool,
        math: dnn::cudnnMathType_t,
        dropout: &DropoutDesc,
    ) -> Result<Self, Failure> {
        let r = RnnDesc::create()?;
        let bias = if bias {
            dnn::cudnnRNNBiasMode_t::CUDNN_RNN_DOUBLE_BIAS
        } else {
            dnn::cudnnRNNBiasMode_t::CUDNN_RNN_NO_BIAS
        };
        let float = dnn::cudnnDataType_t::CUDNN_DATA_FLOAT;
        // SAFETY: a fresh descriptor and a live dropout descriptor.
        check("cudnnSetRNNDescriptor_v8", unsafe {
            dnn::cudnnSetRNNDescriptor_v8(
                r.0,
                dnn::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_STANDARD,
                dnn::cudnnRNNMode_t::CUDNN_LSTM,
                bias,
                dnn::cudnnDirectionMode_t::CUDNN_UNIDIRECTIONAL,
                dnn::cudnnRNNInputMode_t::CUDNN_LINEAR_INPUT,
                float,
                float,
                math,
                input,
                hidden,
                hidden,
                1,
                dropout.0,
                RNN_PADDED_IO_ENABLED,
            )
        })?;
        Ok(r)
    }
}

impl RnnDataDesc {
    /// fp32 data `[max_len, lengths.len(), vector]`, sequence-major with
    /// padding: sequence `b` has `lengths[b]` frames (each in `1..=max_len`),
    /// and outputs described by it are 0 on the padding.
    pub fn seq_major(max_len: i32, vector: i32, lengths: &[i32]) -> Result<Self, Failure> {
        let call = "cudnnSetRNNDataDescriptor";
        let batch = i32::try_from(lengths.len()).map_err(|_| Failure {
            call,
            err: CudnnError(dnn::cudnnStatus_t::CUDNN_STATUS_BAD_PARAM),
        })?;
        let d = RnnDataDesc::create()?;
        let mut fill = 0.0f32;
        // SAFETY: a fresh descriptor; `lengths` holds `batch` lengths and
        // `fill` one f32 (the data type), both read during the call only.
        check(call, unsafe {
            dnn::cudnnSetRNNDataDescriptor(
                d.0,
                dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
                dnn::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                max_len,
                batch,
                vector,
                lengths.as_ptr(),
                (&mut fill as *mut f32).cast(),
            )
        })?;
        Ok(d)
    }
}

/// The bytes of the RNN's weight space.
pub(super) fn weight_space_size(h: &Handle, rnn: &RnnDesc) -> Result<usize, Failure> {
    let mut bytes = 0;
    // SAFETY: see the module doc; a valid out-pointer.
    check("cudnnGetRNNWeightSpaceSize", unsafe {
        dnn::cudnnGetRNNWeightSpaceSize(h.0, rnn.0, &mut bytes)
    })?;
    Ok(bytes)
}

/// The `(workspace, reserve space)` bytes a training forward and its
/// backward need for the sequences `x` describes.
pub(super) fn temp_space_sizes(
    h: &Handle,
    rnn: &RnnDesc,
    x: &RnnDataDesc,
) -> Result<(usize, usize), Failure> {
    let (mut work, mut reserve) = (0, 0);
    // SAFETY: see the module doc; valid out-pointers.
    check("cudnnGetRNNTempSpaceSizes", unsafe {
        dnn::cudnnGetRNNTempSpaceSizes(
            h.0,
            rnn.0,
            dnn::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
            x.0,
            &mut work,
            &mut reserve,
        )
    })?;
    Ok((work, reserve))
}

/// The part of a linear layer that [`weight_param`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    Matrix,
    Bias,
}

/// Where the weight space at `space` holds linear layer `id`'s matrix or
/// bias (of the first and only layer): its address and the dims cuDNN reports.
pub(super) fn weight_param(
    h: &Handle,
    rnn: &RnnDesc,
    space: Scratch,
    id: i32,
    part: Part,
) -> Result<(CUdeviceptr, Vec<i32>), Failure> {
    let desc = TensorDesc::create()?;
    let mut addr: *mut c_void = std::ptr::null_mut();
    let none = std::ptr::null_mut();
    let (m_desc, m_addr, b_desc, b_addr) = match part {
        Part::Matrix => (desc.0, &mut addr as *mut _, none, std::ptr::null_mut()),
        Part::Bias => (none, std::ptr::null_mut(), desc.0, &mut addr as *mut _),
    };
    // SAFETY: see the module doc; cuDNN only computes an address inside the
    // weight space (it does not access it) and sets the live descriptor.
    check("cudnnGetRNNWeightParams", unsafe {
        dnn::cudnnGetRNNWeightParams(
            h.0,
            rnn.0,
            0,
            space.bytes,
            input(space.ptr),
            id,
            m_desc,
            m_addr,
            b_desc,
            b_addr,
        )
    })?;
    Ok((addr as CUdeviceptr, desc.dims()?))
}

/// The device memory an RNN call works in: the packed weights (or their
/// gradients), the workspace and the reserve space.
#[derive(Clone, Copy, Debug)]
pub(super) struct RnnSpaces {
    pub weights: Scratch,
    pub work: Scratch,
    pub reserve: Scratch,
}

/// The training forward: `y`, `hy`, `cy` and the reserve space from `x`,
/// `hx`, `cx` and the weights (absent states, address 0, are zeros; absent
/// outputs are not written).
pub(super) fn rnn_forward(
    h: &Handle,
    d: &RnnDescs,
    s: &SeqDescs,
    t: &LstmForwardPtrs,
    sp: RnnSpaces,
) -> Result<(), Failure> {
    // SAFETY: see the module doc; the sequence lengths live in `s.x` (cuDNN
    // 8.9.1 and later take no device copy, so it is null).
    check("cudnnRNNForward", unsafe {
        dnn::cudnnRNNForward(
            h.0,
            d.rnn.0,
            dnn::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
            std::ptr::null(),
            s.x.0,
            input(t.x),
            s.y.0,
            out(t.y),
            s.state.0,
            input(t.hx),
            out(t.hy),
            s.state.0,
            input(t.cx),
            out(t.cy),
            sp.weights.bytes,
            input(sp.weights.ptr),
            sp.work.bytes,
            out(sp.work.ptr),
            sp.reserve.bytes,
            out(sp.reserve.ptr),
        )
    })
}

/// `dx`, `dhx`, `dcx` from the output gradients (absent `dhy`, `dcy` are
/// zeros; absent `dhx`, `dcx` are not written); leaves in the reserve space
/// what [`rnn_backward_weights`] reads.
pub(super) fn rnn_backward_data(
    h: &Handle,
    d: &RnnDescs,
    s: &SeqDescs,
    t: &LstmBackwardPtrs,
    sp: RnnSpaces,
) -> Result<(), Failure> {
    // SAFETY: see the module doc and `rnn_forward`.
    check("cudnnRNNBackwardData_v8", unsafe {
        dnn::cudnnRNNBackwardData_v8(
            h.0,
            d.rnn.0,
            std::ptr::null(),
            s.y.0,
            input(t.y),
            input(t.dy),
            s.x.0,
            out(t.dx),
            s.state.0,
            input(t.hx),
            input(t.dhy),
            out(t.dhx),
            s.state.0,
            input(t.cx),
            input(t.dcy),
            out(t.dcx),
            sp.weights.bytes,
            input(sp.weights.ptr),
            sp.work.bytes,
            out(sp.work.ptr),
            sp.reserve.bytes,
            out(sp.reserve.ptr),
        )
    })
}

/// Adds the weight and bias gradients into `sp.weights` (the gradient
/// space, laid out as the weight space), after [`rnn_backward_data`].
pub(super) fn rnn_backward_weights(
    h: &Handle,
    d: &RnnDescs,
    s: &SeqDescs,
    t: &LstmBackwardPtrs,
    sp: RnnSpaces,
) -> Result<(), Failure> {
    // SAFETY: see the module doc and `rnn_forward`.
    check("cudnnRNNBackwardWeights_v8", unsafe {
        dnn::cudnnRNNBackwardWeights_v8(
            h.0,
            d.rnn.0,
            dnn::cudnnWgradMode_t::CUDNN_WGRAD_MODE_ADD,
            std::ptr::null(),
            s.x.0,
            input(t.x),
            s.state.0,
            input(t.hx),
            s.y.0,
            input(t.y),
            sp.weights.bytes,
            out(sp.weights.ptr),
            sp.work.bytes,
            out(sp.work.ptr),
            sp.reserve.bytes,
            out(sp.reserve.ptr),
        )
    })
}

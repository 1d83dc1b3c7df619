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
//! The cuDNN RNN calls (`cudnnRNNForward`, `cudnnRNNBackwardData_v8`,
//! `cudnnRNNBackwardWeights_v8`, the RNN and RNN-data descriptors) belong
//! here too, beside the convolution's.

use super::algo::{Algo, Direction, Found};
use super::conv::ConvOperands;
use super::desc::ConvDescs;
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

/// `db = sum of dy` over every axis but the channels (`db`'s descriptor is `[1, c, 1, 1]`).
pub(super) fn backward_bias(
    h: &Handle,
    dy_desc: &TensorDesc,
    dy: CUdeviceptr,
    db_desc: &TensorDesc,
    db: CUdeviceptr,
) -> Result<(), Failure> {
    // SAFETY: see the module doc.
    check("cudnnConvolutionBackwardBias", unsafe {
        dnn::cudnnConvolutionBackwardBias(
            h.0,
            scale(&ONE),
            dy_desc.0,
            input(dy),
            scale(&ZERO),
            db_desc.0,
            out(db),
        )
    })
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

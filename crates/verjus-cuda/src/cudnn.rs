//! Convolution and average pooling through cuDNN 9 (legacy descriptor API).
//!
//! For each convolution shape the descriptors and the algorithm of each
//! direction are chosen once and cached: the first call of a shape runs
//! `cudnnFind*AlgorithmEx` (it times the candidates on the real buffers, which
//! the call overwrites anyway) and keeps the fastest that succeeded; later calls
//! of the shape reuse it. One workspace, grown to the largest algorithm chosen,
//! serves every call (all work is on one stream, so it is never used twice at
//! once). Without TF32 the descriptors ask for `CUDNN_FMA_MATH`, i.e. full fp32:
//! cuDNN's default would allow TF32 tensor cores on Ampere and later.

use crate::alloc::{Allocator, Block};
use crate::device::Gpu;
use cudarc::cudnn::sys as dnn;
use cudarc::driver::sys::CUdeviceptr;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use verjus_core::ops::{Conv2dPlan, Pool2dPlan};
use verjus_core::Result;

/// Bytes the algorithm search may use as workspace.
const SEARCH_WORKSPACE: usize = 256 << 20;

/// What identifies a convolution for the caches.
type ConvKey = [usize; 14];

fn conv_key(p: &Conv2dPlan, tf32: bool) -> ConvKey {
    let q = p.params;
    [
        p.n,
        p.c_in,
        p.h,
        p.w,
        p.c_out,
        p.kh,
        p.kw,
        q.stride[0],
        q.stride[1],
        q.padding[0],
        q.padding[1],
        q.dilation[0],
        q.dilation[1],
        tf32 as usize,
    ]
}

/// A convolution's descriptors and chosen algorithms `(algo, math, workspace)`.
#[derive(Debug)]
struct Conv {
    x: dnn::cudnnTensorDescriptor_t,
    y: dnn::cudnnTensorDescriptor_t,
    w: dnn::cudnnFilterDescriptor_t,
    conv: dnn::cudnnConvolutionDescriptor_t,
    fwd: Option<(dnn::cudnnConvolutionFwdAlgo_t, dnn::cudnnMathType_t, usize)>,
    bwd_data: Option<(
        dnn::cudnnConvolutionBwdDataAlgo_t,
        dnn::cudnnMathType_t,
        usize,
    )>,
    bwd_filter: Option<(
        dnn::cudnnConvolutionBwdFilterAlgo_t,
        dnn::cudnnMathType_t,
        usize,
    )>,
}

#[derive(Debug)]
struct Pool {
    x: dnn::cudnnTensorDescriptor_t,
    y: dnn::cudnnTensorDescriptor_t,
    pool: dnn::cudnnPoolingDescriptor_t,
}

#[derive(Debug)]
struct State {
    handle: dnn::cudnnHandle_t,
    convs: HashMap<ConvKey, Conv>,
    pools: HashMap<[usize; 10], Pool>,
    /// `[n, c, h, w]` tensor and `[1, c, 1, 1]` bias descriptors for the bias gradient.
    bias: HashMap<[usize; 4], (dnn::cudnnTensorDescriptor_t, dnn::cudnnTensorDescriptor_t)>,
    workspace: Option<Block>,
    workspace_bytes: usize,
}

/// The cuDNN handle of one device and its caches.
#[derive(Debug)]
pub(crate) struct Cudnn {
    gpu: Arc<Gpu>,
    alloc: Arc<Allocator>,
    state: Mutex<State>,
}

// SAFETY: the handle and descriptors are used only under the state lock and
// with the context current.
unsafe impl Send for Cudnn {}
// SAFETY: as above.
unsafe impl Sync for Cudnn {}

fn int(gpu: &Gpu, op: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| crate::error::too_large(gpu.device, op, "a size", v))
}

impl Cudnn {
    pub fn new(gpu: Arc<Gpu>, alloc: Arc<Allocator>) -> Result<Self> {
        let mut handle = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the context is current.
        unsafe { dnn::cudnnCreate(&mut handle) }
            .result()
            .map_err(|e| gpu.error("open", "cudnnCreate", e))?;
        // SAFETY: a fresh handle and the device's live stream.
        unsafe { dnn::cudnnSetStream(handle, gpu.stream() as dnn::cudaStream_t) }
            .result()
            .map_err(|e| gpu.error("open", "cudnnSetStream", e))?;
        Ok(Cudnn {
            gpu,
            alloc,
            state: Mutex::new(State {
                handle,
                convs: HashMap::new(),
                pools: HashMap::new(),
                bias: HashMap::new(),
                workspace: None,
                workspace_bytes: 0,
            }),
        })
    }

    fn check(&self, op: &str, what: &str, s: dnn::cudnnStatus_t) -> Result<()> {
        s.result().map_err(|e| self.gpu.error(op, what, e))
    }

    fn tensor4(&self, op: &str, d: [usize; 4]) -> Result<dnn::cudnnTensorDescriptor_t> {
        let g = &self.gpu;
        let mut t = std::ptr::null_mut();
        // SAFETY: valid out-pointer, then a fresh descriptor.
        unsafe {
            self.check(
                op,
                "cudnnCreateTensorDescriptor",
                dnn::cudnnCreateTensorDescriptor(&mut t),
            )?;
            self.check(
                op,
                "cudnnSetTensor4dDescriptor",
                dnn::cudnnSetTensor4dDescriptor(
                    t,
                    dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                    dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
                    int(g, op, d[0])?,
                    int(g, op, d[1])?,
                    int(g, op, d[2])?,
                    int(g, op, d[3])?,
                ),
            )?;
        }
        Ok(t)
    }

    fn make_conv(&self, op: &str, p: &Conv2dPlan, tf32: bool) -> Result<Conv> {
        let g = &self.gpu;
        let q = p.params;
        let x = self.tensor4(op, [p.n, p.c_in, p.h, p.w])?;
        let y = self.tensor4(op, [p.n, p.c_out, p.oh, p.ow])?;
        let (mut w, mut conv) = (std::ptr::null_mut(), std::ptr::null_mut());
        let math = if tf32 {
            dnn::cudnnMathType_t::CUDNN_DEFAULT_MATH
        } else {
            dnn::cudnnMathType_t::CUDNN_FMA_MATH
        };
        // SAFETY: valid out-pointers, then fresh descriptors.
        unsafe {
            self.check(
                op,
                "cudnnCreateFilterDescriptor",
                dnn::cudnnCreateFilterDescriptor(&mut w),
            )?;
            self.check(
                op,
                "cudnnSetFilter4dDescriptor",
                dnn::cudnnSetFilter4dDescriptor(
                    w,
                    dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
                    dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                    int(g, op, p.c_out)?,
                    int(g, op, p.c_in)?,
                    int(g, op, p.kh)?,
                    int(g, op, p.kw)?,
                ),
            )?;
            self.check(
                op,
                "cudnnCreateConvolutionDescriptor",
                dnn::cudnnCreateConvolutionDescriptor(&mut conv),
            )?;
            self.check(
                op,
                "cudnnSetConvolution2dDescriptor",
                dnn::cudnnSetConvolution2dDescriptor(
                    conv,
                    int(g, op, q.padding[0])?,
                    int(g, op, q.padding[1])?,
                    int(g, op, q.stride[0])?,
                    int(g, op, q.stride[1])?,
                    int(g, op, q.dilation[0])?,
                    int(g, op, q.dilation[1])?,
                    dnn::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                    dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
                ),
            )?;
            self.check(
                op,
                "cudnnSetConvolutionMathType",
                dnn::cudnnSetConvolutionMathType(conv, math),
            )?;
        }
        Ok(Conv {
            x,
            y,
            w,
            conv,
            fwd: None,
            bwd_data: None,
            bwd_filter: None,
        })
    }

    /// The workspace address for `bytes` (grown if needed).
    fn workspace(&self, op: &str, st: &mut State, bytes: usize) -> Result<*mut c_void> {
        if bytes > st.workspace_bytes || st.workspace.is_none() {
            st.workspace = None;
            st.workspace = Some(self.alloc.alloc(op, bytes.max(1))?);
            st.workspace_bytes = bytes.max(1);
        }
        Ok(st.workspace.as_ref().map_or(0, |b| b.ptr()) as *mut c_void)
    }

    /// The key of `p`'s cached descriptors, creating them on first use.
    fn conv_entry(&self, op: &str, st: &mut State, p: &Conv2dPlan, tf32: bool) -> Result<ConvKey> {
        let key = conv_key(p, tf32);
        if let Entry::Vacant(e) = st.convs.entry(key) {
            e.insert(self.make_conv(op, p, tf32)?);
        }
        Ok(key)
    }

    /// After a `cudnnFind*AlgorithmEx` search: releases the search workspace
    /// to the allocator's cache (the chosen algorithm's size is allocated when
    /// it runs) and picks the fastest result that succeeded with an allowed
    /// math type, as `(algorithm, math type, workspace bytes)`.
    fn choose<A>(
        &self,
        op: &str,
        st: &mut State,
        tf32: bool,
        results: impl Iterator<Item = (dnn::cudnnStatus_t, dnn::cudnnMathType_t, A, usize)>,
    ) -> Result<(A, dnn::cudnnMathType_t, usize)> {
        st.workspace = None;
        st.workspace_bytes = 0;
        results
            .filter(|(status, math, _, _)| {
                *status == dnn::cudnnStatus_t::CUDNN_STATUS_SUCCESS && math_ok(*math, tf32)
            })
            .map(|(_, math, algo, bytes)| (algo, math, bytes))
            .next()
            .ok_or_else(|| {
                self.gpu.error(
                    op,
                    "choosing a cuDNN algorithm",
                    "no algorithm works for this shape",
                )
            })
    }

    /// `y = conv(x, w)` (bias is added by the caller).
    pub fn conv_forward(
        &self,
        p: &Conv2dPlan,
        tf32: bool,
        x: CUdeviceptr,
        w: CUdeviceptr,
        y: CUdeviceptr,
    ) -> Result<()> {
        let op = "conv2d";
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        let key = self.conv_entry(op, st, p, tf32)?;
        if st.convs[&key].fwd.is_none() {
            let ws = self.workspace(op, st, SEARCH_WORKSPACE)?;
            let c = &st.convs[&key];
            // SAFETY: an all-zero perf struct is a valid value (every enum field has a 0 variant).
            let mut perf: [dnn::cudnnConvolutionFwdAlgoPerf_t; 8] = unsafe { std::mem::zeroed() };
            let mut found = 0;
            // SAFETY: descriptors match the buffers' shapes; the workspace
            // holds SEARCH_WORKSPACE bytes; `perf` holds 8 results.
            unsafe {
                dnn::cudnnFindConvolutionForwardAlgorithmEx(
                    st.handle,
                    c.x,
                    x as *const c_void,
                    c.w,
                    w as *const c_void,
                    c.conv,
                    c.y,
                    y as *mut c_void,
                    8,
                    &mut found,
                    perf.as_mut_ptr(),
                    ws,
                    SEARCH_WORKSPACE,
                )
            }
            .result()
            .map_err(|e| {
                self.gpu
                    .error(op, "cudnnFindConvolutionForwardAlgorithmEx", e)
            })?;
            let results = perf.iter().take(usize::try_from(found).unwrap_or(0));
            let best = self.choose(
                op,
                st,
                tf32,
                results.map(|r| (r.status, r.mathType, r.algo, r.memory)),
            )?;
            if let Some(c) = st.convs.get_mut(&key) {
                c.fwd = Some(best);
            }
        }
        let c = &st.convs[&key];
        let (algo, math, bytes) = c
            .fwd
            .ok_or_else(|| self.gpu.error(op, "cuDNN", "no algorithm"))?;
        let (handle, xd, wd, cd, yd) = (st.handle, c.x, c.w, c.conv, c.y);
        let ws = self.workspace(op, st, bytes)?;
        let (one, zero) = (1f32, 0f32);
        // SAFETY: as above, with the chosen algorithm's workspace size.
        unsafe {
            self.check(
                op,
                "cudnnSetConvolutionMathType",
                dnn::cudnnSetConvolutionMathType(cd, math),
            )?;
            dnn::cudnnConvolutionForward(
                handle,
                (&one as *const f32).cast(),
                xd,
                x as *const c_void,
                wd,
                w as *const c_void,
                cd,
                algo,
                ws,
                bytes,
                (&zero as *const f32).cast(),
                yd,
                y as *mut c_void,
            )
        }
        .result()
        .map_err(|e| self.gpu.error(op, "cudnnConvolutionForward", e))
    }

    /// `dx = conv_transpose(dy, w)`.
    pub fn conv_backward_data(
        &self,
        p: &Conv2dPlan,
        tf32: bool,
        dy: CUdeviceptr,
        w: CUdeviceptr,
        dx: CUdeviceptr,
    ) -> Result<()> {
        let op = "conv2d_backward_data";
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        let key = self.conv_entry(op, st, p, tf32)?;
        if st.convs[&key].bwd_data.is_none() {
            let ws = self.workspace(op, st, SEARCH_WORKSPACE)?;
            let c = &st.convs[&key];
            // SAFETY: an all-zero perf struct is a valid value (enums with a 0 variant).
            let mut perf: [dnn::cudnnConvolutionBwdDataAlgoPerf_t; 8] =
                unsafe { std::mem::zeroed() };
            let mut found = 0;
            // SAFETY: as in `conv_forward`.
            unsafe {
                dnn::cudnnFindConvolutionBackwardDataAlgorithmEx(
                    st.handle,
                    c.w,
                    w as *const c_void,
                    c.y,
                    dy as *const c_void,
                    c.conv,
                    c.x,
                    dx as *mut c_void,
                    8,
                    &mut found,
                    perf.as_mut_ptr(),
                    ws,
                    SEARCH_WORKSPACE,
                )
            }
            .result()
            .map_err(|e| {
                self.gpu
                    .error(op, "cudnnFindConvolutionBackwardDataAlgorithmEx", e)
            })?;
            let results = perf.iter().take(usize::try_from(found).unwrap_or(0));
            let best = self.choose(
                op,
                st,
                tf32,
                results.map(|r| (r.status, r.mathType, r.algo, r.memory)),
            )?;
            if let Some(c) = st.convs.get_mut(&key) {
                c.bwd_data = Some(best);
            }
        }
        let c = &st.convs[&key];
        let (algo, math, bytes) = c
            .bwd_data
            .ok_or_else(|| self.gpu.error(op, "cuDNN", "no algorithm"))?;
        let (handle, xd, wd, cd, yd) = (st.handle, c.x, c.w, c.conv, c.y);
        let ws = self.workspace(op, st, bytes)?;
        let (one, zero) = (1f32, 0f32);
        // SAFETY: as in `conv_forward`.
        unsafe {
            self.check(
                op,
                "cudnnSetConvolutionMathType",
                dnn::cudnnSetConvolutionMathType(cd, math),
            )?;
            dnn::cudnnConvolutionBackwardData(
                handle,
                (&one as *const f32).cast(),
                wd,
                w as *const c_void,
                yd,
                dy as *const c_void,
                cd,
                algo,
                ws,
                bytes,
                (&zero as *const f32).cast(),
                xd,
                dx as *mut c_void,
            )
        }
        .result()
        .map_err(|e| self.gpu.error(op, "cudnnConvolutionBackwardData", e))
    }

    /// `dw = correlate(x, dy)` (overwrites).
    pub fn conv_backward_filter(
        &self,
        p: &Conv2dPlan,
        tf32: bool,
        x: CUdeviceptr,
        dy: CUdeviceptr,
        dw: CUdeviceptr,
    ) -> Result<()> {
        let op = "conv2d_backward_filter";
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        let key = self.conv_entry(op, st, p, tf32)?;
        if st.convs[&key].bwd_filter.is_none() {
            let ws = self.workspace(op, st, SEARCH_WORKSPACE)?;
            let c = &st.convs[&key];
            // SAFETY: an all-zero perf struct is a valid value (enums with a 0 variant).
            let mut perf: [dnn::cudnnConvolutionBwdFilterAlgoPerf_t; 8] =
                unsafe { std::mem::zeroed() };
            let mut found = 0;
            // SAFETY: as in `conv_forward`.
            unsafe {
                dnn::cudnnFindConvolutionBackwardFilterAlgorithmEx(
                    st.handle,
                    c.x,
                    x as *const c_void,
                    c.y,
                    dy as *const c_void,
                    c.conv,
                    c.w,
                    dw as *mut c_void,
                    8,
                    &mut found,
                    perf.as_mut_ptr(),
                    ws,
                    SEARCH_WORKSPACE,
                )
            }
            .result()
            .map_err(|e| {
                self.gpu
                    .error(op, "cudnnFindConvolutionBackwardFilterAlgorithmEx", e)
            })?;
            let results = perf.iter().take(usize::try_from(found).unwrap_or(0));
            let best = self.choose(
                op,
                st,
                tf32,
                results.map(|r| (r.status, r.mathType, r.algo, r.memory)),
            )?;
            if let Some(c) = st.convs.get_mut(&key) {
                c.bwd_filter = Some(best);
            }
        }
        let c = &st.convs[&key];
        let (algo, math, bytes) = c
            .bwd_filter
            .ok_or_else(|| self.gpu.error(op, "cuDNN", "no algorithm"))?;
        let (handle, xd, wd, cd, yd) = (st.handle, c.x, c.w, c.conv, c.y);
        let ws = self.workspace(op, st, bytes)?;
        let (one, zero) = (1f32, 0f32);
        // SAFETY: as in `conv_forward`.
        unsafe {
            self.check(
                op,
                "cudnnSetConvolutionMathType",
                dnn::cudnnSetConvolutionMathType(cd, math),
            )?;
            dnn::cudnnConvolutionBackwardFilter(
                handle,
                (&one as *const f32).cast(),
                xd,
                x as *const c_void,
                yd,
                dy as *const c_void,
                cd,
                algo,
                ws,
                bytes,
                (&zero as *const f32).cast(),
                wd,
                dw as *mut c_void,
            )
        }
        .result()
        .map_err(|e| self.gpu.error(op, "cudnnConvolutionBackwardFilter", e))
    }

    /// `db[c] = sum of dy[:, c, :, :]` for `dy [n, c, h, w]`.
    pub fn conv_backward_bias(
        &self,
        dims: [usize; 4],
        dy: CUdeviceptr,
        db: CUdeviceptr,
    ) -> Result<()> {
        let op = "conv2d_backward_bias";
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Entry::Vacant(e) = st.bias.entry(dims) {
            e.insert((
                self.tensor4(op, dims)?,
                self.tensor4(op, [1, dims[1], 1, 1])?,
            ));
        }
        let (dyd, dbd) = st.bias[&dims];
        let (one, zero) = (1f32, 0f32);
        // SAFETY: descriptors match the buffers.
        unsafe {
            dnn::cudnnConvolutionBackwardBias(
                st.handle,
                (&one as *const f32).cast(),
                dyd,
                dy as *const c_void,
                (&zero as *const f32).cast(),
                dbd,
                db as *mut c_void,
            )
        }
        .result()
        .map_err(|e| self.gpu.error(op, "cudnnConvolutionBackwardBias", e))
    }

    fn pool_descs<'a>(&self, op: &str, st: &'a mut State, p: &Pool2dPlan) -> Result<&'a Pool> {
        let q = p.params;
        let key = [
            p.n,
            p.c,
            p.h,
            p.w,
            q.kernel[0],
            q.kernel[1],
            q.stride[0],
            q.stride[1],
            q.padding[0],
            q.padding[1],
        ];
        if let Entry::Vacant(e) = st.pools.entry(key) {
            let g = &self.gpu;
            let x = self.tensor4(op, [p.n, p.c, p.h, p.w])?;
            let y = self.tensor4(op, [p.n, p.c, p.oh, p.ow])?;
            let mut pool = std::ptr::null_mut();
            // SAFETY: valid out-pointer, then a fresh descriptor.
            unsafe {
                self.check(
                    op,
                    "cudnnCreatePoolingDescriptor",
                    dnn::cudnnCreatePoolingDescriptor(&mut pool),
                )?;
                self.check(
                    op,
                    "cudnnSetPooling2dDescriptor",
                    dnn::cudnnSetPooling2dDescriptor(
                        pool,
                        dnn::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                        dnn::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                        int(g, op, q.kernel[0])?,
                        int(g, op, q.kernel[1])?,
                        int(g, op, q.padding[0])?,
                        int(g, op, q.padding[1])?,
                        int(g, op, q.stride[0])?,
                        int(g, op, q.stride[1])?,
                    ),
                )?;
            }
            e.insert(Pool { x, y, pool });
        }
        st.pools
            .get(&key)
            .ok_or_else(|| self.gpu.error(op, "cuDNN", "pooling descriptor vanished"))
    }

    /// Average pooling (padding counts in the divisor).
    pub fn avg_pool(&self, p: &Pool2dPlan, x: CUdeviceptr, y: CUdeviceptr) -> Result<()> {
        let op = "avg_pool2d";
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let handle = st.handle;
        let d = self.pool_descs(op, &mut st, p)?;
        let (one, zero) = (1f32, 0f32);
        // SAFETY: descriptors match the buffers.
        unsafe {
            dnn::cudnnPoolingForward(
                handle,
                d.pool,
                (&one as *const f32).cast(),
                d.x,
                x as *const c_void,
                (&zero as *const f32).cast(),
                d.y,
                y as *mut c_void,
            )
        }
        .result()
        .map_err(|e| self.gpu.error(op, "cudnnPoolingForward", e))
    }

    /// Gradient of average pooling.
    pub fn avg_pool_backward(
        &self,
        p: &Pool2dPlan,
        x: CUdeviceptr,
        y: CUdeviceptr,
        dy: CUdeviceptr,
        dx: CUdeviceptr,
    ) -> Result<()> {
        let op = "avg_pool2d_backward";
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let handle = st.handle;
        let d = self.pool_descs(op, &mut st, p)?;
        let (one, zero) = (1f32, 0f32);
        // SAFETY: descriptors match the buffers.
        unsafe {
            dnn::cudnnPoolingBackward(
                handle,
                d.pool,
                (&one as *const f32).cast(),
                d.y,
                y as *const c_void,
                d.y,
                dy as *const c_void,
                d.x,
                x as *const c_void,
                (&zero as *const f32).cast(),
                d.x,
                dx as *mut c_void,
            )
        }
        .result()
        .map_err(|e| self.gpu.error(op, "cudnnPoolingBackward", e))
    }
}

/// Without TF32, only algorithms that keep full fp32 math.
fn math_ok(math: dnn::cudnnMathType_t, tf32: bool) -> bool {
    tf32 || matches!(
        math,
        dnn::cudnnMathType_t::CUDNN_FMA_MATH | dnn::cudnnMathType_t::CUDNN_DEFAULT_MATH
    )
}

impl Drop for Cudnn {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the descriptors and the handle were created here and are
        // used by no one else; errors cannot be reported from a destructor.
        unsafe {
            let _ = self.gpu.bind("drop");
            for (_, c) in st.convs.drain() {
                dnn::cudnnDestroyTensorDescriptor(c.x);
                dnn::cudnnDestroyTensorDescriptor(c.y);
                dnn::cudnnDestroyFilterDescriptor(c.w);
                dnn::cudnnDestroyConvolutionDescriptor(c.conv);
            }
            for (_, p) in st.pools.drain() {
                dnn::cudnnDestroyTensorDescriptor(p.x);
                dnn::cudnnDestroyTensorDescriptor(p.y);
                dnn::cudnnDestroyPoolingDescriptor(p.pool);
            }
            for (_, (a, b)) in st.bias.drain() {
                dnn::cudnnDestroyTensorDescriptor(a);
                dnn::cudnnDestroyTensorDescriptor(b);
            }
            st.workspace = None;
            dnn::cudnnDestroy(st.handle);
        }
    }
}

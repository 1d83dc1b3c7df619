//! [`CudaBackend`]: the device's resources, the helpers every op uses, and the
//! trait implementation, which only dispatches to `ops/`.

use crate::alloc::{Allocator, Block, MemoryStats};
use crate::blas::Blas;
use crate::cudnn::Cudnn;
use crate::deferred::Deferred;
use crate::device::Gpu;
use crate::kernels::{Kernels, Module};
use crate::launch;
use crate::ops;
use crate::staging::Staging;
use crate::storage::CudaStorage;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use verjus_core::ops::{
    AdamHyper, AttentionArgs, AttentionGrads, AttentionPlan, AxisPlan, BinaryPlan, ConcatPlan,
    Conv2dPlan, CrossEntropyPlan, DepthwiseArgs, DepthwiseGrads, DepthwisePlan, Distribution,
    DropoutPlan, GemmPlan, IndexPlan, LayerNormArgs, LayerNormGrads, LayerNormPlan, LstmArgs,
    LstmGrads, LstmOutputGrads, LstmOutputs, LstmPlan, PermutePlan, Pool2dPlan, ReducePlan,
    SelectPlan, SgdHyper, UnaryOp,
};
use verjus_core::{Backend, DType, Device, Result, Shape, Storage, Tensor};

/// The CUDA backend of one device. Obtain it with [`crate::backend`], which
/// shares one instance per device (tensors of one device must share its stream
/// and allocator).
#[derive(Debug)]
pub struct CudaBackend {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) alloc: Arc<Allocator>,
    pub(crate) staging: Staging,
    pub(crate) kernels: Kernels,
    pub(crate) blas: Blas,
    pub(crate) cudnn: Cudnn,
    /// The deferred range checks of indices and labels.
    pub(crate) deferred: Deferred,
    tf32: AtomicBool,
}

impl CudaBackend {
    /// Opens device `ordinal` (after `probe` found the libraries).
    pub(crate) fn open(ordinal: usize) -> Result<Self> {
        let gpu = Arc::new(Gpu::open(ordinal)?);
        let alloc = Allocator::new(Arc::clone(&gpu));
        let tf32 = std::env::var("VERJUS_CUDA_TF32").is_ok_and(|v| v == "1");
        let staging = Staging::new(Arc::clone(&gpu));
        let record = alloc.alloc("open", Deferred::BYTES)?;
        Ok(CudaBackend {
            deferred: Deferred::new("open", record, &staging)?,
            staging,
            kernels: Kernels::new(Arc::clone(&gpu)),
            blas: Blas::new(Arc::clone(&gpu))?,
            cudnn: Cudnn::new(Arc::clone(&gpu), Arc::clone(&alloc))?,
            alloc,
            gpu,
            tf32: AtomicBool::new(tf32),
        })
    }

    /// Allows TF32 tensor cores in GEMM and convolution (off by default, or
    /// on with `VERJUS_CUDA_TF32=1`): much faster, about 3 decimal digits.
    pub fn set_tf32(&self, on: bool) {
        self.tf32.store(on, Ordering::Relaxed);
    }

    /// Whether TF32 is allowed.
    pub fn tf32(&self) -> bool {
        self.tf32.load(Ordering::Relaxed)
    }

    /// The allocator's counters (the high-water mark is `peak_in_use`).
    pub fn memory_stats(&self) -> MemoryStats {
        self.alloc.stats()
    }

    /// Starts a new high-water mark at the current use.
    pub fn reset_peak_memory(&self) {
        self.alloc.reset_peak()
    }

    /// Frees cached, unused device memory back to the driver.
    pub fn empty_cache(&self) -> Result<()> {
        self.gpu.bind("empty_cache")?;
        self.alloc.release_cache("empty_cache")
    }

    /// The device's name and compute capability, e.g. `NVIDIA H100 (sm_90)`.
    pub fn description(&self) -> String {
        format!(
            "{} (sm_{}{})",
            self.gpu.name, self.gpu.arch.0, self.gpu.arch.1
        )
    }

    /// Binds the context for an op.
    pub(crate) fn enter(&self, op: &str) -> Result<()> {
        self.gpu.bind(op)
    }

    /// `dst = src[..dst.len()]` (bytes) after all queued work (waits), then
    /// the report of a failed deferred range check, if any: every read of
    /// values from the GPU goes through here.
    pub(crate) fn read_back(&self, op: &str, src: u64, dst: &mut [u8]) -> Result<()> {
        self.staging.download(op, src, dst)?;
        self.deferred.settle(&self.staging, op)
    }

    /// Uninitialised device memory for temporaries.
    pub(crate) fn scratch(&self, op: &str, bytes: usize) -> Result<Block> {
        self.alloc.alloc(op, bytes)
    }

    /// An uninitialised tensor.
    pub(crate) fn empty(&self, op: &str, shape: &Shape, dtype: DType) -> Result<Tensor> {
        let bytes = shape.numel() * dtype.size_in_bytes();
        let block = self.alloc.alloc(op, bytes)?;
        let storage = CudaStorage {
            device: self.gpu.device,
            block,
        };
        Tensor::from_storage(shape.clone(), dtype, Storage::Device(Box::new(storage)))
    }

    /// Launches `module::name` with a grid of `grid` blocks.
    pub(crate) fn launch(
        &self,
        op: &str,
        module: Module,
        name: &'static str,
        grid: u32,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        let f = self.kernels.function(op, module, name)?;
        // SAFETY: every call site passes arguments matching the kernel's
        // parameter list in `kernels/*.cu`, device addresses of live tensors
        // sized by validated plans, and has bound the context.
        unsafe { self.gpu.launch(op, f, grid, launch::BLOCK, args) }
    }

    /// Launches an elementwise kernel over `n` items (nothing for `n == 0`).
    pub(crate) fn launch_n(
        &self,
        op: &str,
        module: Module,
        name: &'static str,
        n: usize,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.launch(op, module, name, launch::grid(n, self.gpu.sm_count), args)
    }

    /// Launches a row kernel over `rows` rows of `len` elements.
    pub(crate) fn launch_rows(
        &self,
        op: &str,
        module: Module,
        name: &'static str,
        rows: usize,
        len: usize,
        args: &mut [*mut c_void],
    ) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        let grid = launch::grid_rows(rows, len, self.gpu.sm_count);
        self.launch(op, module, name, grid, args)
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }
    fn device(&self) -> Device {
        self.gpu.device
    }
    fn synchronize(&self) -> Result<()> {
        self.enter("synchronize")?;
        self.gpu.sync("synchronize")?;
        self.deferred.settle(&self.staging, "synchronize")
    }
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        ops::memory::alloc_zeroed(self, shape, dtype)
    }
    fn alloc_output(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        ops::memory::alloc_output(self, shape, dtype)
    }
    fn upload(&self, host: &Tensor) -> Result<Tensor> {
        ops::memory::upload(self, host)
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        ops::memory::download(self, t)
    }
    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        ops::memory::copy(self, src, dst)
    }
    fn fill(&self, dst: &mut Tensor, value: f64) -> Result<()> {
        ops::memory::fill(self, dst, value)
    }
    fn cast(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        ops::memory::cast(self, src, dst)
    }
    fn random(&self, dst: &mut Tensor, dist: Distribution, seed: u64, offset: u64) -> Result<()> {
        ops::random::random(self, dst, dist, seed, offset)
    }
    fn gemm(&self, plan: &GemmPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        ops::gemm::gemm(self, plan, a, b, c)
    }
    fn unary(&self, op: UnaryOp, x: &Tensor, y: &mut Tensor) -> Result<()> {
        ops::elementwise::unary(self, op, x, y)
    }
    fn unary_backward(
        &self,
        op: UnaryOp,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        ops::elementwise::unary_backward(self, op, x, y, dy, dx)
    }
    fn binary(&self, plan: &BinaryPlan, a: &Tensor, b: &Tensor, c: &mut Tensor) -> Result<()> {
        ops::elementwise::binary(self, plan, a, b, c)
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
        ops::elementwise::binary_backward(self, plan, a, b, dy, da, db)
    }
    fn select(
        &self,
        plan: &SelectPlan,
        cond: &Tensor,
        x: &Tensor,
        y: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        ops::elementwise::select(self, plan, cond, x, y, out)
    }
    fn reduce(&self, plan: &ReducePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        ops::reduce::reduce(self, plan, x, y)
    }
    fn reduce_backward(
        &self,
        plan: &ReducePlan,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        ops::reduce::reduce_backward(self, plan, x, y, dy, dx)
    }
    fn argmax(&self, plan: &AxisPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        ops::reduce::argmax(self, plan, x, y)
    }
    fn softmax(&self, plan: &AxisPlan, log: bool, x: &Tensor, y: &mut Tensor) -> Result<()> {
        ops::softmax::softmax(self, plan, log, x, y)
    }
    fn softmax_backward(
        &self,
        plan: &AxisPlan,
        log: bool,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        ops::softmax::softmax_backward(self, plan, log, y, dy, dx)
    }
    fn conv2d(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        w: &Tensor,
        bias: Option<&Tensor>,
        y: &mut Tensor,
    ) -> Result<()> {
        ops::conv::conv2d(self, plan, x, w, bias, y)
    }
    fn conv2d_backward_data(
        &self,
        plan: &Conv2dPlan,
        dy: &Tensor,
        w: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        ops::conv::conv2d_backward_data(self, plan, dy, w, dx)
    }
    fn conv2d_backward_filter(
        &self,
        plan: &Conv2dPlan,
        x: &Tensor,
        dy: &Tensor,
        dw: &mut Tensor,
    ) -> Result<()> {
        ops::conv::conv2d_backward_filter(self, plan, x, dy, dw)
    }
    fn conv2d_backward_bias(&self, dy: &Tensor, db: &mut Tensor) -> Result<()> {
        ops::conv::conv2d_backward_bias(self, dy, db)
    }
    fn pool2d(&self, plan: &Pool2dPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        ops::pool::pool2d(self, plan, x, y)
    }
    fn pool2d_backward(
        &self,
        plan: &Pool2dPlan,
        x: &Tensor,
        y: &Tensor,
        dy: &Tensor,
        dx: &mut Tensor,
    ) -> Result<()> {
        ops::pool::pool2d_backward(self, plan, x, y, dy, dx)
    }
    fn dropout(&self, plan: &DropoutPlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        ops::dropout::dropout(self, plan, x, y)
    }
    fn index_select(
        &self,
        plan: &IndexPlan,
        x: &Tensor,
        indices: &Tensor,
        y: &mut Tensor,
    ) -> Result<()> {
        ops::index::index_select(self, plan, x, indices, y)
    }
    fn index_add(
        &self,
        plan: &IndexPlan,
        src: &Tensor,
        indices: &Tensor,
        dst: &mut Tensor,
    ) -> Result<()> {
        ops::index::index_add(self, plan, src, indices, dst)
    }
    fn concat(&self, plan: &ConcatPlan, parts: &[&Tensor], y: &mut Tensor) -> Result<()> {
        ops::concat::concat(self, plan, parts, y)
    }
    fn split(&self, plan: &ConcatPlan, x: &Tensor, parts: &mut [&mut Tensor]) -> Result<()> {
        ops::concat::split(self, plan, x, parts)
    }
    fn permute(&self, plan: &PermutePlan, x: &Tensor, y: &mut Tensor) -> Result<()> {
        ops::permute::permute(self, plan, x, y)
    }
    fn sgd_update(
        &self,
        hp: &SgdHyper,
        param: &mut Tensor,
        grad: &Tensor,
        velocity: Option<&mut Tensor>,
    ) -> Result<()> {
        ops::optim::sgd_update(self, hp, param, grad, velocity)
    }
    fn adam_update(
        &self,
        hp: &AdamHyper,
        param: &mut Tensor,
        grad: &Tensor,
        m: &mut Tensor,
        v: &mut Tensor,
    ) -> Result<()> {
        ops::optim::adam_update(self, hp, param, grad, m, v)
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
        ops::loss::softmax_cross_entropy(self, plan, logits, labels, grad_scale, losses, dlogits)
    }
    fn ctc_loss(
        &self,
        plan: &verjus_core::ops::CtcPlan,
        inputs: &verjus_core::ops::CtcInputs<'_>,
        losses: &mut Tensor,
        grad: Option<&mut Tensor>,
    ) -> Result<()> {
        ops::ctc::ctc_loss(self, plan, inputs, losses, grad)
    }
    fn lstm_reserve_len(&self, plan: &LstmPlan) -> Result<usize> {
        ops::lstm::reserve_len(self, plan)
    }
    fn lstm_sequence(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        out: LstmOutputs<'_>,
    ) -> Result<()> {
        ops::lstm::sequence(self, plan, args, out)
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
        ops::lstm::sequence_backward(self, plan, args, y, reserve, dout, grads)
    }
    fn lstm_cell(&self, plan: &LstmPlan, args: &LstmArgs<'_>, out: LstmOutputs<'_>) -> Result<()> {
        ops::lstm::cell(self, plan, args, out)
    }
    fn lstm_cell_backward(
        &self,
        plan: &LstmPlan,
        args: &LstmArgs<'_>,
        _h: &Tensor,
        reserve: &Tensor,
        dout: &LstmOutputGrads<'_>,
        grads: LstmGrads<'_>,
    ) -> Result<()> {
        ops::lstm::cell_backward(self, plan, args, reserve, dout, grads)
    }
    fn attention(
        &self,
        plan: &AttentionPlan,
        args: &AttentionArgs<'_>,
        out: &mut Tensor,
        lse: &mut Tensor,
    ) -> Result<()> {
        ops::attention::forward(self, plan, args, out, lse)
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
        ops::attention::backward(self, plan, args, out, lse, dout, grads)
    }
    fn layer_norm(
        &self,
        plan: &LayerNormPlan,
        args: &LayerNormArgs<'_>,
        y: &mut Tensor,
        mean: &mut Tensor,
        rstd: &mut Tensor,
    ) -> Result<()> {
        ops::layer_norm::forward(self, plan, args, y, mean, rstd)
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
        ops::layer_norm::backward(self, plan, args, mean, rstd, dy, grads)
    }
    fn depthwise_conv1d(
        &self,
        plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        y: &mut Tensor,
    ) -> Result<()> {
        ops::depthwise::forward(self, plan, args, y)
    }
    fn depthwise_conv1d_backward(
        &self,
        plan: &DepthwisePlan,
        args: &DepthwiseArgs<'_>,
        dy: &Tensor,
        grads: DepthwiseGrads<'_>,
    ) -> Result<()> {
        ops::depthwise::backward(self, plan, args, dy, grads)
    }
}

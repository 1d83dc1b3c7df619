//! The named workloads: what each computes, its FLOP count, its parameters as
//! JSON (so `run.py` can run the same workload in numpy and PyTorch), and how to
//! prepare it on a backend. Single ops are here, the LSTMs in [`crate::lstm`],
//! whole networks in [`crate::nets`], sequence models in [`crate::seqnets`].

use crate::lstm::{self, Lstm, LstmRun};
use crate::nets::{self, Net, Optimizer};
use crate::seqnets::SeqNet;
use serde_json::{json, Value};
use verjus_core::ops::{self, Conv2dParams, GemmSpec};
use verjus_core::{Backend, BackendRef, DType, Result, Shape, Tensor};

/// One operation at fixed sizes.
#[derive(Clone, Debug)]
pub enum Op {
    /// `C[m, n] = op(A) @ op(B)`; `A` is stored `[k, m]` when `trans_a`, `B` is
    /// stored `[n, k]` when `trans_b`.
    Gemm {
        m: usize,
        n: usize,
        k: usize,
        trans_a: bool,
        trans_b: bool,
    },
    /// `y = conv2d(x [batch, c_in, size, size], w [c_out, c_in, kernel, kernel]) + bias`
    /// with stride 1 and zero padding `pad`; with `backward`, also the gradients wrt
    /// the input, the filter and the bias.
    Conv2d {
        batch: usize,
        c_in: usize,
        size: usize,
        c_out: usize,
        kernel: usize,
        pad: usize,
        backward: bool,
    },
    /// One training step of `net` at batch size `batch` (see [`nets::train_step`]).
    TrainStep {
        net: Net,
        opt: Optimizer,
        batch: usize,
    },
    /// The solver update of a training step of `net` alone (see [`nets::update`]).
    Update {
        net: Net,
        opt: Optimizer,
        batch: usize,
    },
    /// The forward pass of `net` in inference mode (see [`nets::infer`]).
    Infer { net: Net, batch: usize },
    /// A request of `batch` examples to a `Runner` serving `net` (see
    /// [`nets::serve`]); PyTorch's side is its `inference_mode` forward.
    Serve { net: Net, batch: usize },
    /// One Fashion-MNIST training epoch of `net` (see [`nets::epoch`]); timed
    /// once, not repeated.
    Epoch {
        net: Net,
        opt: Optimizer,
        batch: usize,
    },
    /// A fused LSTM training pass or cell step (see [`Lstm`]).
    Lstm(Lstm),
    /// A sequence model through the static graph (see [`SeqNet`]).
    SeqNet(SeqNet),
}

/// A named [`Op`].
#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    pub op: Op,
}

/// A prepared workload: one call runs the op once on buffers allocated up front.
pub type Runner = Box<dyn FnMut() -> Result<()>>;

fn gemm(name: &str, m: usize, k: usize, n: usize, trans_a: bool, trans_b: bool) -> Workload {
    Workload {
        name: name.into(),
        op: Op::Gemm {
            m,
            n,
            k,
            trans_a,
            trans_b,
        },
    }
}

fn conv(name: &str, c_in: usize, size: usize, c_out: usize, backward: bool) -> Workload {
    Workload {
        name: name.into(),
        op: Op::Conv2d {
            batch: 128,
            c_in,
            size,
            c_out,
            kernel: 3,
            pad: 1,
            backward,
        },
    }
}

/// The batch size of the network workloads.
const BATCH: usize = 128;

fn named(name: &str, op: Op) -> Workload {
    Workload {
        name: name.into(),
        op,
    }
}

fn serve(name: &str, net: Net, batch: usize) -> Workload {
    named(name, Op::Serve { net, batch })
}

fn step(name: &str, net: Net, opt: Optimizer) -> Workload {
    named(
        name,
        Op::TrainStep {
            net,
            opt,
            batch: BATCH,
        },
    )
}

fn step_at(name: &str, net: Net, batch: usize) -> Workload {
    let opt = Optimizer::Adam;
    named(name, Op::TrainStep { net, opt, batch })
}

fn epoch(name: &str, net: Net) -> Workload {
    let opt = Optimizer::Adam;
    named(
        name,
        Op::Epoch {
            net,
            opt,
            batch: BATCH,
        },
    )
}

/// The LSTM workloads: `lstm_seq_train`, the recurrent part of a row-by-row
/// Fashion-MNIST LSTM (28 rows of 28 pixels, batch 128, 128 units);
/// `lstm_lm_train`, a language model's LSTM over 32 sequences of 64 to 256
/// frames (fixed seed), compared with PyTorch's packed sequences, and
/// `lstm_lm_train_unpacked`, the same compared with PyTorch's padded batch; and
/// `lstm_cell_step`, one step of that language model's cell at batch 1, the
/// latency of sampling text.
fn lstms() -> Vec<Workload> {
    let lm_lengths = lstm::lengths(32, 64, 256, 7);
    let lm = |torch_packs| {
        Op::Lstm(Lstm {
            batch: 32,
            input: 64,
            hidden: 256,
            run: LstmRun::TrainLengths {
                lengths: lm_lengths.clone(),
                torch_packs,
            },
        })
    };
    let seq = Lstm {
        batch: 128,
        input: 28,
        hidden: 128,
        run: LstmRun::Train { steps: 28 },
    };
    let cell = Lstm {
        batch: 1,
        input: 64,
        hidden: 256,
        run: LstmRun::CellStep,
    };
    vec![
        named("lstm_seq_train", Op::Lstm(seq)),
        named("lstm_lm_train", lm(true)),
        named("lstm_lm_train_unpacked", lm(false)),
        named("lstm_cell_step", Op::Lstm(cell)),
    ]
}

/// The sequence models through the static graph: `rowlstm_step`, a training
/// step of the row LSTM at batch 128, and `char_sample_step`, one sampled
/// character of the character LM (vocabulary 114, the fortunes').
fn seqnets() -> Vec<Workload> {
    vec![
        named(
            "rowlstm_step",
            Op::SeqNet(SeqNet::RowLstmStep { batch: BATCH }),
        ),
        named(
            "char_sample_step",
            Op::SeqNet(SeqNet::CharSampleStep { vocab: 114 }),
        ),
    ]
}

/// Every workload, in the order they are reported; the epochs (which take a
/// while) only when `epochs` is set.
///
/// The MLP shapes are the products a 784-512-512-10 network at batch 128 runs
/// with weights stored `[out, in]` (verjus' Linear, like PyTorch's): forward
/// `x @ W^T`, backward `dx = dy @ W` and `dW = dy^T @ x` (the first layer needs
/// no `dx`). The convolutions are the two layers of the Fashion-MNIST CNN at
/// batch 128. The network workloads run those two networks whole, at the same
/// batch size.
pub fn all(epochs: bool) -> Vec<Workload> {
    let mut all = vec![
        gemm("gemm_256", 256, 256, 256, false, false),
        gemm("gemm_1024", 1024, 1024, 1024, false, false),
        gemm("gemm_2048", 2048, 2048, 2048, false, false),
        gemm("mlp_fwd_784x512", 128, 784, 512, false, true),
        gemm("mlp_fwd_512x512", 128, 512, 512, false, true),
        gemm("mlp_fwd_512x10", 128, 512, 10, false, true),
        gemm("mlp_bwd_dx_10x512", 128, 10, 512, false, false),
        gemm("mlp_bwd_dx_512x512", 128, 512, 512, false, false),
        gemm("mlp_bwd_dw_512x10", 10, 128, 512, true, false),
        gemm("mlp_bwd_dw_512x512", 512, 128, 512, true, false),
        gemm("mlp_bwd_dw_784x512", 512, 128, 784, true, false),
        conv("conv1_fwd_1x32_28", 1, 28, 32, false),
        conv("conv1_fwdbwd_1x32_28", 1, 28, 32, true),
        conv("conv2_fwd_32x64_14", 32, 14, 64, false),
        conv("conv2_fwdbwd_32x64_14", 32, 14, 64, true),
        named(
            "mlp_infer",
            Op::Infer {
                net: Net::Mlp,
                batch: BATCH,
            },
        ),
        step("mlp_step", Net::Mlp, Optimizer::Adam),
        serve("mlp_serve_b1", Net::Mlp, 1),
        serve("mlp_serve_b8", Net::Mlp, 8),
        serve("mlp_serve_b128", Net::Mlp, BATCH),
        serve("cnn_serve_b1", Net::Cnn, 1),
        serve("cnn_serve_b8", Net::Cnn, 8),
        serve("cnn_serve_b128", Net::Cnn, BATCH),
        named(
            "mlp_adam_update",
            Op::Update {
                net: Net::Mlp,
                opt: Optimizer::Adam,
                batch: BATCH,
            },
        ),
        step("mlp_step_sgd", Net::Mlp, Optimizer::SgdMomentum),
        step("cnn_step", Net::Cnn, Optimizer::Adam),
    ];
    all.extend(lstms());
    all.extend(seqnets());
    if epochs {
        all.extend([epoch("mlp_epoch", Net::Mlp), epoch("cnn_epoch", Net::Cnn)]);
    }
    all
}

/// The GPU set (`--device cuda`): large f32 GEMMs, in full fp32 and with TF32
/// (names ending in `_tf32`), the two networks' Adam training steps at batch
/// 128 and 1024, and the LSTM workloads.
pub fn gpu() -> Vec<Workload> {
    let mut gpu = vec![
        gemm("gemm_4096", 4096, 4096, 4096, false, false),
        gemm("gemm_8192", 8192, 8192, 8192, false, false),
        gemm("gemm_4096_tf32", 4096, 4096, 4096, false, false),
        gemm("gemm_8192_tf32", 8192, 8192, 8192, false, false),
        step_at("mlp_step", Net::Mlp, 128),
        step_at("mlp_step_1024", Net::Mlp, 1024),
        step_at("cnn_step", Net::Cnn, 128),
        step_at("cnn_step_1024", Net::Cnn, 1024),
    ];
    gpu.extend(lstms());
    gpu
}

impl Workload {
    /// Whether the workload runs with TF32 allowed (CUDA only).
    pub fn tf32(&self) -> bool {
        self.name.ends_with("_tf32")
    }

    /// Floating-point operations of one run (multiply-adds count two; the bias
    /// terms are left out); `None` for whole networks.
    pub fn flops(&self) -> Option<f64> {
        Some(match self.op {
            Op::Lstm(ref lstm) => lstm.flops(),
            Op::Gemm { m, n, k, .. } => 2.0 * (m * n * k) as f64,
            Op::Conv2d {
                batch,
                c_in,
                size,
                c_out,
                kernel,
                pad,
                backward,
            } => {
                let out = size + 2 * pad - kernel + 1;
                let forward = 2.0 * (batch * c_out * out * out * c_in * kernel * kernel) as f64;
                // Data and filter gradients each cost as much as the forward pass.
                if backward {
                    3.0 * forward
                } else {
                    forward
                }
            }
            Op::TrainStep { .. }
            | Op::Update { .. }
            | Op::Infer { .. }
            | Op::Serve { .. }
            | Op::Epoch { .. }
            | Op::SeqNet(_) => return None,
        })
    }

    /// Whether a run is too long to repeat: timed once, without warm-up.
    pub fn once(&self) -> bool {
        matches!(self.op, Op::Epoch { .. })
    }

    /// Why the workload cannot run on this machine, if it cannot.
    pub fn unavailable(&self) -> Option<String> {
        match self.op {
            Op::Epoch { .. } => nets::missing_dataset(),
            _ => None,
        }
    }

    /// The first fields of its JSON line: name, FLOP count, op and sizes.
    pub fn line(&self) -> Value {
        let mut line = json!({"name": self.name, "flops": self.flops()});
        merge(&mut line, self.describe());
        line
    }

    /// The op and its sizes, as `run.py` reads them.
    pub fn describe(&self) -> Value {
        let mut v = self.describe_op();
        if self.tf32() {
            merge(&mut v, serde_json::json!({"tf32": true}));
        }
        v
    }

    fn describe_op(&self) -> Value {
        match self.op {
            Op::Lstm(ref lstm) => lstm.describe(),
            Op::SeqNet(net) => net.describe(),
            Op::Gemm {
                m,
                n,
                k,
                trans_a,
                trans_b,
            } => json!({"op": "gemm", "m": m, "n": n, "k": k,
                        "trans_a": trans_a, "trans_b": trans_b}),
            Op::Conv2d {
                batch,
                c_in,
                size,
                c_out,
                kernel,
                pad,
                backward,
            } => json!({"op": "conv2d", "batch": batch, "c_in": c_in, "size": size,
                        "c_out": c_out, "kernel": kernel, "pad": pad, "backward": backward}),
            Op::TrainStep { net, opt, batch } => {
                let mut line = json!({"op": "train_step", "net": net.file(), "batch": batch});
                merge(&mut line, opt.describe());
                line
            }
            Op::Update { net, opt, batch } => {
                let mut line = json!({"op": "update", "net": net.file(), "batch": batch});
                merge(&mut line, opt.describe());
                line
            }
            Op::Infer { net, batch } | Op::Serve { net, batch } => {
                json!({"op": "infer", "net": net.file(), "batch": batch})
            }
            Op::Epoch { net, opt, batch } => {
                let mut line = json!({"op": "train_epoch", "net": net.file(), "batch": batch,
                                      "data_dir": nets::dataset_dir()});
                merge(&mut line, opt.describe());
                line
            }
        }
    }

    /// Allocates the operands on `be` and returns the op as a callable.
    pub fn prepare(&self, be: BackendRef) -> Result<Runner> {
        let dev = &*be;
        match self.op {
            Op::Gemm {
                m,
                n,
                k,
                trans_a,
                trans_b,
            } => {
                let a = filled(dev, if trans_a { [k, m] } else { [m, k] }, 1)?;
                let b = filled(dev, if trans_b { [n, k] } else { [k, n] }, 2)?;
                let mut c = ops::zeros(dev, &Shape::new([m, n])?, DType::F32)?;
                let spec = GemmSpec::new(trans_a, trans_b);
                Ok(Box::new(move || ops::gemm(&*be, &a, &b, &mut c, spec)))
            }
            Op::Conv2d {
                batch,
                c_in,
                size,
                c_out,
                kernel,
                pad,
                backward,
            } => {
                let params = Conv2dParams {
                    padding: [pad, pad],
                    ..Conv2dParams::default()
                };
                let out = size + 2 * pad - kernel + 1;
                let x = filled(dev, [batch, c_in, size, size], 3)?;
                let w = filled(dev, [c_out, c_in, kernel, kernel], 4)?;
                let bias = filled(dev, [c_out], 5)?;
                let dy = filled(dev, [batch, c_out, out, out], 6)?;
                let mut y = ops::zeros(dev, dy.shape(), DType::F32)?;
                let mut dx = ops::zeros(dev, x.shape(), DType::F32)?;
                let mut dw = ops::zeros(dev, w.shape(), DType::F32)?;
                let mut db = ops::zeros(dev, bias.shape(), DType::F32)?;
                Ok(Box::new(move || {
                    let be = &*be;
                    ops::conv2d(be, &x, &w, Some(&bias), params, &mut y)?;
                    if backward {
                        ops::conv2d_backward_data(be, &dy, &w, params, &mut dx)?;
                        ops::conv2d_backward_filter(be, &x, &dy, params, &mut dw)?;
                        ops::conv2d_backward_bias(be, &dy, &mut db)?;
                    }
                    Ok(())
                }))
            }
            Op::TrainStep { net, opt, batch } => nets::train_step(net, opt, batch, be),
            Op::Update { net, opt, batch } => nets::update(net, opt, batch, be),
            Op::Infer { net, batch } => nets::infer(net, batch, be),
            Op::Serve { net, batch } => nets::serve(net, batch, be),
            Op::Epoch { net, opt, batch } => nets::epoch(net, opt, batch, be),
            Op::Lstm(ref lstm) => lstm.prepare(be),
            Op::SeqNet(net) => net.prepare(be),
        }
    }
}

/// Adds the fields of the object `extra` to the object `line`.
pub fn merge(line: &mut Value, extra: Value) {
    if let (Value::Object(line), Value::Object(extra)) = (line, extra) {
        line.extend(extra);
    }
}

/// A tensor of the given shape with values in [-1, 1) from a small
/// deterministic generator (filled on the host, then uploaded).
pub fn filled(be: &dyn Backend, dims: impl Into<Vec<usize>>, seed: u64) -> Result<Tensor> {
    let shape = Shape::new(dims)?;
    let data = xorshift(seed)
        .take(shape.numel())
        .map(|bits| (bits >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect();
    ops::upload(be, &Tensor::from_vec(shape.dims().to_vec(), data)?)
}

/// An endless stream of 64-bit values from `seed` (xorshift64*: plenty for
/// benchmark inputs).
pub fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_repeated_workload_runs_on_the_native_backend() {
        let mut ran = 0;
        for w in all(false) {
            // The largest products would only cost test time.
            if w.flops().is_some_and(|f| f > 1e9) {
                continue;
            }
            let mut run =
                (w.prepare(verjus_native::backend())).unwrap_or_else(|e| panic!("{}: {e}", w.name));
            run()
                .and_then(|()| run())
                .unwrap_or_else(|e| panic!("{}: {e}", w.name));
            ran += 1;
        }
        assert!(ran >= 15, "only {ran} workloads ran");
    }
}

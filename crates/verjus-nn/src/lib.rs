//! verjus-nn: the static network graph.
//!
//! After Juice's "new layer architecture", what a network *is* and what one
//! *invocation* of it holds are separate:
//!
//! - a [`NetworkDef`] is the definition as data (JSON);
//! - [`Network::build`] turns it into a [`Network`]: leaf layers in topological
//!   order with every shape inferred once, a [`Descriptor`] per layer, and the
//!   [`Parameter`]s (shared ones once). Definition mistakes are errors here;
//! - a [`Context`] is one invocation: batch size, training flag, activations,
//!   gradients and the dropout stream, on one device. The backend is passed to
//!   every call and never stored.
//!
//! Training: [`solver`] (SGD and Adam/AdamW over fused device updates, learning-rate
//! schedules, clipping by global norm, state keyed by parameter name), the
//! [`Trainer`] (one call per minibatch: forward, loss, backward, update) and
//! [`data`] (the IDX files of MNIST and Fashion-MNIST, minibatches).
//!
//! Weights: [`weights`] reads and writes safetensors (named by parameter,
//! PyTorch's layout), [`Network::load_parameters`] replaces parameters by name
//! after checking all of them, and [`write_atomic`] saves files so that a crash
//! never leaves a torn one. [`checkpoint`]: a network ([`Network::save`]) or a
//! training run ([`Trainer::save_checkpoint`], [`Trainer::resume`]) as one
//! folder, replaced atomically as a whole.
//!
//! Serving: the hot-swap [`Runner`] swaps networks under load, from memory or
//! from a checkpoint folder, and can [`Runner::watch`] a folder for new ones.
//!
//! Sequences (definition format 3): inputs with a time axis whose length and
//! per-example lengths come with each call
//! ([`Network::compute_output_with_lengths`], [`Trainer::train_sequences`]),
//! held time-major inside (`[T * batch] + unit`, so every per-example layer
//! applies per frame); `Embedding`, `LSTM` and the time reductions; carried
//! recurrent state for stepping one frame at a time
//! ([`Context::set_carry_state`], [`Network::state`]).
//!
//! Gradients are summed wherever they meet (fan-outs, shared parameters), and
//! parameter gradients are sums over the batch: a solver divides by the batch
//! size it actually saw. [`Loss`] computes losses on the device with the same
//! convention.
//!
//! ```no_run
//! # fn main() -> verjus_core::Result<()> {
//! # let be = verjus_native::NativeBackend::new();
//! # let x = verjus_core::Tensor::from_vec([8, 1, 28, 28], vec![0f32; 8 * 784])?;
//! # let labels = verjus_core::Tensor::from_vec([8], vec![0i64; 8])?;
//! use verjus_nn::{Loss, Network, NetworkDef};
//! let def = NetworkDef::from_json(include_str!("../../../examples/nets/fashion_mlp.json"))?;
//! let net = Network::build(def, &be, 0)?;
//! let mut ctx = net.new_context(&be, 8)?;
//! ctx.set_train(true);
//! net.compute_output(&be, &mut ctx, &[&x])?;
//! let mut dlogits = verjus_core::ops::zeros(&be, ctx.output(0).shape(), verjus_core::DType::F32)?;
//! let loss = Loss::SoftmaxCrossEntropy { label_smoothing: 0.0 }
//!     .compute(&be, ctx.output(0), &labels, Some(&mut dlogits))?;
//! net.compute_gradients(&be, &mut ctx, &[&dlogits])?;
//! // ctx.param_grads()[i] is the batch sum for net.parameters()[i].
//! # let _ = loss;
//! # Ok(())
//! # }
//! ```

mod atomic;
pub mod checkpoint;
mod context;
pub mod data;
pub mod def;
mod descriptor;
mod exec;
mod folder;
mod frame_loss;
mod fuse;
mod gradplan;
mod graph;
mod interface;
mod layers;
mod load;
mod loss;
mod loss_scale;
mod network;
mod parameter;
mod runner;
mod seqcheck;
mod seqdef;
pub mod solver;
mod state;
mod tally;
mod trainer;
mod transfer;
mod watch;
mod weightdef;
pub mod weights;

pub use atomic::write_atomic;
pub use context::Context;
pub use def::{
    InputDType, InputDef, LayerConfig, LayerDef, NetworkDef, OutputDef, Pair, WeightSetting,
};
pub use descriptor::{Descriptor, Init, ParamDesc};
pub use loss::Loss;
pub use network::Network;
pub use parameter::Parameter;
pub use runner::{check_compatible, Runner, Served};
pub use trainer::{Metrics, Trainer};
pub use watch::{WatchEvent, Watcher};

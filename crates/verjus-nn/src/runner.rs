//! Serving inference while the network is replaced: the hot-swap [`Runner`].
//!
//! A `Runner` holds the network it serves behind an `Arc`. [`Runner::infer`]
//! takes a clone of that `Arc` under a lock held only for the clone, then runs
//! with no lock at all, so any number of threads infer at once. [`Runner::swap`]
//! checks the new network against the served one *before* anything changes —
//! the same interface (input names and unit shapes, output names and unit
//! shapes, in order), parameters on the runner's device — and then replaces
//! the `Arc` in one store. Outputs are matched by their interface names
//! (`{"name": "logits", "from": "fc3"}`), not by the layers that compute
//! them, so a network with other layers serves in place of another. A call that started before the swap finishes on the old network
//! (its `Arc` keeps it alive); every later call uses the new one. A swap that
//! does not fit is refused with an error naming the mismatch, and the old
//! network keeps serving.
//!
//! A sequence model serves requests of any padded length and lengths
//! ([`Runner::infer_with_lengths`]); a swap also checks that sequence inputs
//! stay sequences of the same element type, and refuses a model whose
//! Embedding has another vocabulary (its ids would mean other tokens).
//!
//! [`Runner::swap_from`] loads a checkpoint folder (built, weights loaded,
//! everything checked) and swaps it in; [`Runner::watch`] does so whenever
//! the folder changes.
//!
//! The static graph makes this cheap and safe: a [`Network`] holds no
//! per-invocation state, so one instance serves every thread, each call with a
//! context of its own. The contexts are kept between calls (one per request
//! served at the same time, resized to each request's batch within their
//! capacity), since making one allocates every buffer of the network: an MLP
//! request of one example took 0.46 ms with a new context each call, about
//! PyTorch's 0.21 ms with a kept one (see BENCHMARKS.md, serving).

use crate::context::Context;
use crate::exec::batch_of_inputs;
use crate::network::Network;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use verjus_core::{Backend, BackendRef, Error, Result, Tensor};

/// Requests of more examples than this run on a context of their own, not
/// kept: one huge request does not leave every kept context that large.
const KEPT_BATCH: usize = 4096;

/// The network being served and its generation (0 for the first, +1 per swap),
/// with the contexts its requests run on.
#[derive(Debug)]
pub struct Served {
    pub network: Network,
    pub generation: u64,
    contexts: Mutex<Vec<Context>>,
}

impl Served {
    fn new(network: Network, generation: u64) -> Served {
        Served {
            network,
            generation,
            contexts: Mutex::new(Vec::new()),
        }
    }

    /// The outputs of one request, computed on a kept context (or a new one,
    /// kept afterwards unless the request failed or was too large).
    fn run(
        &self,
        be: &dyn Backend,
        inputs: &[&Tensor],
        lengths: Option<&Tensor>,
    ) -> Result<Vec<Tensor>> {
        let batch = batch_of_inputs(inputs);
        let kept = self.kept().pop();
        let mut ctx = match kept {
            Some(ctx) => ctx,
            None => self.network.new_context(be, batch)?,
        };
        self.network.infer_into(be, &mut ctx, inputs, lengths)?;
        let outputs = ctx.copy_outputs(be)?;
        if batch <= KEPT_BATCH {
            self.kept().push(ctx);
        }
        Ok(outputs)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Context>> {
        // A poisoned lock only means a thread panicked while holding it; the
        // kept contexts are whole (a context is pushed only after it ran).
        self.contexts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Serves inference from a network that can be swapped at run time. See the
/// module docs.
pub struct Runner {
    be: BackendRef,
    current: RwLock<Arc<Served>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("device", &self.be.device())
            .field("generation", &self.generation())
            .finish()
    }
}

impl Runner {
    /// A runner serving `network`, whose parameters must live on `be`'s device.
    pub fn new(network: Network, be: BackendRef) -> Result<Runner> {
        check_device(&network, &be)?;
        Ok(Runner {
            be,
            current: RwLock::new(Arc::new(Served::new(network, 0))),
        })
    }

    /// A runner serving the network of the checkpoint (or network) folder
    /// `folder`, loaded onto `be`'s device.
    pub fn from_checkpoint(folder: &Path, be: BackendRef) -> Result<Runner> {
        let network = Network::load(folder, &*be)?;
        Runner::new(network, be)
    }

    /// The backend inference runs on.
    pub fn backend(&self) -> &BackendRef {
        &self.be
    }

    /// The network served now (it stays valid after a swap for as long as it
    /// is held).
    pub fn current(&self) -> Arc<Served> {
        // A poisoned lock only means a thread panicked while holding it; the
        // Arc inside is always whole, so serving goes on.
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The generation of the network served now.
    pub fn generation(&self) -> u64 {
        self.current().generation
    }

    /// Inference (no dropout) on one batch with the network served now; returns
    /// its outputs and the generation that computed them.
    pub fn infer(&self, inputs: &[&Tensor]) -> Result<(Vec<Tensor>, u64)> {
        let served = self.current();
        let outputs = served.run(&*self.be, inputs, None)?;
        Ok((outputs, served.generation))
    }

    /// [`Runner::infer`] on a batch of sequences with each example's length
    /// (int32 `[batch]`; see [`Network::compute_output_with_lengths`]). Each
    /// call has its own padded length, so requests of any length are served
    /// side by side.
    pub fn infer_with_lengths(
        &self,
        inputs: &[&Tensor],
        lengths: Option<&Tensor>,
    ) -> Result<(Vec<Tensor>, u64)> {
        let served = self.current();
        let outputs = served.run(&*self.be, inputs, lengths)?;
        Ok((outputs, served.generation))
    }

    /// Replaces the served network with `network` if it fits (see the module
    /// docs); returns the new generation. On an error nothing changes.
    pub fn swap(&self, network: Network) -> Result<u64> {
        check_device(&network, &self.be)?;
        let mut slot = self.current.write().unwrap_or_else(|e| e.into_inner());
        check_compatible(&slot.network, &network)?;
        let generation = slot.generation + 1;
        *slot = Arc::new(Served::new(network, generation));
        Ok(generation)
    }

    /// Loads the checkpoint (or network) folder `folder` onto the runner's
    /// device and swaps it in like [`Runner::swap`]. A folder that does not
    /// load, or a network that does not fit, is an error and the old network
    /// keeps serving.
    pub fn swap_from(&self, folder: &Path) -> Result<u64> {
        let network = Network::load(folder, &*self.be)?;
        self.swap(network)
    }
}

/// The parameters of `network` must live on `be`'s device.
fn check_device(network: &Network, be: &BackendRef) -> Result<()> {
    match network
        .parameters()
        .iter()
        .find(|p| p.value.device() != be.device())
    {
        Some(p) => Err(Error::WrongDevice {
            op: "Runner".into(),
            what: format!("parameter {:?}", p.name),
            expected: be.device(),
            actual: p.value.device(),
        }),
        None => Ok(()),
    }
}

/// A replacement must take the same inputs and give the same outputs (interface
/// names and unit shapes, in order) as the network it replaces. A refusal names
/// the first difference and lists both interfaces.
pub fn check_compatible(serving: &Network, candidate: &Network) -> Result<()> {
    let inputs = |net: &Network| -> Vec<(String, Vec<usize>)> {
        net.inputs()
            .iter()
            .map(|i| (i.name.clone(), i.shape.clone()))
            .collect()
    };
    compare("input", &inputs(serving), &inputs(candidate))?;
    check_sequences(serving, candidate)?;
    compare(
        "output",
        &serving.output_shapes(),
        &candidate.output_shapes(),
    )
}

/// The inputs must agree in kind (sequence or not, float or token ids), and
/// token inputs in their vocabulary: ids mean other tokens in a model with
/// another one.
fn check_sequences(serving: &Network, candidate: &Network) -> Result<()> {
    let kind = |i: &crate::def::InputDef| {
        let dtype = match i.dtype {
            crate::def::InputDType::F32 => "float32",
            crate::def::InputDType::I32 => "int32 token ids",
        };
        let time = if i.sequence { "a sequence of" } else { "one" };
        format!("{time} {dtype}")
    };
    let refuse = |why: String| Err(Error::invalid("Runner::swap", format!("refused: {why}")));
    for (k, (old, new)) in serving.inputs().iter().zip(candidate.inputs()).enumerate() {
        if old.sequence != new.sequence || old.dtype != new.dtype {
            return refuse(format!(
                "input {:?} takes {} in the serving network but {} in the new one",
                old.name,
                kind(old),
                kind(new)
            ));
        }
        if let (Some((a, la)), Some((b, lb))) = (&serving.vocab[k], &candidate.vocab[k]) {
            if a != b {
                return refuse(format!(
                    "input {:?} has a vocabulary of {a} token ids in the serving network \
                     (Embedding {la:?}) but {b} in the new one (Embedding {lb:?}): \
                     a model with another vocabulary reads the ids as other tokens",
                    old.name
                ));
            }
        }
    }
    Ok(())
}

fn compare(what: &str, old: &[(String, Vec<usize>)], new: &[(String, Vec<usize>)]) -> Result<()> {
    let difference = if old.len() != new.len() {
        format!(
            "the serving network has {} {what}(s), the new one {}",
            old.len(),
            new.len()
        )
    } else {
        let Some(((old_name, old_shape), (new_name, new_shape))) =
            old.iter().zip(new).find(|(o, n)| o != n)
        else {
            return Ok(());
        };
        if old_name != new_name {
            format!(
                "{what} {old_name:?} of the serving network is called {new_name:?} in the new one"
            )
        } else {
            format!(
                "{what} {old_name:?} has unit shape {old_shape:?} in the serving network \
                 but {new_shape:?} in the new one"
            )
        }
    };
    Err(Error::invalid(
        "Runner::swap",
        format!(
            "refused: {difference} (serving {what}s: {}; new {what}s: {})",
            interface(old),
            interface(new)
        ),
    ))
}

/// `"logits" [10], "aux" [3]`.
fn interface(items: &[(String, Vec<usize>)]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|(name, shape)| format!("{name:?} {shape:?}"))
        .collect();
    parts.join(", ")
}

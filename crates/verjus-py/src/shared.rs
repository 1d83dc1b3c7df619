//! The one network a Python `Network` and its `Trainer`s share.
//!
//! `verjus_nn::Trainer` owns the network it trains. So that a Python `Network`
//! sees the weights its `Trainer` trains, both hold the same
//! `Arc<RwLock<Model>>`, and the model is either the bare network or the
//! trainer that owns it (the network is read through the trainer). A second
//! `Trainer` made from the same `Network` takes the network over; the first
//! one's later calls then fail with a `RuntimeError` saying it was superseded.
//!
//! The model also knows the device: the bare network's backend, or the
//! trainer's. `Network.to(device)` moves whichever holds the network (a
//! trainer moves with its solver state), all-or-nothing.
//!
//! Locking rules: a lock is only ever taken inside `py.detach` (the GIL is
//! released), so a thread waiting for the lock never holds the GIL that the
//! lock's holder may need; and a poisoned lock is a `RuntimeError`, not a panic.

use pyo3::exceptions::PyRuntimeError;
use pyo3::PyResult;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use verjus::nn::{Network, Trainer};
use verjus::{BackendRef, Error, Result};

/// Who holds the network. See the module docs.
pub(crate) enum Model {
    /// Not trained by anyone; computes on `be`'s device, where its parameters live.
    Bare { net: Box<Network>, be: BackendRef },
    /// Owned by the trainer whose id is `owner`.
    Training { trainer: Box<Trainer>, owner: u64 },
    /// Only while the network moves to a new trainer under the write lock (the
    /// move cannot fail), so never seen by another call.
    Moving,
}

/// The handle a `Network` and its `Trainer`s share.
pub(crate) type Shared = Arc<RwLock<Model>>;

/// A fresh shared model around `net`, whose parameters live on `be`'s device.
pub(crate) fn new_shared(net: Network, be: BackendRef) -> Shared {
    Arc::new(RwLock::new(Model::Bare {
        net: Box::new(net),
        be,
    }))
}

/// A new trainer id.
pub(crate) fn next_trainer_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn moving() -> pyo3::PyErr {
    PyRuntimeError::new_err("the network is being handed to a new Trainer")
}

impl Model {
    /// The network and the backend it computes on.
    pub(crate) fn network(&self) -> PyResult<(&Network, &BackendRef)> {
        match self {
            Model::Bare { net, be } => Ok((net, be)),
            Model::Training { trainer, .. } => Ok((trainer.network(), trainer.backend())),
            Model::Moving => Err(moving()),
        }
    }

    /// The network, mutably, and (a handle to) its backend.
    pub(crate) fn network_mut(&mut self) -> PyResult<(&mut Network, BackendRef)> {
        match self {
            Model::Bare { net, be } => Ok((net, BackendRef::clone(be))),
            Model::Training { trainer, .. } => {
                let be = BackendRef::clone(trainer.backend());
                Ok((trainer.network_mut(), be))
            }
            Model::Moving => Err(moving()),
        }
    }

    /// Moves the network (and a trainer's solver state) to `be`'s device; on an
    /// error nothing changes.
    pub(crate) fn move_to(&mut self, be: BackendRef) -> Result<()> {
        match self {
            Model::Bare { net, be: old } => {
                net.to_device(&**old, &*be)?;
                *old = be;
                Ok(())
            }
            Model::Training { trainer, .. } => trainer.to_device(be),
            Model::Moving => Err(Error::invalid(
                "to",
                "the network is being handed to a new Trainer",
            )),
        }
    }

    /// The trainer with id `id`, if it still owns the network.
    pub(crate) fn trainer_mut(&mut self, id: u64) -> PyResult<&mut Trainer> {
        match self {
            Model::Training { trainer, owner } if *owner == id => Ok(trainer),
            Model::Moving => Err(moving()),
            _ => Err(PyRuntimeError::new_err(
                "this Trainer was superseded: a newer Trainer made from the same Network trains it now",
            )),
        }
    }

    /// Hands the network to a new trainer with id `id`, built by `make` from
    /// the network (taken from the bare model or from the previous trainer).
    pub(crate) fn hand_to(
        &mut self,
        id: u64,
        make: impl FnOnce(Network) -> Trainer,
    ) -> PyResult<()> {
        let net = match std::mem::replace(self, Model::Moving) {
            Model::Bare { net, .. } => *net,
            Model::Training { trainer, .. } => trainer.into_network(),
            Model::Moving => return Err(moving()),
        };
        *self = Model::Training {
            trainer: Box::new(make(net)),
            owner: id,
        };
        Ok(())
    }
}

fn poisoned() -> pyo3::PyErr {
    PyRuntimeError::new_err(
        "the network's lock is poisoned: an earlier call panicked while holding it",
    )
}

/// Read access; call only inside `py.detach`.
pub(crate) fn read(model: &RwLock<Model>) -> PyResult<RwLockReadGuard<'_, Model>> {
    model.read().map_err(|_| poisoned())
}

/// Write access; call only inside `py.detach`.
pub(crate) fn write(model: &RwLock<Model>) -> PyResult<RwLockWriteGuard<'_, Model>> {
    model.write().map_err(|_| poisoned())
}

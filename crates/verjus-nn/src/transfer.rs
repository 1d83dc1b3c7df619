//! Moving a built network (and a trainer's solver state) to another device.
//!
//! A network is built on one backend ([`Network::build`] draws its parameters
//! there), but a program may decide the device later: a Python `Network` made on
//! the CPU and handed to a CUDA `Trainer`, or a checkpoint loaded on the host
//! and served on a GPU. Only parameters live on a device (contexts are made per
//! invocation, the graph is plain data), so a move copies each parameter
//! through the host: downloaded with the source backend, uploaded with the
//! target backend, both through `verjus_core::ops`. The logic never asks which
//! kind of backend it talks to, so a CPU->CPU move exercises the same path as
//! CPU->CUDA, and values arrive bit-identical (a copy, no arithmetic).
//!
//! Moves are all-or-nothing: every new tensor is made before any is swapped in,
//! so an error (a device out of memory, a failed upload) leaves the network
//! (and the trainer) exactly as it was.

use crate::network::Network;
use crate::trainer::Trainer;
use verjus_core::{ops, Backend, BackendRef, Device, Error, Result, Tensor};

impl Network {
    /// Moves every parameter from `from`'s device (where they live now) to
    /// `to`'s device, keeping the values bit-identical. A no-op when both are
    /// the same device. On an error nothing changes.
    ///
    /// Contexts made before the move belong to the old device: make new ones
    /// with [`Network::new_context`] on `to`.
    pub fn to_device(&mut self, from: &dyn Backend, to: &dyn Backend) -> Result<()> {
        if from.device() == to.device() && self.on_device(to.device()) {
            return Ok(());
        }
        let moved = self
            .parameters
            .iter()
            .map(|p| move_tensor(&p.name, from, to, &p.value))
            .collect::<Result<Vec<_>>>()?;
        for (p, value) in self.parameters.iter_mut().zip(moved) {
            p.value = value;
        }
        Ok(())
    }

    /// Whether every parameter lives on `device`.
    pub fn on_device(&self, device: Device) -> bool {
        self.parameters.iter().all(|p| p.value.device() == device)
    }
}

impl Trainer {
    /// Moves the network and the solver's state (moments, velocities) to
    /// `be`'s device and computes there from now on. The per-batch buffers are
    /// dropped (they are made again on the new device); the step count, the
    /// schedule and the dropout stream's position carry over, so training
    /// continues as if it had not moved. On an error nothing changes.
    pub fn to_device(&mut self, be: BackendRef) -> Result<()> {
        let from = BackendRef::clone(self.backend());
        let same = from.device() == be.device();
        if same && self.network().on_device(be.device()) && self.state_on(be.device()) {
            return Ok(());
        }
        // Everything is copied before anything is replaced.
        let params = self
            .network()
            .parameters()
            .iter()
            .map(|p| move_tensor(&p.name, &*from, &*be, &p.value))
            .collect::<Result<Vec<_>>>()?;
        let mut state = Vec::new();
        for (name, st) in self.solver().state().entries() {
            let slots = st
                .slots
                .iter()
                .map(|s| move_tensor(&format!("solver state of {name}"), &*from, &*be, s))
                .collect::<Result<Vec<_>>>()?;
            state.push((name.to_owned(), slots));
        }
        for (p, value) in self.network_mut().parameters_mut().iter_mut().zip(params) {
            p.value = value;
        }
        for (name, slots) in state {
            if let Some(st) = self.solver_mut().state_mut().get_mut(&name) {
                st.slots = slots;
            }
        }
        self.set_backend(be);
        Ok(())
    }

    /// Whether every solver state tensor lives on `device`.
    fn state_on(&self, device: Device) -> bool {
        self.solver()
            .state()
            .entries()
            .iter()
            .all(|(_, st)| st.slots.iter().all(|s| s.device() == device))
    }
}

/// A copy of `t` on `to`'s device, through the host. `t` must live on the
/// host or on `from`'s device; `what` names it in errors.
fn move_tensor(what: &str, from: &dyn Backend, to: &dyn Backend, t: &Tensor) -> Result<Tensor> {
    let host = match t.device() {
        Device::Cpu => None,
        d if d == from.device() => Some(ops::download(from, t)?),
        d => {
            return Err(Error::invalid(
                "to_device",
                format!(
                    "{what} lives on {d}, but the move was asked from {}",
                    from.device()
                ),
            ))
        }
    };
    match (host, to.device()) {
        // Already a fresh host copy: it is the result.
        (Some(h), Device::Cpu) => Ok(h),
        (Some(h), _) => ops::upload(to, &h),
        (None, _) => ops::upload(to, t),
    }
}

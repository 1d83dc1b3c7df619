//! Grad mode: whether ops on [`Var`](super::Var)s record themselves.
//!
//! The flag is thread-local, like PyTorch's: evaluation code on one thread does
//! not switch recording off for a training loop on another. It is changed only
//! through guards, so it is restored however the scope is left (`?`, panic).

use std::cell::Cell;
use std::marker::PhantomData;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record nodes for the backward pass.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Restores the previous grad mode of this thread when dropped.
#[must_use = "grad mode returns to its previous value when the guard is dropped"]
#[derive(Debug)]
pub struct GradModeGuard {
    previous: bool,
    /// The guard restores a thread-local flag, so it must stay on its thread.
    _not_send: PhantomData<*const ()>,
}

fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let previous = GRAD_ENABLED.with(|flag| flag.replace(enabled));
    GradModeGuard {
        previous,
        _not_send: PhantomData,
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|flag| flag.set(self.previous));
    }
}

/// Turns recording off on this thread until the guard drops: results have no
/// graph and do not require gradients (evaluation, optimizer updates).
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

/// Turns recording back on inside a [`no_grad`] scope until the guard drops.
pub fn enable_grad() -> GradModeGuard {
    set_grad_enabled(true)
}

//! [`Var`]: a tensor value that remembers how it was computed.

use super::alloc;
use super::checkpoint::Replay;
use super::node::Node;
use crate::{ops, BackendRef, DType, Device, Error, Result, Shape, Storage, Tensor};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// A cheap-to-clone handle to a value on some backend, with what the backward
/// pass needs: whether it requires a gradient, the node of the op that made it
/// (none for leaves and constants), and, for leaves, a gradient slot.
///
/// Clones share everything: the value, the node and the gradient slot.
#[derive(Clone)]
pub struct Var(Arc<VarInner>);

struct VarInner {
    /// Replaced, never mutated, while other handles hold it (copy on write), so
    /// a graph that saved the old value still differentiates at that value.
    value: RwLock<Arc<Tensor>>,
    backend: BackendRef,
    requires_grad: bool,
    /// The node of the op that made this value, and which of its outputs this is.
    grad_fn: Option<(Arc<Node>, usize)>,
    /// Accumulated gradient (leaves that require one; always empty otherwise).
    grad: Mutex<Option<Arc<Tensor>>>,
    /// For a value made in a gradient checkpoint scope: how to make it again.
    replay: Option<(Arc<Replay>, usize)>,
}

impl Var {
    /// A leaf or constant holding `value` on `backend`. A host tensor is
    /// uploaded to the backend's device. Only float32 values can require a
    /// gradient (int64 labels and indices are constants).
    pub fn new(value: Tensor, backend: BackendRef, requires_grad: bool) -> Result<Var> {
        let value = on_device(&backend, value, "Var::new")?;
        if requires_grad && value.dtype() != DType::F32 {
            return Err(Error::Autograd(format!(
                "only float32 values can require gradients, got a {} value",
                value.dtype()
            )));
        }
        Ok(Var::from_parts(
            Arc::new(value),
            backend,
            requires_grad,
            None,
        ))
    }

    /// A leaf that requires a gradient (a parameter, or an input to differentiate by).
    pub fn leaf(value: Tensor, backend: BackendRef) -> Result<Var> {
        Var::new(value, backend, true)
    }

    /// A value no gradient flows to (data, labels, indices).
    pub fn constant(value: Tensor, backend: BackendRef) -> Result<Var> {
        Var::new(value, backend, false)
    }

    pub(crate) fn from_parts(
        value: Arc<Tensor>,
        backend: BackendRef,
        requires_grad: bool,
        grad_fn: Option<(Arc<Node>, usize)>,
    ) -> Var {
        Var(Arc::new(VarInner {
            value: RwLock::new(value),
            backend,
            requires_grad,
            grad_fn,
            grad: Mutex::new(None),
            replay: None,
        }))
    }

    /// This freshly made value, marked as output `output` of `replay`.
    pub(crate) fn with_replay(self, replay: Arc<Replay>, output: usize) -> Var {
        match Arc::try_unwrap(self.0) {
            Ok(mut inner) => {
                inner.replay = Some((replay, output));
                Var(Arc::new(inner))
            }
            Err(shared) => Var(shared),
        }
    }

    /// The replay that makes this value again, for a value made in a
    /// gradient checkpoint scope.
    pub(crate) fn replay(&self) -> Option<(&Arc<Replay>, usize)> {
        self.0.replay.as_ref().map(|(r, i)| (r, *i))
    }

    /// The current value (shared, not copied).
    pub fn value(&self) -> Arc<Tensor> {
        read(&self.0.value).clone()
    }

    /// The shape of the value.
    pub fn shape(&self) -> Shape {
        read(&self.0.value).shape().clone()
    }

    /// The element type of the value.
    pub fn dtype(&self) -> DType {
        read(&self.0.value).dtype()
    }

    /// The backend computing this value and every op on it.
    pub fn backend(&self) -> &BackendRef {
        &self.0.backend
    }

    /// Whether gradients flow to this value.
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad
    }

    /// Whether this is a leaf or a constant (not the output of a recorded op).
    pub fn is_leaf(&self) -> bool {
        self.0.grad_fn.is_none()
    }

    /// The name of the recorded op that made this value, if any.
    pub fn op_name(&self) -> Option<&'static str> {
        self.0.grad_fn.as_ref().map(|(n, _)| n.name)
    }

    pub(crate) fn grad_fn(&self) -> Option<&Arc<Node>> {
        self.0.grad_fn.as_ref().map(|(n, _)| n)
    }

    /// Which output of its node this value is (0 for leaves, constants and
    /// the outputs of one-output ops).
    pub(crate) fn output(&self) -> usize {
        self.0.grad_fn.as_ref().map_or(0, |&(_, i)| i)
    }

    /// Whether two handles are the same variable.
    pub fn ptr_eq(&self, other: &Var) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The identity of this variable while it lives (for maps in the engine).
    pub(crate) fn addr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The gradient accumulated by [`Var::backward`] calls (leaves only).
    pub fn grad(&self) -> Option<Arc<Tensor>> {
        lock(&self.0.grad).clone()
    }

    /// Clears the accumulated gradient.
    pub fn zero_grad(&self) {
        *lock(&self.0.grad) = None;
    }

    /// Replaces the accumulated gradient by `g` of the variable's shape (what
    /// clipping a gradient by value does).
    pub fn set_grad(&self, g: Tensor) -> Result<()> {
        if g.shape() != &self.shape() {
            return Err(Error::invalid(
                "set_grad",
                format!(
                    "gradient of shape {}, variable of {}",
                    g.shape(),
                    self.shape()
                ),
            ));
        }
        *lock(&self.0.grad) = Some(Arc::new(g));
        Ok(())
    }

    /// Adds `g` to the gradient slot.
    pub(crate) fn accumulate_grad(&self, g: Tensor) -> Result<()> {
        let mut slot = lock(&self.0.grad);
        let sum = match slot.as_deref() {
            None => g,
            Some(old) => alloc::add(&**self.backend(), old, &g)?,
        };
        *slot = Some(Arc::new(sum));
        Ok(())
    }

    /// Replaces the value of a leaf or constant by one of the same shape and
    /// dtype (a host tensor is uploaded). Graphs recorded before keep the old value.
    pub fn set_value(&self, value: Tensor) -> Result<()> {
        self.check_assignable("set_value")?;
        let value = on_device(self.backend(), value, "set_value")?;
        let mut slot = write(&self.0.value);
        check_same_layout("set_value", &slot, &value)?;
        *slot = Arc::new(value);
        Ok(())
    }

    /// Updates the value of a leaf or constant in place (an optimizer step):
    /// `f` gets the value mutably and must keep its shape, dtype and device.
    /// When a recorded graph or another caller still shares the value, `f`
    /// works on a copy, so they keep seeing the old one. `f` runs under this
    /// variable's lock and must not use the variable itself.
    pub fn update_value<R>(&self, f: impl FnOnce(&mut Tensor) -> Result<R>) -> Result<R> {
        self.check_assignable("update_value")?;
        let mut slot = write(&self.0.value);
        let aliased = matches!(slot.storage(), Storage::Alias(_));
        if aliased || Arc::get_mut(&mut slot).is_none() {
            let copy = alloc::copy_as(&**self.backend(), &slot, slot.shape())?;
            *slot = Arc::new(copy);
        }
        let before = (slot.shape().clone(), slot.dtype(), slot.device());
        let value = Arc::get_mut(&mut slot).ok_or_else(|| {
            Error::Autograd("update_value: the value is shared after copying".into())
        })?;
        let result = f(value)?;
        if (value.shape(), value.dtype(), value.device()) != (&before.0, before.1, before.2) {
            return Err(Error::Autograd(format!(
                "update_value changed the value from {} {} on {} to {} {} on {}",
                before.1,
                before.0,
                before.2,
                value.dtype(),
                value.shape(),
                value.device()
            )));
        }
        Ok(result)
    }

    fn check_assignable(&self, op: &str) -> Result<()> {
        if self.replay().is_some() {
            return Err(Error::Autograd(format!(
                "{op}: this value was made in a gradient checkpoint scope and is recomputed in backward; it cannot be assigned"
            )));
        }
        match self.op_name() {
            Some(name) => Err(Error::Autograd(format!(
                "{op}: this value is the output of {name}; only leaves and constants can be assigned"
            ))),
            None => Ok(()),
        }
    }

    /// The same value without its graph: no gradient flows through the result
    /// (`stop_gradient`). The value is shared, not copied.
    #[doc(alias = "stop_gradient")]
    pub fn detach(&self) -> Var {
        Var::from_parts(self.value(), self.backend().clone(), false, None)
    }

    /// A host copy of the value.
    pub fn to_host(&self) -> Result<Tensor> {
        ops::download(&**self.backend(), &self.value())
    }

    /// The value of a one-element float32 variable.
    pub fn item(&self) -> Result<f32> {
        let host = self.to_host()?;
        host.as_slice::<f32>()?
            .first()
            .copied()
            .filter(|_| host.numel() == 1)
            .ok_or_else(|| {
                Error::invalid(
                    "item",
                    format!("needs exactly one element, got shape {}", host.shape()),
                )
            })
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value();
        f.debug_struct("Var")
            .field("shape", value.shape())
            .field("dtype", &value.dtype())
            .field("device", &value.device())
            .field("requires_grad", &self.requires_grad())
            .field("op", &self.op_name())
            .finish()
    }
}

/// `value` on the backend's device: host tensors are uploaded, tensors on
/// another device are an error.
pub(crate) fn on_device(backend: &BackendRef, value: Tensor, op: &str) -> Result<Tensor> {
    let (have, want) = (value.device(), backend.device());
    if have == want {
        Ok(value)
    } else if have == Device::Cpu {
        ops::upload(&**backend, &value)
    } else {
        Err(Error::WrongDevice {
            op: op.into(),
            what: "value".into(),
            expected: want,
            actual: have,
        })
    }
}

fn check_same_layout(op: &str, old: &Tensor, new: &Tensor) -> Result<()> {
    if old.shape() != new.shape() {
        return Err(Error::shape(op, "new value", old.shape(), new.shape()));
    }
    if old.dtype() != new.dtype() {
        return Err(Error::DTypeMismatch {
            op: op.into(),
            what: "new value".into(),
            expected: old.dtype(),
            actual: new.dtype(),
        });
    }
    Ok(())
}

// Poisoning is ignored: a panic under these locks can at worst leave a value
// half-updated by the caller's own `update_value` closure, and reporting that
// as a second panic everywhere else would not make it consistent again.
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

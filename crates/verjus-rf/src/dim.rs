//! [`Dim`]: the name of an axis, compared by identity.
//!
//! Two dims are equal only when they are the same object:
//! `Dim::new_static(7, "f") != Dim::new_static(7, "f")`. Identity is a
//! unique `u64` behind an `Arc`, so comparing and hashing cost one integer
//! compare, and a clone one reference-count increment.
//!
//! A dim's size is one of
//! - static (`Dim(7)`): every tensor with the dim has exactly that many entries;
//! - dynamic (`Dim(lengths)`): per-sequence lengths, an integer tensor over
//!   other dims (usually `[batch]`); the axis holds `max(lengths)` entries
//!   and the entries past a sequence's own length are padding, masked by
//!   reductions and softmax;
//! - unknown ([`batch_dim`], `Dim(None)`): set by the tensors that carry it,
//!   which must then agree with each other; never masked. A constant over
//!   such a dim ([`full`](crate::full), so `rf.zeros([rf.batch_dim, ...])`)
//!   takes the size of the last tensor made from data over it, as RETURNN's
//!   `batch_dim` takes the current batch's.

use crate::dim_math::DimMath;
use crate::mask;
use crate::RfTensor;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use verjus_core::{Error, Result};

/// The name of an axis. See the module docs.
#[derive(Clone)]
pub struct Dim(Arc<DimInner>);

struct DimInner {
    id: u64,
    name: String,
    size: Size,
    /// The sequence mask of a dynamic dim, made on first use.
    mask: OnceLock<RfTensor>,
    /// Dims derived from this one by dim arithmetic (`dim + 1`, ...), so
    /// that the same formula gives the same dim (`dim_math.rs`). Weak: a
    /// derived dim nobody holds cannot be compared with, and goes.
    derived: Mutex<Vec<(DimMath, Weak<DimInner>)>>,
    /// The dim and formula this one was derived from by dim arithmetic.
    origin: OnceLock<(Dim, DimMath)>,
    /// An unknown dim's size in the last tensor made from data over it
    /// ([`NOT_SEEN`] before any).
    seen: AtomicUsize,
}

/// [`DimInner::seen`] before a tensor over the dim was made from data.
const NOT_SEEN: usize = usize::MAX;

enum Size {
    Static(usize),
    Dynamic { lengths: RfTensor, max: usize },
    Unknown,
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Dim {
    fn make(name: &str, size: Size) -> Dim {
        Dim(Arc::new(DimInner {
            id: next_id(),
            name: name.to_owned(),
            size,
            mask: OnceLock::new(),
            derived: Mutex::new(Vec::new()),
            origin: OnceLock::new(),
            seen: AtomicUsize::new(NOT_SEEN),
        }))
    }

    /// A dim of fixed size.
    pub fn new_static(size: usize, name: &str) -> Dim {
        Dim::make(name, Size::Static(size))
    }

    /// A dim whose size the tensors carrying it decide (like the batch).
    pub fn new_unknown(name: &str) -> Dim {
        Dim::make(name, Size::Unknown)
    }

    /// A dynamic dim with per-sequence `lengths` (an integer tensor, usually
    /// over `[batch]`, values `>= 0`). Reads the lengths once to learn the
    /// longest, which is the axis size of every tensor with this dim.
    pub fn new_dynamic(lengths: RfTensor, name: &str) -> Result<Dim> {
        if !lengths.dtype().is_int() {
            return Err(Error::invalid(
                "Dim",
                format!(
                    "lengths of dim {name:?} must be an int32 or int64 tensor, got {}",
                    lengths.dtype()
                ),
            ));
        }
        let host = lengths.var().to_host()?;
        let values: Vec<i64> = match host.dtype() {
            verjus_core::DType::I32 => host.as_slice::<i32>()?.iter().map(|&v| v as i64).collect(),
            _ => host.to_vec::<i64>()?,
        };
        if let Some(bad) = values.iter().find(|&&v| v < 0) {
            return Err(Error::invalid(
                "Dim",
                format!("lengths of dim {name:?} must be >= 0, got {bad}"),
            ));
        }
        let max = values.iter().copied().max().unwrap_or(0) as usize;
        Ok(Dim::make(name, Size::Dynamic { lengths, max }))
    }

    /// The unique id (what equality and hashing use).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The name, for messages and `repr`.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The axis size every tensor with this dim has: the static size, or
    /// the longest sequence of a dynamic dim; `None` when unknown.
    pub fn size(&self) -> Option<usize> {
        match &self.0.size {
            Size::Static(n) => Some(*n),
            Size::Dynamic { max, .. } => Some(*max),
            Size::Unknown => None,
        }
    }

    /// [`size`](Dim::size), or for an unknown dim its size in the last
    /// tensor made from data over it (the current batch's, for the batch).
    pub fn size_or_seen(&self) -> Option<usize> {
        self.size().or_else(|| {
            let seen = self.0.seen.load(Ordering::Relaxed);
            (seen != NOT_SEEN).then_some(seen)
        })
    }

    /// Records that a tensor made from data has `n` entries along this dim
    /// (kept for an unknown dim; see [`size_or_seen`](Dim::size_or_seen)).
    pub(crate) fn note_data_size(&self, n: usize) {
        if matches!(self.0.size, Size::Unknown) {
            self.0.seen.store(n, Ordering::Relaxed);
        }
    }

    /// The static size, if the dim is static.
    pub fn static_size(&self) -> Option<usize> {
        match &self.0.size {
            Size::Static(n) => Some(*n),
            _ => None,
        }
    }

    /// The per-sequence lengths of a dynamic dim.
    pub fn lengths(&self) -> Option<&RfTensor> {
        match &self.0.size {
            Size::Dynamic { lengths, .. } => Some(lengths),
            _ => None,
        }
    }

    /// Whether the dim has per-sequence lengths (and is masked).
    pub fn is_dynamic(&self) -> bool {
        matches!(self.0.size, Size::Dynamic { .. })
    }

    /// The bool mask `lengths > range(self)` over `lengths.dims + [self]`
    /// (`None` for a dim that is not dynamic), made once per dim.
    pub fn mask(&self) -> Result<Option<RfTensor>> {
        let Size::Dynamic { lengths, max } = &self.0.size else {
            return Ok(None);
        };
        if let Some(m) = self.0.mask.get() {
            return Ok(Some(m.clone()));
        }
        let m = mask::lengths_mask(self, lengths, *max)?;
        Ok(Some(self.0.mask.get_or_init(|| m).clone()))
    }
}

impl Dim {
    /// The dim `key` derives from this one: the one made before while it is
    /// still held, else `make()`, remembered with this dim as its origin.
    pub(crate) fn derive_cached(
        &self,
        key: DimMath,
        make: impl FnOnce() -> Result<Dim>,
    ) -> Result<Dim> {
        let cached = {
            let mut derived = self
                .0
                .derived
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            derived.retain(|(_, d)| d.strong_count() > 0);
            derived
                .iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, d)| d.upgrade())
        };
        if let Some(inner) = cached {
            return Ok(Dim(inner));
        }
        let dim = make()?;
        let _ = dim.0.origin.set((self.clone(), key.clone()));
        self.0
            .derived
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((key, Arc::downgrade(&dim.0)));
        Ok(dim)
    }

    /// The dim and formula this one was derived from by dim arithmetic.
    pub(crate) fn origin(&self) -> Option<&(Dim, DimMath)> {
        self.0.origin.get()
    }
}

impl PartialEq for Dim {
    fn eq(&self, other: &Dim) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for Dim {}

impl Hash for Dim {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.id.hash(state);
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.name)
    }
}

impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.size {
            Size::Static(n) => write!(f, "Dim({:?}, {n})", self.0.name),
            Size::Dynamic { max, .. } => write!(f, "Dim({:?}, dynamic <= {max})", self.0.name),
            Size::Unknown => write!(f, "Dim({:?}, ?)", self.0.name),
        }
    }
}

/// The global batch dim (size set by the tensors that carry it).
pub fn batch_dim() -> Dim {
    static BATCH: OnceLock<Dim> = OnceLock::new();
    BATCH.get_or_init(|| Dim::new_unknown("batch")).clone()
}

/// RETURNN's `single_step_dim` (size 1): given as the spatial dim of a
/// recurrent op (such as [`lstm`](crate::lstm)), it asks for one step on a
/// source without a time axis.
pub fn single_step_dim() -> Dim {
    static SINGLE_STEP: OnceLock<Dim> = OnceLock::new();
    SINGLE_STEP
        .get_or_init(|| Dim::new_static(1, "single-step"))
        .clone()
}

/// `[a, b, c]`: dims by name, for error messages.
pub fn fmt_dims(dims: &[Dim]) -> String {
    let names: Vec<&str> = dims.iter().map(Dim::name).collect();
    format!("[{}]", names.join(", "))
}

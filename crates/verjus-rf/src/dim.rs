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
//!
//! A dim that is not static can be given its sizes after it is made, and
//! again for every batch ([`Dim::set_lengths`]): RETURNN configs declare
//! `time_dim = Dim(None, name="time")` once and bind it to each batch's
//! lengths, and ops given such a dim as `out_dim` fill it in. The dim stays
//! the same object (so tensors, modules and templates that name it keep
//! naming it); its mask and the dims derived from it by formula are made
//! anew for the new sizes.

use crate::dim_math::DimMath;
use crate::mask;
use crate::{RfDType, RfTensor};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};
use verjus_core::{Error, Result};

/// The name of an axis. See the module docs.
#[derive(Clone)]
pub struct Dim(Arc<DimInner>);

struct DimInner {
    id: u64,
    name: String,
    /// Static dims never change; the others can be (re)bound
    /// ([`Dim::set_lengths`]).
    size: RwLock<Size>,
    /// Dims derived from this one by dim arithmetic (`dim + 1`, ...), so
    /// that the same formula gives the same dim (`dim_math.rs`). Weak: a
    /// derived dim nobody holds cannot be compared with, and goes.
    derived: Mutex<Vec<(DimMath, Weak<DimInner>)>>,
    /// The dim and formula this one was derived from by dim arithmetic.
    origin: OnceLock<(Dim, DimMath)>,
    /// The dims and dtype its lengths have or will have (RETURNN's
    /// `dyn_size_ext` template: `Dim(Tensor("time", [batch], "int32"))`).
    lengths_template: Mutex<Option<(Vec<Dim>, RfDType)>>,
    /// An unknown dim's size in the last tensor made from data over it
    /// ([`NOT_SEEN`] before any).
    seen: AtomicUsize,
}

/// [`DimInner::seen`] before a tensor over the dim was made from data.
const NOT_SEEN: usize = usize::MAX;

enum Size {
    Static(usize),
    Dynamic {
        lengths: RfTensor,
        max: usize,
        /// The sequence mask, made on first use.
        mask: OnceLock<RfTensor>,
    },
    Unknown,
}

impl Size {
    fn dynamic(lengths: RfTensor, max: usize) -> Size {
        Size::Dynamic {
            lengths,
            max,
            mask: OnceLock::new(),
        }
    }
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
            size: RwLock::new(size),
            derived: Mutex::new(Vec::new()),
            origin: OnceLock::new(),
            lengths_template: Mutex::new(None),
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
        let max = longest(&lengths, name)?;
        let template = (lengths.dims().to_vec(), lengths.dtype());
        let dim = Dim::make(name, Size::dynamic(lengths, max));
        dim.set_lengths_template(template.0, template.1);
        Ok(dim)
    }

    /// The dims and dtype that this dim's lengths have, or will have once bound.
    pub fn lengths_template(&self) -> Option<(Vec<Dim>, RfDType)> {
        self.0
            .lengths_template
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Declares the dims and dtype of the lengths this dim will be bound to.
    pub fn set_lengths_template(&self, dims: Vec<Dim>, dtype: RfDType) {
        *self
            .0
            .lengths_template
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((dims, dtype));
    }

    /// Binds the sizes of a dim that is not static, replacing earlier ones:
    /// per-sequence `lengths` (as [`new_dynamic`](Dim::new_dynamic)), a
    /// scalar (every entry has that size, so nothing is masked: RETURNN's
    /// `batch_dim.dyn_size_ext` of one batch) or `None` (unknown again).
    /// The mask and the dims derived by formula are made anew afterwards.
    pub fn set_lengths(&self, lengths: Option<RfTensor>) -> Result<()> {
        let name = self.name();
        if let Some(n) = self.static_size() {
            return Err(Error::invalid(
                "Dim",
                format!("dim {name:?} is static ({n}); its size cannot be set"),
            ));
        }
        let new = match lengths {
            None => Size::Unknown,
            Some(l) if l.dims().contains(self) => {
                return Err(Error::invalid(
                    "Dim",
                    format!(
                        "the lengths of dim {name:?} cannot be over the dim itself, got {}",
                        fmt_dims(l.dims())
                    ),
                ))
            }
            Some(l) if l.dims().is_empty() => {
                let n = longest(&l, name)?;
                self.0.seen.store(n, Ordering::Relaxed);
                Size::Unknown
            }
            Some(l) => {
                let max = longest(&l, name)?;
                self.set_lengths_template(l.dims().to_vec(), l.dtype());
                Size::dynamic(l, max)
            }
        };
        {
            let mut size = self.0.size.write().unwrap_or_else(PoisonError::into_inner);
            if matches!(new, Size::Unknown) && !matches!(*size, Size::Unknown) {
                self.0.seen.store(NOT_SEEN, Ordering::Relaxed);
            }
            *size = new;
        }
        self.0
            .derived
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        Ok(())
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
        match &*self.read() {
            Size::Static(n) => Some(*n),
            Size::Dynamic { max, .. } => Some(*max),
            Size::Unknown => None,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Size> {
        self.0.size.read().unwrap_or_else(PoisonError::into_inner)
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
        if matches!(*self.read(), Size::Unknown) {
            self.0.seen.store(n, Ordering::Relaxed);
        }
    }

    /// The static size, if the dim is static.
    pub fn static_size(&self) -> Option<usize> {
        match &*self.read() {
            Size::Static(n) => Some(*n),
            _ => None,
        }
    }

    /// The per-sequence lengths of a dynamic dim.
    pub fn lengths(&self) -> Option<RfTensor> {
        match &*self.read() {
            Size::Dynamic { lengths, .. } => Some(lengths.clone()),
            _ => None,
        }
    }

    /// Whether the dim has per-sequence lengths (and is masked).
    pub fn is_dynamic(&self) -> bool {
        matches!(*self.read(), Size::Dynamic { .. })
    }

    /// The bool mask `lengths > range(self)` over `lengths.dims + [self]`
    /// (`None` for a dim that is not dynamic), made once per dim.
    pub fn mask(&self) -> Result<Option<RfTensor>> {
        let (lengths, max) = match &*self.read() {
            Size::Dynamic { mask, .. } if mask.get().is_some() => return Ok(mask.get().cloned()),
            Size::Dynamic { lengths, max, .. } => (lengths.clone(), *max),
            _ => return Ok(None),
        };
        // Made without the lock held: making it reads this dim's size.
        let m = mask::lengths_mask(self, &lengths, max)?;
        if let Size::Dynamic {
            lengths: l, mask, ..
        } = &*self.read()
        {
            if l.var().ptr_eq(lengths.var()) {
                return Ok(Some(mask.get_or_init(|| m).clone()));
            }
        }
        Ok(Some(m))
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
        match &*self.read() {
            Size::Static(n) => write!(f, "Dim({:?}, {n})", self.0.name),
            Size::Dynamic { max, .. } => write!(f, "Dim({:?}, dynamic <= {max})", self.0.name),
            Size::Unknown => write!(f, "Dim({:?}, ?)", self.0.name),
        }
    }
}

/// The longest of `lengths` (an int tensor of values `>= 0`), the lengths of dim `name`.
fn longest(lengths: &RfTensor, name: &str) -> Result<usize> {
    if !lengths.dtype().is_int() {
        return Err(Error::invalid(
            "Dim",
            format!(
                "lengths of dim {name:?} must be an int32 or int64 tensor, got {}",
                lengths.dtype()
            ),
        ));
    }
    let values = crate::derive::host_i64(lengths)?;
    if let Some(bad) = values.iter().find(|&&v| v < 0) {
        return Err(Error::invalid(
            "Dim",
            format!("lengths of dim {name:?} must be >= 0, got {bad}"),
        ));
    }
    Ok(values.iter().copied().max().unwrap_or(0) as usize)
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

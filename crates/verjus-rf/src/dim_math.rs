//! Dim arithmetic, after RETURNN's: `dim + 1`, `1 + dim`, `dim - 1`,
//! `2 * dim`, `dim // 2`, `dim.ceildiv_right(2)`, `dim.div_left(2)`,
//! `dim_a + dim_b`, `dim_a * dim_b`.
//!
//! Model code writes the same formula in several places (the out dim of a
//! subsampling conv, a padded dim) and expects the results to be one dim, so
//! every derived dim is remembered on its base by formula (`Dim::derive_cached`)
//! and simple inverses fold back: `(dim + 1) - 1` is `dim`, `(dim * 2) // 2`
//! is `dim`, `(dim + 1) + 2` is `dim + 3`. As in RETURNN, left and right
//! forms (`1 + dim`, `dim + 1`) are different dims of the same size.
//!
//! A derived dim's size is the formula applied to the static size, or to
//! every entry's length of a dynamic dim (`derive.rs`), so each sequence
//! gets the length it would get alone; of a dim of unknown size, unknown.

use crate::derive::{derived, host_i64};
use crate::{Dim, RfTensor};
use verjus_core::{Error, Result, Tensor};

/// A formula deriving a dim from another: what a derived dim remembers of
/// its origin, and the key under which its base remembers it. `left` tells
/// `1 + dim` from `dim + 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimMath {
    /// `dim + n` (`n` may be negative: `dim - 1`).
    Add { n: i64, left: bool },
    /// `dim + other`, the other dim by id.
    AddDim { other: u64, left: bool },
    /// `dim * n`.
    Mul { n: i64, left: bool },
    /// `dim * other`, the other dim by id.
    MulDim { other: u64, left: bool },
    /// `dim // n`.
    FloorDiv { n: i64 },
    /// `ceil(dim / n)`.
    CeilDiv { n: i64, left: bool },
    /// `dim / n`, which must divide evenly.
    Div { n: i64, left: bool },
}

fn factor(what: &str, dim: &Dim, n: i64) -> Result<()> {
    if n < 1 {
        return Err(Error::invalid(
            "Dim",
            format!("{what} of dim {dim:?} needs a factor >= 1, got {n}"),
        ));
    }
    Ok(())
}

impl Dim {
    /// `self + n` (`n + self` when `left`); `n` may be negative.
    pub fn add(&self, n: i64, left: bool) -> Result<Dim> {
        if n == 0 {
            return Ok(self.clone());
        }
        if let Some((base, DimMath::Add { n: m, left: l })) = self.origin() {
            if *l == left {
                return base.add(m + n, left);
            }
        }
        let name = if left {
            format!("{n}+{}", self.name())
        } else if n < 0 {
            format!("{}{n}", self.name())
        } else {
            format!("{}+{n}", self.name())
        };
        self.derive(DimMath::Add { n, left }, &name, move |l| l + n)
    }

    /// `self + other` (`other + self` when `left`): per entry, the sum of
    /// the two sizes. Two dynamic dims need lengths over the same dims.
    pub fn add_dim(&self, other: &Dim, left: bool) -> Result<Dim> {
        if let Some(n) = other.static_size() {
            return self.add(n as i64, left);
        }
        if let Some(n) = self.static_size() {
            return other.add(n as i64, !left);
        }
        let key = DimMath::AddDim {
            other: other.id(),
            left,
        };
        let name = if left {
            format!("{other}+{self}")
        } else {
            format!("{self}+{other}")
        };
        self.derive_cached(key, || {
            let (Some(a), Some(b)) = (self.lengths(), other.lengths()) else {
                return Ok(Dim::new_unknown(&name));
            };
            if a.dims() != b.dims() {
                return Err(Error::invalid(
                    "Dim",
                    format!(
                        "{self} + {other}: the lengths must be over the same dims, got {} and {}",
                        crate::fmt_dims(a.dims()),
                        crate::fmt_dims(b.dims())
                    ),
                ));
            }
            let sums: Vec<i64> = host_i64(&a)?
                .iter()
                .zip(host_i64(&b)?)
                .map(|(x, y)| x + y)
                .collect();
            let value = match a.dtype() {
                crate::RfDType::Int32 => Tensor::from_vec(
                    a.sizes(),
                    sums.iter().map(|&v| v as i32).collect::<Vec<_>>(),
                )?,
                _ => Tensor::from_vec(a.sizes(), sums)?,
            };
            let t = RfTensor::from_tensor(
                value,
                a.dims().to_vec(),
                Some(a.dtype()),
                a.backend().clone(),
                false,
            )?;
            Dim::new_dynamic(t, &name)
        })
    }

    /// `self * n` (`n * self` when `left`), `n >= 1`.
    pub fn mul(&self, n: i64, left: bool) -> Result<Dim> {
        factor("multiplying", self, n)?;
        if n == 1 {
            return Ok(self.clone());
        }
        let name = if left {
            format!("{n}*{self}")
        } else {
            format!("{self}*{n}")
        };
        self.derive(DimMath::Mul { n, left }, &name, move |l| l * n)
    }

    /// `self * other` (`other * self` when `left`): a dim of its own (a dim of
    /// size 1 does not fold away, as in RETURNN), static when both are, else
    /// each entry's length times the static one's size; two dynamic dims
    /// have no product. `merge_dims` names its merged dim so.
    pub fn mul_dim(&self, other: &Dim, left: bool) -> Result<Dim> {
        let key = DimMath::MulDim {
            other: other.id(),
            left,
        };
        let name = if left {
            format!("{other}*{self}")
        } else {
            format!("{self}*{other}")
        };
        let (dynamic, n) = match (self.static_size(), other.static_size()) {
            (_, Some(n)) => (self, n),
            (Some(n), None) => (other, n),
            (None, None) if self.is_dynamic() && other.is_dynamic() => {
                return Err(Error::invalid(
                    "Dim",
                    format!("{self} * {other}: two dynamic dims have no product dim"),
                ))
            }
            (None, None) => return Ok(Dim::new_unknown(&name)),
        };
        let n = n as i64;
        let dynamic = dynamic.clone();
        self.derive_cached(key, || {
            Ok(derived("Dim", &dynamic, &name, move |l| l * n)?
                .unwrap_or_else(|| Dim::new_unknown(&name)))
        })
    }

    /// `self // n`, `n >= 1`; `(dim * n) // n` is `dim`.
    pub fn floordiv(&self, n: i64) -> Result<Dim> {
        factor("dividing", self, n)?;
        if let Some(base) = self.multiple_of(n) {
            return Ok(base);
        }
        let name = format!("{self}//{n}");
        self.derive(DimMath::FloorDiv { n }, &name, move |l| l.div_euclid(n))
    }

    /// `ceil(self / n)` (`ceildiv_left` when `left`), `n >= 1`.
    pub fn ceildiv(&self, n: i64, left: bool) -> Result<Dim> {
        factor("dividing", self, n)?;
        if let Some(base) = self.multiple_of(n) {
            return Ok(base);
        }
        let name = format!("ceil({self}/{n})");
        self.derive(DimMath::CeilDiv { n, left }, &name, move |l| {
            (l + n - 1).div_euclid(n)
        })
    }

    /// `self / n` (`div_left` when `left`), `n >= 1`: the size (every
    /// entry's length) must be a multiple of `n`.
    pub fn div(&self, n: i64, left: bool) -> Result<Dim> {
        factor("dividing", self, n)?;
        if let Some(base) = self.multiple_of(n) {
            return Ok(base);
        }
        let sizes = match (self.static_size(), self.lengths()) {
            (Some(s), _) => vec![s as i64],
            (None, Some(l)) => host_i64(&l)?,
            (None, None) => Vec::new(),
        };
        if let Some(bad) = sizes.iter().find(|&&s| s % n != 0) {
            return Err(Error::invalid(
                "Dim",
                format!(
                    "{self} / {n}: the size {bad} is not a multiple of {n} (use // or ceildiv)"
                ),
            ));
        }
        let name = format!("{self}/{n}");
        self.derive(DimMath::Div { n, left }, &name, move |l| l / n)
    }

    /// The base `b` when this dim is `b * n`.
    fn multiple_of(&self, n: i64) -> Option<Dim> {
        if n == 1 {
            return Some(self.clone());
        }
        match self.origin() {
            Some((base, DimMath::Mul { n: m, left: false })) if *m == n => Some(base.clone()),
            _ => None,
        }
    }

    /// The dim `f` derives from this one, remembered under `key`.
    fn derive(&self, key: DimMath, name: &str, f: impl Fn(i64) -> i64) -> Result<Dim> {
        self.derive_cached(key, || {
            Ok(derived("Dim", self, name, f)?.unwrap_or_else(|| Dim::new_unknown(name)))
        })
    }
}

//! The sliding window of [`conv`](crate::conv) and [`pool`](crate::pool):
//! padding, out sizes and out dims, after RETURNN.
//!
//! `padding="same"` pads `(size - 1) * dilation` entries in total, half on
//! the left (rounded down) and the rest on the right, whatever the stride
//! (RETURNN's consistent "same" padding, behaviour version 24): the padding
//! then does not depend on the longest sequence in the batch, so every
//! sequence gets the result it gets alone, and the out size is
//! `ceil(n / stride)`. `"valid"` gives `ceil((n - (size - 1) * dilation) /
//! stride)`, an explicit padding `p` pads `p` on both sides.
//!
//! The out dim of a spatial dim is the dim itself where the window keeps
//! every position (stride 1 and "same", or a size-1 window); otherwise a
//! new dim whose size is that formula, per sequence for a dynamic dim.

use crate::derive::derived;
use crate::{fmt_dims, Dim};
use verjus_core::autograd::Var;
use verjus_core::{ops, DType, Error, Result, Shape};

/// RETURNN's `padding` of a conv or pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Padding {
    Valid,
    Same,
    /// This many entries on both sides, per spatial dim.
    Explicit(Vec<usize>),
}

impl Padding {
    /// `"valid"` or `"same"` (any case).
    pub fn parse(op: &str, name: &str) -> Result<Padding> {
        match name.to_ascii_lowercase().as_str() {
            "valid" => Ok(Padding::Valid),
            "same" => Ok(Padding::Same),
            _ => Err(Error::invalid(
                op,
                format!("unknown padding {name:?} (\"valid\", \"same\" or an int)"),
            )),
        }
    }
}

/// The window along each spatial dim: size, stride, dilation, padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub size: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilation: Vec<usize>,
    pub padding: Padding,
}

impl Window {
    /// Checks that every list has one positive entry per spatial dim.
    pub(crate) fn check(&self, op: &str, spatial: &[Dim]) -> Result<()> {
        let nd = spatial.len();
        let explicit = match &self.padding {
            Padding::Explicit(p) => p.len(),
            _ => nd,
        };
        let lens = [
            self.size.len(),
            self.strides.len(),
            self.dilation.len(),
            explicit,
        ];
        if lens.iter().any(|&l| l != nd) {
            return Err(Error::invalid(
                op,
                format!(
                    "spatial dims {} need one window size, stride, dilation (and padding) each; \
                     got sizes {:?}, strides {:?}, dilation {:?}, padding {:?}",
                    fmt_dims(spatial),
                    self.size,
                    self.strides,
                    self.dilation,
                    self.padding
                ),
            ));
        }
        let all = self.size.iter().chain(&self.strides).chain(&self.dilation);
        if all.copied().any(|v| v == 0) {
            return Err(Error::invalid(
                op,
                format!(
                    "window sizes {:?}, strides {:?} and dilation {:?} must be positive",
                    self.size, self.strides, self.dilation
                ),
            ));
        }
        Ok(())
    }

    /// `(left, right)` padding of spatial dim `i`.
    pub(crate) fn pads(&self, i: usize) -> (usize, usize) {
        match &self.padding {
            Padding::Valid => (0, 0),
            Padding::Explicit(p) => (p[i], p[i]),
            Padding::Same => {
                let total = (self.size[i] - 1) * self.dilation[i];
                (total / 2, total - total / 2)
            }
        }
    }

    /// The out size of spatial dim `i` for an input of `n` entries.
    pub(crate) fn out_len(&self, i: usize, n: i64) -> i64 {
        let (l, r) = self.pads(i);
        let span = ((self.size[i] - 1) * self.dilation[i] + 1) as i64;
        let padded = n + (l + r) as i64;
        if padded < span {
            0
        } else {
            (padded - span) / self.strides[i] as i64 + 1
        }
    }

    /// Whether the out dim of spatial dim `i` is the dim itself.
    fn keeps_dim(&self, i: usize) -> bool {
        let one = self.strides[i] == 1;
        (one && self.padding == Padding::Same)
            || (one && self.size[i] == 1 && self.pads(i) == (0, 0))
    }

    /// The out dims of `spatial` (raw sizes `sizes`): `given` (checked
    /// against the raw out sizes) or made as the module docs say.
    pub(crate) fn out_dims(
        &self,
        op: &str,
        spatial: &[Dim],
        sizes: &[usize],
        given: Option<Vec<Dim>>,
    ) -> Result<Vec<Dim>> {
        let raw: Vec<usize> = (0..spatial.len())
            .map(|i| self.out_len(i, sizes[i] as i64) as usize)
            .collect();
        if let Some(given) = given {
            let fits = given.len() == spatial.len()
                && given
                    .iter()
                    .zip(&raw)
                    .all(|(d, &n)| d.size().is_none_or(|s| s == n));
            if !fits {
                return Err(Error::invalid(
                    op,
                    format!(
                        "out_spatial_dims {given:?} do not fit the out sizes {raw:?} of {}",
                        fmt_dims(spatial)
                    ),
                ));
            }
            return Ok(given);
        }
        spatial
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if self.keeps_dim(i) {
                    return Ok(d.clone());
                }
                let name = format!("{op}:{}", d.name());
                let made = derived(op, d, &name, |n| self.out_len(i, n))?;
                Ok(made.unwrap_or_else(|| Dim::new_unknown(&name)))
            })
            .collect()
    }
}

/// `var` with `before` / `after` entries of `value` around raw axis `i`.
pub(crate) fn pad_axis(
    var: &Var,
    i: usize,
    (before, after): (usize, usize),
    value: f32,
) -> Result<Var> {
    if before == 0 && after == 0 {
        return Ok(var.clone());
    }
    let mut parts = Vec::with_capacity(3);
    if before > 0 {
        parts.push(filled(var, i, before, value)?);
    }
    parts.push(var.clone());
    if after > 0 {
        parts.push(filled(var, i, after, value)?);
    }
    Var::concat(&parts, i)
}

/// A constant shaped like `like` with axis `i` of size `n`, all `value`.
fn filled(like: &Var, i: usize, n: usize, value: f32) -> Result<Var> {
    let mut sizes = like.shape().dims().to_vec();
    sizes[i] = n;
    let be = like.backend();
    let mut t = ops::output(&**be, &Shape::new(sizes)?, DType::F32)?;
    ops::fill(&**be, &mut t, value as f64)?;
    Var::constant(t, be.clone())
}

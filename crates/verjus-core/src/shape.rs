//! Shapes with checked arithmetic.
//!
//! A [`Shape`] is only ever constructed through [`Shape::new`], which checks the
//! rank and that the element count neither overflows nor exceeds
//! [`MAX_ELEMENTS`]. Everything downstream (allocation, index arithmetic in the
//! kernels) can therefore multiply dimensions without overflow checks of its own:
//! an absurd shape is an error at the door, not an overflow or a huge allocation
//! deep inside a kernel.

use crate::{Error, Result};
use std::fmt;

/// The largest rank a tensor may have.
pub const MAX_RANK: usize = 12;

/// The largest number of elements a tensor may have (2^34, 64 GiB of f32).
pub const MAX_ELEMENTS: usize = 1 << 34;

/// A row-major tensor shape. Dimensions may be zero (an empty tensor).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    dims: Vec<usize>,
    numel: usize,
}

impl Shape {
    /// A checked shape.
    pub fn new(dims: impl Into<Vec<usize>>) -> Result<Self> {
        let dims = dims.into();
        if dims.len() > MAX_RANK {
            return Err(Error::ShapeTooLarge {
                dims,
                reason: format!("rank exceeds the maximum of {MAX_RANK}"),
            });
        }
        let mut numel: usize = 1;
        let mut nonzero: usize = 1;
        for &d in &dims {
            numel = numel.saturating_mul(d);
            // Also bound the product of the non-zero dims so that a shape such as
            // [0, huge, huge] cannot be reshaped into something absurd later.
            if d != 0 {
                nonzero = nonzero.saturating_mul(d);
            }
        }
        if nonzero > MAX_ELEMENTS {
            return Err(Error::ShapeTooLarge {
                dims,
                reason: format!("more than {MAX_ELEMENTS} elements"),
            });
        }
        Ok(Shape { dims, numel })
    }

    /// The shape of a scalar (rank 0, one element).
    pub fn scalar() -> Self {
        Shape {
            dims: Vec::new(),
            numel: 1,
        }
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements (product of the dimensions).
    pub fn numel(&self) -> usize {
        self.numel
    }

    /// Dimension `axis`, or an error naming `op` when the axis is out of range.
    pub fn dim(&self, op: &str, axis: usize) -> Result<usize> {
        self.dims.get(axis).copied().ok_or_else(|| {
            Error::invalid(
                op,
                format!(
                    "axis {axis} is out of range for shape {self} of rank {}",
                    self.rank()
                ),
            )
        })
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1; self.dims.len()];
        for i in (0..self.dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.dims[i + 1];
        }
        strides
    }

    /// Splits the shape around `axis` into `(outer, axis_len, inner)` element counts,
    /// the usual view of a reduction or softmax over one axis.
    pub fn split_at_axis(&self, op: &str, axis: usize) -> Result<(usize, usize, usize)> {
        let len = self.dim(op, axis)?;
        let outer = self.dims[..axis].iter().product();
        let inner = self.dims[axis + 1..].iter().product();
        Ok((outer, len, inner))
    }

    /// The NumPy broadcast of two shapes (aligned at the trailing dimension).
    pub fn broadcast(op: &str, a: &Shape, b: &Shape) -> Result<Shape> {
        let rank = a.rank().max(b.rank());
        let mut dims = vec![0; rank];
        for (i, out) in dims.iter_mut().enumerate() {
            let da = dim_from_end(a, rank - 1 - i);
            let db = dim_from_end(b, rank - 1 - i);
            *out = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => {
                    return Err(Error::shape(
                        op,
                        "broadcast operands",
                        format!("shapes broadcastable with {a}"),
                        b,
                    ))
                }
            };
        }
        Shape::new(dims)
    }

    /// Whether `self` broadcasts to `target` (NumPy rules) without changing `target`.
    pub fn broadcasts_to(&self, target: &Shape) -> bool {
        if self.rank() > target.rank() {
            return false;
        }
        let offset = target.rank() - self.rank();
        self.dims
            .iter()
            .enumerate()
            .all(|(i, &d)| d == 1 || d == target.dims[offset + i])
    }

    /// The same elements under new dimensions; the element count must match.
    pub fn reshape(&self, op: &str, dims: impl Into<Vec<usize>>) -> Result<Shape> {
        let new = Shape::new(dims)?;
        if new.numel != self.numel {
            return Err(Error::shape(
                op,
                "reshape target",
                format!("a shape with {} elements (from {self})", self.numel),
                &new,
            ));
        }
        Ok(new)
    }
}

/// Dimension `i` counted from the end, 1 when the shape is shorter.
fn dim_from_end(s: &Shape, i: usize) -> usize {
    if i < s.rank() {
        s.dims[s.rank() - 1 - i]
    } else {
        1
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl TryFrom<&[usize]> for Shape {
    type Error = Error;
    fn try_from(dims: &[usize]) -> Result<Self> {
        Shape::new(dims.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numel_and_strides() {
        let s = Shape::new([2, 3, 5]).unwrap();
        assert_eq!(s.numel(), 30);
        assert_eq!(s.strides(), vec![15, 5, 1]);
        assert_eq!(Shape::scalar().numel(), 1);
        assert_eq!(Shape::new([4, 0, 3]).unwrap().numel(), 0);
    }

    #[test]
    fn absurd_shapes_are_errors() {
        assert!(Shape::new([usize::MAX, 2]).is_err());
        assert!(Shape::new([1 << 20, 1 << 20]).is_err());
        assert!(Shape::new([0, usize::MAX, usize::MAX]).is_err());
        assert!(Shape::new(vec![1; MAX_RANK + 1]).is_err());
    }

    #[test]
    fn broadcasting() {
        let a = Shape::new([4, 1, 3]).unwrap();
        let b = Shape::new([5, 1]).unwrap();
        assert_eq!(Shape::broadcast("t", &a, &b).unwrap().dims(), &[4, 5, 3]);
        let c = Shape::new([2]).unwrap();
        let err = Shape::broadcast("add", &a, &c).unwrap_err().to_string();
        assert!(
            err.contains("add") && err.contains("[4, 1, 3]") && err.contains("[2]"),
            "{err}"
        );
        assert!(b.broadcasts_to(&Shape::new([7, 5, 9]).unwrap()));
        assert!(!c.broadcasts_to(&a));
    }

    #[test]
    fn reshape_checks_numel() {
        let s = Shape::new([6, 4]).unwrap();
        assert_eq!(s.reshape("r", [3, 8]).unwrap().dims(), &[3, 8]);
        assert!(s.reshape("r", [5, 5]).is_err());
    }
}

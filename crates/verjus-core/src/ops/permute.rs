//! Axis permutation (a copy into the permuted layout).

use super::{check_device, check_shape};
use crate::{Backend, Error, Result, Shape, Tensor};

/// Validated permutation: output axis `i` is input axis `perm[i]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PermutePlan {
    pub perm: Vec<usize>,
    pub input: Shape,
    pub output: Shape,
}

impl PermutePlan {
    /// Checks that `perm` is a permutation of the input's axes.
    pub fn new(input: &Shape, perm: &[usize]) -> Result<Self> {
        let mut seen = vec![false; input.rank()];
        let valid = perm.len() == input.rank()
            && perm
                .iter()
                .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
        if !valid {
            return Err(Error::invalid(
                "permute",
                format!(
                    "{perm:?} is not a permutation of the {} axes of {input}",
                    input.rank()
                ),
            ));
        }
        let output = Shape::new(perm.iter().map(|&p| input.dims()[p]).collect::<Vec<_>>())?;
        Ok(PermutePlan {
            perm: perm.to_vec(),
            input: input.clone(),
            output,
        })
    }

    /// The inverse permutation (the gradient of a permute is the inverse permute).
    pub fn inverse(&self) -> Vec<usize> {
        let mut inv = vec![0; self.perm.len()];
        for (i, &p) in self.perm.iter().enumerate() {
            inv[p] = i;
        }
        inv
    }
}

/// `y = x` with axes reordered: `y.dims[i] = x.dims[perm[i]]`. Any dtype.
pub fn permute(be: &dyn Backend, x: &Tensor, perm: &[usize], y: &mut Tensor) -> Result<()> {
    let plan = PermutePlan::new(x.shape(), perm)?;
    check_device("permute", "x", be, x)?;
    check_device("permute", "y", be, y)?;
    super::check_dtype("permute", "y", y, x.dtype())?;
    check_shape("permute", "y", y, &plan.output)?;
    be.permute(&plan, x, y)
}

//! Gathering slices along an axis (`index_select`, embeddings).

use super::alloc;
use super::node::BackwardFn;
use super::record::{Reads, Saves};
use super::var::Var;
use crate::ops;
use crate::{Result, Shape};
use std::sync::Arc;

impl Var {
    /// The slices `indices[j]` (an integer vector) of `self` along `axis`,
    /// stacked: the result's axis has one entry per index. The gradient adds
    /// up over repeated indices.
    pub fn index_select(&self, axis: usize, indices: &Var) -> Result<Var> {
        Var::record(
            "index_select",
            self.backend(),
            &[self, indices],
            Saves::inputs(Reads::Only(&[1])),
            move |be, xs| {
                let (x, idx) = (&xs[0], &xs[1]);
                x.shape().dim("index_select", axis)?;
                let mut dims = x.dims().to_vec();
                dims[axis] = idx.numel();
                let mut y = alloc::output(be, &Shape::new(dims)?)?;
                ops::index_select(be, x, axis, idx, &mut y)?;
                let x_shape = x.shape().clone();
                let backward: BackwardFn = Box::new(move |be, dy, inputs, _| {
                    let idx = inputs.get(1)?;
                    let mut dx = alloc::zeros(be, &x_shape)?;
                    ops::index_add(be, &dy, axis, &idx, &mut dx)?;
                    Ok(vec![Some(dx), None])
                });
                Ok((Arc::new(y), backward))
            },
        )
    }
}

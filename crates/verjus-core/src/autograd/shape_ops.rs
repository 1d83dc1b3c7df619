//! Ops that move elements without computing: `reshape`, `permute`, `concat`, `split`.

use super::alloc;
use super::checkpoint::in_checkpoint_scope;
use super::node::{need, Backward, BackwardFn, MultiBackwardFn};
use super::record::Saves;
use super::var::Var;
use crate::grad;
use crate::ops::{self, ConcatPlan, PermutePlan};
use crate::{Backend, Error, Result, Shape, Tensor};
use std::sync::Arc;

impl Var {
    /// The same elements under new dimensions (equal element count). The
    /// forward copies once, since a tensor owns its storage and the input's
    /// value is shared; the backward reshapes the gradient in place.
    pub fn reshape(&self, dims: impl Into<Vec<usize>>) -> Result<Var> {
        let dims = dims.into();
        Var::record(
            "reshape",
            self.backend(),
            &[self],
            Saves::NOTHING,
            move |be, xs| {
                let x = &xs[0];
                // On the host the result shares x's elements (values on the
                // tape are never written); on a device it is a copy.
                let y = match Tensor::alias(x, dims.clone())? {
                    Some(y) => y,
                    None => {
                        let shape = x.shape().reshape("reshape", dims.clone())?;
                        alloc::copy_as(be, x, &shape)?
                    }
                };
                let x_dims = x.dims().to_vec();
                // The gradient is `grad::reshape`'s copy back; owning `dy`, the
                // backward relabels it instead.
                let backward: BackwardFn =
                    Box::new(move |_, dy, _, _| Ok(vec![Some(dy.reshape(x_dims.clone())?)]));
                Ok((Arc::new(y), backward))
            },
        )
    }

    /// Reorders the axes: output axis `i` is input axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Result<Var> {
        let perm = perm.to_vec();
        Var::record(
            "permute",
            self.backend(),
            &[self],
            Saves::NOTHING,
            move |be, xs| {
                let x = &xs[0];
                let plan = PermutePlan::new(x.shape(), &perm)?;
                let mut y = ops::output(be, &plan.output, x.dtype())?;
                ops::permute(be, x, &perm, &mut y)?;
                let (perm, x_shape) = (perm.clone(), plan.input);
                let backward: BackwardFn = Box::new(move |be, dy, _, _| {
                    let mut dx = alloc::output(be, &x_shape)?;
                    grad::permute(be, &dy, &perm, &mut dx)?;
                    Ok(vec![Some(dx)])
                });
                Ok((Arc::new(y), backward))
            },
        )
    }

    /// Joins `parts` along `axis` (they agree on every other axis).
    pub fn concat(parts: &[Var], axis: usize) -> Result<Var> {
        let first = parts
            .first()
            .ok_or_else(|| Error::invalid("concat", "needs at least one part"))?;
        let inputs: Vec<&Var> = parts.iter().collect();
        Var::record(
            "concat",
            first.backend(),
            &inputs,
            Saves::NOTHING,
            move |be, xs| {
                let tensors: Vec<&Tensor> = xs.iter().map(|v| &**v).collect();
                let shapes: Vec<&Shape> = tensors.iter().map(|t| t.shape()).collect();
                let plan = ConcatPlan::new("concat", &shapes, axis)?;
                let mut y = alloc::output(be, &plan.whole)?;
                ops::concat(be, &tensors, axis, &mut y)?;
                let part_shapes: Vec<Shape> = shapes.into_iter().cloned().collect();
                let backward: BackwardFn = Box::new(move |be, dy, _, needs| {
                    let mut grads = part_shapes
                        .iter()
                        .map(|s| alloc::output(be, s))
                        .collect::<Result<Vec<_>>>()?;
                    let mut outs: Vec<&mut Tensor> = grads.iter_mut().collect();
                    grad::concat(be, &dy, axis, &mut outs)?;
                    Ok(grads
                        .into_iter()
                        .enumerate()
                        .map(|(i, g)| need(needs, i).then_some(g))
                        .collect())
                });
                Ok((Arc::new(y), backward))
            },
        )
    }

    /// Splits along `axis` into parts of the given sizes (adding up to the
    /// axis length). The parts share one node, whose backward concatenates
    /// their gradients (zeros for a part no gradient reached) into the
    /// whole's. In a gradient checkpoint scope each part is recorded on its
    /// own, with a backward that places its gradient into zeros of the whole
    /// shape (the parts' gradients then add up like those of any value used
    /// several times).
    pub fn split(&self, axis: usize, sizes: &[usize]) -> Result<Vec<Var>> {
        let sizes: Arc<[usize]> = sizes.into();
        if !in_checkpoint_scope() {
            let be = &**self.backend();
            let (parts, shapes) = split_values(be, &self.value(), axis, &sizes)?;
            let x_shape = self.shape();
            let backward: MultiBackwardFn = Box::new(move |be, dys, _, _| {
                let zeros = dys
                    .iter()
                    .zip(shapes.iter())
                    .map(|(dy, s)| dy.is_none().then(|| alloc::zeros(be, s)).transpose())
                    .collect::<Result<Vec<_>>>()?;
                let pieces: Vec<&Tensor> = dys
                    .iter()
                    .zip(&zeros)
                    .filter_map(|(dy, zero)| dy.as_ref().or(zero.as_ref()))
                    .collect();
                let mut dx = alloc::output(be, &x_shape)?;
                grad::split(be, &pieces, axis, &mut dx)?;
                Ok(vec![Some(dx)])
            });
            let parts = parts.into_iter().map(Arc::new).collect();
            return Ok(Var::from_op_outputs(
                "split",
                parts,
                self.backend(),
                &[self],
                Backward::Kept(backward),
                Vec::new,
            ));
        }
        // Recorded for recomputation: each part's forward makes the parts again
        // and keeps its own.
        (0..sizes.len())
            .map(|i| {
                let sizes = sizes.clone();
                Var::record(
                    "split",
                    self.backend(),
                    &[self],
                    Saves::NOTHING,
                    move |be, xs| {
                        let (part, backward) =
                            split_parts(be, &xs[0], axis, &sizes)?.swap_remove(i);
                        Ok((Arc::new(part), backward))
                    },
                )
            })
            .collect()
    }
}

/// The parts of `x` split along `axis`, and their shapes.
fn split_values(
    be: &dyn Backend,
    x: &Tensor,
    axis: usize,
    sizes: &[usize],
) -> Result<(Vec<Tensor>, Arc<[Shape]>)> {
    x.shape().dim("split", axis)?;
    let shapes = sizes
        .iter()
        .map(|&s| {
            let mut dims = x.dims().to_vec();
            dims[axis] = s;
            Shape::new(dims)
        })
        .collect::<Result<Arc<[Shape]>>>()?;
    let mut parts = shapes
        .iter()
        .map(|s| alloc::output(be, s))
        .collect::<Result<Vec<_>>>()?;
    let mut outs: Vec<&mut Tensor> = parts.iter_mut().collect();
    ops::split(be, x, axis, &mut outs)?;
    Ok((parts, shapes))
}

/// The parts of `x` split along `axis`, each with its backward (which places
/// the part's gradient into zeros of the whole shape): the split recorded in
/// a gradient checkpoint scope, part by part.
fn split_parts(
    be: &dyn Backend,
    x: &Tensor,
    axis: usize,
    sizes: &[usize],
) -> Result<Vec<(Tensor, BackwardFn)>> {
    let (parts, shapes) = split_values(be, x, axis, sizes)?;
    let x_shape = x.shape().clone();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let (shapes, x_shape) = (shapes.clone(), x_shape.clone());
            let backward: BackwardFn = Box::new(move |be, dy, _, _| {
                let others = shapes
                    .iter()
                    .enumerate()
                    .map(|(j, s)| (j != i).then(|| alloc::zeros(be, s)).transpose())
                    .collect::<Result<Vec<_>>>()?;
                let pieces: Vec<&Tensor> =
                    others.iter().map(|o| o.as_ref().unwrap_or(&dy)).collect();
                let mut dx = alloc::output(be, &x_shape)?;
                grad::split(be, &pieces, axis, &mut dx)?;
                Ok(vec![Some(dx)])
            });
            (part, backward)
        })
        .collect())
}

//! Where every gradient goes, decided once per context.
//!
//! Juice overwrote a value's gradient with each consumer's contribution, so
//! fan-outs and shared weights trained wrong. Here every gradient destination
//! (a value's gradient, a parameter's gradient) counts its contributors:
//!
//! - none: the buffer stays zero (a branch that reaches no output);
//! - one: the contributor writes straight into the buffer (no extra work);
//! - several: each contributor writes its own *edge* buffer, and the edges are
//!   summed into the destination before anyone reads it (a value's gradient
//!   just before its producer's backward, a parameter's after the pass).
//!
//! A network output's gradient from the caller is one more contributor, read
//! in place. Backward computations therefore only ever overwrite, which every
//! op in the set can do; the sums are device ops like the rest.
//!
//! The plan also decides which layers run backward at all: a layer runs when
//! it has parameters or one of its inputs needs a gradient, and network inputs
//! need one only when the context asks for input gradients.

use crate::layers::{internal, ParamDst};
use crate::network::Network;
use verjus_core::ops::{self, BinaryOp};
use verjus_core::{Backend, Result, Tensor};

/// A contribution to a sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// A buffer of the gradient store.
    Slot(usize),
    /// The caller's gradient for network output `k`.
    Output(usize),
}

/// Several contributions summed into one destination. Slots come first; with
/// three or more sources, `spare` (the first source's slot, or a slot of its
/// own) is the ping-pong buffer of the running sum.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sum {
    pub sources: Vec<Src>,
    pub spare: Option<usize>,
}

/// See the module docs. Indexed by node (topological position), value id or
/// parameter index as named.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GradPlan {
    pub input_grads: bool,
    /// Per node: whether its backward runs.
    pub run: Vec<bool>,
    /// Per node: where its output gradient is read from.
    pub dy: Vec<Option<Src>>,
    /// Per node and input: the slot its input gradient goes to.
    pub dx: Vec<Vec<Option<usize>>>,
    /// Per node and parameter: where its parameter gradient goes.
    pub dparam: Vec<Vec<ParamDst>>,
    /// Per value: the slot holding its (complete) gradient.
    pub value_slot: Vec<Option<usize>>,
    /// Per value: the sum that completes it, when it has several contributors.
    pub value_sum: Vec<Option<Sum>>,
    /// `(parameter, sum over its users' edges)` for shared parameters.
    pub param_sums: Vec<(usize, Sum)>,
    /// Per buffer of the value-gradient store: the value whose gradient (or
    /// a contribution to it) it holds, and whose shape it has.
    pub slots: Vec<usize>,
    /// Shapes of the parameter-edge store.
    pub param_edges: Vec<Vec<usize>>,
}

impl GradPlan {
    pub fn new(net: &Network, input_grads: bool) -> Self {
        let n_in = net.n_inputs;
        let nodes = &net.nodes;
        let n_values = n_in + nodes.len();
        let mut need: Vec<bool> = (0..n_in)
            .map(|i| input_grads && net.value_dtype(i) == verjus_core::DType::F32)
            .collect();
        need.resize(n_values, false);
        let mut run = vec![false; nodes.len()];
        for (t, node) in nodes.iter().enumerate() {
            let wanted = !node.params.is_empty() || node.inputs.iter().any(|&v| need[v]);
            need[n_in + t] = node.live && wanted;
            run[t] = need[n_in + t];
        }

        // Contributors per value: (node, input position) of running consumers
        // whose gradient for that input is wanted, then network outputs.
        let mut contributors: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n_values];
        for (t, node) in nodes.iter().enumerate() {
            if run[t] {
                for (k, &v) in node.inputs.iter().enumerate() {
                    if need[v] {
                        contributors[v].push((t, k));
                    }
                }
            }
        }
        let mut outputs_of: Vec<Vec<usize>> = vec![Vec::new(); n_values];
        for (k, &(_, v)) in net.outputs.iter().enumerate() {
            outputs_of[v].push(k);
        }

        let mut plan = GradPlan {
            input_grads,
            run,
            dy: vec![None; nodes.len()],
            dx: nodes.iter().map(|n| vec![None; n.inputs.len()]).collect(),
            dparam: nodes
                .iter()
                .map(|n| Vec::with_capacity(n.params.len()))
                .collect(),
            value_slot: vec![None; n_values],
            value_sum: vec![None; n_values],
            param_sums: Vec::new(),
            slots: Vec::new(),
            param_edges: Vec::new(),
        };
        for v in 0..n_values {
            if !need[v] {
                continue;
            }
            let consumers = &contributors[v];
            let outs = &outputs_of[v];
            let total = consumers.len() + outs.len();
            let src = if total == 1 && consumers.is_empty() {
                Src::Output(outs[0])
            } else {
                let slot = plan.new_slot(v);
                plan.value_slot[v] = Some(slot);
                if total == 1 {
                    let (t, k) = consumers[0];
                    plan.dx[t][k] = Some(slot);
                } else if total > 1 {
                    let mut sources = Vec::with_capacity(total);
                    for &(t, k) in consumers {
                        let edge = plan.new_slot(v);
                        plan.dx[t][k] = Some(edge);
                        sources.push(Src::Slot(edge));
                    }
                    sources.extend(outs.iter().map(|&k| Src::Output(k)));
                    let spare = match (total > 2, sources[0]) {
                        (false, _) => None,
                        (true, Src::Slot(s)) => Some(s),
                        (true, Src::Output(_)) => Some(plan.new_slot(v)),
                    };
                    plan.value_sum[v] = Some(Sum { sources, spare });
                }
                Src::Slot(slot)
            };
            if v >= n_in {
                plan.dy[v - n_in] = Some(src);
            }
        }

        // Parameters: users are the running nodes that hold them.
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); net.parameters.len()];
        for (t, node) in nodes.iter().enumerate() {
            if plan.run[t] {
                for &p in &node.params {
                    users[p].push(t);
                }
            }
        }
        for (t, node) in nodes.iter().enumerate() {
            for &p in &node.params {
                let dst = if plan.run[t] && users[p].len() > 1 {
                    plan.param_edges
                        .push(net.parameters[p].value.dims().to_vec());
                    ParamDst::Edge(plan.param_edges.len() - 1)
                } else {
                    ParamDst::Grad(p)
                };
                plan.dparam[t].push(dst);
            }
        }
        for (p, ts) in users.iter().enumerate() {
            if ts.len() > 1 {
                let sources: Vec<Src> = ts
                    .iter()
                    .filter_map(|&t| {
                        let j = nodes[t].params.iter().position(|&q| q == p)?;
                        match plan.dparam[t][j] {
                            ParamDst::Edge(e) => Some(Src::Slot(e)),
                            ParamDst::Grad(_) => None,
                        }
                    })
                    .collect();
                let spare = match (sources.len() > 2, sources.first()) {
                    (true, Some(Src::Slot(s))) => Some(*s),
                    _ => None,
                };
                plan.param_sums.push((p, Sum { sources, spare }));
            }
        }
        plan
    }

    fn new_slot(&mut self, value: usize) -> usize {
        self.slots.push(value);
        self.slots.len() - 1
    }

    /// Whether input `k` of node `t` receives a gradient.
    pub fn needs_dx(&self, t: usize) -> Vec<bool> {
        self.dx
            .get(t)
            .map(|d| d.iter().map(Option::is_some).collect())
            .unwrap_or_default()
    }
}

fn source<'a>(src: Src, store: &'a [Option<Tensor>], ext: &[&'a Tensor]) -> Result<&'a Tensor> {
    match src {
        Src::Slot(s) => store.get(s).and_then(Option::as_ref),
        Src::Output(k) => ext.get(k).copied(),
    }
    .ok_or_else(|| internal("gradient source missing"))
}

/// `acc = sum of sum.sources` (sources from `store` or the caller's `ext`).
pub(crate) fn sum(
    be: &dyn Backend,
    sum: &Sum,
    store: &mut [Option<Tensor>],
    ext: &[&Tensor],
    acc: &mut Tensor,
) -> Result<()> {
    let [s0, s1, rest @ ..] = sum.sources.as_slice() else {
        return Err(internal("a sum needs two sources"));
    };
    ops::binary(
        be,
        BinaryOp::Add,
        source(*s0, store, ext)?,
        source(*s1, store, ext)?,
        acc,
    )?;
    if rest.is_empty() {
        return Ok(());
    }
    let slot = sum
        .spare
        .ok_or_else(|| internal("a sum of three needs a spare"))?;
    let mut spare = store
        .get_mut(slot)
        .and_then(Option::take)
        .ok_or_else(|| internal("spare buffer missing"))?;
    let mut result = Ok(());
    for &s in rest {
        result = source(s, store, ext)
            .and_then(|src| ops::binary(be, BinaryOp::Add, acc, src, &mut spare));
        if result.is_err() {
            break;
        }
        std::mem::swap(acc, &mut spare);
    }
    store[slot] = Some(spare);
    result
}

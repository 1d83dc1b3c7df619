//! The backward pass: [`Var::backward`], [`grad`] and [`grad_with`].
//!
//! The nodes reachable from the outputs are put in topological order (every
//! consumer of a value before its producer, Kahn's algorithm on consumer
//! counts), so a node runs once, after all gradients for its outputs have
//! arrived and been summed (one slot per output of a multi-output node). Leaf
//! gradients are collected and only written to the slots when the whole pass
//! has succeeded, so a failed pass leaves them as they were. A node's backward
//! gets the input values it reads from a [`Resolver`] that lives for the pass
//! (recomputing values made in a gradient checkpoint scope; see `resolve.rs`).
//! A pass issues many ops in a row, so it runs through the backend's
//! [`Backend::run_scoped`] (on the native backend, on a worker of its pool:
//! the caller no longer hands each op's parallel loops over and waits).

use super::alloc;
use super::node::{Backward, EdgeTarget, Node};
use super::resolve::{Inputs, Resolver};
use super::var::{on_device, Var};
use crate::backend::scoped;
use crate::{Backend, Error, Result, Tensor};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

impl Var {
    /// Backpropagates from this one-element value: adds `d self / d leaf` into
    /// the gradient slot of every leaf it depends on that requires a gradient.
    /// Gradients of several calls add up until [`Var::zero_grad`]. The graph is
    /// kept, so backward can run again.
    pub fn backward(&self) -> Result<()> {
        self.backward_with(ones_like(self, "backward")?)
    }

    /// Backpropagates `seed` (the gradient of some scalar wrt this value, of
    /// its shape) into the leaves' gradient slots, as [`Var::backward`] does.
    pub fn backward_with(&self, seed: Tensor) -> Result<()> {
        let be = self.backend().clone();
        let outcome = scoped(&*be, || run(vec![(self.clone(), seed)], None))?;
        for (leaf, g) in outcome.leaves.into_values() {
            leaf.accumulate_grad(g)?;
        }
        Ok(())
    }
}

/// The gradients of the sum of the one-element `outputs` wrt each of `inputs`
/// (leaves or intermediate values), without touching any gradient slot.
/// `None` where an input does not influence the outputs or needs no gradient.
pub fn grad(outputs: &[Var], inputs: &[Var]) -> Result<Vec<Option<Tensor>>> {
    let seeds = outputs
        .iter()
        .map(|o| ones_like(o, "grad"))
        .collect::<Result<_>>()?;
    grad_with(outputs, seeds, inputs)
}

/// [`grad`] with a seed gradient per output (each of its output's shape).
pub fn grad_with(
    outputs: &[Var],
    seeds: Vec<Tensor>,
    inputs: &[Var],
) -> Result<Vec<Option<Tensor>>> {
    if outputs.len() != seeds.len() {
        return Err(Error::Autograd(format!(
            "grad: {} seed gradients for {} outputs",
            seeds.len(),
            outputs.len()
        )));
    }
    let targets: HashSet<Key> = inputs
        .iter()
        .filter(|v| v.requires_grad())
        .map(Key::of)
        .collect();
    let pass = || run(outputs.iter().cloned().zip(seeds).collect(), Some(&targets));
    let outcome = match outputs.first() {
        Some(first) => scoped(&**first.backend(), pass)?,
        None => pass()?,
    };
    let mut found: HashMap<Key, Tensor> = outcome
        .nodes
        .into_iter()
        .map(|((id, output), g)| (Key::Node(id, output), g))
        .chain(
            outcome
                .leaves
                .into_iter()
                .map(|(id, (_, g))| (Key::Leaf(id), g)),
        )
        .collect();
    let mut grads = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        let key = Key::of(input);
        let again = inputs[i + 1..].iter().any(|v| Key::of(v) == key);
        grads.push(match found.get(&key) {
            Some(g) if again => Some(alloc::copy_as(&**input.backend(), g, g.shape())?),
            _ => found.remove(&key),
        });
    }
    Ok(grads)
}

/// Ones of `v`'s shape, for a one-element `v`.
fn ones_like(v: &Var, op: &str) -> Result<Tensor> {
    let shape = v.shape();
    if shape.numel() != 1 {
        return Err(Error::Autograd(format!(
            "{op} needs a one-element output, got shape {shape}; pass a seed gradient of that shape instead"
        )));
    }
    let host = Tensor::from_vec(shape.dims().to_vec(), vec![1f32])?;
    on_device(v.backend(), host, op)
}

/// What a gradient is keyed by: the node that made a value and which of its
/// outputs the value is, or a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Node(usize, usize),
    Leaf(usize),
}

impl Key {
    fn of(v: &Var) -> Key {
        match v.grad_fn() {
            Some(node) => Key::Node(addr(node), v.output()),
            None => Key::Leaf(v.addr()),
        }
    }
}

fn addr(node: &Arc<Node>) -> usize {
    Arc::as_ptr(node) as usize
}

/// The gradients a pass produced: per leaf (with its handle), and per node
/// output for the intermediate values [`grad`] asked for.
#[derive(Default)]
struct Outcome {
    leaves: HashMap<usize, (Var, Tensor)>,
    nodes: HashMap<(usize, usize), Tensor>,
}

/// The gradients that have arrived for each node, one slot per output.
type Pending = HashMap<usize, Vec<Option<Tensor>>>;

/// Which gradients a pass computes: all leaves' (`targets` = `None`, the
/// backward pass), or only those of `targets`.
struct Wanted<'a> {
    targets: Option<&'a HashSet<Key>>,
    /// Nodes whose backward must run because a wanted gradient lies behind them.
    runs: HashSet<usize>,
}

impl Wanted<'_> {
    /// Whether [`grad`] asked for the gradient of output `output` of `node`.
    fn is_target(&self, node: &Arc<Node>, output: usize) -> bool {
        self.targets
            .is_some_and(|t| t.contains(&Key::Node(addr(node), output)))
    }

    /// Whether the gradient along `edge` is wanted.
    fn through(&self, edge: &EdgeTarget) -> bool {
        match edge {
            EdgeTarget::Node(n, output) => {
                self.is_target(n, *output) || self.runs.contains(&addr(n))
            }
            EdgeTarget::Leaf(v) => self
                .targets
                .is_none_or(|t| t.contains(&Key::Leaf(v.addr()))),
        }
    }

    /// Which inputs of `node` need a gradient.
    fn needs(&self, node: &Node) -> Vec<bool> {
        node.edges
            .iter()
            .map(|e| e.as_ref().is_some_and(|e| self.through(&e.target)))
            .collect()
    }
}

fn run(roots: Vec<(Var, Tensor)>, targets: Option<&HashSet<Key>>) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    let mut pending = Pending::new();
    let mut root_nodes = Vec::new();
    let mut wanted = Wanted {
        targets,
        runs: HashSet::new(),
    };
    for (var, seed) in roots {
        if !var.requires_grad() {
            return Err(Error::Autograd(
                "the output does not require a gradient: no leaf it depends on requires one, or it was computed under no_grad".into(),
            ));
        }
        let seed = on_device(var.backend(), seed, "backward")?;
        if seed.shape() != &var.shape() {
            return Err(Error::shape(
                "backward",
                "seed gradient",
                var.shape(),
                seed.shape(),
            ));
        }
        match var.grad_fn() {
            Some(node) => {
                add_to(&mut pending, node, var.output(), &**var.backend(), seed)?;
                root_nodes.push(node.clone());
            }
            None => {
                if wanted.through(&EdgeTarget::Leaf(var.clone())) {
                    add_to_leaf(&mut outcome.leaves, &var, seed)?;
                }
            }
        }
    }
    let order = topological_order(&root_nodes);
    for node in order.iter().rev() {
        if wanted.needs(node).contains(&true) {
            wanted.runs.insert(addr(node));
        }
    }
    let mut resolver = Resolver::default();
    for node in order.iter().filter(|n| wanted.runs.contains(&addr(n))) {
        resolver.expect(node);
    }
    let resolver = RefCell::new(resolver);
    for node in &order {
        let id = addr(node);
        let runs = wanted.runs.contains(&id);
        let Some(mut dys) = pending.remove(&id) else {
            if runs {
                resolver.borrow_mut().done(node);
            }
            continue;
        };
        for (output, dy) in dys.iter_mut().enumerate() {
            if !wanted.is_target(node, output) {
                continue;
            }
            let kept = match dy {
                Some(g) if runs => Some(alloc::copy_as(&*node.backend, g, g.shape())?),
                _ => dy.take(),
            };
            if let Some(g) = kept {
                outcome.nodes.insert((id, output), g);
            }
        }
        if runs {
            let needs = wanted.needs(node);
            let grads = call_backward(node, dys, &needs, &resolver);
            resolver.borrow_mut().done(node);
            route(node, grads?, needs, &mut pending, &mut outcome.leaves)?;
        }
    }
    Ok(outcome)
}

/// Runs `node`'s backward on its outputs' gradients `dys` (re-running its
/// forward first when it was recorded in a checkpoint scope and dropped its
/// backward).
fn call_backward(
    node: &Node,
    dys: Vec<Option<Tensor>>,
    needs: &[bool],
    resolver: &RefCell<Resolver>,
) -> Result<Vec<Option<Tensor>>> {
    let inputs = Inputs::new(node, resolver);
    let be = &*node.backend;
    match &node.backward {
        Backward::Kept(backward) => backward(be, dys, &inputs, needs),
        Backward::Replay(replay) => {
            let values = replay
                .sources()
                .iter()
                .map(|s| resolver.borrow_mut().value(s))
                .collect::<Result<Vec<_>>>()?;
            let (_outputs, backward) = replay.run(&values)?;
            backward(be, dys, &inputs, needs)
        }
    }
}

/// Routes the inputs' gradients `grads` of `node` (those `needs` asked for)
/// to their producers.
fn route(
    node: &Node,
    grads: Vec<Option<Tensor>>,
    needs: Vec<bool>,
    pending: &mut Pending,
    leaves: &mut HashMap<usize, (Var, Tensor)>,
) -> Result<()> {
    if grads.len() != node.edges.len() {
        return Err(Error::Autograd(format!(
            "{}: backward gave {} gradients for {} inputs",
            node.name,
            grads.len(),
            node.edges.len()
        )));
    }
    for ((edge, g), need) in node.edges.iter().zip(grads).zip(needs) {
        let (true, Some(edge), Some(g)) = (need, edge, g) else {
            continue;
        };
        if g.shape() != &edge.shape {
            return Err(Error::Autograd(format!(
                "{}: gradient of shape {} for an input of shape {}",
                node.name,
                g.shape(),
                edge.shape
            )));
        }
        match &edge.target {
            EdgeTarget::Node(n, output) => add_to(pending, n, *output, &*node.backend, g)?,
            EdgeTarget::Leaf(v) => add_to_leaf(leaves, v, g)?,
        }
    }
    Ok(())
}

/// Adds `g` to the gradient of output `output` of `node`.
fn add_to(
    pending: &mut Pending,
    node: &Arc<Node>,
    output: usize,
    be: &dyn Backend,
    g: Tensor,
) -> Result<()> {
    let slots = pending
        .entry(addr(node))
        .or_insert_with(|| (0..node.outputs).map(|_| None).collect());
    let slot = slots.get_mut(output).ok_or_else(|| {
        Error::Autograd(format!(
            "{}: a gradient for output {output} of an op with {} outputs",
            node.name, node.outputs
        ))
    })?;
    *slot = Some(alloc::accumulate(be, slot.take(), g)?);
    Ok(())
}

fn add_to_leaf(leaves: &mut HashMap<usize, (Var, Tensor)>, leaf: &Var, g: Tensor) -> Result<()> {
    let sum = match leaves.remove(&leaf.addr()) {
        Some((_, acc)) => alloc::add(&**leaf.backend(), &acc, &g)?,
        None => g,
    };
    leaves.insert(leaf.addr(), (leaf.clone(), sum));
    Ok(())
}

/// The nodes reachable from `roots`, each after all of its consumers.
pub(crate) fn topological_order(roots: &[Arc<Node>]) -> Vec<Arc<Node>> {
    let mut consumers: HashMap<usize, usize> = HashMap::new();
    let mut seen: HashSet<usize> = HashSet::new();
    let starts: Vec<Arc<Node>> = roots
        .iter()
        .filter(|r| seen.insert(addr(r)))
        .cloned()
        .collect();
    let mut stack = starts.clone();
    while let Some(node) = stack.pop() {
        for p in node.producers() {
            *consumers.entry(addr(p)).or_default() += 1;
            if seen.insert(addr(p)) {
                stack.push(p.clone());
            }
        }
    }
    let mut ready: Vec<Arc<Node>> = starts
        .into_iter()
        .filter(|n| !consumers.contains_key(&addr(n)))
        .collect();
    let mut order = Vec::with_capacity(seen.len());
    while let Some(node) = ready.pop() {
        for p in node.producers() {
            if let Some(count) = consumers.get_mut(&addr(p)) {
                *count -= 1;
                if *count == 0 {
                    ready.push(p.clone());
                }
            }
        }
        order.push(node);
    }
    order
}

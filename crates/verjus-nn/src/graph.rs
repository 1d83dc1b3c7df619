//! From nested definitions to a flat, ordered DAG of leaf layers.
//!
//! Containers (`Sequential`, `Graph`) exist only in the definition: they give
//! names a scope and layers a path. Building flattens them away, so that the
//! network that runs is a plain list of leaf layers in topological order whose
//! inputs are indices. Names are resolved here, all at once, after every scope
//! is known, so a `Graph` may name a layer defined further down (and a cycle is
//! therefore possible, and reported with the layers on it).

use crate::def::{LayerConfig, LayerDef, NetworkDef};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use verjus_core::{Error, Result};

/// Where a layer input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// Network input `i`.
    Input(usize),
    /// The output of leaf `i` (definition order).
    Leaf(usize),
}

/// A leaf layer with its resolved connections, in definition order.
#[derive(Debug)]
pub(crate) struct Leaf<'d> {
    pub path: String,
    pub def: &'d LayerDef,
    pub inputs: Vec<Source>,
    /// The leaf whose parameters this one uses (already resolved to a leaf).
    pub share: Option<usize>,
}

/// The flattened network: leaves in definition order, a topological order over
/// them, and the outputs.
#[derive(Debug)]
pub(crate) struct Flat<'d> {
    pub leaves: Vec<Leaf<'d>>,
    /// Leaf indices in an order where every leaf comes after its inputs.
    pub order: Vec<usize>,
    /// `(interface name, leaf)` per network output.
    pub outputs: Vec<(String, usize)>,
}

#[derive(Clone, Copy, Debug)]
enum Item {
    Leaf(usize),
    Scope(usize),
}

#[derive(Debug)]
struct Entry<'d> {
    def: &'d LayerDef,
    item: Item,
}

#[derive(Debug)]
struct Scope<'d> {
    parent: Option<usize>,
    /// The container layer that opened this scope (None for the top level).
    owner: Option<&'d LayerDef>,
    /// Index of the owner within the parent scope.
    position: usize,
    path: String,
    entries: Vec<Entry<'d>>,
    names: HashMap<&'d str, usize>,
    /// `Graph` scopes: the names of their outputs.
    outputs: &'d [String],
}

struct Builder<'d> {
    def: &'d NetworkDef,
    scopes: Vec<Scope<'d>>,
    /// `(scope, position in scope, path)` per leaf.
    leaves: Vec<(usize, usize, String)>,
}

/// Flattens, resolves and orders `def`.
pub(crate) fn flatten(def: &NetworkDef) -> Result<Flat<'_>> {
    let mut names = HashMap::new();
    for (i, input) in def.inputs.iter().enumerate() {
        check_name(&input.name, "network input")?;
        if names.insert(input.name.as_str(), i).is_some() {
            return Err(Error::definition(
                &input.name,
                "duplicate network input name",
            ));
        }
    }
    let mut b = Builder {
        def,
        scopes: Vec::new(),
        leaves: Vec::new(),
    };
    b.add_scope(None, None, 0, String::new(), &def.layers, &[])?;
    if let Some(name) = b.scopes[0].names.keys().find(|n| names.contains_key(*n)) {
        return Err(Error::definition(
            *name,
            "a top-level layer has the name of a network input",
        ));
    }
    let mut leaves = Vec::with_capacity(b.leaves.len());
    for (i, (scope, pos, path)) in b.leaves.iter().enumerate() {
        let entry = &b.scopes[*scope].entries[*pos];
        let inputs = b.leaf_inputs(*scope, *pos, path)?;
        let share = match &entry.def.share {
            None => None,
            Some(target) => Some(b.share_target(*scope, i, path, target)?),
        };
        leaves.push(Leaf {
            path: path.clone(),
            def: entry.def,
            inputs,
            share,
        });
    }
    let outputs = b.outputs()?;
    let order = topological_order(&leaves)?;
    Ok(Flat {
        leaves,
        order,
        outputs,
    })
}

fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty() || name.contains('.') {
        return Err(Error::definition(
            name,
            format!("a {what} name must be non-empty and contain no '.'"),
        ));
    }
    Ok(())
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

impl<'d> Builder<'d> {
    fn add_scope(
        &mut self,
        parent: Option<usize>,
        owner: Option<&'d LayerDef>,
        position: usize,
        path: String,
        layers: &'d [LayerDef],
        outputs: &'d [String],
    ) -> Result<usize> {
        let id = self.scopes.len();
        self.scopes.push(Scope {
            parent,
            owner,
            position,
            path: path.clone(),
            entries: Vec::with_capacity(layers.len()),
            names: HashMap::new(),
            outputs,
        });
        for (pos, layer) in layers.iter().enumerate() {
            let lpath = join(&path, &layer.name);
            check_name(&layer.name, "layer").map_err(|_| {
                Error::definition(&lpath, "a layer name must be non-empty and contain no '.'")
            })?;
            if self.scopes[id].names.insert(&layer.name, pos).is_some() {
                return Err(Error::definition(
                    &lpath,
                    "duplicate layer name in this scope",
                ));
            }
            let item = match &layer.config {
                LayerConfig::Sequential { layers: inner } => {
                    self.check_container(layer, &lpath)?;
                    Item::Scope(self.add_scope(Some(id), Some(layer), pos, lpath, inner, &[])?)
                }
                LayerConfig::Graph {
                    layers: inner,
                    outputs,
                } => {
                    self.check_container(layer, &lpath)?;
                    Item::Scope(self.add_scope(
                        Some(id),
                        Some(layer),
                        pos,
                        lpath,
                        inner,
                        outputs,
                    )?)
                }
                _ => {
                    self.leaves.push((id, pos, lpath));
                    Item::Leaf(self.leaves.len() - 1)
                }
            };
            self.scopes[id].entries.push(Entry { def: layer, item });
        }
        Ok(id)
    }

    fn check_container(&self, layer: &LayerDef, path: &str) -> Result<()> {
        if layer.share.is_some() {
            return Err(Error::definition(
                path,
                "only leaf layers can share parameters, not containers",
            ));
        }
        if let Some(inputs) = &layer.inputs {
            if inputs.len() != 1 {
                return Err(Error::definition(
                    path,
                    format!(
                        "a container takes one input (its first layer's), got {}",
                        inputs.len()
                    ),
                ));
            }
        }
        if let LayerConfig::Sequential { layers } | LayerConfig::Graph { layers, .. } =
            &layer.config
        {
            if layers.is_empty() {
                return Err(Error::definition(
                    path,
                    "a container needs at least one layer",
                ));
            }
        }
        Ok(())
    }

    /// The entry a (possibly dotted) name refers to, looked up from `scope`
    /// outwards; `None` when it is not a layer (it may be a network input).
    fn lookup(&self, scope: usize, name: &str, chain: bool) -> Option<(usize, usize)> {
        let mut parts = name.split('.');
        let first = parts.next()?;
        let mut s = Some(scope);
        let (mut sc, mut pos) = loop {
            let cur = s?;
            if let Some(&p) = self.scopes[cur].names.get(first) {
                break (cur, p);
            }
            if !chain {
                return None;
            }
            s = self.scopes[cur].parent;
        };
        for part in parts {
            let Item::Scope(inner) = self.scopes[sc].entries[pos].item else {
                return None;
            };
            pos = *self.scopes[inner].names.get(part)?;
            sc = inner;
        }
        Some((sc, pos))
    }

    /// The value a name refers to, from `scope`; errors name `path`, the layer asking.
    fn resolve(&self, scope: usize, name: &str, path: &str) -> Result<Source> {
        if let Some((sc, pos)) = self.lookup(scope, name, true) {
            return self.value_of(sc, pos);
        }
        if let Some(i) = self.def.inputs.iter().position(|x| x.name == name) {
            return Ok(Source::Input(i));
        }
        let mut known: Vec<String> = self.def.inputs.iter().map(|x| x.name.clone()).collect();
        let mut s = Some(scope);
        while let Some(cur) = s {
            let mut here: Vec<&str> = self.scopes[cur].names.keys().copied().collect();
            here.sort_unstable();
            known.extend(here.into_iter().map(str::to_string));
            s = self.scopes[cur].parent;
        }
        Err(Error::definition(
            path,
            format!(
                "unknown input {name:?} (names visible here: {})",
                known.join(", ")
            ),
        ))
    }

    /// The value of entry `pos` of `scope`: a leaf's output or a container's output.
    fn value_of(&self, scope: usize, pos: usize) -> Result<Source> {
        match self.scopes[scope].entries[pos].item {
            Item::Leaf(l) => Ok(Source::Leaf(l)),
            Item::Scope(inner) => self.scope_output(inner),
        }
    }

    /// A container's output: its last layer's, or for a `Graph` its first named output.
    fn scope_output(&self, scope: usize) -> Result<Source> {
        let s = &self.scopes[scope];
        if let Some(name) = s.outputs.first() {
            let (sc, pos) = self.lookup(scope, name, false).ok_or_else(|| {
                Error::definition(
                    &s.path,
                    format!("output {name:?} is not a layer of this Graph"),
                )
            })?;
            return self.value_of(sc, pos);
        }
        match s.entries.len() {
            0 => Err(Error::definition(
                &s.path,
                "a container needs at least one layer",
            )),
            n => self.value_of(scope, n - 1),
        }
    }

    /// What a layer without `inputs` at `pos` of `scope` takes: the previous
    /// layer's output, or the scope's input.
    fn implicit_input(&self, scope: usize, pos: usize, path: &str) -> Result<Source> {
        if pos > 0 {
            return self.value_of(scope, pos - 1);
        }
        let s = &self.scopes[scope];
        match (s.parent, s.owner) {
            (Some(parent), Some(owner)) => match &owner.inputs {
                Some(names) => self.resolve(parent, &names[0], &s.path),
                None => self.implicit_input(parent, s.position, &s.path),
            },
            _ => {
                if self.def.inputs.len() == 1 {
                    Ok(Source::Input(0))
                } else {
                    Err(Error::definition(
                        path,
                        format!(
                            "the first layer must name its inputs: the network has {} inputs",
                            self.def.inputs.len()
                        ),
                    ))
                }
            }
        }
    }

    fn leaf_inputs(&self, scope: usize, pos: usize, path: &str) -> Result<Vec<Source>> {
        match &self.scopes[scope].entries[pos].def.inputs {
            Some(names) => names.iter().map(|n| self.resolve(scope, n, path)).collect(),
            None => Ok(vec![self.implicit_input(scope, pos, path)?]),
        }
    }

    /// The leaf that owns the parameters `target` names (following chains of sharing).
    fn share_target(&self, scope: usize, me: usize, path: &str, target: &str) -> Result<usize> {
        let (my_scope, my_pos, _) = &self.leaves[me];
        let mine = self.scopes[*my_scope].entries[*my_pos].def;
        let mut name = target.to_string();
        let mut sc = scope;
        let mut seen = vec![me];
        loop {
            let (tsc, tpos) = self.lookup(sc, &name, true).ok_or_else(|| {
                Error::definition(
                    path,
                    format!("shares parameters with unknown layer {name:?}"),
                )
            })?;
            let Item::Leaf(t) = self.scopes[tsc].entries[tpos].item else {
                return Err(Error::definition(
                    path,
                    format!("shares parameters with {name:?}, which is a container, not a layer"),
                ));
            };
            if seen.contains(&t) {
                return Err(Error::definition(
                    path,
                    format!("sharing parameters with {target:?} leads in a circle"),
                ));
            }
            seen.push(t);
            let tdef = self.scopes[tsc].entries[tpos].def;
            if tdef.config.kind() != mine.config.kind() {
                return Err(Error::definition(
                    path,
                    format!(
                        "a {} cannot share the parameters of {:?}, a {}",
                        mine.config.kind(),
                        self.leaves[t].2,
                        tdef.config.kind()
                    ),
                ));
            }
            match &tdef.share {
                None => return Ok(t),
                Some(next) => {
                    name = next.clone();
                    sc = tsc;
                }
            }
        }
    }

    fn outputs(&self) -> Result<Vec<(String, usize)>> {
        let as_leaf = |name: &str, src: Source| match src {
            Source::Leaf(l) => Ok((name.to_string(), l)),
            Source::Input(_) => Err(Error::definition(
                name,
                "a network output must be a layer, not a network input",
            )),
        };
        if self.def.outputs.is_empty() {
            let top = &self.scopes[0];
            if top.entries.is_empty() {
                return Err(Error::definition("<network>", "the network has no layers"));
            }
            let last = top.entries.len() - 1;
            let name = top.entries[last].def.name.clone();
            return Ok(vec![as_leaf(&name, self.value_of(0, last)?)?]);
        }
        let mut outputs: Vec<(String, usize)> = Vec::with_capacity(self.def.outputs.len());
        for (k, output) in self.def.outputs.iter().enumerate() {
            let what = if output.is_renamed() {
                format!("the network output {:?}", output.name)
            } else {
                "the network output".to_string()
            };
            if output.name.is_empty() {
                return Err(Error::definition(
                    &output.from,
                    "a network output's name must be non-empty",
                ));
            }
            // One name, one layer: the same output may be listed twice, but
            // two layers cannot share a name (a swap matches outputs by name).
            if let Some(earlier) = self.def.outputs[..k]
                .iter()
                .find(|o| o.name == output.name && o.from != output.from)
            {
                return Err(Error::definition(
                    &output.name,
                    format!(
                        "two network outputs have this name: from {:?} and from {:?}",
                        earlier.from, output.from
                    ),
                ));
            }
            let (sc, pos) = self
                .lookup(0, &output.from, false)
                .ok_or_else(|| Error::definition(&output.from, format!("{what} names no layer")))?;
            let (_, leaf) = as_leaf(&output.from, self.value_of(sc, pos)?)?;
            outputs.push((output.name.clone(), leaf));
        }
        Ok(outputs)
    }
}

/// Kahn's algorithm, taking the earliest-defined ready leaf first so that a
/// sequential definition keeps its order. A leftover leaf lies on or after a
/// cycle; the error walks back to the cycle and names its layers.
fn topological_order(leaves: &[Leaf<'_>]) -> Result<Vec<usize>> {
    let n = leaves.len();
    let mut pending = vec![0usize; n];
    let mut consumers = vec![Vec::new(); n];
    for (i, leaf) in leaves.iter().enumerate() {
        for src in &leaf.inputs {
            if let Source::Leaf(j) = *src {
                pending[i] += 1;
                consumers[j].push(i);
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&i| pending[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &c in &consumers[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.push(Reverse(c));
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Walk inputs among the unordered leaves until one repeats: that is a cycle.
    let mut walk = vec![(0..n).find(|&i| pending[i] > 0).unwrap_or(0)];
    loop {
        let cur = walk[walk.len() - 1];
        let next = leaves[cur].inputs.iter().find_map(|s| match *s {
            Source::Leaf(j) if pending[j] > 0 => Some(j),
            _ => None,
        });
        let Some(next) = next else {
            return Err(Error::definition(
                &leaves[cur].path,
                "the layer graph has a cycle",
            ));
        };
        if let Some(start) = walk.iter().position(|&w| w == next) {
            // `walk` follows inputs, so data flows along it reversed; start the
            // message at the earliest-defined layer on the cycle.
            let mut cycle: Vec<usize> = walk[start..].iter().rev().copied().collect();
            let first = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
            cycle.rotate_left(first);
            cycle.push(cycle[0]);
            let names: Vec<&str> = cycle.iter().map(|&i| leaves[i].path.as_str()).collect();
            return Err(Error::definition(
                names[0],
                format!("cycle in the layer graph: {}", names.join(" -> ")),
            ));
        }
        walk.push(next);
    }
}

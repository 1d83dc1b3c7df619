//! Carried recurrent state: reading, writing and resetting the state an
//! LSTM ends a call in, which the next call of a context that carries state
//! (`Context::set_carry_state`) starts from.
//!
//! The state lives in the context (the layer's scratch), named by the
//! layer's path and the layer and kind within it (`rnn.h_l0`, `rnn.c_l1`),
//! each `[batch, hidden]`. Reading it after a call and writing it into
//! another context before one is how a caller takes a prefix's state
//! elsewhere (a Runner request that continues an earlier one).

use crate::context::Context;
use crate::network::Network;
use verjus_core::{ops, Backend, Error, Result, Tensor};

impl Network {
    /// `(name, index in the nodes, scratch index)` of every state buffer.
    fn state_slots(&self) -> Vec<(String, usize, usize)> {
        let mut out = Vec::new();
        for (t, node) in self.nodes.iter().enumerate() {
            let path = &self.descriptors()[t].path;
            for (name, i) in node.layer.state() {
                out.push((format!("{path}.{name}"), t, i));
            }
        }
        out
    }

    /// The recurrent state `ctx` holds: `(name, [batch, hidden])` per LSTM
    /// layer (`rnn.h_l0`, `rnn.c_l0`, ...), the state its last call ended in.
    pub fn state<'c>(&self, ctx: &'c Context) -> Result<Vec<(String, &'c Tensor)>> {
        self.check_context(ctx)?;
        self.state_slots()
            .into_iter()
            .map(|(name, t, i)| {
                let buf = ctx.scratch.get(t).and_then(|s| s.get(i));
                buf.map(|b| (name.clone(), b))
                    .ok_or_else(|| Error::invalid("Network::state", format!("{name} is missing")))
            })
            .collect()
    }

    /// Sets the state `name` (one of [`Network::state`]'s) of `ctx` to
    /// `value`, which must have its shape; the next call of a context that
    /// carries state starts from it.
    pub fn set_state(
        &self,
        be: &dyn Backend,
        ctx: &mut Context,
        name: &str,
        value: &Tensor,
    ) -> Result<()> {
        self.check_context(ctx)?;
        let slots = self.state_slots();
        let Some((_, t, i)) = slots.iter().find(|(n, _, _)| n == name) else {
            let known: Vec<&str> = slots.iter().map(|(n, _, _)| n.as_str()).collect();
            return Err(Error::invalid(
                "Network::set_state",
                format!("no state {name:?} (this network has {known:?})"),
            ));
        };
        let batch = ctx.batch();
        let buf = ctx
            .scratch
            .get_mut(*t)
            .and_then(|s| s.get_mut(*i))
            .ok_or_else(|| Error::invalid("Network::set_state", format!("{name} is missing")))?;
        if buf.shape() != value.shape() {
            return Err(Error::shape(
                "Network::set_state",
                format!("state {name:?}"),
                format!(
                    "{} ([batch, hidden] at the context's batch {batch})",
                    buf.shape()
                ),
                value.shape(),
            ));
        }
        ops::copy(be, value, buf)
    }

    /// Sets every state of `ctx` to zeros (a new sequence starts).
    pub fn reset_state(&self, be: &dyn Backend, ctx: &mut Context) -> Result<()> {
        self.check_context(ctx)?;
        for (_, t, i) in self.state_slots() {
            if let Some(buf) = ctx.scratch.get_mut(t).and_then(|s| s.get_mut(i)) {
                ops::fill(be, buf, 0.0)?;
            }
        }
        Ok(())
    }

    fn check_context(&self, ctx: &Context) -> Result<()> {
        if ctx.net_id != self.id {
            return Err(Error::invalid(
                "Network",
                "this context was made by another network",
            ));
        }
        Ok(())
    }
}

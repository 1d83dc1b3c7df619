//! Execution-only rewrites of a built network: the layers compute the same
//! values and gradients with fewer passes over memory.
//!
//! `ReLU -> MaxPool2d` becomes one node that pools first and applies the ReLU
//! to the (4x smaller, for a 2x2 window) pooled values. The two orders agree
//! exactly, values and gradients: ReLU is monotonic, so the window's first
//! maximum is the same element either way, and where the maximum is not
//! positive both give 0 with zero gradient. For the Fashion-MNIST CNN this
//! removes a full-size ReLU pass forward and backward after each convolution
//! and the ReLU's activation buffer.
//!
//! Only a ReLU whose sole consumer is the pooling (and that is no network
//! output) is folded; the [`crate::Descriptor`]s still describe the network
//! as defined.

use crate::def::LayerConfig;
use crate::graph::Flat;
use crate::layers::pool;
use crate::network::Node;
use verjus_core::ops::PoolKind;
use verjus_core::Result;

/// Folds every `ReLU -> MaxPool2d` pair into the pooling node (see the module
/// docs). `nodes` are in topological order (`flat.order`); value `n_in + t` is
/// node `t`'s output; `outputs` are the value ids of the network outputs.
pub(crate) fn relu_into_max_pool(
    nodes: &mut [Node],
    flat: &Flat<'_>,
    n_in: usize,
    value_units: &[Vec<usize>],
    outputs: &[usize],
) -> Result<()> {
    let mut consumers = vec![0usize; value_units.len()];
    for node in nodes.iter().filter(|n| n.live) {
        node.inputs.iter().for_each(|&v| consumers[v] += 1);
    }
    outputs.iter().for_each(|&v| consumers[v] += 1);
    let config = |t: usize| &flat.leaves[flat.order[t]].def.config;
    for t in 0..nodes.len() {
        let LayerConfig::MaxPool2d {
            kernel,
            stride,
            padding,
        } = *config(t)
        else {
            continue;
        };
        let Some(r) = nodes[t].inputs.first().and_then(|&v| v.checked_sub(n_in)) else {
            continue;
        };
        let folds =
            nodes[t].live && matches!(config(r), LayerConfig::ReLU) && consumers[n_in + r] == 1;
        if !folds {
            continue;
        }
        let path = &flat.leaves[flat.order[t]].path;
        let source = nodes[r].inputs.clone();
        let shapes: Vec<Vec<usize>> = source.iter().map(|&v| value_units[v].clone()).collect();
        let fused = pool::build(path, &shapes, PoolKind::Max, kernel, stride, padding, true)?;
        nodes[t].layer = fused.layer;
        nodes[t].inputs = source;
        nodes[r].live = false;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Network, NetworkDef};
    use verjus_native::NativeBackend;

    #[test]
    fn the_cnn_relus_before_pooling_are_folded_and_the_last_is_not() {
        let def = NetworkDef::from_json(include_str!("../../../examples/nets/fashion_cnn.json"));
        let net = Network::build(def.unwrap(), &NativeBackend::new(), 0).unwrap();
        let live: Vec<(&str, bool)> = net
            .descriptors()
            .iter()
            .zip(&net.nodes)
            .map(|(d, n)| (d.path.as_str(), n.live))
            .collect();
        let dead: Vec<&str> = live.iter().filter(|l| !l.1).map(|l| l.0).collect();
        assert_eq!(dead, ["relu1", "relu2"], "{live:?}");
        assert!(net.descriptors().iter().all(|d| d.live));
    }
}

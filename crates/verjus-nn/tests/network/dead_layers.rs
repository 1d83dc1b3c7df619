//! A layer that feeds no output: the Trainer leaves its parameters alone, as
//! PyTorch's optimizers skip a parameter without a gradient.

use crate::common::{param_values as values, rand_tensor};
use std::sync::Arc;
use verjus_core::{BackendRef, Tensor};
use verjus_native::NativeBackend;
use verjus_nn::solver::{Adam, Sgd, Solver};
use verjus_nn::{Loss, Network, NetworkDef, Trainer};

/// `fc1` is the output; `aux` reads it but feeds nothing.
const WITH_DEAD_HEAD: &str = r#"{
    "inputs": [{"name": "x", "shape": [6]}],
    "outputs": ["fc1"],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 4},
        {"name": "aux", "type": "Linear", "out_features": 3}
    ]
}"#;

fn trained(solver: Solver) -> (Vec<Vec<f32>>, Trainer) {
    let be: BackendRef = Arc::new(NativeBackend::new());
    let def = NetworkDef::from_json(WITH_DEAD_HEAD).unwrap();
    let net = Network::build(def, &*be, 3).unwrap();
    let before = values(&net);
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut t = Trainer::new(net, solver, loss, be);
    for i in 0..3 {
        let x = rand_tensor(&NativeBackend::new(), &[5, 6], 10 + i);
        let y = Tensor::from_vec([5], vec![0i64, 1, 2, 3, 1]).unwrap();
        t.train_minibatch(&x, &y).unwrap();
    }
    (before, t)
}

#[test]
fn weight_decay_leaves_a_dead_layer_unchanged() {
    let solvers = [
        ("AdamW", Solver::new(Adam::adamw(0.1, 0.1))),
        (
            "Adam with L2",
            Solver::new(Adam {
                weight_decay: 0.1,
                ..Adam::new(0.1)
            }),
        ),
        (
            "SGD with momentum and decay",
            Solver::new(Sgd {
                momentum: 0.9,
                weight_decay: 0.1,
                ..Sgd::new(0.1)
            }),
        ),
    ];
    for (what, solver) in solvers {
        let (before, t) = trained(solver);
        let after = values(t.network());
        let names: Vec<&str> = t
            .network()
            .parameters()
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        for ((name, b), a) in names.iter().zip(&before).zip(&after) {
            if name.starts_with("aux.") {
                assert_eq!(b, a, "{what}: {name} moved");
                assert!(
                    t.solver().state().get(name).is_none(),
                    "{what}: {name} has solver state"
                );
            } else {
                assert_ne!(b, a, "{what}: {name} did not train");
            }
        }
    }
}

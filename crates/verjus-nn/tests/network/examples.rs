//! The example definitions in `examples/nets` build and give `[N, 10]` logits.

use crate::common::{be, build, rand_tensor};

const MLP: &str = include_str!("../../../../examples/nets/fashion_mlp.json");
const CNN: &str = include_str!("../../../../examples/nets/fashion_cnn.json");

#[test]
fn fashion_networks_give_ten_logits() {
    let be = be();
    for (json, params) in [(MLP, 669_706), (CNN, 421_642)] {
        let net = build(json, 0);
        assert_eq!(net.parameter_count(), params);
        assert_eq!(net.inputs()[0].name, "image");
        assert_eq!(net.output_shapes(), [("logits".to_string(), vec![10])]);
        for n in [1, 5] {
            let x = rand_tensor(&be, &[n, 1, 28, 28], 1);
            let y = net.transform(&be, &[&x]).unwrap();
            assert_eq!(y[0].dims(), &[n, 10]);
        }
    }
}

#[test]
fn initialisation_follows_pytorch_bounds_and_the_seed() {
    let be = be();
    let a = build(MLP, 5);
    let b = build(MLP, 5);
    let c = build(MLP, 6);
    let w = |n: &verjus_nn::Network| crate::common::host(&be, &n.parameters()[0].value);
    assert_eq!(w(&a), w(&b));
    assert_ne!(w(&a), w(&c));
    let bound = 1.0 / 784f32.sqrt();
    let wa = w(&a);
    assert!(wa.iter().all(|v| v.abs() <= bound));
    assert!(wa.iter().any(|v| v.abs() > 0.9 * bound));
    assert_eq!(a.parameters()[0].value.dims(), &[512, 784]);
    assert_eq!(a.parameters()[0].name, "fc1.weight");
}

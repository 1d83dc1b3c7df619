//! Dropout is active in training only, draws a new mask each step, and its
//! backward applies forward's mask.

use crate::common::{be, build, host, rand_vec, tensor};

const NET: &str = r#"{"inputs": [{"name": "x", "shape": [1000]}], "layers": [
    {"name": "drop", "type": "Dropout", "p": 0.3}]}"#;

#[test]
fn training_drops_and_scales() {
    let be = be();
    let net = build(NET, 1);
    let xs: Vec<f32> = rand_vec(2000, 1).iter().map(|v| v + 2.0).collect();
    let x = tensor(&be, &[2, 1000], xs.clone());
    let mut ctx = net.new_context(&be, 2).unwrap();
    ctx.set_train(true);
    ctx.set_input_grads(true);
    net.compute_output(&be, &mut ctx, &[&x]).unwrap();
    let y1 = host(&be, ctx.output(0));
    let dropped = y1.iter().filter(|&&v| v == 0.0).count();
    assert!((500..700).contains(&dropped), "dropped {dropped} of 2000");
    for (y, x) in y1.iter().zip(&xs) {
        assert!(*y == 0.0 || (y - x / 0.7).abs() < 1e-5, "{y} from {x}");
    }
    let dy = tensor(&be, &[2, 1000], vec![1.0; 2000]);
    net.compute_gradients(&be, &mut ctx, &[&dy]).unwrap();
    let dx = host(&be, ctx.input_grad(0).unwrap());
    for (d, y) in dx.iter().zip(&y1) {
        assert_eq!(*d == 0.0, *y == 0.0, "backward uses forward's mask");
    }
    net.compute_output(&be, &mut ctx, &[&x]).unwrap();
    assert_ne!(host(&be, ctx.output(0)), y1, "each step draws a new mask");
}

#[test]
fn inference_is_the_identity() {
    let be = be();
    let net = build(NET, 1);
    let xs = rand_vec(1000, 2);
    let x = tensor(&be, &[1, 1000], xs.clone());
    let mut ctx = net.new_context(&be, 1).unwrap();
    net.compute_output(&be, &mut ctx, &[&x]).unwrap();
    assert_eq!(host(&be, ctx.output(0)), xs);
    assert_eq!(host(&be, &net.transform(&be, &[&x]).unwrap()[0]), xs);
}

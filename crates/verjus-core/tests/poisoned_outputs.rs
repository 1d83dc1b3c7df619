//! With `VERJUS_POISON_OUTPUTS=1` every output buffer starts as NaN, fresh or
//! recycled, so that an op which leaves part of its output unwritten fails
//! its tests (the test scripts set it). A process of its own: the setting is
//! read once, at the first allocation.

use verjus_core::{DType, Shape, Tensor};

#[test]
fn outputs_are_nan_when_poisoning_is_asked_for() {
    std::env::set_var("VERJUS_POISON_OUTPUTS", "1");
    let shape = Shape::new([20_000]).unwrap();
    let all_nan = |t: &Tensor| t.as_slice::<f32>().unwrap().iter().all(|v| v.is_nan());
    let mut first = Tensor::output_host(&shape, DType::F32).unwrap();
    assert!(all_nan(&first), "a fresh output");
    first.as_mut_slice::<f32>().unwrap().fill(1.0);
    drop(first);
    let recycled = Tensor::output_host(&shape, DType::F32).unwrap();
    assert!(all_nan(&recycled), "a recycled output");
    let zeros = Tensor::zeros_host(&shape, DType::F32).unwrap();
    assert!(zeros.as_slice::<f32>().unwrap().iter().all(|&v| v == 0.0));
}

//! Tests of the graph bookkeeping that need no kernels: a mock backend that can
//! only allocate and move data stands in for a real one, and hand-built nodes
//! with identity backward closures stand in for ops.

use super::engine::topological_order;
use super::node::BackwardFn;
use super::record::Saves;
use super::*;
use crate::{Backend, BackendRef, DType, Device, Error, Result, Shape, Tensor};
use std::sync::Arc;

/// Allocation and copies only; every compute op is unsupported.
#[derive(Debug)]
struct HostOnly;

impl Backend for HostOnly {
    fn name(&self) -> &str {
        "host-only"
    }
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        Tensor::zeros_host(shape, dtype)
    }
    fn upload(&self, host: &Tensor) -> Result<Tensor> {
        host.try_clone_host()
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        t.try_clone_host()
    }
    fn copy(&self, src: &Tensor, dst: &mut Tensor) -> Result<()> {
        dst.as_mut_slice::<f32>()?
            .copy_from_slice(src.as_slice::<f32>()?);
        Ok(())
    }
}

fn be() -> BackendRef {
    Arc::new(HostOnly)
}

fn leaf(values: Vec<f32>) -> Var {
    Var::leaf(Tensor::from_vec([values.len()], values).unwrap(), be()).unwrap()
}

fn host(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// A recorded op that passes its input through (value and gradient).
fn identity(name: &'static str, inputs: &[&Var]) -> Var {
    let n = inputs.len();
    Var::record(
        name,
        inputs[0].backend(),
        inputs,
        Saves::NOTHING,
        move |_, xs| {
            let backward: BackwardFn = Box::new(move |_, dy, _, _| {
                let mut grads = vec![Some(dy)];
                grads.resize_with(n, || None);
                Ok(grads)
            });
            Ok((xs[0].clone(), backward))
        },
    )
    .unwrap()
}

#[test]
fn var_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Var>();
}

#[test]
fn grad_mode_guards_nest_and_restore() {
    assert!(is_grad_enabled());
    {
        let _off = no_grad();
        assert!(!is_grad_enabled());
        {
            let _on = enable_grad();
            assert!(is_grad_enabled());
        }
        assert!(!is_grad_enabled());
    }
    assert!(is_grad_enabled());
}

#[test]
fn only_float_values_require_gradients() {
    let labels = Tensor::from_vec([2], vec![0i64, 1]).unwrap();
    let err = Var::leaf(labels, be()).unwrap_err();
    assert!(matches!(err, Error::Autograd(_)), "{err}");
    let labels = Tensor::from_vec([2], vec![0i64, 1]).unwrap();
    assert!(!Var::constant(labels, be()).unwrap().requires_grad());
}

#[test]
fn ops_record_only_in_grad_mode_and_for_gradient_inputs() {
    let x = leaf(vec![1.0]);
    let y = identity("f", &[&x]);
    assert!(y.requires_grad() && !y.is_leaf());
    assert_eq!(y.op_name(), Some("f"));
    let z = {
        let _guard = no_grad();
        identity("f", &[&x])
    };
    assert!(!z.requires_grad() && z.is_leaf());
    let c = x.detach();
    let w = identity("f", &[&c]);
    assert!(!w.requires_grad() && w.op_name().is_none());
}

#[test]
fn detach_shares_the_value_without_the_graph() {
    let x = leaf(vec![1.0, 2.0]);
    let y = identity("f", &[&x]).detach();
    assert!(y.is_leaf() && !y.requires_grad());
    assert!(Arc::ptr_eq(&x.value(), &y.value()));
}

#[test]
fn topological_order_puts_consumers_first() {
    // a = f(x); b = g(a); c = h(a, b): a has two consumers.
    let x = leaf(vec![1.0]);
    let a = identity("a", &[&x]);
    let b = identity("b", &[&a]);
    let c = identity("c", &[&a, &b]);
    let order = topological_order(&[c.grad_fn().unwrap().clone()]);
    let names: Vec<_> = order.iter().map(|n| n.name).collect();
    assert_eq!(names, ["c", "b", "a"]);
}

#[test]
fn backward_routes_through_a_chain_into_the_leaf() {
    let x = leaf(vec![3.0]);
    let y = identity("g", &[&identity("f", &[&x])]);
    y.backward().unwrap();
    assert_eq!(host(&x.grad().unwrap()), [1.0]);
    x.zero_grad();
    assert!(x.grad().is_none());
}

#[test]
fn grad_returns_gradients_without_touching_slots() {
    let x = leaf(vec![3.0]);
    let h = identity("f", &[&x]);
    let y = identity("g", &[&h]);
    let other = leaf(vec![1.0]);
    let g = grad(std::slice::from_ref(&y), &[x.clone(), h.clone(), other]).unwrap();
    assert_eq!(host(g[0].as_ref().unwrap()), [1.0]);
    assert_eq!(host(g[1].as_ref().unwrap()), [1.0]);
    assert!(g[2].is_none());
    assert!(x.grad().is_none());
    // The same input twice gets two gradients.
    let g = grad(&[y], &[x.clone(), x]).unwrap();
    assert!(g.iter().all(|g| g.is_some()));
}

#[test]
fn backward_needs_a_scalar_or_a_seed() {
    let x = leaf(vec![1.0, 2.0]);
    let y = identity("f", &[&x]);
    let err = y.backward().unwrap_err().to_string();
    assert!(err.contains("one-element") && err.contains("[2]"), "{err}");
    let err = y
        .backward_with(Tensor::from_vec([3], vec![1f32; 3]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("seed") && err.contains("[3]"), "{err}");
    y.backward_with(Tensor::from_vec([2], vec![2f32, 5.0]).unwrap())
        .unwrap();
    assert_eq!(host(&x.grad().unwrap()), [2.0, 5.0]);
}

#[test]
fn backward_of_a_constant_is_an_error() {
    let c = Var::constant(Tensor::from_vec([1], vec![1f32]).unwrap(), be()).unwrap();
    let err = c.backward().unwrap_err();
    assert!(matches!(err, Error::Autograd(_)), "{err}");
}

#[test]
fn update_value_copies_a_shared_value() {
    let x = leaf(vec![1.0, 2.0]);
    let before = Arc::as_ptr(&x.value());
    x.update_value(|t| {
        t.as_mut_slice::<f32>()?[0] = 5.0;
        Ok(())
    })
    .unwrap();
    assert_eq!(Arc::as_ptr(&x.value()), before, "unshared: in place");
    let saved = x.value();
    x.update_value(|t| {
        t.as_mut_slice::<f32>()?[1] = 7.0;
        Ok(())
    })
    .unwrap();
    assert_eq!(host(&saved), [5.0, 2.0]);
    assert_eq!(host(&x.value()), [5.0, 7.0]);
    let err = x.update_value(|t| t.reshape_in_place([1, 2])).unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
}

#[test]
fn reshape_shares_elements_and_updates_leave_it_unchanged() {
    let x = leaf(vec![1.0, 2.0]);
    let y = x.reshape([2, 1]).unwrap();
    let (xv, yv) = (x.value(), y.value());
    assert_eq!(
        xv.as_slice::<f32>().unwrap().as_ptr(),
        yv.as_slice::<f32>().unwrap().as_ptr(),
        "the reshape copied"
    );
    drop(xv);
    x.update_value(|t| {
        t.as_mut_slice::<f32>()?[0] = 5.0;
        Ok(())
    })
    .unwrap();
    assert_eq!(host(&y.value()), [1.0, 2.0]);
    assert_eq!(host(&x.value()), [5.0, 2.0]);
    // A leaf whose value is an alias is updated through a copy.
    let z = leaf(vec![0.0, 0.0]);
    z.set_value(Tensor::alias(&y.value(), [2]).unwrap().unwrap())
        .unwrap();
    z.update_value(|t| {
        t.as_mut_slice::<f32>()?[1] = 3.0;
        Ok(())
    })
    .unwrap();
    assert_eq!(host(&z.value()), [1.0, 3.0]);
    assert_eq!(host(&y.value()), [1.0, 2.0]);
}

#[test]
fn only_leaves_can_be_assigned() {
    let x = leaf(vec![1.0, 2.0]);
    let y = identity("f", &[&x]);
    let err = y
        .set_value(Tensor::from_vec([2], vec![0f32; 2]).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("output of f"), "{err}");
    let err = x
        .set_value(Tensor::from_vec([3], vec![0f32; 3]).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("[3]"), "{err}");
    x.set_value(Tensor::from_vec([2], vec![4f32, 4.0]).unwrap())
        .unwrap();
    assert_eq!(host(&x.value()), [4.0, 4.0]);
}

#[test]
fn long_chains_backpropagate_and_drop_without_recursion() {
    let x = leaf(vec![1.0]);
    let mut y = x.clone();
    for _ in 0..200_000 {
        y = identity("f", &[&y]);
    }
    y.backward().unwrap();
    assert_eq!(host(&x.grad().unwrap()), [1.0]);
    drop(y);
}

//! Gradient checkpoint scopes on the native backend: gradients bitwise equal
//! to the run without the scope (random ops draw the same numbers again),
//! for weight noise, dropout, chains of arbitrary ops, nested scopes and an
//! LSTM step reading a weight made in a scope.

use verjus_core::autograd::{checkpoint_scope, Var};
use verjus_core::ops::Distribution;
use verjus_core::{rng, BackendRef, Result, Shape, Tensor};

#[path = "common/dropout_lstm.rs"]
mod dropout_lstm;
use dropout_lstm::dropout_lstm;

fn be() -> BackendRef {
    verjus_native::backend()
}

fn leaf(seed: u64, dims: &[usize]) -> Var {
    let n = dims.iter().product();
    let data = (0..n)
        .map(|i| rng::unit_uniform(rng::word_at(seed, 0, i)) - 0.5)
        .collect();
    Var::leaf(Tensor::from_vec(dims.to_vec(), data).unwrap(), be()).unwrap()
}

fn grad(v: &Var) -> Vec<f32> {
    v.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

/// Runs `f` on fresh leaves made by `make`, once plain and once with `scoped`
/// set, and asserts bitwise-equal losses and gradients.
fn same_with_scope(make: impl Fn() -> Vec<Var>, f: impl Fn(&[Var], bool) -> Result<Var>) {
    let run = |scoped: bool| {
        let leaves = make();
        let loss = f(&leaves, scoped).unwrap();
        loss.backward().unwrap();
        let value = loss.item().unwrap();
        (value, leaves.iter().map(grad).collect::<Vec<_>>())
    };
    let (plain, scoped) = (run(false), run(true));
    assert_eq!(plain.0.to_bits(), scoped.0.to_bits(), "loss");
    for (i, (a, b)) in plain.1.iter().zip(&scoped.1).enumerate() {
        let (a, b): (Vec<u32>, Vec<u32>) = (
            a.iter().map(|v| v.to_bits()).collect(),
            b.iter().map(|v| v.to_bits()).collect(),
        );
        assert_eq!(a, b, "gradient of leaf {i}");
    }
}

fn noisy(w: &Var, std: f32, offset: u64) -> Result<Var> {
    let noise = Var::random(
        &w.shape(),
        Distribution::Normal { mean: 0.0, std },
        7,
        offset,
        w.backend(),
    )?;
    w.add(&noise)
}

#[test]
fn weight_noise_in_a_scope_gives_the_same_gradients() {
    same_with_scope(
        || vec![leaf(1, &[3, 5]), leaf(2, &[5, 4])],
        |v, scoped| {
            let w = {
                let _scope = scoped.then(checkpoint_scope);
                noisy(&v[1], 0.3, 11)?
            };
            v[0].matmul(&w)?.tanh()?.sum_all()
        },
    );
}

#[test]
fn dropout_and_a_chain_of_ops_in_nested_scopes_give_the_same_gradients() {
    same_with_scope(
        || vec![leaf(3, &[4, 6]), leaf(4, &[6, 6])],
        |v, scoped| {
            let _outer = scoped.then(checkpoint_scope);
            let h = v[0].matmul(&v[1])?.tanh()?;
            let h = {
                let _inner = scoped.then(checkpoint_scope);
                h.dropout(0.4, 5, 100)?.softmax(1)?.mul(&h)?
            };
            drop(_outer);
            h.exp()?.mean_all()
        },
    );
}

#[test]
fn an_lstm_step_reading_a_dropped_out_weight_gives_the_same_gradients() {
    same_with_scope(
        || vec![leaf(5, &[2, 3]), leaf(6, &[8, 3]), leaf(7, &[8, 2])],
        |v, scoped| {
            let (x, w_ih, w_hh) = (&v[0], &v[1], &v[2]);
            dropout_lstm(x, w_ih, w_hh, Some(scoped), 4)
        },
    );
}

#[test]
fn a_value_made_in_a_scope_cannot_be_assigned() {
    let t = {
        let _scope = checkpoint_scope();
        Var::random(
            &Shape::new([3]).unwrap(),
            Distribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            1,
            0,
            &be(),
        )
        .unwrap()
    };
    let err = t
        .set_value(Tensor::from_vec([3], vec![0f32; 3]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("gradient checkpoint scope"), "{err}");
}

#[test]
fn a_random_draw_is_the_philox_stream() {
    let shape = Shape::new([9]).unwrap();
    let dist = Distribution::Normal {
        mean: 1.0,
        std: 2.0,
    };
    let v = Var::random(&shape, dist, 3, 4, &be()).unwrap();
    let mut expected = Tensor::from_vec([9], vec![0f32; 9]).unwrap();
    verjus_core::ops::random(&*be(), &mut expected, dist, 3, 4).unwrap();
    assert_eq!(
        v.to_host().unwrap().to_vec::<f32>().unwrap(),
        expected.to_vec::<f32>().unwrap()
    );
    assert!(!v.requires_grad());
}

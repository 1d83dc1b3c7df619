//! The Trainer's data-parallel step without a second process: a collective
//! whose other rank mirrors this one (a world of two equal ranks) must train
//! exactly as one process does, since the gradient and the normaliser both
//! double (the reported loss within rounding: a sum over the count); a non-finite loss reported by another rank stops the step on this
//! one before anything changes; batches split between ranks row by row.

use crate::common::{assert_close, param_values as values, rand_tensor};
use std::sync::Arc;
use verjus_core::{BackendRef, Collective, ReduceOp, Result, Tensor};
use verjus_native::NativeBackend;
use verjus_nn::data::Dataset;
use verjus_nn::solver::{Adam, Solver, SolverConfig, UpdateRule};
use verjus_nn::{Loss, Network, NetworkDef, Trainer};

const MLP: &str = r#"{
    "inputs": [{"name": "x", "shape": [6]}],
    "layers": [
        {"name": "fc1", "type": "Linear", "out_features": 5},
        {"name": "act", "type": "Tanh"},
        {"name": "fc2", "type": "Linear", "out_features": 3}
    ]
}"#;

/// Rank 0 of two, the other rank holding the same batch: sums double.
/// `other_loss_non_finite` makes the other rank report a non-finite loss.
#[derive(Debug, Default)]
struct Mirror {
    other_loss_non_finite: bool,
}

impl Collective for Mirror {
    fn rank(&self) -> usize {
        0
    }
    fn world(&self) -> usize {
        2
    }
    fn all_reduce_host(&self, buf: &mut [f32], op: ReduceOp) -> Result<()> {
        if op == ReduceOp::Sum {
            buf.iter_mut().for_each(|v| *v *= 2.0);
            if self.other_loss_non_finite {
                // The trainer's tally ends the buffer: the loss sum (the
                // other rank adds none), the normaliser, the non-finite count.
                let n = buf.len();
                buf[n - 3] /= 2.0;
                buf[n - 1] += 1.0;
            }
        }
        Ok(())
    }
    fn broadcast_host(&self, _: &mut [f32], _: usize) -> Result<()> {
        Ok(())
    }
    fn all_reduce_scalars(&self, xs: &mut [f64], op: ReduceOp) -> Result<()> {
        if op == ReduceOp::Sum {
            xs.iter_mut().for_each(|v| *v *= 2.0);
        }
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
}

fn trainer(clip_norm: Option<f32>) -> Trainer {
    let be: BackendRef = Arc::new(NativeBackend::new());
    let net = Network::build(NetworkDef::from_json(MLP).unwrap(), &*be, 7).unwrap();
    let config = SolverConfig {
        clip_norm,
        ..SolverConfig::from(UpdateRule::from(Adam::new(0.05)))
    };
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    Trainer::new(net, Solver::from_config(config).unwrap(), loss, be)
}

fn train(t: &mut Trainer) -> Vec<f32> {
    (0..4)
        .map(|i| {
            let x = rand_tensor(&NativeBackend::new(), &[5, 6], 20 + i);
            let y = Tensor::from_vec([5], vec![0i64, 1, 2, 1, 0]).unwrap();
            t.train_minibatch(&x, &y).unwrap().0
        })
        .collect()
}

#[test]
fn two_equal_ranks_train_exactly_as_one_process() {
    for clip_norm in [None, Some(0.1)] {
        let mut alone = trainer(clip_norm);
        let mut pair = trainer(clip_norm);
        pair.set_collective(Arc::new(Mirror::default()));
        pair.broadcast_parameters().unwrap();
        let losses = (train(&mut alone), train(&mut pair));
        // The pair's loss is the sum over ranks over the count: within rounding.
        assert_close(
            &format!("clip {clip_norm:?}: losses"),
            &losses.0,
            &losses.1,
            1e-6,
        );
        assert_eq!(
            values(alone.network()),
            values(pair.network()),
            "clip {clip_norm:?}: parameters"
        );
    }
}

#[test]
fn a_non_finite_loss_on_another_rank_stops_the_step_here() {
    let mut t = trainer(None);
    t.set_collective(Arc::new(Mirror {
        other_loss_non_finite: true,
    }));
    let before = values(t.network());
    let x = rand_tensor(&NativeBackend::new(), &[5, 6], 3);
    let y = Tensor::from_vec([5], vec![0i64, 1, 2, 1, 0]).unwrap();
    let err = t.train_minibatch(&x, &y).unwrap_err().to_string();
    assert!(err.contains("not finite on another rank"), "{err}");
    assert_eq!(
        before,
        values(t.network()),
        "the step changed the parameters"
    );
}

#[test]
fn ranks_split_each_batch_row_by_row() {
    let x = Tensor::from_vec([7, 1], (0..7).map(|v| v as f32).collect::<Vec<_>>()).unwrap();
    let y = Tensor::from_vec([7], (0..7).collect::<Vec<i64>>()).unwrap();
    let data = Dataset::new(x, y).unwrap();
    let rows = |rank| -> Vec<Vec<i64>> {
        let batches = data.batches(3, None).unwrap().shard(rank, 2).unwrap();
        batches.map(|b| b.unwrap().y.to_vec().unwrap()).collect()
    };
    assert_eq!(rows(0), [vec![0, 2], vec![3, 5], vec![6]]);
    assert_eq!(rows(1), [vec![1], vec![4], vec![]]); // the last batch has one row
    let err = data.batches(3, None).unwrap().shard(2, 2).unwrap_err();
    assert!(err.to_string().contains("rank 2"), "{err}");
}

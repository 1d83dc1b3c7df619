//! Sequence models through the static graph (`verjus-nn`), as the examples run
//! them: `rowlstm_step`, one `Trainer` step of `examples/nets/fashion_rowlstm.json`
//! (the 28 rows of an image as 28 frames, LSTM 128, Linear 10, Adam), and
//! `char_sample_step`, one character sampled at batch 1 from a character
//! language model (Embedding 64, LSTM 256, Linear to the vocabulary, Softmax)
//! stepping with carried LSTM state. Unlike [`crate::lstm`], which times the
//! fused op alone, these include everything the graph adds around it; `run.py`
//! times the same models in PyTorch.

use crate::workloads::{filled, xorshift, Runner};
use serde_json::{json, Value};
use verjus_core::{ops, BackendRef, Device, Error, Result, Tensor};
use verjus_nn::solver::{Adam, Solver};
use verjus_nn::{Loss, Network, NetworkDef, Trainer};

/// Seed of the parameter initialisation.
const SEED: u64 = 0;

/// A sequence-model workload.
#[derive(Clone, Copy, Debug)]
pub enum SeqNet {
    /// One Adam training step (lr 1e-3) of the row LSTM on a random batch of
    /// `batch` images.
    RowLstmStep { batch: usize },
    /// One character of a `vocab`-id language model: the forward of one frame
    /// at batch 1 from the carried state, then a draw from its softmax, which
    /// is the next call's input.
    CharSampleStep { vocab: usize },
}

/// Fashion-MNIST as rows: 28 frames of 28 pixels, 10 classes.
const ROWS: usize = 28;
const CLASSES: i64 = 10;
const ROW_HIDDEN: usize = 128;
/// The character model's sizes.
const EMBED: usize = 64;
const CHAR_HIDDEN: usize = 256;

impl SeqNet {
    /// The op and sizes for `run.py`.
    pub fn describe(self) -> Value {
        match self {
            SeqNet::RowLstmStep { batch } => json!({
                "op": "rowlstm_step", "net": "fashion_rowlstm.json", "batch": batch,
                "steps": ROWS, "input": ROWS, "hidden": ROW_HIDDEN, "classes": CLASSES,
                "solver": "adam", "lr": 1e-3}),
            SeqNet::CharSampleStep { vocab } => json!({
                "op": "char_sample_step", "vocab": vocab, "embed": EMBED,
                "hidden": CHAR_HIDDEN}),
        }
    }

    /// Builds the model on `be` and returns one call as a runner.
    pub fn prepare(self, be: BackendRef) -> Result<Runner> {
        match self {
            SeqNet::RowLstmStep { batch } => row_lstm_step(batch, be),
            SeqNet::CharSampleStep { vocab } => char_sample_step(vocab, be),
        }
    }
}

fn row_lstm_step(batch: usize, be: BackendRef) -> Result<Runner> {
    let json = include_str!("../../examples/nets/fashion_rowlstm.json");
    let net = Network::build(NetworkDef::from_json(json)?, &*be, SEED)?;
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    let mut trainer = Trainer::new(net, Solver::new(Adam::new(1e-3)), loss, be.clone());
    let x = filled(&*be, [batch, ROWS, ROWS], 7)?;
    let labels = (0..batch as i64).map(|i| (i * 7 + 3) % CLASSES).collect();
    let y = ops::upload(&*be, &Tensor::from_vec([batch], labels)?)?;
    Ok(Box::new(move || trainer.train_minibatch(&x, &y).map(drop)))
}

/// The character model's definition for `vocab` ids, ending in a Softmax.
fn char_model(vocab: usize) -> Result<NetworkDef> {
    NetworkDef::from_json(&format!(
        r#"{{"format_version": 3,
            "inputs": [{{"name": "chars", "shape": [null], "dtype": "int32"}}],
            "layers": [
              {{"name": "embed", "type": "Embedding", "vocab": {vocab}, "dim": {EMBED}}},
              {{"name": "rnn", "type": "LSTM", "hidden": {CHAR_HIDDEN}}},
              {{"name": "fc", "type": "Linear", "out_features": {vocab}}},
              {{"name": "probs", "type": "Softmax"}}
            ]}}"#
    ))
}

/// Sampling one character: the id of the last call goes in (`[1, 1]`, on the
/// host), the LSTM continues from its carried state, and the next id is drawn
/// from the probabilities read back. Nothing is allocated per call on the CPU.
fn char_sample_step(vocab: usize, be: BackendRef) -> Result<Runner> {
    let net = Network::build(char_model(vocab)?, &*be, SEED)?;
    let mut ctx = net.new_context(&*be, 1)?;
    ctx.set_carry_state(true);
    let mut x = Tensor::from_vec([1, 1], vec![1i32])?;
    let mut uniforms = xorshift(11).map(|bits| (bits >> 11) as f64 / (1u64 << 53) as f64);
    Ok(Box::new(move || {
        net.compute_output(&*be, &mut ctx, &[&x])?;
        let out = ctx.output(0);
        let probs = if out.device() == Device::Cpu {
            draw(out.as_slice::<f32>()?, uniforms.next())
        } else {
            draw(
                ops::download(&*be, out)?.as_slice::<f32>()?,
                uniforms.next(),
            )
        };
        x.as_mut_slice::<i32>()?[0] = probs?;
        Ok(())
    }))
}

/// The index at which the running sum of `probs` passes `uniform` (in [0, 1)).
fn draw(probs: &[f32], uniform: Option<f64>) -> Result<i32> {
    let mut left = uniform.unwrap_or(0.0) as f32;
    let last = probs.len().saturating_sub(1);
    let i = probs
        .iter()
        .position(|&p| {
            left -= p;
            left < 0.0
        })
        .unwrap_or(last);
    i32::try_from(i).map_err(|_| Error::invalid("char_sample_step", "vocabulary too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_the_cumulative_probabilities() {
        let probs = [0.25, 0.5, 0.25];
        assert_eq!(draw(&probs, Some(0.0)).unwrap(), 0);
        assert_eq!(draw(&probs, Some(0.3)).unwrap(), 1);
        assert_eq!(draw(&probs, Some(0.74)).unwrap(), 1);
        assert_eq!(draw(&probs, Some(0.8)).unwrap(), 2);
        // Rounding leaves the sum short of 1: the last id.
        assert_eq!(draw(&[0.5, 0.4999], Some(0.99999)).unwrap(), 1);
    }

    #[test]
    fn sampling_steps_carry_the_state() {
        let be = verjus_native::backend();
        let net = Network::build(char_model(7).unwrap(), &*be, SEED).unwrap();
        let x = Tensor::from_vec([1, 1], vec![3i32]).unwrap();
        let probs = |ctx: &mut verjus_nn::Context| {
            net.compute_output(&*be, ctx, &[&x]).unwrap();
            ctx.output(0).to_vec::<f32>().unwrap()
        };
        let mut carry = net.new_context(&*be, 1).unwrap();
        carry.set_carry_state(true);
        let first = probs(&mut carry);
        let total: f32 = first.iter().sum();
        assert!((total - 1.0).abs() < 1e-5, "{first:?}");
        // The same input from the carried state gives other probabilities;
        // without carrying, the same as the first call.
        assert_ne!(probs(&mut carry), first);
        let mut fresh = net.new_context(&*be, 1).unwrap();
        assert_eq!(probs(&mut fresh), first);
        assert_eq!(probs(&mut fresh), first);
    }

    #[test]
    fn both_workloads_run_twice() {
        for w in [
            SeqNet::RowLstmStep { batch: 4 },
            SeqNet::CharSampleStep { vocab: 9 },
        ] {
            let mut call = w.prepare(verjus_native::backend()).unwrap();
            call().and_then(|()| call()).unwrap();
        }
    }
}

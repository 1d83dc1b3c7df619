//! Embedding: a table of learned vectors looked up by token id, one per
//! frame (or example), as `torch.nn.Embedding` (`weight [vocab, dim]`).
//!
//! Forward is `ops::index_select` of the table's rows by the int32 ids, which
//! for a sequence writes the vectors straight into the time-major layout the
//! ids come in. Backward is the gather's gradient, a scatter-add
//! (`ops::index_add`) of the rows of `dy` into a zeroed `dW`: a token seen
//! several times in the batch sums its contributions. Ids are never
//! differentiated.

use super::{expect_inputs, fmt_shape, Backward, Built, Forward, Layer, ParamSpec};
use crate::descriptor::Init;
use verjus_core::ops;
use verjus_core::{Backend, Error, Result};

#[derive(Debug)]
pub(crate) struct Embedding;

/// `sqrt(3)`: uniform weights of unit variance, as PyTorch's `N(0, 1)` has.
const UNIT_VARIANCE_BOUND: f32 = 1.732_050_8;

pub(crate) fn build(path: &str, inputs: &[Vec<usize>], vocab: usize, dim: usize) -> Result<Built> {
    expect_inputs(path, "Embedding", inputs, 1)?;
    if !inputs[0].is_empty() {
        return Err(Error::definition(
            path,
            format!(
                "Embedding expects one token id per frame (unit shape []), got {}",
                fmt_shape(&inputs[0])
            ),
        ));
    }
    if vocab == 0 || dim == 0 {
        return Err(Error::definition(
            path,
            format!("Embedding needs positive sizes, got vocab = {vocab}, dim = {dim}"),
        ));
    }
    Ok(Built {
        layer: Box::new(Embedding),
        output: vec![dim],
        params: vec![ParamSpec {
            role: "weight".into(),
            shape: vec![vocab, dim],
            init: Init::Uniform {
                bound: UNIT_VARIANCE_BOUND,
            },
        }],
    })
}

impl Layer for Embedding {
    fn forward(&self, be: &dyn Backend, io: Forward<'_>) -> Result<()> {
        ops::index_select(be, io.params.get(0)?, 0, io.x.get(0)?, io.y)
    }

    fn backward(&self, be: &dyn Backend, mut io: Backward<'_>) -> Result<()> {
        let dw = io.dparams.get(0)?;
        ops::fill(be, dw, 0.0)?;
        ops::index_add(be, io.dy, 0, io.x.get(0)?, dw)
    }
}

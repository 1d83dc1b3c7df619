//! Checks of dropout and its backward: the mask must be exactly the shared
//! Philox mask of `(seed, offset)`, including offsets that wrap around `u64`.
//! Tolerance: `Tolerance::ELEMENTWISE` (`x * scale` versus `x / (1 - p)`).

use crate::compare::{close, every_case, Tolerance};
use crate::inputs::uniform;
use crate::reference::dropout::dropout as reference;
use crate::transfer::{get, put, zeros, Context};
use verjus_core::{ops, Backend, DType};

const SHAPES: [&[usize]; 6] = [&[0], &[1], &[7], &[17, 3], &[65], &[33, 31]];
const PROBABILITIES: [f32; 4] = [0.0, 0.1, 0.5, 0.9];
const STREAMS: [(u64, u64); 3] = [(0, 0), (42, 7), (u64::MAX, u64::MAX - 1)];

fn run(be: &dyn Backend, backward: bool) -> Result<(), String> {
    let name = if backward {
        "dropout_backward"
    } else {
        "dropout"
    };
    let cases = SHAPES.iter().flat_map(|&s| {
        PROBABILITIES
            .iter()
            .flat_map(move |&p| STREAMS.iter().map(move |&st| (s, p, st)))
    });
    every_case(cases, |(dims, p, (seed, offset))| {
        let what = format!("{name} {dims:?} p={p} seed {seed} offset {offset}");
        let x = uniform(seed ^ 11, dims, -2.0, 2.0);
        let tx = put(be, &what, &x)?;
        let mut ty = zeros(be, &what, dims, DType::F32)?;
        if backward {
            ops::dropout_backward(be, &tx, p, seed, offset, &mut ty).context(&what)?;
        } else {
            ops::dropout(be, &tx, p, seed, offset, &mut ty).context(&what)?;
        }
        let expected = reference(&x, p, seed, offset);
        close(
            &what,
            dims,
            &expected.data,
            &get(be, &what, &ty)?,
            Tolerance::ELEMENTWISE,
        )
    })
}

/// `ops::dropout`.
pub fn dropout(be: &dyn Backend) -> Result<(), String> {
    run(be, false)
}

/// `ops::dropout_backward`: the forward mask applied to `dy`.
pub fn dropout_backward(be: &dyn Backend) -> Result<(), String> {
    run(be, true)
}

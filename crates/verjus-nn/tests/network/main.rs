//! Integration tests of verjus-nn on the native backend: gradients against
//! finite differences for every layer, gradient sums at fan-outs and shared
//! parameters, batch sizes, dropout modes, losses, definition errors, layers
//! that feed no output, the example networks, checkpoints and fuzzing of every
//! loader, named outputs and the swaps that match them. (One test binary, so
//! the helpers compile once.)

mod checkpoint;
mod common;
mod data_parallel;
mod dead_layers;
mod dropout;
mod errors;
mod examples;
mod fusion;
mod fuzz;
mod gradcheck;
mod interface;
mod losses;
mod precision;
mod runner;
mod sequences;
mod sharing;
mod transfer;
mod variable_batch;

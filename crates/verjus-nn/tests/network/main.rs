//! Integration tests of verjus-nn on the native backend: gradients against
//! finite differences for every layer, gradient sums at fan-outs and shared
//! parameters, batch sizes, dropout modes, losses, definition errors and the
//! example networks. (One test binary, so the helpers compile once.)

mod common;
mod dropout;
mod errors;
mod examples;
mod gradcheck;
mod losses;
mod runner;
mod sharing;
mod variable_batch;

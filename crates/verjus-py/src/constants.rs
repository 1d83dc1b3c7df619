//! Facts the Python package shares with the Rust crates, exported from here
//! so that each is stated once: the names of a run folder's files and the cap
//! on the JSON files read from one.

use pyo3::prelude::*;
use verjus::nn::checkpoint::{
    DEFINITION_FILE, MANIFEST_FILE, MAX_JSON_BYTES, SOLVER_FILE, TRAINER_FILE, WEIGHTS_FILE,
};
use verjus::nn::data::VOCAB_FILE;

/// Adds the constants to the module `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for (name, value) in [
        ("DEFINITION_FILE", DEFINITION_FILE),
        ("WEIGHTS_FILE", WEIGHTS_FILE),
        ("MANIFEST_FILE", MANIFEST_FILE),
        ("TRAINER_FILE", TRAINER_FILE),
        ("SOLVER_FILE", SOLVER_FILE),
        ("VOCAB_FILE", VOCAB_FILE),
    ] {
        m.add(name, value)?;
    }
    m.add("MAX_JSON_BYTES", MAX_JSON_BYTES)
}

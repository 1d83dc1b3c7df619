//! The backend conformance suite (`verjus-conformance`) on CUDA device 0.
//!
//! Without a usable GPU every test prints `skipped: <what is missing>` and
//! passes; with `VERJUS_REQUIRE_CUDA=1` (the GPU machine, see docs/gpu.md) a
//! missing GPU fails every test instead.

verjus_conformance::conformance_suite_or_skip!(
    verjus_cuda::backend(0).map_err(|e| e.to_string()),
    "VERJUS_REQUIRE_CUDA"
);

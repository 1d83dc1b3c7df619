//! The backend conformance suite (`verjus-conformance`) on CUDA device 0.
//!
//! The tests are `#[ignore]`d, so a machine without a GPU reports them as
//! ignored rather than passed; on a GPU machine run them with
//! `--include-ignored` and `VERJUS_REQUIRE_CUDA=1` (scripts/gpu_run.sh does),
//! where a missing GPU fails every test instead of skipping it.

verjus_conformance::conformance_suite_or_skip!(
    verjus_cuda::backend(0).map_err(|e| e.to_string()),
    "VERJUS_REQUIRE_CUDA",
    "needs a CUDA GPU: run with --include-ignored (docs/gpu.md)"
);

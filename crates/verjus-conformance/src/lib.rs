//! verjus-conformance: the suite every verjus backend must pass.
//!
//! A backend is only as trustworthy as the tests that pin down its semantics, and
//! the CPU and CUDA backends must agree with each other and with the documented
//! meaning of each op. This crate holds that meaning in executable form:
//!
//! - [`reference`](mod@reference): naive, obviously-correct implementations of every op in
//!   `verjus_core::ops` on plain host arrays (validated by hand-worked unit tests);
//! - [`checks`]: one function per op that runs the backend through the validated
//!   `ops` API on awkward shapes (1, primes, non-multiples of SIMD widths, empty
//!   batches) and compares with the reference under a documented [`Tolerance`];
//! - [`gradcheck`]: every backward op against central finite differences of its
//!   forward op, computed through the backend itself;
//! - [`errors`]: invalid shapes, dtypes, indices, axes, arguments and devices give
//!   an error naming the op, never a panic;
//! - [`proptests`]: random (mostly invalid) shapes for every op never panic.
//!
//! A backend crate runs everything with one line in a test file:
//!
//! ```ignore
//! verjus_conformance::conformance_suite!(verjus_native::backend());
//! ```
//!
//! `cargo test -p verjus-native --test conformance` then reports one test per
//! check. `cargo test -p verjus-conformance` tests the suite itself: the
//! references against hand-worked examples, and (in `tests/reference_backend.rs`)
//! a backend made of the references, which must pass every check, and copies of
//! it with planted bugs, which must fail the checks meant to catch them.

pub mod array;
pub mod checks;
pub mod compare;
pub mod errors;
pub mod gradcheck;
pub mod inputs;
pub mod proptests;
pub mod reference;
pub mod transfer;

pub use compare::Tolerance;
pub use verjus_core::BackendRef;

/// Expands, in a backend's test file, to one `#[test]` per check, each named
/// after what it checks (`gemm`, `conv2d_backward_filter`, `gradcheck_conv2d`,
/// `errors_wrong_shapes`, `no_panic_on_any_shape`, ...). The argument is an
/// expression that makes the backend (a [`BackendRef`]); every test evaluates it.
///
/// ```ignore
/// verjus_conformance::conformance_suite!(verjus_native::backend());
/// ```
#[macro_export]
macro_rules! conformance_suite {
    ($make_backend:expr) => {
        $crate::__conformance_list! { $crate::__conformance_tests; ($make_backend) }
    };
}

/// Like [`conformance_suite!`] for a backend that may be absent: the first
/// argument is an expression of type `Result<BackendRef, String>`, the third
/// the reason the tests are `#[ignore]`d by default. Ignored tests are reported
/// as ignored (with the reason), never counted as passes on a machine without
/// the device; run them with `--include-ignored` where it is present. Run that
/// way without the device, each test prints `skipped: {reason}` to stderr and
/// returns, unless the environment variable named as the second argument is
/// `1`, in which case it fails (so a machine that must have the device cannot
/// skip silently).
///
/// ```ignore
/// verjus_conformance::conformance_suite_or_skip!(
///     verjus_cuda::backend(0).map_err(|e| e.to_string()),
///     "VERJUS_REQUIRE_CUDA",
///     "needs a CUDA GPU: run with --include-ignored (docs/gpu.md)"
/// );
/// ```
#[macro_export]
macro_rules! conformance_suite_or_skip {
    ($try_backend:expr, $require_var:literal, $ignore_reason:literal) => {
        $crate::__conformance_list! {
            $crate::__conformance_tests_or_skip; ($try_backend, $require_var, $ignore_reason)
        }
    };
}

/// The list of checks, handed to `$emit` with the backend expression.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_list {
    ($emit:path; $args:tt) => {
        $emit! {
            $args;
            fill => $crate::checks::fill,
            cast => $crate::checks::cast,
            copy => $crate::checks::copy,
            random_uniform => $crate::checks::random_uniform,
            random_normal => $crate::checks::random_normal,
            gemm => $crate::checks::gemm,
            gemm_reduced_precision => $crate::checks::gemm_reduced_precision,
            unary => $crate::checks::unary,
            relu_keeps_nan => $crate::checks::relu_keeps_nan,
            unary_backward => $crate::checks::unary_backward,
            binary => $crate::checks::binary,
            binary_backward => $crate::checks::binary_backward,
            reduce => $crate::checks::reduce,
            reduce_backward => $crate::checks::reduce_backward,
            argmax => $crate::checks::argmax,
            softmax => $crate::checks::softmax,
            log_softmax => $crate::checks::log_softmax,
            softmax_backward => $crate::checks::softmax_backward,
            log_softmax_backward => $crate::checks::log_softmax_backward,
            conv2d => $crate::checks::conv2d,
            conv2d_backward_data => $crate::checks::conv2d_backward_data,
            conv2d_backward_filter => $crate::checks::conv2d_backward_filter,
            conv2d_backward_bias => $crate::checks::conv2d_backward_bias,
            max_pool2d => $crate::checks::max_pool2d,
            avg_pool2d => $crate::checks::avg_pool2d,
            max_pool2d_backward => $crate::checks::max_pool2d_backward,
            avg_pool2d_backward => $crate::checks::avg_pool2d_backward,
            dropout => $crate::checks::dropout,
            dropout_backward => $crate::checks::dropout_backward,
            index_select => $crate::checks::index_select,
            index_add => $crate::checks::index_add,
            concat => $crate::checks::concat,
            split => $crate::checks::split,
            permute => $crate::checks::permute,
            select => $crate::checks::select,
            sgd_update => $crate::checks::sgd_update,
            adam_update => $crate::checks::adam_update,
            nadam_update => $crate::checks::nadam_update,
            softmax_cross_entropy => $crate::checks::softmax_cross_entropy,
            ctc_loss => $crate::checks::ctc_loss,
            lstm_sequence => $crate::checks::lstm_sequence,
            lstm_sequence_backward => $crate::checks::lstm_sequence_backward,
            lstm_cell => $crate::checks::lstm_cell,
            lstm_cell_backward => $crate::checks::lstm_cell_backward,
            lstm_lengths_equal_sequences_alone => $crate::checks::lstm_lengths_equal_sequences_alone,
            lstm_backward_twice => $crate::checks::lstm_backward_twice,
            attention => $crate::checks::attention,
            attention_backward => $crate::checks::attention_backward,
            layer_norm => $crate::checks::layer_norm,
            depthwise_conv1d => $crate::checks::depthwise_conv1d,
            depthwise_conv1d_backward => $crate::checks::depthwise_conv1d_backward,
            layer_norm_backward => $crate::checks::layer_norm_backward,
            gradcheck_unary => $crate::gradcheck::unary,
            gradcheck_binary => $crate::gradcheck::binary,
            gradcheck_reduce => $crate::gradcheck::reduce,
            gradcheck_softmax => $crate::gradcheck::softmax,
            gradcheck_log_softmax => $crate::gradcheck::log_softmax,
            gradcheck_conv2d => $crate::gradcheck::conv2d,
            gradcheck_max_pool2d => $crate::gradcheck::max_pool2d,
            gradcheck_avg_pool2d => $crate::gradcheck::avg_pool2d,
            gradcheck_dropout => $crate::gradcheck::dropout,
            gradcheck_index_select => $crate::gradcheck::index_select,
            gradcheck_concat => $crate::gradcheck::concat,
            gradcheck_permute => $crate::gradcheck::permute,
            gradcheck_softmax_cross_entropy => $crate::gradcheck::softmax_cross_entropy,
            gradcheck_ctc_loss => $crate::gradcheck::ctc_loss,
            gradcheck_gemm => $crate::gradcheck::gemm,
            gradcheck_lstm_sequence => $crate::gradcheck::lstm_sequence,
            gradcheck_lstm_cell => $crate::gradcheck::lstm_cell,
            gradcheck_attention => $crate::gradcheck::attention,
            gradcheck_layer_norm => $crate::gradcheck::layer_norm,
            gradcheck_depthwise_conv1d => $crate::gradcheck::depthwise_conv1d,
            errors_wrong_shapes => $crate::errors::wrong_shapes,
            errors_wrong_dtypes => $crate::errors::wrong_dtypes,
            errors_out_of_range_indices => $crate::errors::out_of_range_indices,
            errors_bad_axes => $crate::errors::bad_axes,
            errors_invalid_arguments => $crate::errors::invalid_arguments,
            errors_foreign_devices => $crate::errors::foreign_devices,
            errors_ctc => $crate::errors::ctc,
            errors_lstm => $crate::errors::lstm,
            errors_attention => $crate::errors::attention,
            errors_layer_norm => $crate::errors::layer_norm,
            errors_depthwise => $crate::errors::depthwise,
            no_panic_on_any_shape => $crate::proptests::no_panic_on_any_shape,
        }
    };
}

/// The expansion of [`conformance_suite!`]: one test per `name => check`.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    (($make_backend:expr); $($name:ident => $check:path,)*) => {
        $(
            #[test]
            fn $name() {
                let backend: $crate::BackendRef = $make_backend;
                $crate::expect_pass(stringify!($name), &*backend, $check(&*backend));
            }
        )*
    };
}

/// The expansion of [`conformance_suite_or_skip!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests_or_skip {
    (($try_backend:expr, $require_var:literal, $ignore_reason:literal); $($name:ident => $check:path,)*) => {
        $(
            #[test]
            #[ignore = $ignore_reason]
            fn $name() {
                let made: Result<$crate::BackendRef, String> = $try_backend;
                let Some(backend) = $crate::backend_or_skip(stringify!($name), made, $require_var)
                else {
                    return;
                };
                $crate::expect_pass(stringify!($name), &*backend, $check(&*backend));
            }
        )*
    };
}

/// The backend, or `None` after printing why the test is skipped; panics
/// instead when `require_var` is set to `1` in the environment.
pub fn backend_or_skip(
    test: &str,
    made: Result<BackendRef, String>,
    require_var: &str,
) -> Option<BackendRef> {
    match made {
        Ok(be) => Some(be),
        Err(reason) if std::env::var(require_var).is_ok_and(|v| v == "1") => {
            panic!("{test}: the backend is required ({require_var}=1) but unavailable: {reason}")
        }
        Err(reason) => {
            // Written to the process' stderr directly: the test harness
            // captures `eprintln!` of passing tests, and a skip must be seen.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{test}: skipped: {reason}");
            None
        }
    }
}

/// Panics with the report when a check failed; the macro's tests call this.
pub fn expect_pass(check: &str, backend: &dyn verjus_core::Backend, outcome: Result<(), String>) {
    if let Err(report) = outcome {
        panic!("{check} failed on the {} backend: {report}", backend.name());
    }
}

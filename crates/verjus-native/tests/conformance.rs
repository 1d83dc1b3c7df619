//! The backend conformance suite (`verjus-conformance`) on the native backend:
//! one test per op, gradient check, error class and the no-panic property.

verjus_conformance::conformance_suite!(verjus_native::backend());

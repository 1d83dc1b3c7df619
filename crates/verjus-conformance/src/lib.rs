//! conformance

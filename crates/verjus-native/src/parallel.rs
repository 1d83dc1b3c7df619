//! STUB: parallel loop helpers.

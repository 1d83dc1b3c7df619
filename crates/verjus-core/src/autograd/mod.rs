//! Eager reverse-mode autograd (filled in below).

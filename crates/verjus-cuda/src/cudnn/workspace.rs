//! The one device workspace of a cuDNN handle.
//!
//! Every cuDNN call of a device runs on its one stream, so no two calls use
//! the workspace at once and one buffer, grown to the largest request, serves
//! them all (the convolutions now, the RNN's temporary space later; an RNN's
//! reserve space lives from forward to backward and so belongs to the caller).
//! An algorithm search borrows a large buffer and gives it back to the
//! allocator's cache at once ([`Workspace::release`]).

use super::raw::Scratch;
use crate::alloc::{Allocator, Block};
use std::sync::Arc;
use verjus_core::Result;

#[derive(Debug)]
pub(super) struct Workspace {
    alloc: Arc<Allocator>,
    block: Option<Block>,
    /// The block's size (0 without a block).
    held: usize,
}

/// The size to allocate when `wanted` bytes are asked of a buffer of `held`
/// bytes (0: none), or `None` when the buffer serves: it grows only, and is
/// never empty, so its address is always a real allocation.
fn grown_size(held: usize, wanted: usize) -> Option<usize> {
    (held == 0 || wanted > held).then(|| wanted.max(1))
}

impl Workspace {
    pub fn new(alloc: Arc<Allocator>) -> Self {
        Workspace {
            alloc,
            block: None,
            held: 0,
        }
    }

    /// `bytes` of scratch, growing the buffer when it is smaller (the old block
    /// goes back to the allocator's cache first).
    pub fn get(&mut self, op: &str, bytes: usize) -> Result<Scratch> {
        if let Some(size) = grown_size(self.held, bytes) {
            self.release();
            self.block = Some(self.alloc.alloc(op, size)?);
            self.held = size;
        }
        Ok(Scratch {
            ptr: self.block.as_ref().map_or(0, Block::ptr),
            bytes,
        })
    }

    /// Gives the buffer back to the allocator's cache.
    pub fn release(&mut self) {
        self.block = None;
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::grown_size;

    #[test]
    fn the_workspace_grows_only() {
        assert_eq!(grown_size(0, 100), Some(100));
        assert_eq!(grown_size(100, 100), None);
        assert_eq!(grown_size(100, 40), None);
        assert_eq!(grown_size(100, 0), None);
        assert_eq!(grown_size(100, 101), Some(101));
    }

    #[test]
    fn an_empty_request_still_gets_a_real_allocation() {
        assert_eq!(grown_size(0, 0), Some(1));
    }
}

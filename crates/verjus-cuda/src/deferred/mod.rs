//! Deferred range checks of indices and labels: no wait in the op.
//!
//! Validation cannot see tensor contents, so index_select, index_add and
//! softmax_cross_entropy check their indices / labels on the device. Reading
//! the result back in the op would make the host wait for the GPU several
//! times per training step. Instead each check is two launches that write a
//! small device record ([`pending`] has its layout): `check_indices_*` puts
//! the smallest bad position into a scratch word (`atomicMin`), then one thread
//! of `commit_check_*` moves it, with the check's number and the bad value, into
//! the record unless an earlier check already failed (the stream orders the
//! launches, so the first failure wins) and resets the scratch word. The op's
//! own kernel skips a bad index, so nothing is read or written out of bounds.
//!
//! The host keeps the list of checks launched since the last read. Every place
//! the host waits for the stream anyway (downloads, `synchronize`, the length
//! reads of the LSTM and CTC) then reads the record too ([`Deferred::settle`]):
//! one more tiny copy, only when checks are pending. A failure becomes the op's
//! error naming the value, its position and the axis length or class count,
//! and the record is cleared, so the backend stays usable.

mod pending;

use crate::alloc::Block;
use crate::device::arg;
use crate::kernels::Module;
use crate::staging::Staging;
use crate::storage::ptr;
use crate::CudaBackend;
pub(crate) use pending::Range;
use pending::{Check, Pending, CLEAR, RECORD_WORDS};
use std::sync::{Mutex, MutexGuard};
use verjus_core::{DType, Result, Tensor};

/// The device record and the pending checks of one device.
#[derive(Debug)]
pub(crate) struct Deferred {
    record: Block,
    /// Held while a check is launched and while the record is read and reset,
    /// so a check of another thread is either in the read or after the reset.
    pending: Mutex<Pending>,
}

/// The record as bytes.
fn clear_bytes() -> Vec<u8> {
    CLEAR.iter().flat_map(|w| w.to_le_bytes()).collect()
}

impl Deferred {
    /// Takes `record` (at least [`RECORD_WORDS`] words) and queues its
    /// initialisation.
    pub fn new(op: &str, record: Block, staging: &Staging) -> Result<Self> {
        staging.upload(op, &clear_bytes(), record.ptr())?;
        Ok(Deferred {
            record,
            pending: Mutex::new(Pending::default()),
        })
    }

    pub const BYTES: usize = 8 * RECORD_WORDS;

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues the check that every value of `indices` lies in `range` for `op`;
    /// does not wait (except once per `MAX_PENDING` checks without a read).
    pub fn check(
        &self,
        be: &CudaBackend,
        op: &'static str,
        indices: &Tensor,
        range: Range,
    ) -> Result<()> {
        let count = indices.numel();
        if count == 0 {
            return Ok(());
        }
        let mut pending = self.lock();
        if pending.is_full() {
            self.settle_locked(&be.staging, op, &mut pending)?;
        }
        let number = pending.push(Check { op, range });
        let (check, commit) = match indices.dtype() {
            DType::I64 => ("check_indices_i64", "commit_check_i64"),
            _ => ("check_indices_i32", "commit_check_i32"),
        };
        let (ip, rp) = (ptr(op, indices)?, self.record.ptr());
        let (c, bound) = (count as i64, range.bound() as i64);
        be.launch_n(
            op,
            Module::Index,
            check,
            count,
            &mut [arg(&ip), arg(&c), arg(&bound), arg(&rp)],
        )?;
        be.launch(
            op,
            Module::Index,
            commit,
            1,
            &mut [arg(&ip), arg(&c), arg(&number), arg(&rp)],
        )
    }

    /// After a wait of `reader`: reads the record if checks are pending and
    /// returns the first failure as an error (clearing the record).
    pub fn settle(&self, staging: &Staging, reader: &str) -> Result<()> {
        let mut pending = self.lock();
        if pending.is_empty() {
            return Ok(());
        }
        self.settle_locked(staging, reader, &mut pending)
    }

    fn settle_locked(&self, staging: &Staging, reader: &str, pending: &mut Pending) -> Result<()> {
        let mut bytes = [0u8; Self::BYTES];
        staging.download(reader, self.record.ptr(), &mut bytes)?;
        let mut record = [0u64; RECORD_WORDS];
        for (w, b) in record.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_le_bytes(b.try_into().unwrap_or_default());
        }
        match pending.settle(&record, reader) {
            None => Ok(()),
            Some(e) => {
                staging.upload(reader, &clear_bytes(), self.record.ptr())?;
                Err(e)
            }
        }
    }
}

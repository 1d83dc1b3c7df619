//! Watching a checkpoint folder and swapping in each new version.
//!
//! [`Runner::watch`] starts a thread that polls the folder every interval.
//! Polling (rather than inotify and friends) works the same on every system
//! and file system, and a checkpoint changes rarely. The thread compares a
//! fingerprint of the folder (the manifest's bytes, which hold the size and
//! CRC-32 of every file, and the sizes and modification times of the network
//! files for folders without a manifest); when it changes, the folder is
//! loaded and swapped in with [`Runner::swap_from`], so the same checks apply.
//! A load that fails is reported through the callback and the old network
//! keeps serving. A folder caught in the middle of a save fails its manifest
//! check and is read again on the next poll, when the fingerprint has moved on.
//!
//! The [`Watcher`] handle stops the thread when dropped (waking it at once).

use crate::checkpoint::{DEFINITION_FILE, MANIFEST_FILE, WEIGHTS_FILE};
use crate::runner::Runner;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};
use verjus_core::{Error, Result};

/// What a watcher did after the folder changed.
#[derive(Debug)]
pub enum WatchEvent {
    /// The new version serves now, as this generation.
    Swapped { generation: u64 },
    /// The new version was refused (it does not load or does not fit); the
    /// old network keeps serving.
    Refused { error: Error },
}

/// Stops the watching thread when dropped. See the module docs.
#[derive(Debug)]
pub struct Watcher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Asks the thread to stop without waiting for it (it exits at its next
    /// wake-up, after a swap in progress). For callers that must not block,
    /// such as a callback's owner holding a lock the callback needs.
    pub fn detach(mut self) {
        self.signal();
        self.thread = None;
    }

    fn signal(&self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.signal();
        if let Some(thread) = self.thread.take() {
            // Dropped by its own callback (a callback that stops the watching):
            // the thread cannot wait for itself; it exits when the callback returns.
            if thread.thread().id() == std::thread::current().id() {
                return;
            }
            // A panicking callback ended the thread; there is nothing to report.
            let _ = thread.join();
        }
    }
}

/// What identifies one version of the folder.
type Fingerprint = (Option<Vec<u8>>, Vec<Option<(u64, Option<SystemTime>)>>);

fn fingerprint(folder: &Path) -> Fingerprint {
    let manifest = std::fs::read(folder.join(MANIFEST_FILE)).ok();
    let files = [DEFINITION_FILE, WEIGHTS_FILE]
        .iter()
        .map(|f| {
            let meta = std::fs::metadata(folder.join(f)).ok()?;
            Some((meta.len(), meta.modified().ok()))
        })
        .collect();
    (manifest, files)
}

impl Runner {
    /// Polls `folder` every `interval` and swaps in each new version of it,
    /// calling `on_event` after each attempt (see the module docs). The
    /// version present now is taken as already served. Stops when the
    /// returned [`Watcher`] is dropped.
    pub fn watch(
        self: &Arc<Self>,
        folder: impl Into<PathBuf>,
        interval: Duration,
        mut on_event: impl FnMut(WatchEvent) + Send + 'static,
    ) -> Result<Watcher> {
        let folder = folder.into();
        if interval.is_zero() {
            return Err(Error::invalid("Runner::watch", "the interval must be > 0"));
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let runner = Arc::clone(self);
        let flag = Arc::clone(&stop);
        // Taken here, not in the thread: a save right after `watch` returns
        // must count as new (taken in the thread, it raced the caller's save
        // and could become the baseline, never swapped in).
        let mut seen = fingerprint(&folder);
        let thread = std::thread::Builder::new()
            .name("verjus-watch".into())
            .spawn(move || {
                let (stopped, wake) = &*flag;
                let mut guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    guard = wake
                        .wait_timeout(guard, interval)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    if *guard {
                        return;
                    }
                    let now = fingerprint(&folder);
                    if now == seen {
                        continue;
                    }
                    drop(guard);
                    let event = match runner.swap_from(&folder) {
                        Ok(generation) => WatchEvent::Swapped { generation },
                        Err(error) => WatchEvent::Refused { error },
                    };
                    // A save that landed during the load is picked up next time.
                    seen = now;
                    on_event(event);
                    guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                }
            })
            .map_err(|e| Error::invalid("Runner::watch", format!("cannot start a thread: {e}")))?;
        Ok(Watcher {
            stop,
            thread: Some(thread),
        })
    }
}

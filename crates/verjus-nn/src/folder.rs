//! Replacing a whole folder of files at once, so that a crash at any moment
//! leaves the old folder or the new one, never a mix.
//!
//! A checkpoint is several files (definition, weights, solver state, RNG
//! state, a manifest) that only make sense together; renaming each file over
//! its old version would leave a window where the weights are new and the
//! solver state old. [`replace_folder`] therefore swaps whole folders:
//!
//! 0. the writer takes the lock file `.{name}.lock` beside the target (an
//!    advisory `flock`, held for the save and released even if the process
//!    dies): a second save to the same folder while one runs is an error
//!    naming the folder, instead of the two deleting each other's files;
//! 1. stale temporary folders of earlier, interrupted saves
//!    (`.{name}.ckpt-*` beside the target) are removed; under the lock, no
//!    live save owns one;
//! 2. the new files are written into a fresh sibling folder
//!    `.{name}.ckpt-{pid}-{n}`, each fsynced, then the folder itself;
//! 3. files in the target that are not the checkpoint's own (a run's
//!    `metrics.jsonl`, `curves.png`) are hard-linked (copied where links fail)
//!    into the new folder, so they survive the swap;
//! 4. on Linux, `renameat2(RENAME_EXCHANGE)` swaps the two folders in one
//!    atomic step; the parent folder is fsynced, and the old checkpoint (now
//!    under the temporary name) is deleted. Where the exchange is unsupported
//!    (other systems, some file systems), the old folder is renamed aside and
//!    the new one renamed into place: a crash between the two renames leaves
//!    the target missing and both versions complete beside it.
//!
//! A reader never sees a half-written file, but one that opens the files one
//! by one may straddle a swap; the checkpoint's manifest (sizes and CRC-32 of
//! every file, see `checkpoint`) catches that, and the reader retries. Readers
//! take no lock. The lock file stays (removing it would let a third writer lock
//! a fresh file while the second still holds the old one).

use crate::atomic::link_target;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use verjus_core::{Error, Result};

/// Distinguishes the temporary folders of saves in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Replaces the folder `target` by one holding exactly `files` (name, bytes)
/// plus the files of the old folder whose names are not in `own` (see the
/// module docs). Errors are [`Error::File`] naming the folder. A symbolic link
/// (`latest -> run-7`) stays a link: the folder at the end of its chain is
/// replaced (or created, for a dangling link), as single files are written.
pub(crate) fn replace_folder(target: &Path, files: &[(&str, &[u8])], own: &[&str]) -> Result<()> {
    let target = &link_target(target)?;
    let err = |what: String, e: io::Error| Error::file(target, format!("cannot {what}: {e}"));
    let name = target
        .file_name()
        .ok_or_else(|| Error::file(target, "not a folder name"))?
        .to_string_lossy()
        .into_owned();
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|e| err(format!("create {}", parent.display()), e))?;
    if target.exists() && !target.is_dir() {
        return Err(Error::file(target, "exists and is not a folder"));
    }
    let _lock = lock_for_writing(target, &parent.join(format!(".{name}.lock")))?;
    let prefix = format!(".{name}.ckpt-");
    remove_stale(&parent, &prefix);
    let temp = parent.join(format!(
        "{prefix}{}-{}",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let result = fill(&temp, target, files, own).and_then(|()| swap_in(&temp, target, &parent));
    // Best effort: after a successful exchange `temp` holds the old folder;
    // after an error, the partial new one. Either way it goes.
    let _ = fs::remove_dir_all(&temp);
    result.map_err(|(what, e)| err(what, e))
}

type Step = std::result::Result<(), (String, io::Error)>;

/// Writes `files` into the new folder `temp` and carries over the target's
/// other files; everything is fsynced.
fn fill(temp: &Path, target: &Path, files: &[(&str, &[u8])], own: &[&str]) -> Step {
    let at = |what: &str, p: &Path| format!("{what} {}", p.display());
    fs::create_dir(temp).map_err(|e| (at("create", temp), e))?;
    for (file, bytes) in files {
        let path = temp.join(file);
        let mut f = File::create(&path).map_err(|e| (at("create", &path), e))?;
        f.write_all(bytes).map_err(|e| (at("write", &path), e))?;
        f.sync_all().map_err(|e| (at("flush", &path), e))?;
    }
    if target.is_dir() {
        carry_over(target, temp, own).map_err(|e| (at("carry over the files of", target), e))?;
        keep_mode(target, temp).map_err(|e| (at("keep the permissions of", target), e))?;
    }
    sync_dir(temp).map_err(|e| (at("flush", temp), e))
}

/// Links (or copies) every entry of `from` not named in `own` into `to`.
fn carry_over(from: &Path, to: &Path, own: &[&str]) -> io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if own.iter().any(|o| name == **o) {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            fs::create_dir(&dst)?;
            carry_over(&src, &dst, &[])?;
            keep_mode(&src, &dst)?;
        } else if fs::hard_link(&src, &dst).is_err() {
            fs::copy(&src, &dst)?;
            File::open(&dst)?.sync_all()?;
        }
    }
    Ok(())
}

/// Gives the folder `to` the permissions of `from`: a new folder gets the
/// default mode, which would open a private (0700) run folder to everyone.
fn keep_mode(from: &Path, to: &Path) -> io::Result<()> {
    fs::set_permissions(to, fs::metadata(from)?.permissions())
}

/// Puts the complete folder `temp` in place of `target`; afterwards `temp`
/// names the old folder, if there was one.
fn swap_in(temp: &Path, target: &Path, parent: &Path) -> Step {
    let flush = |e| (format!("flush {}", parent.display()), e);
    if !target.exists() {
        fs::rename(temp, target).map_err(|e| (format!("rename {}", temp.display()), e))?;
        return sync_dir(parent).map_err(flush);
    }
    if !exchange(temp, target).map_err(|e| (format!("exchange {}", temp.display()), e))? {
        let aside = temp.with_extension("old");
        fs::rename(target, &aside).map_err(|e| ("move the old folder aside".into(), e))?;
        fs::rename(temp, target).map_err(|e| (format!("rename {}", temp.display()), e))?;
        fs::rename(&aside, temp).map_err(|e| ("rename the old folder".into(), e))?;
    }
    sync_dir(parent).map_err(flush)
}

/// Swaps two folders atomically; `Ok(false)` where the system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Opens (creating it) and locks the lock file `path` of the folder `target`;
/// the lock is released when the returned file is dropped.
fn lock_for_writing(target: &Path, path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| {
            Error::file(
                target,
                format!("cannot open the lock file {}: {e}", path.display()),
            )
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(Error::file(
            target,
            format!(
                "another save to this folder is in progress (it holds the lock file {}); \
                 one writer per folder at a time",
                path.display()
            ),
        )),
        // A file system without working locks (ENOLCK on some NFS mounts,
        // EOPNOTSUPP on some FUSE ones): save unguarded, as before locks
        // existed, rather than refuse every save there.
        Err(TryLockError::Error(_)) => Ok(file),
    }
}

/// Removes the temporary folders of interrupted saves (best effort); called
/// under the folder's lock, so none of them belongs to a running save.
fn remove_stale(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Flushes a folder's entries to disk; a no-op where folders cannot be opened.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut all: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        all.sort();
        all
    }

    #[test]
    fn replaces_the_folder_and_keeps_foreign_files() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("run");
        replace_folder(&target, &[("a", b"1"), ("b", b"2")], &["a", "b"]).unwrap();
        fs::write(target.join("metrics.jsonl"), "{}\n").unwrap();
        // A stale temporary folder of a killed save.
        fs::create_dir(root.path().join(".run.ckpt-1-1")).unwrap();
        replace_folder(&target, &[("a", b"new")], &["a", "b"]).unwrap();
        assert_eq!(names(&target), ["a", "metrics.jsonl"]);
        assert_eq!(fs::read(target.join("a")).unwrap(), b"new");
        assert_eq!(fs::read(target.join("metrics.jsonl")).unwrap(), b"{}\n");
        assert_eq!(names(root.path()), [".run.lock", "run"]);
    }

    #[test]
    fn a_second_writer_is_refused_and_destroys_nothing() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("run");
        replace_folder(&target, &[("a", b"1")], &["a"]).unwrap();
        // Another writer holds the lock and is filling its temporary folder.
        let held = File::open(root.path().join(".run.lock")).unwrap();
        held.lock().unwrap();
        let theirs = root.path().join(".run.ckpt-1-1");
        fs::create_dir(&theirs).unwrap();
        fs::write(theirs.join("a"), "theirs").unwrap();
        let err = replace_folder(&target, &[("a", b"2")], &["a"]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("run") && msg.contains("in progress"), "{msg}");
        assert_eq!(fs::read(target.join("a")).unwrap(), b"1");
        assert_eq!(fs::read(theirs.join("a")).unwrap(), b"theirs");
        // Once they are done (or dead), the next save goes through and clears up.
        drop(held);
        replace_folder(&target, &[("a", b"3")], &["a"]).unwrap();
        assert_eq!(fs::read(target.join("a")).unwrap(), b"3");
        assert_eq!(names(root.path()), [".run.lock", "run"]);
    }

    #[cfg(unix)]
    #[test]
    fn the_folder_and_its_subfolders_keep_their_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("run");
        replace_folder(&target, &[("a", b"1")], &["a"]).unwrap();
        fs::create_dir(target.join("notes")).unwrap();
        fs::write(target.join("notes/secret"), "s").unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for (dir, m) in [(&target, 0o750), (&target.join("notes"), 0o700)] {
            fs::set_permissions(dir, fs::Permissions::from_mode(m)).unwrap();
        }
        replace_folder(&target, &[("a", b"2")], &["a"]).unwrap();
        assert_eq!(mode(&target), 0o750);
        assert_eq!(mode(&target.join("notes")), 0o700);
        assert_eq!(fs::read(target.join("notes/secret")).unwrap(), b"s");
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_a_folder_stays_and_the_folder_it_names_is_replaced() {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        replace_folder(&root.path().join("run-7"), &[("a", b"old")], &["a"]).unwrap();
        symlink("run-7", root.path().join("latest")).unwrap();
        symlink("run-8", root.path().join("next")).unwrap();
        replace_folder(&root.path().join("latest"), &[("a", b"new")], &["a"]).unwrap();
        replace_folder(&root.path().join("next"), &[("a", b"8")], &["a"]).unwrap();
        for (link, folder) in [("latest", "run-7"), ("next", "run-8")] {
            let link = root.path().join(link);
            assert!(link.symlink_metadata().unwrap().is_symlink());
            assert_eq!(fs::read_link(&link).unwrap(), Path::new(folder));
        }
        assert_eq!(fs::read(root.path().join("run-7/a")).unwrap(), b"new");
        assert_eq!(fs::read(root.path().join("run-8/a")).unwrap(), b"8");
    }

    #[test]
    fn a_file_in_the_way_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("ckpt");
        fs::write(&target, "x").unwrap();
        let err = replace_folder(&target, &[("a", b"1")], &["a"]).unwrap_err();
        assert!(err.to_string().contains("ckpt"), "{err}");
        assert_eq!(names(root.path()), ["ckpt"]);
    }
}

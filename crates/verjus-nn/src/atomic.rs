//! Writing a file so that readers see the old contents or the new, never a
//! torn mix.
//!
//! A crash or a full disk in the middle of saving weights must not destroy the
//! previous file. [`write_atomic`] writes a temporary file in the same folder
//! (so the rename stays on one file system), flushes it to disk, renames it over
//! the target and then flushes the folder, so the rename itself survives a
//! power loss.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use verjus_core::{Error, Result};

/// Distinguishes the temporary files of concurrent writers in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` by `bytes` atomically (see the module docs). Errors are
/// [`Error::File`] naming `path`; on error the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::file(path, "not a file name"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = dir.join(temp_name);
    let result = write_then_rename(&temp, path, &dir, bytes);
    if result.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = fs::remove_file(&temp);
    }
    result
}

fn write_then_rename(temp: &Path, path: &Path, dir: &Path, bytes: &[u8]) -> Result<()> {
    let io = |what: &str, e: std::io::Error| Error::file(path, format!("cannot {what}: {e}"));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| io(&format!("create {}", temp.display()), e))?;
    file.write_all(bytes).map_err(|e| io("write", e))?;
    file.sync_all().map_err(|e| io("flush to disk", e))?;
    drop(file);
    fs::rename(temp, path).map_err(|e| io(&format!("rename {} over it", temp.display()), e))?;
    sync_dir(dir).map_err(|e| io(&format!("flush the folder {}", dir.display()), e))
}

/// Flushes a folder's entries (the rename) to disk; a no-op where folders
/// cannot be opened as files.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.bin");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new contents").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new contents");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["w.bin"]);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("w.bin");
        let err = write_atomic(&path, b"x").unwrap_err();
        assert!(matches!(err, Error::File { .. }), "{err}");
        assert!(err.to_string().contains("w.bin"), "{err}");
    }
}

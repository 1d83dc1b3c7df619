//! Writing a file so that readers see the old contents or the new, never a
//! torn mix.
//!
//! A crash or a full disk in the middle of saving weights must not destroy the
//! previous file. [`write_atomic`] writes a temporary file in the same folder
//! (so the rename stays on one file system), flushes it to disk, renames it over
//! the target and then flushes the folder, so the rename itself survives a
//! power loss. Saving through a symbolic link replaces the file the link
//! points to (the link stays), and a replaced file keeps its permissions.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use verjus_core::{Error, Result};

/// Distinguishes the temporary files of concurrent writers in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Links followed before giving up, as the kernel's `ELOOP` limit.
const MAX_LINKS: usize = 40;

/// Replaces `path` by `bytes` atomically (see the module docs). Errors are
/// [`Error::File`] naming `path`; on error the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let target = link_target(path)?;
    let name = target
        .file_name()
        .ok_or_else(|| Error::file(path, "not a file name"))?;
    let dir = match target.parent() {
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
    let result = write_then_rename(&temp, path, &target, &dir, bytes);
    if result.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Where a write to `path` lands: the end of its chain of symbolic links, or
/// `path` itself when it is no link (or does not exist yet).
pub(crate) fn link_target(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let Ok(link) = fs::read_link(&current) else {
            return Ok(current);
        };
        // A relative link is relative to its own folder; `join` keeps an absolute one.
        current = match current.parent() {
            Some(dir) => dir.join(link),
            None => link,
        };
    }
    Err(Error::file(
        path,
        format!("more than {MAX_LINKS} symbolic links in a row (a loop?)"),
    ))
}

/// Writes `temp`, then renames it over `target` (`path`, or the file its links
/// point to); errors name `path`, the name the caller gave.
fn write_then_rename(
    temp: &Path,
    path: &Path,
    target: &Path,
    dir: &Path,
    bytes: &[u8],
) -> Result<()> {
    let io = |what: &str, e: std::io::Error| Error::file(path, format!("cannot {what}: {e}"));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| match e.kind() {
            // Not the temporary file's name: the user never chose it.
            std::io::ErrorKind::NotFound => {
                Error::file(path, format!("the folder {} does not exist", dir.display()))
            }
            _ => io(&format!("create {}", temp.display()), e),
        })?;
    file.write_all(bytes).map_err(|e| io("write", e))?;
    if let Ok(old) = fs::metadata(target) {
        file.set_permissions(old.permissions())
            .map_err(|e| io("keep the file's permissions", e))?;
    }
    file.sync_all().map_err(|e| io("flush to disk", e))?;
    drop(file);
    fs::rename(temp, target).map_err(|e| io(&format!("rename {} over it", temp.display()), e))?;
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
    fn a_missing_folder_is_named_not_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("w.bin");
        let err = write_atomic(&path, b"x").unwrap_err().to_string();
        assert!(
            err.contains("missing") && err.contains("does not exist"),
            "{err}"
        );
        assert!(!err.contains(".w.bin."), "{err}"); // the temporary file
    }

    #[cfg(unix)]
    #[test]
    fn writes_through_links_and_keeps_permissions() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("store")).unwrap();
        let real = dir.path().join("store").join("w.bin");
        write_atomic(&real, b"old").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).unwrap();
        // A relative link to a relative link.
        symlink("store/w.bin", dir.path().join("inner")).unwrap();
        let link = dir.path().join("w.bin");
        symlink("inner", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
        let mode = fs::metadata(&real).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A dangling link gets its file created.
        let dangling = dir.path().join("dangling");
        symlink("store/fresh.bin", &dangling).unwrap();
        write_atomic(&dangling, b"fresh").unwrap();
        assert_eq!(
            fs::read(dir.path().join("store/fresh.bin")).unwrap(),
            b"fresh"
        );
        // A loop is an error naming the path, not a hang.
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        symlink("b", &a).unwrap();
        symlink("a", &b).unwrap();
        let err = write_atomic(&a, b"x").unwrap_err().to_string();
        assert!(err.contains("symbolic links"), "{err}");
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

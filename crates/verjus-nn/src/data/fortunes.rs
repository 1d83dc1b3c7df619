//! The texts of Debian's `fortunes` package: real text for character models.
//!
//! `apt-get install fortunes` puts about 15,000 texts ("fortune cookies") of
//! 1 to 2,400 characters into [`FORTUNES_DIR`]; another folder can be given by
//! argument or by the environment variable [`FORTUNES_ENV_VAR`].
//!
//! Which files: every regular file directly in the folder, in sorted name
//! order, except `*.dat` (the `strfile` indexes) and `*.u8` (in Debian, links
//! to the plain files). Symbolic links are left out (they would read a file
//! twice), and so are subfolders: `off/`, which `fortunes-off` installs, holds
//! offensive fortunes stored rot13-encoded, which are neither wanted nor
//! readable text.
//!
//! A file holds texts separated by lines holding only `%`; each text loses the
//! newline that ends its last line, and empty texts are dropped.

use super::text::{read_utf8, split_texts, TextSplit};
use super::vocab::CharVocab;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use verjus_core::{Error, Result};

/// Where `apt-get install fortunes` puts the files.
pub const FORTUNES_DIR: &str = "/usr/share/games/fortunes";

/// Environment variable naming the folder of the fortune files.
pub const FORTUNES_ENV_VAR: &str = "VERJUS_FORTUNES";

/// The folder to read: `dir` if given, else `$VERJUS_FORTUNES` if set (and
/// not empty), else [`FORTUNES_DIR`].
pub fn fortunes_dir(dir: Option<&Path>) -> PathBuf {
    resolve_dir(dir, std::env::var_os(FORTUNES_ENV_VAR))
}

fn resolve_dir(dir: Option<&Path>, env: Option<OsString>) -> PathBuf {
    match (dir, env) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(e)) if !e.is_empty() => PathBuf::from(e),
        _ => PathBuf::from(FORTUNES_DIR),
    }
}

/// Every text of the fortune files in [`fortunes_dir`]`(dir)`, file by file
/// in sorted name order (see the module docs for which files).
pub fn read_fortunes(dir: Option<&Path>) -> Result<Vec<String>> {
    let dir = fortunes_dir(dir);
    let mut texts = Vec::new();
    for file in fortune_files(&dir)? {
        texts.extend(split_fortunes(&read_utf8(&file)?));
    }
    Ok(texts)
}

/// The fortunes of [`read_fortunes`]`(dir)`, split by [`split_texts`] (texts
/// over `max_len` characters left out, every `val_every`-th of the rest for
/// validation), and the vocabulary of the characters of both parts (so that
/// the validation texts encode too).
pub fn load_fortunes(
    dir: Option<&Path>,
    max_len: Option<usize>,
    val_every: Option<usize>,
) -> Result<(TextSplit, CharVocab)> {
    let split = split_texts(read_fortunes(dir)?, max_len, val_every)?;
    let vocab = CharVocab::build(&[split.train.as_slice(), split.validation.as_slice()].concat());
    Ok((split, vocab))
}

/// The texts of one fortune file's contents.
pub fn split_fortunes(contents: &str) -> Vec<String> {
    let mut texts = Vec::new();
    let mut current = String::new();
    let mut flush = |current: &mut String| {
        let text = current.strip_suffix('\n').unwrap_or(current);
        if !text.is_empty() {
            texts.push(text.to_string());
        }
        current.clear();
    };
    for line in contents.split_inclusive('\n') {
        if line.strip_suffix('\n').unwrap_or(line) == "%" {
            flush(&mut current);
        } else {
            current.push_str(line);
        }
    }
    flush(&mut current);
    texts
}

/// The fortune files in `dir`, sorted by name; a folder that is missing, is
/// not a folder, cannot be listed or holds no fortune file is an error naming it.
fn fortune_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::file(
                dir,
                format!(
                    "fortunes not found: install them with `apt-get install fortunes`, \
                     or set {FORTUNES_ENV_VAR} to a folder of fortune files"
                ),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::file(
                dir,
                "is not a folder (give the folder that holds the fortune files)",
            ))
        }
        Err(e) => return Err(Error::file(dir, format!("cannot be listed: {e}"))),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::file(dir, format!("cannot be listed: {e}")))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| Error::file(&path, format!("cannot be read: {e}")))?;
        let ext = path.extension().and_then(|e| e.to_str());
        if kind.is_file() && !matches!(ext, Some("dat" | "u8")) {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(Error::file(
            dir,
            "holds no fortune files (files of texts separated by lines of `%`)",
        ));
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_resolution() {
        let arg = Path::new("/arg");
        let env = || Some(OsString::from("/env"));
        assert_eq!(resolve_dir(Some(arg), env()), arg);
        assert_eq!(resolve_dir(None, env()), Path::new("/env"));
        assert_eq!(
            resolve_dir(None, Some(OsString::new())),
            Path::new(FORTUNES_DIR)
        );
        assert_eq!(resolve_dir(None, None), Path::new(FORTUNES_DIR));
    }

    #[test]
    fn texts_are_split_on_lines_of_only_a_percent_sign() {
        let contents = "one\n  line two\n%\n%\n100% sure\n%  \n\n%\nlast\n\n";
        assert_eq!(
            split_fortunes(contents),
            ["one\n  line two", "100% sure\n%  \n", "last\n"]
        );
        assert_eq!(split_fortunes("%\nno end"), ["no end"]);
        assert!(split_fortunes("%\n%\n").is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn only_plain_fortune_files_are_read_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("b"), "b1\n%\nb2\n").unwrap();
        fs::write(d.join("a"), "a1\n%\n").unwrap();
        fs::write(d.join("a.dat"), b"\x00\x02binary").unwrap();
        std::os::unix::fs::symlink("a", d.join("a.u8")).unwrap();
        std::os::unix::fs::symlink("b", d.join("link")).unwrap();
        fs::create_dir(d.join("off")).unwrap();
        fs::write(d.join("off").join("c"), "hidden\n").unwrap();
        assert_eq!(read_fortunes(Some(d)).unwrap(), ["a1", "b1", "b2"]);
    }

    #[test]
    fn bad_folders_and_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let e = read_fortunes(Some(d)).unwrap_err().to_string();
        assert!(e.contains("holds no fortune files"), "{e}");
        let missing = d.join("missing");
        let e = read_fortunes(Some(&missing)).unwrap_err().to_string();
        assert!(
            e.contains("missing") && e.contains("apt-get install fortunes"),
            "{e}"
        );
        fs::write(d.join("good"), "fine\n").unwrap();
        fs::write(d.join("latin1"), b"caf\xe9\n").unwrap();
        let e = read_fortunes(Some(d)).unwrap_err().to_string();
        assert!(e.contains("latin1") && e.contains("offset 3"), "{e}");
        fs::write(d.join("latin1"), b"").unwrap();
        let e = read_fortunes(Some(d)).unwrap_err().to_string();
        assert!(e.contains("latin1") && e.contains("is empty"), "{e}");
        let e = read_fortunes(Some(&d.join("good")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a folder"), "{e}");
    }

    #[test]
    fn vocabulary_covers_training_and_validation() {
        let dir = tempfile::tempdir().unwrap();
        let texts = "val x\n%\ntrain\n%\nlong text\n%\nval y\n%\ntrain\n";
        fs::write(dir.path().join("f"), texts).unwrap();
        let (split, vocab) = load_fortunes(Some(dir.path()), Some(5), Some(2)).unwrap();
        assert_eq!(split.validation, ["val x", "val y"]);
        assert_eq!(split.train, ["train", "train"]);
        for (i, t) in split.validation.iter().enumerate() {
            vocab.encode(i, t).unwrap();
        }
        assert!(vocab.id('g').is_none(), "'long text' was left out");
    }

    /// The installed package, where there is one: the figures of the char-LM
    /// recipe (texts up to 512 characters, every 20th for validation).
    #[test]
    fn reads_the_installed_package() {
        let dir = Path::new(FORTUNES_DIR);
        if !dir.join("fortunes").is_file() {
            eprintln!("skipped: {FORTUNES_DIR} is not installed (apt-get install fortunes)");
            return;
        }
        let all = read_fortunes(Some(dir)).unwrap();
        assert!((14_000..17_000).contains(&all.len()), "{}", all.len());
        assert!(all.iter().all(|t| !t.is_empty() && !t.ends_with("\n%")));
        let (split, vocab) = load_fortunes(Some(dir), Some(512), Some(20)).unwrap();
        let chars: usize = split.train.iter().map(|t| t.chars().count()).sum();
        assert!((13_000..14_000).contains(&split.train.len()), "{chars}");
        assert!((1_500_000..1_800_000).contains(&chars), "{chars}");
        assert!((100..130).contains(&vocab.chars().len()), "{}", vocab.len());
    }
}

//! Texts from disk and their split into training and validation.
//!
//! [`read_utf8`] reads a text file whole, with the loaders' standards: a file
//! that is missing, empty, unreadable or not UTF-8 is an error naming it (and,
//! for bad UTF-8, the byte offset). [`split_texts`] leaves out the texts over a
//! length and puts every n-th of the rest aside for validation; lengths count
//! characters (Unicode scalar values, as Python's `len`).

use std::path::Path;
use verjus_core::{Error, Result};

/// Texts for training and for validation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextSplit {
    pub train: Vec<String>,
    pub validation: Vec<String>,
}

/// The contents of the text file `path`.
pub fn read_utf8(path: &Path) -> Result<String> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::file(path, format!("cannot be read: {e}")))?;
    if bytes.is_empty() {
        return Err(Error::file(path, "is empty"));
    }
    String::from_utf8(bytes).map_err(|e| {
        let e = e.utf8_error();
        Error::file(
            path,
            format!(
                "is not UTF-8 text: invalid byte at offset {}",
                e.valid_up_to()
            ),
        )
    })
}

/// Leaves out the texts of more than `max_len` characters (none with `None`),
/// then, with `val_every = Some(n)`, puts texts `0, n, 2n, ...` of the rest into
/// validation and the others into training; with `None` all train.
/// `val_every` below 2 is an error (it would leave nothing to train on).
pub fn split_texts(
    texts: Vec<String>,
    max_len: Option<usize>,
    val_every: Option<usize>,
) -> Result<TextSplit> {
    if let Some(n) = val_every.filter(|&n| n < 2) {
        return Err(Error::invalid(
            "split_texts",
            format!("val_every must be at least 2 (or None for no validation), got {n}"),
        ));
    }
    let mut split = TextSplit::default();
    let kept = texts
        .into_iter()
        .filter(|t| max_len.is_none_or(|m| t.chars().count() <= m));
    for (i, text) in kept.enumerate() {
        if val_every.is_some_and(|n| i % n == 0) {
            split.validation.push(text);
        } else {
            split.train.push(text);
        }
    }
    Ok(split)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_text_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, b"ok \xc3\xa9 then \xff").unwrap();
        let e = read_utf8(&path).unwrap_err();
        assert!(matches!(e, Error::File { .. }));
        let e = e.to_string();
        assert!(e.contains("/t") && e.contains("offset 11"), "{e}");
        std::fs::write(&path, b"").unwrap();
        let e = read_utf8(&path).unwrap_err().to_string();
        assert!(e.contains("is empty"), "{e}");
        let e = read_utf8(&dir.path().join("none")).unwrap_err().to_string();
        assert!(e.contains("none") && e.contains("cannot be read"), "{e}");
        std::fs::write(&path, "é\n").unwrap();
        assert_eq!(read_utf8(&path).unwrap(), "é\n");
    }

    #[test]
    fn long_texts_are_left_out_and_every_nth_validates() {
        let texts: Vec<String> = ["a", "bb", "ccc", "dé", "e", "ffff", "g"]
            .map(String::from)
            .into();
        let s = split_texts(texts.clone(), Some(2), Some(2)).unwrap();
        assert_eq!(s.validation, ["a", "dé", "g"]);
        assert_eq!(s.train, ["bb", "e"]);
        let s = split_texts(texts.clone(), None, None).unwrap();
        assert_eq!(s.train, texts);
        assert!(s.validation.is_empty());
        let e = split_texts(texts, None, Some(1)).unwrap_err().to_string();
        assert!(e.contains("val_every") && e.contains("got 1"), "{e}");
    }
}

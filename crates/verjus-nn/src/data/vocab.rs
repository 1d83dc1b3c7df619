//! A character vocabulary: the ids a character language model reads and
//! writes, saved next to the network so that sampling decodes the same way.
//!
//! Id [`PAD`] (`<pad>`) fills the frames past a text's end in a padded batch;
//! id [`EOT`] (`<eot>`, end of text) ends a text and also starts one (the
//! first input of every text). The characters follow as ids `2..`, in the
//! order of their code points, so the same texts always give the same ids.
//! Characters are Unicode scalar values (Python's `str` elements).
//!
//! The JSON file ([`CharVocab::save`] / [`CharVocab::load`]) holds the format
//! name and version, the special symbols and the characters in id order; it is
//! written atomically.

use crate::atomic::write_atomic;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use verjus_core::{Error, Result};

/// The id of `<pad>`, the filler past a text's end.
pub const PAD: i32 = 0;
/// The id of `<eot>`: end of text, and the start symbol of a text.
pub const EOT: i32 = 1;
/// The special symbols, by id.
pub const SPECIALS: [&str; 2] = ["<pad>", "<eot>"];
/// The file name a run folder keeps its vocabulary under.
pub const VOCAB_FILE: &str = "vocab.json";

/// The `format` field of a saved vocabulary.
const FORMAT: &str = "verjus-char-vocab";
/// The `version` field of a saved vocabulary.
const VERSION: u32 = 1;

/// Characters and their ids (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CharVocab {
    chars: Vec<char>,
    ids: HashMap<char, i32>,
}

/// The saved form.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct VocabFile {
    format: String,
    version: u32,
    specials: Vec<String>,
    chars: Vec<String>,
}

impl CharVocab {
    /// The vocabulary of the characters in `texts`.
    pub fn build<S: AsRef<str>>(texts: &[S]) -> Self {
        let set: BTreeSet<char> = texts.iter().flat_map(|t| t.as_ref().chars()).collect();
        Self::from_sorted(set.into_iter().collect())
    }

    /// `chars` (sorted, unique) after the special symbols.
    fn from_sorted(chars: Vec<char>) -> Self {
        let first = SPECIALS.len() as i32;
        let ids = chars.iter().zip(first..).map(|(&c, id)| (c, id)).collect();
        CharVocab { chars, ids }
    }

    /// The number of ids: the special symbols and the characters.
    pub fn len(&self) -> usize {
        SPECIALS.len() + self.chars.len()
    }

    /// Whether there are no characters (only the special symbols).
    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The characters, in id order (ids `2..`).
    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    /// The id of `c`, if it is in the vocabulary.
    pub fn id(&self, c: char) -> Option<i32> {
        self.ids.get(&c).copied()
    }

    /// The ids of the characters of `text` (without `<eot>`); a character
    /// outside the vocabulary is an error naming it and `text_index`, the
    /// text's place in the caller's list.
    pub fn encode(&self, text_index: usize, text: &str) -> Result<Vec<i32>> {
        text.chars()
            .enumerate()
            .map(|(pos, c)| {
                self.id(c).ok_or_else(|| {
                    Error::invalid(
                        "CharVocab::encode",
                        format!(
                            "text {text_index}: character {c:?} (U+{:04X}) at position {pos} \
                             is not in the vocabulary of {} characters",
                            u32::from(c),
                            self.chars.len()
                        ),
                    )
                })
            })
            .collect()
    }

    /// The text of character ids; the special symbols are left out (neither
    /// is a character). An id outside `0..len()` is an error naming its
    /// position and value.
    pub fn decode(&self, ids: &[i32]) -> Result<String> {
        let first = SPECIALS.len();
        let mut text = String::with_capacity(ids.len());
        for (pos, &id) in ids.iter().enumerate() {
            match usize::try_from(id) {
                Ok(i) if i < first => {}
                Ok(i) if i < self.len() => text.push(self.chars[i - first]),
                _ => {
                    return Err(Error::invalid(
                        "CharVocab::decode",
                        format!(
                            "id {id} at position {pos} is outside the vocabulary [0, {})",
                            self.len()
                        ),
                    ))
                }
            }
        }
        Ok(text)
    }

    /// Writes the vocabulary to `path` as JSON, atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.to_json(path)?)
    }

    /// The vocabulary as the JSON [`save`](Self::save) writes (`path` names
    /// the file in errors).
    pub fn to_json(&self, path: &Path) -> Result<Vec<u8>> {
        let file = VocabFile {
            format: FORMAT.into(),
            version: VERSION,
            specials: SPECIALS.iter().map(|s| s.to_string()).collect(),
            chars: self.chars.iter().map(char::to_string).collect(),
        };
        let mut json = serde_json::to_vec_pretty(&file)
            .map_err(|e| Error::file(path, format!("cannot encode the vocabulary: {e}")))?;
        json.push(b'\n');
        Ok(json)
    }

    /// Reads a vocabulary written by [`save`](Self::save); a missing file, bad
    /// JSON or contents that are not a vocabulary are errors naming `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(path).map_err(|e| Error::file(path, format!("cannot be read: {e}")))?;
        Self::from_json(path, &bytes)
    }

    /// The vocabulary of the JSON `bytes` of the file `path`.
    pub fn from_json(path: &Path, bytes: &[u8]) -> Result<Self> {
        let file: VocabFile = serde_json::from_slice(bytes)
            .map_err(|e| Error::file(path, format!("is not a character vocabulary (JSON): {e}")))?;
        Self::from_file(file).map_err(|msg| Error::file(path, msg))
    }

    fn from_file(file: VocabFile) -> std::result::Result<Self, String> {
        if file.format != FORMAT || file.version != VERSION {
            return Err(format!(
                "format {:?} version {}, expected {FORMAT:?} version {VERSION}",
                file.format, file.version
            ));
        }
        if file.specials != SPECIALS {
            return Err(format!(
                "special symbols {:?}, expected {SPECIALS:?}",
                file.specials
            ));
        }
        let mut chars = Vec::with_capacity(file.chars.len());
        for (i, s) in file.chars.iter().enumerate() {
            let mut it = s.chars();
            let (Some(c), None) = (it.next(), it.next()) else {
                return Err(format!("chars[{i}] = {s:?} is not one character"));
            };
            if chars.last().is_some_and(|&last| last >= c) {
                return Err(format!(
                    "chars[{i}] = {s:?} is out of order (the characters must be sorted and unique)"
                ));
            }
            chars.push(c);
        }
        Ok(Self::from_sorted(chars))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_sorted_characters_after_the_specials() {
        let v = CharVocab::build(&["ba", "ca\n"]);
        assert_eq!(v.chars(), ['\n', 'a', 'b', 'c']);
        assert_eq!(v.len(), 6);
        assert_eq!(v.id('\n'), Some(2));
        assert_eq!(v.id('c'), Some(5));
        assert_eq!(v.encode(0, "cab").unwrap(), [5, 3, 4]);
        // Order of the texts does not matter.
        assert_eq!(v, CharVocab::build(&["ca\n", "ba"]));
    }

    #[test]
    fn decode_inverts_encode_and_drops_the_specials() {
        let texts = ["Grüße, 世界!", "tab\there"];
        let v = CharVocab::build(&texts);
        for (i, t) in texts.iter().enumerate() {
            let mut ids = v.encode(i, t).unwrap();
            assert_eq!(v.decode(&ids).unwrap(), *t);
            ids.insert(0, EOT);
            ids.push(PAD);
            assert_eq!(v.decode(&ids).unwrap(), *t);
        }
    }

    #[test]
    fn unknown_characters_and_ids_are_named() {
        let v = CharVocab::build(&["abc"]);
        let e = v.encode(7, "abé").unwrap_err().to_string();
        assert!(
            e.contains("text 7") && e.contains("'é'") && e.contains("position 2"),
            "{e}"
        );
        let e = v.decode(&[2, 5]).unwrap_err().to_string();
        assert!(e.contains("id 5 at position 1"), "{e}");
        let e = v.decode(&[-1]).unwrap_err().to_string();
        assert!(e.contains("id -1 at position 0"), "{e}");
    }

    #[test]
    fn save_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(VOCAB_FILE);
        let v = CharVocab::build(&["\"quoted\"\n\\ and ünïcode 🙂"]);
        v.save(&path).unwrap();
        assert_eq!(CharVocab::load(&path).unwrap(), v);
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.json");
        let e = CharVocab::load(&path).unwrap_err().to_string();
        assert!(e.contains("v.json") && e.contains("cannot be read"), "{e}");
        let bad = [
            ("{", "JSON"),
            (
                r#"{"format":"other","version":1,"specials":[],"chars":[]}"#,
                "format",
            ),
            (
                r#"{"format":"verjus-char-vocab","version":1,"specials":["<eot>","<pad>"],"chars":[]}"#,
                "special symbols",
            ),
            (
                r#"{"format":"verjus-char-vocab","version":1,"specials":["<pad>","<eot>"],"chars":["ab"]}"#,
                "chars[0]",
            ),
            (
                r#"{"format":"verjus-char-vocab","version":1,"specials":["<pad>","<eot>"],"chars":["b","a"]}"#,
                "chars[1]",
            ),
        ];
        for (text, what) in bad {
            std::fs::write(&path, text).unwrap();
            let e = CharVocab::load(&path).unwrap_err();
            assert!(matches!(e, Error::File { .. }), "{e}");
            let e = e.to_string();
            assert!(e.contains("v.json") && e.contains(what), "{text}: {e}");
        }
    }
}

//! Text data for sequence models: `CharVocab`, `TextBatcher`, `fortunes`.
//!
//! Thin over `verjus::nn::data`: reading, encoding and padding run in Rust
//! (with the GIL released for the reading), and batches come out as int32
//! numpy arrays that own the Rust buffers. `verjus.data` subclasses
//! `TextBatcher` to make it iterable per epoch.

use crate::convert::to_numpy;
use crate::error::to_py_err;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use verjus::nn::data;

/// A character vocabulary: ``<pad>`` (id 0, the filler past a text's end),
/// ``<eot>`` (id 1, end of text and the start symbol of a text), then the
/// characters as ids 2, 3, ... in code-point order, so the same texts always
/// give the same ids. Saved as JSON next to a trained network so that sampling
/// decodes the same way.
///
/// Make one with ``CharVocab.build(texts)`` or ``CharVocab.load(path)``.
#[pyclass(frozen, module = "verjus._verjus")]
pub(crate) struct CharVocab {
    pub(crate) inner: data::CharVocab,
}

#[pymethods]
impl CharVocab {
    /// The vocabulary of the characters in ``texts``.
    ///
    /// :param list[str] texts: the texts
    /// :rtype: CharVocab
    #[staticmethod]
    fn build(texts: Vec<String>) -> Self {
        CharVocab {
            inner: data::CharVocab::build(&texts),
        }
    }

    /// Reads a vocabulary written by ``save``; a missing or malformed file is
    /// an ``OSError`` naming it.
    ///
    /// :param str path: the JSON file (or an ``os.PathLike``)
    /// :rtype: CharVocab
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py
            .detach(|| data::CharVocab::load(&path))
            .map_err(to_py_err)?;
        Ok(CharVocab { inner })
    }

    /// The vocabulary of the character model saved in the run folder
    /// ``folder``, checked against the checkpoint's manifest: a ``vocab.json``
    /// edited or copied from another run is an ``OSError`` naming it (a run
    /// saved before vocabularies were listed is read unchecked).
    ///
    /// :param str folder: the run folder (or an ``os.PathLike``)
    /// :rtype: CharVocab
    #[staticmethod]
    fn from_run(py: Python<'_>, folder: PathBuf) -> PyResult<Self> {
        let inner = py
            .detach(|| verjus::nn::checkpoint::run_vocab(&folder))
            .map_err(to_py_err)?;
        Ok(CharVocab { inner })
    }

    /// Writes the vocabulary to ``path`` as JSON, atomically (readers see the
    /// old file or the new one, never a mix).
    ///
    /// :param str path: the JSON file (or an ``os.PathLike``)
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path)).map_err(to_py_err)
    }

    /// The ids of the characters of ``text`` (no ``<eot>``), int32. A
    /// character outside the vocabulary is a ``ValueError`` naming it, its
    /// position and ``index``.
    ///
    /// :param str text: the text
    /// :param int index: the text's place in the caller's list, for the error
    /// :rtype: npt.NDArray[np.int32]
    #[pyo3(signature = (text, index = 0))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        index: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ids = self.inner.encode(index, text).map_err(to_py_err)?;
        let n = ids.len();
        to_numpy(py, verjus::Tensor::from_vec([n], ids).map_err(to_py_err)?)
    }

    /// The text of ``ids``; ``<pad>`` and ``<eot>`` are left out. An id outside
    /// the vocabulary is a ``ValueError`` naming it and its position.
    ///
    /// :param Sequence[int] | npt.NDArray[np.integer] ids: the ids
    /// :rtype: str
    fn decode(&self, ids: Vec<i64>) -> PyResult<String> {
        let ids = ids
            .iter()
            .enumerate()
            .map(|(pos, &id)| {
                i32::try_from(id).map_err(|_| {
                    PyValueError::new_err(format!(
                        "CharVocab.decode: id {id} at position {pos} is outside the \
                         vocabulary [0, {})",
                        self.inner.len()
                    ))
                })
            })
            .collect::<PyResult<Vec<i32>>>()?;
        self.inner.decode(&ids).map_err(to_py_err)
    }

    /// The number of ids: 2 special symbols and the characters.
    ///
    /// :rtype: int
    #[getter]
    fn size(&self) -> usize {
        self.inner.len()
    }

    /// The characters in id order (ids 2, 3, ...).
    ///
    /// :rtype: str
    #[getter]
    fn chars(&self) -> String {
        self.inner.chars().iter().collect()
    }

    /// The id of ``<pad>``.
    ///
    /// :rtype: int
    #[getter]
    fn pad_id(&self) -> i32 {
        data::PAD
    }

    /// The id of ``<eot>`` (end of text, and the first input of every text).
    ///
    /// :rtype: int
    #[getter]
    fn eot_id(&self) -> i32 {
        data::EOT
    }

    fn __repr__(&self) -> String {
        format!("CharVocab(size={})", self.inner.len())
    }
}

/// Padded batches of texts for a character language model, by similar length.
///
/// A batch is ``(inputs, targets, lengths)``: ``inputs [B, T]`` int32 =
/// ``<eot>`` then the characters; ``targets [B, T]`` = the characters then
/// ``<eot>``; both padded with ``<pad>`` past ``lengths [B]`` (int32, a text's
/// characters + 1). Each epoch shuffles the texts by seed and epoch, sorts
/// pools of ``pool`` batches by length, cuts them into batches and shuffles
/// the batches: little padding, and new batches every epoch. Without a seed
/// the texts are sorted by length. The texts are encoded when it is made (an
/// unknown character is a ``ValueError`` naming the text's index).
///
/// :param list[str] texts: the texts
/// :param CharVocab vocab: their vocabulary
/// :param int batch_size: texts per batch (the last may hold fewer)
/// :param int pool: batches per pool sorted by length
#[pyclass(frozen, subclass, module = "verjus._verjus")]
pub(crate) struct TextBatcher {
    inner: data::TextBatcher,
}

#[pymethods]
impl TextBatcher {
    #[new]
    #[pyo3(signature = (texts, vocab, batch_size = 32, pool = 100))]
    fn new(
        py: Python<'_>,
        texts: Vec<String>,
        vocab: &CharVocab,
        batch_size: usize,
        pool: usize,
    ) -> PyResult<Self> {
        let inner = py
            .detach(|| data::TextBatcher::new(&vocab.inner, &texts, batch_size, pool))
            .map_err(to_py_err)?;
        Ok(TextBatcher { inner })
    }

    /// The texts (indices into ``texts``) of each batch of epoch ``epoch``, in
    /// batch order: shuffled from ``seed`` and ``epoch``, or with ``seed=None``
    /// sorted by length.
    ///
    /// :param int | None seed: the shuffling seed
    /// :param int epoch: the epoch
    /// :rtype: list[list[int]]
    #[pyo3(signature = (seed = None, epoch = 0))]
    fn plan(&self, seed: Option<u64>, epoch: u64) -> Vec<Vec<usize>> {
        self.inner.plan(seed, epoch)
    }

    /// The padded batch of the texts ``rows``.
    ///
    /// :param list[int] rows: indices into ``texts``
    /// :return: ``(inputs, targets, lengths)``
    /// :rtype: tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32]]
    fn batch<'py>(
        &self,
        py: Python<'py>,
        rows: Vec<usize>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let b = self.inner.batch(&rows).map_err(to_py_err)?;
        Ok((
            to_numpy(py, b.inputs)?,
            to_numpy(py, b.targets)?,
            to_numpy(py, b.lengths)?,
        ))
    }

    /// The number of texts.
    ///
    /// :rtype: int
    #[getter]
    fn num_texts(&self) -> usize {
        self.inner.num_texts()
    }

    /// The number of batches of an epoch.
    ///
    /// :rtype: int
    #[getter]
    fn num_batches(&self) -> usize {
        self.inner.num_batches()
    }

    /// Texts per batch.
    ///
    /// :rtype: int
    #[getter]
    fn batch_size(&self) -> usize {
        self.inner.batch_size()
    }

    /// The real frames (tokens) of an epoch: every text's characters + 1.
    ///
    /// :rtype: int
    #[getter]
    fn tokens(&self) -> usize {
        self.inner.tokens()
    }
}

/// The texts of Debian's ``fortunes`` package, split for a character model,
/// and their vocabulary.
///
/// The folder is ``path``, else ``$VERJUS_FORTUNES``, else
/// ``/usr/share/games/fortunes``; every regular file in it except ``*.dat``,
/// ``*.u8``, symbolic links and subfolders, in name order, split on lines
/// holding only ``%``. A missing folder is an ``OSError`` saying to
/// ``apt-get install fortunes``; a file that is empty, unreadable or not
/// UTF-8 an ``OSError`` naming it (and the byte offset).
///
/// :param str | None path: the folder of the fortune files (or an ``os.PathLike``)
/// :param int | None max_len: texts over this many characters are left out
/// :param int | None val_every: texts 0, n, 2n, ... (of those kept) validate
/// :return: ``(train, validation, vocab)``, the vocabulary of both parts
/// :rtype: tuple[list[str], list[str], CharVocab]
#[pyfunction]
#[pyo3(signature = (path = None, max_len = None, val_every = None))]
pub(crate) fn fortunes(
    py: Python<'_>,
    path: Option<PathBuf>,
    max_len: Option<usize>,
    val_every: Option<usize>,
) -> PyResult<(Vec<String>, Vec<String>, CharVocab)> {
    let (split, vocab) = py
        .detach(|| data::load_fortunes(path.as_deref(), max_len, val_every))
        .map_err(to_py_err)?;
    py.check_signals()?;
    Ok((split.train, split.validation, CharVocab { inner: vocab }))
}

/// Adds `CharVocab`, `TextBatcher` and `fortunes` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CharVocab>()?;
    m.add_class::<TextBatcher>()?;
    m.add_function(wrap_pyfunction!(fortunes, m)?)
}

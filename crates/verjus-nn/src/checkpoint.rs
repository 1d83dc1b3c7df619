//! Checkpoints: a network, or a whole training run, as one folder.
//!
//! A *network folder* ([`Network::save`] / [`Network::load`]) holds
//!
//! - `network.json`: the [`NetworkDef`] (with its `format_version`);
//! - `weights.safetensors`: the parameters, named by layer path;
//! - `checkpoint.json`: the manifest: format version, the network's seed (it
//!   keys the dropout streams) and the size and CRC-32 of every file above.
//!
//! A *training checkpoint* ([`Trainer::save_checkpoint`] / [`Trainer::resume`])
//! adds `trainer.json` (solver settings, loss, schedule position = step,
//! per-parameter step counts, dropout stream position) and
//! `solver.safetensors` (the solver's moments, `{parameter}.{slot}`), and for
//! a character model its `vocab.json` ([`Trainer::save_checkpoint_with`],
//! read back checked by [`run_vocab`]). A checkpoint is a network folder:
//! `Network::load` reads one.
//!
//! Saving replaces the whole folder atomically (see `folder`), keeping files
//! that are not the checkpoint's own (a run's `metrics.jsonl`, `curves.png`).
//! Loading trusts nothing: JSON files are capped at [`MAX_JSON_BYTES`]
//! (serde_json caps nesting), sizes are checked before allocating, every file
//! must match the manifest (a torn or corrupted checkpoint is an error, not a
//! mixture), and the network, weights and solver state are all built and
//! checked before anything is returned, down to values no training produces
//! (a NaN moment, a negative second moment, a step count past 2^53), since a
//! file edited with its manifest passes the CRC checks. Errors name the file. A folder
//! without a manifest (hand-made: a definition and weights) still loads as a
//! network, with seed 0 and no integrity check.

use crate::data::{CharVocab, VOCAB_FILE};
use crate::def::NetworkDef;
use crate::folder::replace_folder;
use crate::loss::Loss;
use crate::network::Network;
use crate::solver::{ParamState, Solver, SolverConfig};
use crate::trainer::Trainer;
use crate::weights;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::Path;
use verjus_core::{ops, Backend, BackendRef, Device, Error, Result, Tensor};

/// The definition file of a network folder.
pub const DEFINITION_FILE: &str = "network.json";
/// The weights file of a network folder.
pub const WEIGHTS_FILE: &str = "weights.safetensors";
/// The manifest of a checkpoint.
pub const MANIFEST_FILE: &str = "checkpoint.json";
/// The trainer state of a training checkpoint.
pub const TRAINER_FILE: &str = "trainer.json";
/// The solver's moments in a training checkpoint.
pub const SOLVER_FILE: &str = "solver.safetensors";
/// Every file a checkpoint owns (the rest of a folder is left alone).
pub const CHECKPOINT_FILES: [&str; 5] = [
    DEFINITION_FILE,
    WEIGHTS_FILE,
    MANIFEST_FILE,
    TRAINER_FILE,
    SOLVER_FILE,
];
/// The largest JSON file a checkpoint may hold.
pub const MAX_JSON_BYTES: u64 = 64 << 20;
/// The current checkpoint format.
const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    format_version: u32,
    /// The network's seed.
    seed: u64,
    files: BTreeMap<String, FileEntry>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    bytes: u64,
    crc32: u32,
}

impl FileEntry {
    fn of(bytes: &[u8]) -> FileEntry {
        let mut crc = flate2::Crc::new();
        crc.update(bytes);
        FileEntry {
            bytes: bytes.len() as u64,
            crc32: crc.sum(),
        }
    }
}

/// `trainer.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainerState {
    format_version: u32,
    solver: SolverConfig,
    loss: Loss,
    /// Completed solver steps (the schedule's position).
    step: u64,
    /// Training forward passes (the dropout stream's position).
    dropout_step: u64,
    /// Steps per parameter, for the parameters that have solver state.
    param_steps: BTreeMap<String, u64>,
}

/// Reads `path` whole, refusing files over `cap` bytes before allocating.
pub(crate) fn read_bounded(path: &Path, cap: Option<u64>) -> Result<Vec<u8>> {
    let io = |what: &str, e: std::io::Error| Error::file(path, format!("cannot {what}: {e}"));
    let file = File::open(path).map_err(|e| io("open", e))?;
    let len = file.metadata().map_err(|e| io("read the size", e))?.len();
    if let Some(cap) = cap.filter(|&cap| len > cap) {
        return Err(Error::file(
            path,
            format!("{len} bytes; the limit for this file is {cap}"),
        ));
    }
    let size = usize::try_from(len).map_err(|_| Error::file(path, "the file is too large"))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(size)
        .map_err(|e| Error::file(path, format!("cannot allocate {len} bytes: {e}")))?;
    // `take` bounds the read by the size checked above, even if the file grows.
    file.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| io("read", e))?;
    Ok(bytes)
}

fn parse_json<T: for<'de> Deserialize<'de>>(path: &Path, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::file(path, format!("invalid: {e}")))
}

/// The files of a checkpoint folder, checked against its manifest.
struct Contents {
    seed: u64,
    files: HashMap<&'static str, Vec<u8>>,
}

impl Contents {
    /// Reads `names` from `folder`. With a manifest, it must list each of
    /// `names` and each file must match its entry; a folder without one is
    /// an error unless `allow_bare`.
    fn read(folder: &Path, names: &[&'static str], allow_bare: bool) -> Result<Contents> {
        if !folder.is_dir() {
            return Err(Error::file(folder, "not a folder (or it does not exist)"));
        }
        let manifest_path = folder.join(MANIFEST_FILE);
        let manifest: Option<Manifest> = if manifest_path.exists() || !allow_bare {
            let bytes = read_bounded(&manifest_path, Some(MAX_JSON_BYTES))?;
            Some(parse_json(&manifest_path, &bytes)?)
        } else {
            None
        };
        if let Some(m) = &manifest {
            if m.format_version > FORMAT_VERSION {
                return Err(Error::file(
                    &manifest_path,
                    format!(
                        "format_version {} is newer than this verjus understands ({FORMAT_VERSION})",
                        m.format_version
                    ),
                ));
            }
            if let Some(unknown) = m
                .files
                .keys()
                .find(|k| !CHECKPOINT_FILES.contains(&k.as_str()) && k.as_str() != VOCAB_FILE)
            {
                return Err(Error::file(
                    &manifest_path,
                    format!("lists {unknown:?}, which is not a checkpoint file"),
                ));
            }
        }
        let mut files = HashMap::new();
        for &name in names {
            let path = folder.join(name);
            let expected = match &manifest {
                Some(m) => Some(m.files.get(name).ok_or_else(|| {
                    Error::file(
                        &manifest_path,
                        format!("does not list {name}: not a complete checkpoint of this kind"),
                    )
                })?),
                None => None,
            };
            let cap = name.ends_with(".json").then_some(MAX_JSON_BYTES);
            let bytes = read_bounded(&path, cap)?;
            if let Some(expected) = expected {
                let actual = FileEntry::of(&bytes);
                if &actual != expected {
                    return Err(Error::file(
                        &path,
                        format!(
                            "{} bytes with CRC-32 {:08x}, but {MANIFEST_FILE} says {} bytes with \
                             {:08x}: the checkpoint is corrupted or was replaced while it was read",
                            actual.bytes, actual.crc32, expected.bytes, expected.crc32
                        ),
                    ));
                }
            }
            files.insert(name, bytes);
        }
        Ok(Contents {
            seed: manifest.map_or(0, |m| m.seed),
            files,
        })
    }

    fn bytes(&self, name: &str) -> &[u8] {
        self.files.get(name).map_or(&[], Vec::as_slice)
    }

    /// Builds the network on `be` and loads its weights (strict).
    fn network(&self, folder: &Path, be: &dyn Backend) -> Result<Network> {
        let def_path = folder.join(DEFINITION_FILE);
        let text = std::str::from_utf8(self.bytes(DEFINITION_FILE))
            .map_err(|e| Error::file(&def_path, format!("not UTF-8: {e}")))?;
        let def = NetworkDef::from_json(text).map_err(|e| e.in_file(&def_path))?;
        let mut net = Network::build(def, be, self.seed).map_err(|e| e.in_file(&def_path))?;
        let weights_path = folder.join(WEIGHTS_FILE);
        let named = weights::decode(&weights_path, self.bytes(WEIGHTS_FILE))?;
        net.load_parameters(be, named, true)
            .map_err(|e| e.in_file(&weights_path))?;
        Ok(net)
    }
}

/// The manifest and `files` as the byte blobs of a checkpoint folder.
fn with_manifest(
    seed: u64,
    files: Vec<(&'static str, Vec<u8>)>,
) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        seed,
        files: files
            .iter()
            .map(|(name, bytes)| (name.to_string(), FileEntry::of(bytes)))
            .collect(),
    };
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| Error::invalid("checkpoint", format!("cannot write the manifest: {e}")))?;
    let mut all = files;
    all.push((MANIFEST_FILE, text.into_bytes()));
    Ok(all)
}

fn write(folder: &Path, files: &[(&str, Vec<u8>)]) -> Result<()> {
    let blobs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let mut own = CHECKPOINT_FILES.to_vec();
    own.extend(files.iter().map(|(name, _)| *name));
    replace_folder(folder, &blobs, &own)
}

/// The vocabulary of the character model saved in `folder`, checked against
/// the manifest (see [`Trainer::save_checkpoint_with`]). A run saved before
/// vocabularies were listed has its `vocab.json` read unchecked.
pub fn run_vocab(folder: &Path) -> Result<CharVocab> {
    let path = folder.join(VOCAB_FILE);
    let manifest_path = folder.join(MANIFEST_FILE);
    let listed = manifest_path.is_file() && {
        let bytes = read_bounded(&manifest_path, Some(MAX_JSON_BYTES))?;
        let manifest: Manifest = parse_json(&manifest_path, &bytes)?;
        manifest.files.contains_key(VOCAB_FILE)
    };
    if !listed {
        return CharVocab::load(&path);
    }
    let contents = Contents::read(folder, &[VOCAB_FILE], false)?;
    CharVocab::from_json(&path, contents.bytes(VOCAB_FILE))
}

fn network_files(
    net: &Network,
    be: &dyn Backend,
    folder: &Path,
) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let def = net.def().to_json() + "\n";
    let params = net.named_parameters_host(be)?;
    weights::check_finite(folder, &params)?;
    let weights = weights::encode(&params)?;
    Ok(vec![
        (DEFINITION_FILE, def.into_bytes()),
        (WEIGHTS_FILE, weights),
    ])
}

impl Network {
    /// Saves the definition, the weights and the manifest as the folder
    /// `folder`, replacing it atomically (see the module docs).
    pub fn save(&self, folder: &Path, be: &dyn Backend) -> Result<()> {
        write(
            folder,
            &with_manifest(self.seed, network_files(self, be, folder)?)?,
        )
    }

    /// Loads a network folder (or a training checkpoint's network) onto `be`'s
    /// device; everything is checked first (see the module docs).
    pub fn load(folder: &Path, be: &dyn Backend) -> Result<Network> {
        Contents::read(folder, &[DEFINITION_FILE, WEIGHTS_FILE], true)?.network(folder, be)
    }
}

impl Trainer {
    /// Saves everything [`Trainer::resume`] needs to continue exactly as
    /// this trainer would: network, weights, solver settings and state, loss,
    /// step and dropout stream position. Replaces `folder` atomically,
    /// keeping files that are not the checkpoint's own.
    pub fn save_checkpoint(&self, folder: &Path) -> Result<()> {
        self.save_checkpoint_with(folder, None)
    }

    /// [`Trainer::save_checkpoint`] of a character model with its vocabulary
    /// (`vocab.json`), listed in the manifest like the other files: a
    /// vocabulary edited or taken from another run is found when it is read
    /// ([`run_vocab`]).
    pub fn save_checkpoint_with(&self, folder: &Path, vocab: Option<&CharVocab>) -> Result<()> {
        let be: &dyn Backend = &**self.backend();
        let net = self.network();
        let solver = self.solver();
        let mut state_tensors = Vec::new();
        for (name, t) in solver.state_tensors() {
            let host = if t.device() == Device::Cpu {
                t.try_clone_host()?
            } else {
                ops::download(be, t)?
            };
            state_tensors.push((name, host));
        }
        let state = TrainerState {
            format_version: FORMAT_VERSION,
            solver: solver.config(),
            loss: self.loss(),
            step: solver.state().step(),
            dropout_step: self.dropout_step(),
            param_steps: solver
                .state()
                .entries()
                .into_iter()
                .map(|(name, st)| (name.to_string(), st.steps))
                .collect(),
        };
        let text = serde_json::to_string_pretty(&state)
            .map_err(|e| Error::invalid("checkpoint", format!("cannot write the state: {e}")))?;
        weights::check_finite(folder, &state_tensors)?;
        let mut files = network_files(net, be, folder)?;
        files.push((TRAINER_FILE, (text + "\n").into_bytes()));
        files.push((SOLVER_FILE, weights::encode(&state_tensors)?));
        if let Some(vocab) = vocab {
            files.push((VOCAB_FILE, vocab.to_json(&folder.join(VOCAB_FILE))?));
        }
        write(folder, &with_manifest(net.seed(), files)?)
    }

    /// A trainer continuing the run saved in `folder` on `be`'s device. Every
    /// file is read and checked before the trainer is made.
    pub fn resume(folder: &Path, be: BackendRef) -> Result<Trainer> {
        let names = [DEFINITION_FILE, WEIGHTS_FILE, TRAINER_FILE, SOLVER_FILE];
        let contents = Contents::read(folder, &names, false)?;
        let net = contents.network(folder, &*be)?;
        let trainer_path = folder.join(TRAINER_FILE);
        let state: TrainerState = parse_json(&trainer_path, contents.bytes(TRAINER_FILE))?;
        if state.format_version > FORMAT_VERSION {
            return Err(Error::file(
                &trainer_path,
                format!("format_version {} is too new", state.format_version),
            ));
        }
        let mut solver = Solver::from_config(state.solver).map_err(|e| e.in_file(&trainer_path))?;
        state
            .loss
            .validate()
            .map_err(|e| e.in_file(&trainer_path))?;
        let solver_path = folder.join(SOLVER_FILE);
        let tensors = weights::decode(&solver_path, contents.bytes(SOLVER_FILE))?;
        let restored = solver_state(&net, &solver, &state, tensors, &solver_path, &*be)?;
        for (name, st) in restored {
            solver.state_mut().insert(name, st);
        }
        solver.state_mut().set_step(state.step);
        let mut trainer = Trainer::new(net, solver, state.loss, be);
        trainer.set_dropout_step(state.dropout_step);
        Ok(trainer)
    }
}

/// The most steps a checkpoint may say a run took: the schedules compute with
/// the step as an `f64`, exact up to 2^53; no run comes near it (at a
/// microsecond per step, 285 years), so a larger count is a damaged file.
const MAX_STEPS: u64 = 1 << 53;

/// Refuses a step count no run can have reached (`what` names it in the error),
/// read from `trainer.json` beside `path`.
fn check_step_count(what: &str, steps: u64, path: &Path) -> Result<()> {
    if steps > MAX_STEPS {
        return Err(Error::file(
            path.with_file_name(TRAINER_FILE),
            format!("{what} is {steps}, more than any run takes (at most 2^53)"),
        ));
    }
    Ok(())
}

/// Refuses a solver buffer with a NaN or infinite value, or, where the rule
/// keeps a mean of squares (`nonnegative`), a negative one: the next update
/// would turn the parameter into NaN.
fn check_slot_values(key: &str, t: &Tensor, nonnegative: bool, path: &Path) -> Result<()> {
    let values = t.as_slice::<f32>()?;
    let bad = values
        .iter()
        .position(|v| !v.is_finite() || (nonnegative && *v < 0.0));
    match bad {
        None => Ok(()),
        Some(i) => Err(Error::file(
            path,
            format!(
                "tensor {key:?} holds {} at index {i}, which no solver step produces",
                values[i]
            ),
        )),
    }
}

/// The per-parameter solver state of a checkpoint, checked against the
/// network (names, shapes) and the rule (slots), on `be`'s device.
fn solver_state(
    net: &Network,
    solver: &Solver,
    state: &TrainerState,
    tensors: Vec<(String, Tensor)>,
    path: &Path,
    be: &dyn Backend,
) -> Result<Vec<(String, ParamState)>> {
    let mut tensors: HashMap<String, Tensor> = tensors.into_iter().collect();
    let slots = solver.rule.slot_names();
    let mut restored = Vec::with_capacity(state.param_steps.len());
    check_step_count("step", state.step, path)?;
    for (name, &steps) in &state.param_steps {
        check_step_count(&format!("steps of {name:?}"), steps, path)?;
        let Some(param) = net.parameters().iter().find(|p| &p.name == name) else {
            return Err(Error::file(
                path.with_file_name(TRAINER_FILE),
                format!("has steps for {name:?}, which the network does not have"),
            ));
        };
        let mut buffers = Vec::with_capacity(slots.len());
        for slot in slots {
            let key = format!("{name}.{slot}");
            let t = tensors
                .remove(&key)
                .ok_or_else(|| Error::file(path, format!("tensor {key:?} is missing")))?;
            if t.shape() != param.value.shape() {
                return Err(Error::file(
                    path,
                    format!(
                        "tensor {key:?} has shape {}, parameter {name:?} has {}",
                        t.shape(),
                        param.value.shape()
                    ),
                ));
            }
            check_slot_values(
                &key,
                &t,
                solver.rule.nonnegative_slots().contains(slot),
                path,
            )?;
            buffers.push(if be.device() == Device::Cpu {
                t
            } else {
                ops::upload(be, &t)?
            });
        }
        restored.push((name.clone(), ParamState::new(steps, buffers)));
    }
    let mut extra: Vec<&String> = tensors.keys().collect();
    extra.sort();
    if let Some(name) = extra.first() {
        return Err(Error::file(
            path,
            format!("tensor {name:?} belongs to no parameter with solver state"),
        ));
    }
    Ok(restored)
}

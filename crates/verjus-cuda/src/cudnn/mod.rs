//! Convolution and average pooling through cuDNN 9 (legacy descriptor API),
//! and the LSTM through its RNN API (`rnn`).
//!
//! For each convolution shape the descriptors and the algorithm of each
//! direction are chosen once and cached: the first call of a shape in a
//! direction runs `cudnnFind*AlgorithmEx` (it times the candidates on the real
//! buffers, which the call overwrites anyway) and keeps the fastest that
//! succeeded; later calls reuse it. One workspace, grown to the largest
//! algorithm chosen, serves every call (all work is on one stream, so it is
//! never used twice at once). Without TF32 the descriptors ask for
//! `CUDNN_FMA_MATH`, i.e. full fp32: cuDNN's default would allow TF32 tensor
//! cores on Ampere and later.
//!
//! The files: `raw` holds every `unsafe` cuDNN call behind safe functions and
//! self-destroying handle and descriptors; `desc` builds descriptors from
//! plans and keys them; `algo` chooses and caches algorithms; `workspace` is
//! the shared scratch buffer; `conv` and `pool` are the ops. The LSTM (`rnn`)
//! has its raw calls in `raw`, its descriptors in `desc`, its host-side
//! arithmetic in `rnn_layout` and its cache in [`State`], and takes cuDNN's
//! workspace from the same [`Workspace`].

mod algo;
mod conv;
mod desc;
mod pool;
mod raw;
mod rnn;
mod rnn_layout;
mod workspace;

pub(crate) use algo::Direction;
pub(crate) use conv::ConvOperands;
pub(crate) use rnn::{LstmBackwardPtrs, LstmForwardPtrs};
pub(crate) use rnn_layout::{LstmKey, Param, SeqLengths, WeightLayout};

use crate::alloc::Allocator;
use crate::device::Gpu;
use desc::{ConvDescs, ConvKey, PoolDescs, PoolKey};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use verjus_core::{Error, Result};
use workspace::Workspace;

/// The handle of one device and what it has cached. Fields drop in order, so
/// the handle goes after everything made with it.
#[derive(Debug)]
struct State {
    convs: HashMap<ConvKey, ConvDescs>,
    algos: algo::AlgoCache,
    pools: HashMap<PoolKey, PoolDescs>,
    lstms: HashMap<rnn_layout::LstmKey, rnn::Lstm>,
    workspace: Workspace,
    handle: raw::Handle,
}

/// The cuDNN handle of one device and its caches.
#[derive(Debug)]
pub(crate) struct Cudnn {
    /// Before `gpu`, so that it drops while the device's context lives.
    state: Mutex<State>,
    gpu: Arc<Gpu>,
}

impl Cudnn {
    pub fn new(gpu: Arc<Gpu>, alloc: Arc<Allocator>) -> Result<Self> {
        let handle =
            raw::Handle::new(gpu.stream()).map_err(|f| gpu.error("open", f.call, f.err))?;
        Ok(Cudnn {
            state: Mutex::new(State {
                convs: HashMap::new(),
                algos: algo::AlgoCache::default(),
                pools: HashMap::new(),
                lstms: HashMap::new(),
                workspace: Workspace::new(alloc),
                handle,
            }),
            gpu,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns a failed raw call into the device error naming `op` and the call.
    fn failed<'a>(&'a self, op: &'a str) -> impl Fn(raw::Failure) -> Error + 'a {
        move |f| self.gpu.error(op, f.call, f.err)
    }
}

impl Drop for Cudnn {
    /// Makes the device's context current for the handle and descriptors,
    /// which destroy themselves when the state drops right after.
    fn drop(&mut self) {
        let _ = self.gpu.bind("drop");
    }
}

/// The cached value of `key`, made by `make` on the key's first use.
fn cached<K: Hash + Eq, V>(
    map: &mut HashMap<K, V>,
    key: K,
    make: impl FnOnce() -> Result<V>,
) -> Result<&mut V> {
    Ok(match map.entry(key) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => e.insert(make()?),
    })
}

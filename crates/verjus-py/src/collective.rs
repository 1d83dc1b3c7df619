//! A [`Collective`] that hands host buffers to a Python communicator.
//!
//! The wheel must not link an MPI library: one vendored MPI would not match the
//! cluster's `mpirun`. So CPU ranks reach MPI through `mpi4py`, which picks the
//! system's library at import, and Rust calls back into Python once per
//! collective with one flat buffer: the tensors are packed straight into a
//! numpy array kept from call to call (a copy each way, no allocation per step).
//!
//! The Python object (`verjus.distributed.MpiCommunicator`, or anything with the
//! same methods) has `rank` and `world` and the in-place methods
//! `all_reduce(array, op)` (op `"sum"`, `"max"` or `"min"`), `broadcast(array,
//! root)` and `barrier()`, taking 1-d float32 or float64 numpy arrays. An
//! exception it raises becomes this collective's error.

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use std::sync::Mutex;
use verjus::core::collective::{pack_into, packed_len, unpack};
use verjus::core::Backend;
use verjus::{Collective, Error, ReduceOp, Result, Tensor};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct PyCollective {
    comm: Py<PyAny>,
    rank: usize,
    world: usize,
    /// The flat buffer of the last tensor collective, reused while it fits.
    flat: Mutex<Option<Py<PyArray1<f32>>>>,
}

impl PyCollective {
    /// Wraps `comm`, reading its `rank` and `world` once.
    pub(crate) fn new(comm: &Bound<'_, PyAny>) -> PyResult<Self> {
        let rank: usize = comm.getattr("rank")?.extract()?;
        let world: usize = comm.getattr("world")?.extract()?;
        if rank >= world {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "the communicator's rank {rank} is not below its world size {world}"
            )));
        }
        Ok(PyCollective {
            comm: comm.clone().unbind(),
            rank,
            world,
            flat: Mutex::new(None),
        })
    }

    /// Packs `ts` into the kept numpy buffer, calls `comm.<method>(buffer,
    /// arg)` and unpacks the result into `ts`.
    fn call_on_tensors<A: for<'py> IntoPyObject<'py>>(
        &self,
        be: &dyn Backend,
        method: &str,
        ts: &mut [&mut Tensor],
        arg: A,
    ) -> Result<()> {
        let len = packed_len(ts);
        Python::attach(|py| {
            let mut kept = self
                .flat
                .lock()
                .map_err(|_| Error::Collective("a collective call failed before".into()))?;
            let flat = match kept.take() {
                Some(a) if a.bind(py).len() == len => a.into_bound(py),
                _ => PyArray1::<f32>::zeros(py, len, false),
            };
            {
                let mut view = flat.readwrite();
                let dst = view
                    .as_slice_mut()
                    .map_err(|e| Error::Collective(e.to_string()))?;
                pack_into(be, ts, dst)?;
            }
            self.comm
                .bind(py)
                .call_method1(method, (&flat, arg))
                .map_err(|e| failed(py, method, &e))?;
            {
                let view = flat.readonly();
                let src = view
                    .as_slice()
                    .map_err(|e| Error::Collective(e.to_string()))?;
                unpack(be, src, ts)?;
            }
            *kept = Some(flat.unbind());
            Ok(())
        })
    }

    /// Calls `comm.<method>(array, arg)` on a numpy copy of `buf` and copies
    /// the result back.
    fn call_on<T: numpy::Element + Copy, A: for<'py> IntoPyObject<'py>>(
        &self,
        method: &str,
        buf: &mut [T],
        arg: A,
    ) -> Result<()> {
        Python::attach(|py| {
            let array = PyArray1::from_slice(py, buf);
            self.comm
                .bind(py)
                .call_method1(method, (&array, arg))
                .map_err(|e| failed(py, method, &e))?;
            let result = array.readonly();
            let values = result
                .as_slice()
                .map_err(|e| Error::Collective(format!("{method}: {e}")))?;
            buf.copy_from_slice(values);
            Ok(())
        })
    }
}

/// The error of a failed call into the communicator.
fn failed(py: Python<'_>, method: &str, err: &PyErr) -> Error {
    Error::Collective(format!("{method} failed: {}", err.value(py)))
}

fn op_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
    }
}

impl Collective for PyCollective {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world(&self) -> usize {
        self.world
    }
    fn all_reduce_host(&self, buf: &mut [f32], op: ReduceOp) -> Result<()> {
        self.call_on("all_reduce", buf, op_name(op))
    }
    fn broadcast_host(&self, buf: &mut [f32], root: usize) -> Result<()> {
        self.call_on("broadcast", buf, root)
    }
    fn all_reduce_scalars(&self, xs: &mut [f64], op: ReduceOp) -> Result<()> {
        self.call_on("all_reduce", xs, op_name(op))
    }
    fn all_reduce(&self, be: &dyn Backend, ts: &mut [&mut Tensor], op: ReduceOp) -> Result<()> {
        self.call_on_tensors(be, "all_reduce", ts, op_name(op))
    }
    fn broadcast(&self, be: &dyn Backend, ts: &mut [&mut Tensor], root: usize) -> Result<()> {
        self.call_on_tensors(be, "broadcast", ts, root)
    }
    fn barrier(&self) -> Result<()> {
        Python::attach(|py| {
            self.comm
                .bind(py)
                .call_method0("barrier")
                .map(drop)
                .map_err(|e| failed(py, "barrier", &e))
        })
    }
}

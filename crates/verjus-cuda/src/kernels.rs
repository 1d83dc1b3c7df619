//! The CUDA C kernel modules, loaded on first use.
//!
//! Each module is one file of `kernels/` (with `common.cuh` prepended), compiled
//! by NVRTC for the device's architecture (`nvrtc_cache.rs`) the first time one
//! of its kernels is launched, then loaded into the context; function handles
//! are looked up once and kept.

use crate::device::Gpu;
use cudarc::driver::result as drv;
use cudarc::driver::sys;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex};
use verjus_core::Result;

const COMMON: &str = include_str!("kernels/common.cuh");

/// Declares [`Module`] with its file names and `Module::ALL` from one list, so
/// a kernel file is in the NVRTC compile test as soon as it has a module.
macro_rules! modules {
    ($($variant:ident => $file:literal,)*) => {
        /// A kernel module: one `.cu` file, named after the op group of
        /// `verjus_core::ops` (and of `ops/`) whose kernels it holds.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum Module {
            $($variant,)*
        }

        impl Module {
            /// Every module (the compile test walks them all).
            #[cfg(test)]
            pub const ALL: &'static [Module] = &[$(Module::$variant,)*];

            pub fn name(self) -> &'static str {
                match self {
                    $(Module::$variant => $file,)*
                }
            }

            fn body(self) -> &'static str {
                match self {
                    $(Module::$variant => include_str!(concat!("kernels/", $file, ".cu")),)*
                }
            }
        }
    };
}

modules! {
    Attention => "attention",
    Concat => "concat",
    Conv => "conv",
    Ctc => "ctc",
    Depthwise => "depthwise",
    Dropout => "dropout",
    Elementwise => "elementwise",
    Index => "index",
    LayerNorm => "layer_norm",
    Loss => "loss",
    Lstm => "lstm",
    Memory => "memory",
    Optim => "optim",
    Permute => "permute",
    Pool => "pool",
    Random => "random",
    Reduce => "reduce",
    Softmax => "softmax",
}

impl Module {
    /// The complete source NVRTC compiles.
    pub fn source(self) -> String {
        let generated = match self {
            Module::Elementwise => crate::elementwise_source::device_functions(),
            _ => String::new(),
        };
        format!(
            "{COMMON}\n{generated}\n// ---- {}.cu ----\n{}",
            self.name(),
            self.body()
        )
    }
}

#[derive(Debug)]
struct Loaded {
    module: sys::CUmodule,
    functions: HashMap<&'static str, sys::CUfunction>,
}

/// The loaded modules of one device.
#[derive(Debug)]
pub(crate) struct Kernels {
    gpu: Arc<Gpu>,
    loaded: Mutex<HashMap<Module, Loaded>>,
}

// SAFETY: module and function handles are plain driver handles, valid from any
// thread with the context current; the map is behind a lock.
unsafe impl Send for Kernels {}
// SAFETY: as above.
unsafe impl Sync for Kernels {}

impl Kernels {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Kernels {
            gpu,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The handle of kernel `name` in `module`, compiling and loading it on first use.
    pub fn function(
        &self,
        op: &str,
        module: Module,
        name: &'static str,
    ) -> Result<sys::CUfunction> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Entry::Vacant(slot) = loaded.entry(module) {
            let image =
                crate::nvrtc_cache::load_or_compile(module.name(), &module.source(), self.gpu.arch)
                    .map_err(|msg| self.gpu.error(op, "compiling kernels with NVRTC", msg))?;
            // SAFETY: `image` is a complete cubin; the context is current
            // (callers bind first). The driver copies the image.
            let handle = unsafe { drv::module::load_data(image.as_ptr().cast()) }
                .map_err(|e| self.gpu.error(op, "cuModuleLoadData", e))?;
            slot.insert(Loaded {
                module: handle,
                functions: HashMap::new(),
            });
        }
        let entry = loaded
            .get_mut(&module)
            .ok_or_else(|| self.gpu.error(op, "loading kernels", "module vanished"))?;
        if let Some(&f) = entry.functions.get(name) {
            return Ok(f);
        }
        let cname = CString::new(name).map_err(|e| self.gpu.error(op, "kernel name", e))?;
        // SAFETY: the module is loaded and stays loaded until `Drop`.
        let f = unsafe { drv::module::get_function(entry.module, cname) }.map_err(|e| {
            self.gpu
                .error(op, &format!("cuModuleGetFunction({name})"), e)
        })?;
        entry.functions.insert(name, f);
        Ok(f)
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        let loaded = self.loaded.get_mut().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the modules were loaded into this context and no launch can
        // use them any more (the backend owning them is being dropped).
        unsafe {
            let _ = self.gpu.bind("drop");
            for (_, l) in loaded.drain() {
                let _ = drv::module::unload(l.module);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Module;

    /// Every kernel module compiles with NVRTC for the architectures verjus
    /// targets. NVRTC needs no GPU: scripts/test.sh installs the
    /// `nvidia-cuda-nvrtc` wheel and runs this test with LD_LIBRARY_PATH
    /// pointing at its libnvrtc.so.13 (see docs/gpu.md); ignored by default
    /// so that a machine without NVRTC does not count it as passed.
    #[test]
    #[ignore = "needs libnvrtc.so.13 on LD_LIBRARY_PATH (scripts/test.sh provides it)"]
    fn every_kernel_module_compiles_with_nvrtc() {
        assert!(
            crate::nvrtc_available(),
            "NVRTC not found (libnvrtc.so.13): set LD_LIBRARY_PATH to the folder that holds it"
        );
        let version = crate::nvrtc_cache::nvrtc_version().expect("nvrtc version");
        eprintln!("NVRTC {}.{}", version.0, version.1);
        let mut failures = Vec::new();
        for arch in [(8, 0), (8, 6), (9, 0)] {
            for &m in Module::ALL {
                match crate::nvrtc_cache::compile(m.name(), &m.source(), arch) {
                    Ok(cubin) => assert!(!cubin.is_empty(), "{} produced an empty cubin", m.name()),
                    Err(e) => failures.push(e),
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }
}

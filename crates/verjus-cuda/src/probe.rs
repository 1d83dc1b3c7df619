//! Finding out, without panicking, whether CUDA can be used at all.
//!
//! cudarc resolves libraries and symbols lazily and panics when one is missing.
//! Before the backend makes its first CUDA call it therefore asks cudarc's
//! fallible loaders whether each library it needs can be opened (the driver
//! `libcuda.so.1`, cuBLAS, cuDNN, NVRTC), then initialises the driver and counts
//! devices. A failure becomes a message naming what is missing.

use cudarc::driver::result as drv;
use std::sync::OnceLock;

/// Whether a library can be opened.
type Present = fn() -> bool;

/// The libraries the backend loads, with the file names a user would look for.
const LIBRARIES: [(&str, &str, Present); 4] = [
    ("CUDA driver", "libcuda.so.1", driver_present),
    ("cuBLAS", "libcublas.so.13", cublas_present),
    ("cuDNN", "libcudnn.so.9", cudnn_present),
    ("NVRTC", "libnvrtc.so.13", nvrtc_present),
];

fn driver_present() -> bool {
    // SAFETY: only opens and closes the library (no symbol is called).
    unsafe { cudarc::driver::sys::is_culib_present() }
}

fn cublas_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

fn cudnn_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::cudnn::sys::is_culib_present() }
}

fn nvrtc_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Whether NVRTC alone can be loaded (it needs no GPU; the kernel compile test uses it).
pub fn nvrtc_available() -> bool {
    nvrtc_present()
}

/// The number of CUDA devices, or why there are none usable. Probed once per process.
pub fn probe() -> Result<usize, String> {
    static PROBE: OnceLock<Result<usize, String>> = OnceLock::new();
    PROBE.get_or_init(probe_uncached).clone()
}

fn probe_uncached() -> Result<usize, String> {
    for (name, file, present) in LIBRARIES {
        if !present() {
            let hint = if file == "libcuda.so.1" {
                "no CUDA driver".to_string()
            } else {
                format!("the {name} library is missing")
            };
            return Err(format!(
                "{hint} ({file} not found; set LD_LIBRARY_PATH to the folder that holds it)"
            ));
        }
    }
    drv::init().map_err(|e| format!("the CUDA driver did not initialise: {e}"))?;
    let count = drv::device::get_count()
        .map_err(|e| format!("the CUDA driver could not count devices: {e}"))?;
    match usize::try_from(count) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("the CUDA driver reports no devices".into()),
    }
}

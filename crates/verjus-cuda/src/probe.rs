//! Finding out, without panicking, whether CUDA can be used at all.
//!
//! cudarc resolves libraries and symbols lazily and panics when one is missing.
//! Before the backend makes its first CUDA call it therefore asks cudarc's
//! fallible loaders whether each library it needs can be opened (the driver
//! `libcuda.so.1`, cuBLAS, cuDNN, NVRTC), then initialises the driver and counts
//! devices. A failure becomes a message naming what is missing: without the
//! NVIDIA kernel driver, that no NVIDIA driver is installed (a library path
//! would not help); with it, the library and `LD_LIBRARY_PATH`.

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

/// Where Linux shows the loaded NVIDIA kernel driver (also inside containers
/// given a GPU).
const NVIDIA_PROC: &str = "/proc/driver/nvidia/version";

/// Why `file` (the library called `name`) cannot be used. Without the NVIDIA
/// kernel driver, no library path would help, so that is what is said.
fn missing(name: &str, file: &str) -> String {
    let driver_loaded = std::path::Path::new(NVIDIA_PROC).exists();
    match (file, driver_loaded) {
        ("libcuda.so.1", false) => format!(
            "no NVIDIA driver is installed ({file} not found and no {NVIDIA_PROC}): \
             CUDA needs an NVIDIA GPU with its driver"
        ),
        ("libcuda.so.1", true) => format!(
            "the NVIDIA driver is loaded but its CUDA library {file} was not found; \
             set LD_LIBRARY_PATH to the folder that holds it"
        ),
        _ => format!(
            "the {name} library is missing ({file} not found; set LD_LIBRARY_PATH to the \
             folder that holds it)"
        ),
    }
}

fn probe_uncached() -> Result<usize, String> {
    for (name, file, present) in LIBRARIES {
        if !present() {
            return Err(missing(name, file));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_library_says_what_to_do() {
        let driver = missing("CUDA driver", "libcuda.so.1");
        if std::path::Path::new(NVIDIA_PROC).exists() {
            assert!(driver.contains("LD_LIBRARY_PATH"), "{driver}");
        } else {
            assert!(driver.contains("no NVIDIA driver is installed"), "{driver}");
            assert!(!driver.contains("LD_LIBRARY_PATH"), "{driver}");
        }
        let cublas = missing("cuBLAS", "libcublas.so.13");
        assert!(
            cublas.contains("libcublas.so.13") && cublas.contains("LD_LIBRARY_PATH"),
            "{cublas}"
        );
    }
}

//! Compiling the kernel sources with NVRTC, cached in memory and on disk.
//!
//! The kernels are CUDA C compiled at run time for the device's own
//! architecture (so no toolkit is needed to build verjus, and every GPU gets
//! native code). NVRTC takes a few hundred milliseconds per module, so each
//! result (a cubin) is also written to
//! `$VERJUS_CUDA_CACHE` or `$XDG_CACHE_HOME/verjus/cuda` or `~/.cache/verjus/cuda`
//! under a name that hashes the source, the architecture and the NVRTC version.
//! Files are written to a temporary name and renamed, so a concurrent process
//! never reads half a file; a cache that cannot be written is only slower.

use cudarc::nvrtc::{result as rtc, sys as rtc_sys};
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// FNV-1a, 64 bit: a stable hash (std's hasher may change between releases).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // Separate the parts so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The cache file name of a module.
pub(crate) fn cache_file_name(
    module: &str,
    source: &str,
    arch: (u32, u32),
    nvrtc: (i32, i32),
) -> String {
    let key = format!("sm_{}{} nvrtc {}.{}", arch.0, arch.1, nvrtc.0, nvrtc.1);
    let h = fnv1a(&[module.as_bytes(), source.as_bytes(), key.as_bytes()]);
    format!("{module}-sm_{}{}-{h:016x}.cubin", arch.0, arch.1)
}

/// The cache folder from the environment, if any is configured.
pub(crate) fn cache_dir_from(
    verjus: Option<String>,
    xdg: Option<String>,
    home: Option<String>,
) -> Option<PathBuf> {
    let nonempty = |v: Option<String>| v.filter(|s| !s.is_empty()).map(PathBuf::from);
    nonempty(verjus)
        .or_else(|| nonempty(xdg).map(|p| p.join("verjus").join("cuda")))
        .or_else(|| nonempty(home).map(|p| p.join(".cache").join("verjus").join("cuda")))
}

fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var(k).ok();
    cache_dir_from(var("VERJUS_CUDA_CACHE"), var("XDG_CACHE_HOME"), var("HOME"))
}

/// The NVRTC library's version.
pub(crate) fn nvrtc_version() -> Result<(i32, i32), String> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers.
    unsafe { rtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| format!("nvrtcVersion failed: {e:?}"))?;
    Ok((major, minor))
}

/// Compiles `source` to a cubin for `sm_{arch}`; the error carries NVRTC's log.
pub(crate) fn compile(module: &str, source: &str, arch: (u32, u32)) -> Result<Vec<u8>, String> {
    let src = CString::new(source).map_err(|_| format!("{module}: source contains NUL"))?;
    let name = CString::new(format!("{module}.cu")).map_err(|_| "bad module name".to_string())?;
    let prog = rtc::create_program(&src, Some(&name))
        .map_err(|e| format!("{module}: nvrtcCreateProgram failed: {e:?}"))?;
    let options = [
        format!("--gpu-architecture=sm_{}{}", arch.0, arch.1),
        "--std=c++17".to_string(),
    ];
    // SAFETY: `prog` is a live program until destroyed below.
    let out = unsafe {
        let compiled = rtc::compile_program(prog, &options);
        let result = match compiled {
            Ok(()) => get_cubin(prog).map_err(|e| format!("{module}: nvrtcGetCUBIN failed: {e:?}")),
            Err(e) => {
                let log = rtc::get_program_log(prog)
                    .map(|l| l.iter().map(|&c| c as u8 as char).collect::<String>())
                    .unwrap_or_default();
                Err(format!(
                    "{module}: NVRTC could not compile for sm_{}{} ({e:?}):\n{}",
                    arch.0,
                    arch.1,
                    log.trim_end_matches('\0')
                ))
            }
        };
        let _ = rtc::destroy_program(prog);
        result
    };
    out
}

/// The cubin of a compiled program.
///
/// # Safety
/// `prog` must be a live, successfully compiled program.
unsafe fn get_cubin(prog: rtc_sys::nvrtcProgram) -> Result<Vec<u8>, rtc::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: the caller guarantees `prog`; `size` is a valid out-pointer.
    unsafe { rtc_sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
    let mut image = vec![0u8; size];
    // SAFETY: `image` holds the `size` bytes NVRTC reported.
    unsafe { rtc_sys::nvrtcGetCUBIN(prog, image.as_mut_ptr().cast()) }.result()?;
    Ok(image)
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("module"),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The cubin of a module: from the disk cache, or compiled (and then cached).
pub(crate) fn load_or_compile(
    module: &str,
    source: &str,
    arch: (u32, u32),
) -> Result<Vec<u8>, String> {
    let version = nvrtc_version()?;
    let path = cache_dir().map(|d| d.join(cache_file_name(module, source, arch, version)));
    if let Some(cached) = path.as_ref().and_then(|p| std::fs::read(p).ok()) {
        if !cached.is_empty() {
            return Ok(cached);
        }
    }
    let image = compile(module, source, arch)?;
    if let Some(p) = &path {
        // A cache that cannot be written only costs the next process a compile.
        let _ = write_atomically(p, &image);
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_names_depend_on_everything() {
        let base = cache_file_name("memory", "src", (9, 0), (13, 0));
        assert!(
            base.starts_with("memory-sm_90-") && base.ends_with(".cubin"),
            "{base}"
        );
        assert_eq!(base, cache_file_name("memory", "src", (9, 0), (13, 0)));
        for other in [
            cache_file_name("memory", "src2", (9, 0), (13, 0)),
            cache_file_name("memory", "src", (8, 0), (13, 0)),
            cache_file_name("memory", "src", (9, 0), (13, 1)),
            cache_file_name("reduce", "src", (9, 0), (13, 0)),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn cache_dir_precedence() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            cache_dir_from(s("/v"), s("/x"), s("/h")),
            Some(PathBuf::from("/v"))
        );
        assert_eq!(
            cache_dir_from(None, s("/x"), s("/h")),
            Some(PathBuf::from("/x/verjus/cuda"))
        );
        assert_eq!(
            cache_dir_from(s(""), None, s("/h")),
            Some(PathBuf::from("/h/.cache/verjus/cuda"))
        );
        assert_eq!(cache_dir_from(None, None, None), None);
    }

    #[test]
    fn atomic_write_replaces_the_file() {
        let dir = std::env::temp_dir().join(format!("verjus-cuda-test-{}", std::process::id()));
        let path = dir.join("a.cubin");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let leftovers = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

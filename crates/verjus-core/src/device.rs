//! Devices a tensor can live on and a backend can run on.

use std::fmt;

/// Where a tensor lives and where a backend computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory, computed by the native backend.
    Cpu,
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = crate::Error;
    /// Parses `cpu`, `cuda` (device 0) and `cuda:N`.
    fn from_str(s: &str) -> crate::Result<Self> {
        let bad = || {
            crate::Error::invalid(
                "device",
                format!("unknown device {s:?} (expected \"cpu\", \"cuda\" or \"cuda:N\")"),
            )
        };
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => {
                let n = s.strip_prefix("cuda:").ok_or_else(bad)?;
                n.parse().map(Device::Cuda).map_err(|_| bad())
            }
        }
    }
}

//! Weights as safetensors files: named float tensors (F32, BF16 or F16),
//! little-endian, in PyTorch's layout, so `safetensors.torch.load_file` reads
//! what verjus writes and the other way round. A network's parameters are
//! float32; reduced-precision weights (a bf16 checkpoint) widen exactly when
//! loaded.
//!
//! Nothing here trusts a file: the `safetensors` crate checks the header
//! against the file's length (offsets, sizes, overlaps) before any tensor is
//! read, verjus then checks every dtype and shape, and the file itself is
//! read with a fallible allocation of exactly its length. Every problem is an
//! [`Error::File`] naming the file. Writing goes through [`write_atomic`].

use crate::atomic::write_atomic;
use crate::checkpoint::read_bounded;
use crate::network::Network;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::path::Path;
use verjus_core::half::{bf16, f16};
use verjus_core::{ops, Backend, DType, Device, Error, Result, Shape, Tensor};

/// The safetensors type of a float dtype (the only ones weights hold).
fn file_dtype(dtype: DType) -> Option<Dtype> {
    match dtype {
        DType::F32 => Some(Dtype::F32),
        DType::BF16 => Some(Dtype::BF16),
        DType::F16 => Some(Dtype::F16),
        _ => None,
    }
}

/// The little-endian bytes of a host float tensor.
fn le_bytes(t: &Tensor) -> Result<Vec<u8>> {
    Ok(match t.dtype() {
        DType::BF16 => t
            .as_slice::<bf16>()?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::F16 => t
            .as_slice::<f16>()?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        _ => t
            .as_slice::<f32>()?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    })
}

/// The safetensors bytes of `named` (float32, bfloat16 or float16 tensors on the host).
pub fn encode(named: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let dtypes = named
        .iter()
        .map(|(name, t)| {
            file_dtype(t.dtype()).ok_or_else(|| {
                Error::invalid(
                    "safetensors",
                    format!(
                        "tensor {name:?} is {}; weights are float tensors",
                        t.dtype()
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let bytes = named
        .iter()
        .map(|(_, t)| le_bytes(t))
        .collect::<Result<Vec<_>>>()?;
    let mut views = Vec::with_capacity(named.len());
    for (((name, t), data), dtype) in named.iter().zip(&bytes).zip(dtypes) {
        let view = TensorView::new(dtype, t.dims().to_vec(), data)
            .map_err(|e| Error::invalid("safetensors", format!("tensor {name:?}: {e}")))?;
        views.push((name.as_str(), view));
    }
    safetensors::serialize(views, None)
        .map_err(|e| Error::invalid("safetensors", format!("cannot serialize: {e}")))
}

/// The named tensors in the bytes of a safetensors file, each in its file's
/// dtype (F32, BF16 or F16); `path` names it in errors.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let file = SafeTensors::deserialize(bytes)
        .map_err(|e| Error::file(path, format!("not a valid safetensors file: {e}")))?;
    let mut named = Vec::with_capacity(file.len());
    for (name, view) in file.iter() {
        let dtype = match view.dtype() {
            Dtype::F32 => DType::F32,
            Dtype::BF16 => DType::BF16,
            Dtype::F16 => DType::F16,
            other => {
                return Err(Error::file(
                    path,
                    format!("tensor {name:?} is {other:?}; verjus reads F32, BF16 and F16 weights"),
                ))
            }
        };
        let shape = Shape::new(view.shape().to_vec())
            .map_err(|e| Error::file(path, format!("tensor {name:?}: {e}")))?;
        let data = view.data();
        if data.len() != shape.numel().saturating_mul(dtype.size_in_bytes()) {
            return Err(Error::file(
                path,
                format!("tensor {name:?}: {} bytes for shape {shape}", data.len()),
            ));
        }
        let dims = shape.dims().to_vec();
        let tensor = match dtype {
            DType::BF16 => Tensor::from_vec(dims, from_le(data, bf16::from_le_bytes))?,
            DType::F16 => Tensor::from_vec(dims, from_le(data, f16::from_le_bytes))?,
            _ => Tensor::from_vec(dims, from_le(data, f32::from_le_bytes))?,
        };
        named.push((name.to_string(), tensor));
    }
    // The header is a JSON object: keep a stable order for callers.
    named.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(named)
}

/// The elements of little-endian `data`, `N` bytes each.
fn from_le<T, const N: usize>(data: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    data.chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunks_exact gives N bytes")))
        .collect()
}

/// `t` as float32 on the host: reduced-precision floats widen exactly, float32
/// is returned as it is.
pub(crate) fn widened(t: Tensor) -> Result<Tensor> {
    let values: Vec<f32> = match t.dtype() {
        DType::BF16 => t.as_slice::<bf16>()?.iter().map(|v| v.to_f32()).collect(),
        DType::F16 => t.as_slice::<f16>()?.iter().map(|v| v.to_f32()).collect(),
        _ => return Ok(t),
    };
    Tensor::from_vec(t.dims().to_vec(), values)
}

/// Reads the safetensors file at `path` into named host tensors.
pub fn load_file(path: &Path) -> Result<Vec<(String, Tensor)>> {
    decode(path, &read_bounded(path, None)?)
}

/// Writes `named` to `path` as safetensors, atomically.
pub fn save_file(path: &Path, named: &[(String, Tensor)]) -> Result<()> {
    let bytes = encode(named).map_err(|e| Error::file(path, e.to_string()))?;
    write_atomic(path, &bytes)
}

/// The first NaN or infinite value among the f32 tensors `named`: the
/// tensor's name, the element's index and the value.
pub(crate) fn first_non_finite(named: &[(String, Tensor)]) -> Option<(&str, usize, f32)> {
    named.iter().find_map(|(name, t)| {
        let values = t.as_slice::<f32>().ok()?;
        let i = values.iter().position(|v| !v.is_finite())?;
        Some((name.as_str(), i, values[i]))
    })
}

/// Refuses to save a tensor with a NaN or infinite value: after a diverged
/// step, saving would replace the last good checkpoint with unusable weights.
pub(crate) fn check_finite(target: &Path, named: &[(String, Tensor)]) -> Result<()> {
    match first_non_finite(named) {
        None => Ok(()),
        Some((name, i, value)) => Err(Error::invalid(
            "save",
            format!(
                "{}: not saved: {name} holds {value} at element {i} (training has diverged?); \
                 what was there is left as it was",
                target.display()
            ),
        )),
    }
}

impl Network {
    /// Copies of the parameters on the host, by name, in parameter order
    /// (parameters on a device are downloaded through `be`).
    pub fn named_parameters_host(&self, be: &dyn Backend) -> Result<Vec<(String, Tensor)>> {
        self.parameters()
            .iter()
            .map(|p| {
                let value = if p.value.device() == Device::Cpu {
                    p.value.try_clone_host()?
                } else {
                    ops::download(be, &p.value)?
                };
                Ok((p.name.clone(), value))
            })
            .collect()
    }

    /// Writes the parameters to `path` as safetensors (names are parameter
    /// names), atomically.
    pub fn save_weights(&self, be: &dyn Backend, path: &Path) -> Result<()> {
        let named = self.named_parameters_host(be)?;
        check_finite(path, &named)?;
        save_file(path, &named)
    }

    /// Reads a safetensors file and loads it with [`Network::load_parameters`]:
    /// nothing changes unless the whole file is valid and fits. A tensor that
    /// does not fit the network is an error naming the file too.
    pub fn load_weights(&mut self, be: &dyn Backend, path: &Path, strict: bool) -> Result<()> {
        let named = load_file(path)?;
        self.load_parameters(be, named, strict)
            .map_err(|e| e.in_file(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NetworkDef;
    use verjus_native::NativeBackend;

    type Named = Vec<(String, Tensor)>;

    const MLP: &str = r#"{
        "inputs": [{"name": "x", "shape": [3]}],
        "layers": [
            {"name": "fc1", "type": "Linear", "out_features": 4},
            {"name": "act", "type": "ReLU"},
            {"name": "fc2", "type": "Linear", "out_features": 2}
        ],
        "outputs": ["fc2"]
    }"#;

    fn mlp(seed: u64) -> Network {
        let be = NativeBackend::new();
        Network::build(NetworkDef::from_json(MLP).unwrap(), &be, seed).unwrap()
    }

    fn values(net: &Network) -> Vec<Vec<f32>> {
        net.parameters()
            .iter()
            .map(|p| p.value.to_vec::<f32>().unwrap())
            .collect()
    }

    #[test]
    fn save_and_load_round_trip() {
        let be = NativeBackend::new();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let a = mlp(1);
        a.save_weights(&be, &path).unwrap();
        let named = load_file(&path).unwrap();
        let names: Vec<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]);
        assert_eq!(named[1].1.dims(), &[4, 3]);
        let mut b = mlp(2);
        assert_ne!(values(&a), values(&b));
        b.load_weights(&be, &path, true).unwrap();
        assert_eq!(values(&a), values(&b));
        // The bytes are little-endian f32 after the header.
        let bytes = std::fs::read(&path).unwrap();
        let w = a.parameters()[0].value.to_vec::<f32>().unwrap();
        let le: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(bytes.windows(le.len()).any(|win| win == le));
    }

    #[test]
    fn reduced_precision_weights_keep_their_dtype_and_load_widened() {
        let be = NativeBackend::new();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let a = mlp(1);
        let rounded = |t: &Tensor, dtype: DType| -> Tensor {
            let v = t.as_slice::<f32>().unwrap();
            match dtype {
                DType::BF16 => Tensor::from_vec(
                    t.dims().to_vec(),
                    v.iter().map(|&x| bf16::from_f32(x)).collect(),
                ),
                _ => Tensor::from_vec(
                    t.dims().to_vec(),
                    v.iter().map(|&x| f16::from_f32(x)).collect(),
                ),
            }
            .unwrap()
        };
        for dtype in [DType::BF16, DType::F16] {
            let named: Named = a
                .named_parameters_host(&be)
                .unwrap()
                .iter()
                .map(|(n, t)| (n.clone(), rounded(t, dtype)))
                .collect();
            save_file(&path, &named).unwrap();
            let read = load_file(&path).unwrap();
            assert!(read.iter().all(|(_, t)| t.dtype() == dtype));
            let mut b = mlp(2);
            b.load_weights(&be, &path, true).unwrap();
            let expected: Vec<Vec<f32>> = named
                .into_iter()
                .map(|(_, t)| widened(t).unwrap().to_vec::<f32>().unwrap())
                .collect();
            assert_eq!(values(&b), expected, "{dtype}");
            assert_ne!(values(&b), values(&a), "{dtype} rounds");
        }
        // An integer tensor is not a weight.
        let ints = [(
            "x".to_string(),
            Tensor::from_vec([2], vec![1i64, 2]).unwrap(),
        )];
        let err = encode(&ints).unwrap_err().to_string();
        assert!(err.contains("int64") && err.contains("\"x\""), "{err}");
    }

    #[test]
    fn corrupt_and_truncated_files_are_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let named = mlp(1).named_parameters_host(&NativeBackend::new()).unwrap();
        let good = encode(&named).unwrap();
        let check = |bytes: &[u8], needle: &str| {
            std::fs::write(&path, bytes).unwrap();
            let err = load_file(&path).unwrap_err();
            assert!(matches!(err, Error::File { .. }), "{err}");
            let msg = err.to_string();
            assert!(
                msg.contains("w.safetensors") && msg.contains(needle),
                "{msg}"
            );
        };
        check(&good[..good.len() - 1], "safetensors");
        check(&good[..5], "safetensors");
        check(b"", "safetensors");
        // A header length far beyond the file.
        let mut huge = good.clone();
        huge[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        check(&huge, "safetensors");
        // Garbage in the header.
        let mut garbage = good.clone();
        garbage[8..20].fill(b'#');
        check(&garbage, "safetensors");
        // Offsets that claim more data than the file has.
        let header = br#"{"w":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,4]}}"#;
        let mut lying = (header.len() as u64).to_le_bytes().to_vec();
        lying.extend_from_slice(header);
        lying.extend_from_slice(&[0; 4]);
        check(&lying, "safetensors");
        // Another dtype.
        let header = br#"{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}"#;
        let mut f64_file = (header.len() as u64).to_le_bytes().to_vec();
        f64_file.extend_from_slice(header);
        f64_file.extend_from_slice(&[0; 8]);
        check(&f64_file, "F64");
        let missing = load_file(&dir.path().join("nope.safetensors")).unwrap_err();
        assert!(matches!(missing, Error::File { .. }) && missing.to_string().contains("nope"));
    }

    #[test]
    fn load_validates_everything_before_changing_anything() {
        let be = NativeBackend::new();
        let mut net = mlp(1);
        let before = values(&net);
        let good = mlp(2).named_parameters_host(&be).unwrap();
        let with = |edit: &dyn Fn(&mut Named)| {
            let mut named: Named = good
                .iter()
                .map(|(n, t)| (n.clone(), t.try_clone_host().unwrap()))
                .collect();
            edit(&mut named);
            named
        };

        // A wrong shape in the last tensor: named, both shapes, nothing replaced.
        let named = with(&|n| n[3].1 = Tensor::from_vec([3], vec![0f32; 3]).unwrap());
        let err = net.load_parameters(&be, named, true).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::ShapeMismatch { .. }), "{msg}");
        assert!(
            msg.contains("fc2.bias") && msg.contains("[2]") && msg.contains("[3]"),
            "{msg}"
        );
        assert_eq!(values(&net), before);

        let named = with(&|n| n[3].0 = "fc3.bias".into());
        let err = net
            .load_parameters(&be, named, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("fc3.bias") && err.contains("fc2.bias"),
            "{err}"
        );
        assert_eq!(values(&net), before);

        let named = with(&|n| n[0].1 = Tensor::from_vec([4, 3], vec![0i64; 12]).unwrap());
        let err = net
            .load_parameters(&be, named, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("fc1.weight") && err.contains("int64"), "{err}");

        let named = with(&|n| {
            n.pop();
        });
        let err = net
            .load_parameters(&be, named, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("fc2.bias") && err.contains("missing"), "{err}");
        assert_eq!(values(&net), before);

        let named = with(&|n| {
            let dup = (n[0].0.clone(), n[0].1.try_clone_host().unwrap());
            n.push(dup);
        });
        assert!(net.load_parameters(&be, named, true).is_err());
        assert_eq!(values(&net), before);

        // Not strict: a subset loads, the rest stays.
        let named = with(&|n| n.truncate(1));
        net.load_parameters(&be, named, false).unwrap();
        let after = values(&net);
        assert_eq!(after[0], good[0].1.to_vec::<f32>().unwrap());
        assert_eq!(after[1..], before[1..]);
    }
}

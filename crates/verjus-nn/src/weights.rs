//! Weights as safetensors files: named f32 tensors, little-endian, in
//! PyTorch's layout, so `safetensors.torch.load_file` reads what verjus writes
//! and the other way round.
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
use verjus_core::{ops, Backend, DType, Device, Error, Result, Shape, Tensor};

/// The safetensors bytes of `named` (f32 tensors on the host).
pub fn encode(named: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let mut views = Vec::with_capacity(named.len());
    let mut bytes: Vec<Vec<u8>> = Vec::with_capacity(named.len());
    for (_, t) in named {
        bytes.push(
            t.as_slice::<f32>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
    }
    for ((name, t), data) in named.iter().zip(&bytes) {
        let view = TensorView::new(Dtype::F32, t.dims().to_vec(), data)
            .map_err(|e| Error::invalid("safetensors", format!("tensor {name:?}: {e}")))?;
        views.push((name.as_str(), view));
    }
    safetensors::serialize(views, None)
        .map_err(|e| Error::invalid("safetensors", format!("cannot serialize: {e}")))
}

/// The named tensors in the bytes of a safetensors file; `path` names it in errors.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    let file = SafeTensors::deserialize(bytes)
        .map_err(|e| Error::file(path, format!("not a valid safetensors file: {e}")))?;
    let mut named = Vec::with_capacity(file.len());
    for (name, view) in file.iter() {
        if view.dtype() != Dtype::F32 {
            return Err(Error::file(
                path,
                format!(
                    "tensor {name:?} is {:?}; verjus reads F32 weights only",
                    view.dtype()
                ),
            ));
        }
        let shape = Shape::new(view.shape().to_vec())
            .map_err(|e| Error::file(path, format!("tensor {name:?}: {e}")))?;
        let data = view.data();
        if data.len() != shape.numel().saturating_mul(DType::F32.size_in_bytes()) {
            return Err(Error::file(
                path,
                format!("tensor {name:?}: {} bytes for shape {shape}", data.len()),
            ));
        }
        let values: Vec<f32> = data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        named.push((
            name.to_string(),
            Tensor::from_vec(shape.dims().to_vec(), values)?,
        ));
    }
    // The header is a JSON object: keep a stable order for callers.
    named.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(named)
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

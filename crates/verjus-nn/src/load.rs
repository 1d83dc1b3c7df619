//! Replacing a network's parameters by name, all or nothing.
//!
//! Loading weights (from a safetensors file or a Python `state_dict`) must not
//! leave a network half-loaded: [`Network::load_parameters`] checks every name,
//! dtype and shape, and moves every value to the parameters' device, before it
//! replaces the first parameter.

use crate::network::Network;
use std::collections::HashMap;
use verjus_core::{ops, Backend, DType, Device, Error, Result, Tensor};

impl Network {
    /// Replaces parameters by name with `named` (host tensors, or tensors on
    /// `be`'s device). bfloat16 and float16 values widen to float32 (exactly).
    /// An unknown or repeated name, another dtype than these, a
    /// wrong shape, or (when `strict`) a parameter missing from `named` is an
    /// error naming the parameter (and both shapes), and leaves every parameter
    /// unchanged. Values for parameters on a device are uploaded through `be`.
    pub fn load_parameters(
        &mut self,
        be: &dyn Backend,
        named: Vec<(String, Tensor)>,
        strict: bool,
    ) -> Result<()> {
        let op = "load_parameters";
        let index: HashMap<&str, usize> = self
            .parameters
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let mut slots: Vec<Option<Tensor>> = (0..self.parameters.len()).map(|_| None).collect();
        for (name, value) in named {
            let Some(&i) = index.get(name.as_str()) else {
                let known: Vec<&str> = self.parameters.iter().map(|p| p.name.as_str()).collect();
                return Err(Error::definition(
                    &name,
                    format!(
                        "{op}: no parameter of this name (the network has {})",
                        known.join(", ")
                    ),
                ));
            };
            let current = &self.parameters[i].value;
            let value = widened(be, value)?;
            if value.dtype() != DType::F32 {
                return Err(Error::DTypeMismatch {
                    op: op.into(),
                    what: format!("parameter {name:?}"),
                    expected: DType::F32,
                    actual: value.dtype(),
                });
            }
            if value.shape() != current.shape() {
                return Err(Error::shape(
                    op,
                    format!("parameter {name:?}"),
                    current.shape(),
                    value.shape(),
                ));
            }
            if slots[i].is_some() {
                return Err(Error::definition(&name, format!("{op}: given twice")));
            }
            slots[i] = Some(value);
        }
        if strict {
            if let Some(i) = slots.iter().position(Option::is_none) {
                let p = &self.parameters[i];
                return Err(Error::definition(
                    &p.name,
                    format!(
                        "{op}: missing (expected shape {}); pass strict=False to load a subset",
                        p.value.shape()
                    ),
                ));
            }
        }
        // Everything fits: bring the values to the parameters' devices (which
        // can still fail, so before anything is replaced), then swap them in.
        for (slot, p) in slots.iter_mut().zip(&self.parameters) {
            let Some(value) = slot.take() else { continue };
            let target = p.value.device();
            *slot = Some(match (value.device(), target) {
                (from, to) if from == to => value,
                (Device::Cpu, _) => ops::upload(be, &value)?,
                (_, Device::Cpu) => ops::download(be, &value)?,
                _ => ops::upload(be, &ops::download(be, &value)?)?,
            });
        }
        for (slot, p) in slots.into_iter().zip(&mut self.parameters) {
            if let Some(value) = slot {
                p.value = value;
            }
        }
        Ok(())
    }
}

/// `value` as float32: reduced-precision floats widen exactly (on the host, or
/// on `be`'s device), anything else is returned as it is.
fn widened(be: &dyn Backend, value: Tensor) -> Result<Tensor> {
    if !value.dtype().is_reduced_float() {
        return Ok(value);
    }
    if value.device() == Device::Cpu {
        return crate::weights::widened(value);
    }
    let mut wide = ops::output(be, value.shape(), DType::F32)?;
    ops::cast(be, &value, &mut wide)?;
    Ok(wide)
}

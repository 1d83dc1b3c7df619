//! Moving networks and trainers between devices.
//!
//! No GPU is needed: a fake device backend (`cuda:7`, host memory behind
//! `DeviceStorage`) can upload, download and be told to fail, which is all a
//! move uses. The move never asks which backend it talks to, so the fake
//! exercises the same path as a real CUDA device.

use crate::checkpoint::{trainer, DROPOUT_MLP};
use crate::common::{build, rand_tensor};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use verjus_core::{
    Backend, BackendRef, DType, Device, DeviceStorage, Error, HostData, Result, Shape, Storage,
    Tensor,
};
use verjus_native::NativeBackend;
use verjus_nn::{Network, Trainer};

const FAKE: Device = Device::Cuda(7);

#[derive(Debug)]
struct FakeStorage(HostData);

impl DeviceStorage for FakeStorage {
    fn device(&self) -> Device {
        FAKE
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A device that only stores: uploads fail once `uploads_left` reaches 0.
#[derive(Debug)]
struct FakeDevice {
    uploads_left: AtomicUsize,
}

impl FakeDevice {
    fn new(uploads: usize) -> Self {
        FakeDevice {
            uploads_left: AtomicUsize::new(uploads),
        }
    }
}

fn host_data(t: &Tensor) -> Result<HostData> {
    match t.try_clone_host()?.storage() {
        Storage::Host(h) => Ok(h.clone()),
        _ => Err(Error::invalid("upload", "not a host tensor")),
    }
}

impl Backend for FakeDevice {
    fn name(&self) -> &str {
        "fake"
    }
    fn device(&self) -> Device {
        FAKE
    }
    fn alloc_zeroed(&self, shape: &Shape, dtype: DType) -> Result<Tensor> {
        let data = HostData::zeros(dtype, shape.numel())?;
        Tensor::from_storage(
            shape.clone(),
            dtype,
            Storage::Device(Box::new(FakeStorage(data))),
        )
    }
    fn upload(&self, host: &Tensor) -> Result<Tensor> {
        let left = self.uploads_left.load(Ordering::SeqCst);
        if left == 0 {
            return Err(Error::Device {
                device: FAKE.to_string(),
                msg: "out of memory (fake)".into(),
            });
        }
        self.uploads_left.store(left - 1, Ordering::SeqCst);
        let storage = Storage::Device(Box::new(FakeStorage(host_data(host)?)));
        Tensor::from_storage(host.shape().clone(), host.dtype(), storage)
    }
    fn download(&self, t: &Tensor) -> Result<Tensor> {
        let Storage::Device(d) = t.storage() else {
            return Err(Error::invalid("download", "not a device tensor"));
        };
        let data = d
            .as_any()
            .downcast_ref::<FakeStorage>()
            .ok_or_else(|| Error::invalid("download", "not a fake tensor"))?;
        Tensor::from_storage(t.shape().clone(), t.dtype(), Storage::Host(data.0.clone()))
    }
}

/// Each parameter's name, device and bits, read through `be`.
fn snapshot(net: &Network, be: &dyn Backend) -> Vec<(String, Device, Vec<u32>)> {
    net.parameters()
        .iter()
        .map(|p| {
            let host = if p.value.device() == Device::Cpu {
                p.value.try_clone_host().unwrap()
            } else {
                be.download(&p.value).unwrap()
            };
            let bits = host.as_slice::<f32>().unwrap();
            let bits = bits.iter().map(|v| v.to_bits()).collect();
            (p.name.clone(), p.value.device(), bits)
        })
        .collect()
}

fn bits_only(s: Vec<(String, Device, Vec<u32>)>) -> Vec<(String, Vec<u32>)> {
    s.into_iter().map(|(n, _, b)| (n, b)).collect()
}

#[test]
fn cpu_to_cpu_keeps_every_bit() {
    let (a, b) = (NativeBackend::new(), NativeBackend::new());
    let mut net = build(DROPOUT_MLP, 3);
    let before = snapshot(&net, &a);
    net.to_device(&a, &b).unwrap();
    assert_eq!(snapshot(&net, &b), before);
}

#[test]
fn round_trip_through_a_device_keeps_every_bit() {
    let cpu = NativeBackend::new();
    let dev = FakeDevice::new(usize::MAX);
    let mut net = build(DROPOUT_MLP, 4);
    let before = snapshot(&net, &cpu);
    net.to_device(&cpu, &dev).unwrap();
    assert!(net.on_device(FAKE));
    assert_eq!(bits_only(snapshot(&net, &dev)), bits_only(before.clone()));
    net.to_device(&dev, &cpu).unwrap();
    assert!(net.on_device(Device::Cpu));
    assert_eq!(snapshot(&net, &cpu), before);
}

#[test]
fn a_failed_move_changes_nothing() {
    let cpu = NativeBackend::new();
    // Two of the four parameters upload, the third fails.
    let dev = FakeDevice::new(2);
    let mut net = build(DROPOUT_MLP, 5);
    let before = snapshot(&net, &cpu);
    let err = net.to_device(&cpu, &dev).unwrap_err().to_string();
    assert!(
        err.contains("cuda:7") && err.contains("out of memory"),
        "{err}"
    );
    assert_eq!(snapshot(&net, &cpu), before);
    assert!(net.on_device(Device::Cpu));
}

#[test]
fn the_source_backend_must_hold_the_parameters() {
    let cpu = NativeBackend::new();
    let dev = FakeDevice::new(usize::MAX);
    let mut net = build(DROPOUT_MLP, 6);
    net.to_device(&cpu, &dev).unwrap();
    let err = net.to_device(&cpu, &cpu).unwrap_err().to_string();
    assert!(
        err.contains("fc1.weight") && err.contains("cuda:7") && err.contains("from cpu"),
        "{err}"
    );
    assert!(net.on_device(FAKE));
}

fn batch(i: usize) -> (Tensor, Tensor) {
    let be = NativeBackend::new();
    let x = rand_tensor(&be, &[6, 12], 300 + i as u64);
    let y: Vec<i64> = (0..6).map(|k| ((k * 3 + i) % 5) as i64).collect();
    (x, Tensor::from_vec([6], y).unwrap())
}

fn train(t: &mut Trainer, steps: std::ops::Range<usize>) -> Vec<f32> {
    steps
        .map(|i| {
            let (x, y) = batch(i);
            t.train_minibatch(&x, &y).unwrap().0
        })
        .collect()
}

#[test]
fn training_continues_after_a_move() {
    // Adam keeps moments: they move with the parameters.
    let (mut moved, mut stayed) = (trainer(8), trainer(8));
    assert_eq!(train(&mut moved, 0..3), train(&mut stayed, 0..3));
    let cpu: BackendRef = Arc::new(NativeBackend::new());
    let dev: BackendRef = Arc::new(FakeDevice::new(usize::MAX));
    moved.to_device(BackendRef::clone(&dev)).unwrap();
    assert_eq!(moved.backend().device(), FAKE);
    assert!(moved.network().on_device(FAKE));
    let moments = moved.solver().state().entries();
    assert!(!moments.is_empty());
    for (name, st) in moments {
        assert!(st.slots.iter().all(|s| s.device() == FAKE), "{name}");
    }
    moved.to_device(cpu).unwrap();
    assert_eq!(train(&mut moved, 3..6), train(&mut stayed, 3..6));
    let cpu = NativeBackend::new();
    assert_eq!(
        snapshot(moved.network(), &cpu),
        snapshot(stayed.network(), &cpu)
    );
}

#[test]
fn a_failed_trainer_move_changes_nothing() {
    let mut t = trainer(9);
    train(&mut t, 0..2);
    let cpu = NativeBackend::new();
    let before = snapshot(t.network(), &cpu);
    // The parameters fit, the solver state does not.
    let n = t.network().parameters().len();
    let err = t
        .to_device(Arc::new(FakeDevice::new(n + 1)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("out of memory"), "{err}");
    assert_eq!(t.backend().device(), Device::Cpu);
    assert_eq!(snapshot(t.network(), &cpu), before);
    let mut fresh = trainer(9);
    train(&mut fresh, 0..2);
    assert_eq!(train(&mut t, 2..4), train(&mut fresh, 2..4));
}

//! Whole-network workloads: a training step, its solver update alone, inference,
//! and a Fashion-MNIST epoch of the example networks (`examples/nets/`, compiled
//! in), through `verjus-nn`'s `Trainer`, `Solver` and `Network` as a training
//! loop or a server would call them.

use crate::workloads::{filled, Runner};
use serde_json::{json, Value};
use verjus_core::{ops, scoped, BackendRef, Result, Tensor};
use verjus_nn::data::{data_dir, load_fashion_mnist, Split, ENV_VAR};
use verjus_nn::solver::{Adam, Sgd, Solver};
use verjus_nn::{Loss, Network, NetworkDef, Trainer};

/// Seed of the parameter initialisation and of the epoch's shuffle.
const SEED: u64 = 0;
/// Fashion-MNIST: 1x28x28 images, 10 classes.
const IMAGE: [usize; 3] = [1, 28, 28];
const CLASSES: i64 = 10;

/// One of the example networks.
#[derive(Clone, Copy, Debug)]
pub enum Net {
    /// `fashion_mlp.json`: Flatten-784-512-ReLU-512-ReLU-10.
    Mlp,
    /// `fashion_cnn.json`: two conv-ReLU-maxpool blocks, then 3136-128-ReLU-10.
    Cnn,
}

impl Net {
    /// The definition's file name in `examples/nets/`.
    pub fn file(self) -> &'static str {
        match self {
            Net::Mlp => "fashion_mlp.json",
            Net::Cnn => "fashion_cnn.json",
        }
    }

    fn build(self, be: &BackendRef) -> Result<Network> {
        let json = match self {
            Net::Mlp => include_str!("../../examples/nets/fashion_mlp.json"),
            Net::Cnn => include_str!("../../examples/nets/fashion_cnn.json"),
        };
        Network::build(NetworkDef::from_json(json)?, &**be, SEED)
    }
}

/// The optimizer of a training workload.
#[derive(Clone, Copy, Debug)]
pub enum Optimizer {
    /// Adam, lr 1e-3, PyTorch's default betas and eps.
    Adam,
    /// SGD, lr 1e-2, momentum 0.9.
    SgdMomentum,
}

impl Optimizer {
    /// Its hyperparameters, as `run.py` reads them.
    pub fn describe(self) -> Value {
        match self {
            Optimizer::Adam => json!({"solver": "adam", "lr": 1e-3}),
            Optimizer::SgdMomentum => json!({"solver": "sgd", "lr": 1e-2, "momentum": 0.9}),
        }
    }

    fn solver(self) -> Solver {
        match self {
            Optimizer::Adam => Solver::new(Adam::new(1e-3)),
            Optimizer::SgdMomentum => Solver::new(Sgd {
                momentum: 0.9,
                ..Sgd::new(1e-2)
            }),
        }
    }
}

fn trainer(net: Net, opt: Optimizer, be: &BackendRef) -> Result<Trainer> {
    let loss = Loss::SoftmaxCrossEntropy {
        label_smoothing: 0.0,
    };
    Ok(Trainer::new(net.build(be)?, opt.solver(), loss, be.clone()))
}

/// A random batch of images and class labels on `be`'s device.
fn random_batch(be: &BackendRef, batch: usize) -> Result<(Tensor, Tensor)> {
    let x = filled(&**be, [&[batch][..], &IMAGE].concat(), 7)?;
    let labels = (0..batch as i64).map(|i| (i * 7 + 3) % CLASSES).collect();
    let y = ops::upload(&**be, &Tensor::from_vec([batch], labels)?)?;
    Ok((x, y))
}

/// One `Trainer::train_minibatch` (forward, softmax cross-entropy, backward,
/// solver step) on the same random batch each call.
pub fn train_step(net: Net, opt: Optimizer, batch: usize, be: BackendRef) -> Result<Runner> {
    let mut trainer = trainer(net, opt, &be)?;
    let (x, y) = random_batch(&be, batch)?;
    Ok(Box::new(move || trainer.train_minibatch(&x, &y).map(drop)))
}

/// The solver update that ends a training step, alone: one `Solver::step` over
/// all of `net`'s parameters from fixed gradients (summed over `batch` examples),
/// on the backend's pool as `Trainer::train_minibatch` runs it.
pub fn update(net: Net, opt: Optimizer, batch: usize, be: BackendRef) -> Result<Runner> {
    let mut network = net.build(&be)?;
    let grads = (network.parameters().iter().enumerate())
        .map(|(i, p)| filled(&*be, p.value.dims().to_vec(), 100 + i as u64))
        .collect::<Result<Vec<_>>>()?;
    let mut solver = opt.solver();
    Ok(Box::new(move || {
        let params = network.parameters_mut();
        scoped(&*be, || solver.step(&*be, params, &grads, batch).map(drop))
    }))
}

/// The forward pass in inference mode into a context kept across calls.
pub fn infer(net: Net, batch: usize, be: BackendRef) -> Result<Runner> {
    let net = net.build(&be)?;
    let mut ctx = net.new_context(&*be, batch)?;
    ctx.set_train(false);
    let (x, _) = random_batch(&be, batch)?;
    Ok(Box::new(move || net.compute_output(&*be, &mut ctx, &[&x])))
}

/// A request to a [`verjus_nn::Runner`] serving the network: what a server's
/// call costs, a context made for each request included.
pub fn serve(net: Net, batch: usize, be: BackendRef) -> Result<Runner> {
    let runner = verjus_nn::Runner::new(net.build(&be)?, BackendRef::clone(&be))?;
    let (x, _) = random_batch(&be, batch)?;
    Ok(Box::new(move || runner.infer(&[&x]).map(drop)))
}

/// Why the epoch workloads cannot run here: no Fashion-MNIST directory.
pub fn missing_dataset() -> Option<String> {
    let dir = data_dir(None);
    (!dir.is_dir()).then(|| {
        format!(
            "Fashion-MNIST is not in {} (apt-get install dataset-fashion-mnist, or set {ENV_VAR})",
            dir.display()
        )
    })
}

/// The directory the epoch workloads read, for `run.py` to load the same files.
pub fn dataset_dir() -> String {
    data_dir(None).display().to_string()
}

/// One epoch over the Fashion-MNIST training split (loaded here, untimed) in a
/// new shuffled order per call: gathering each minibatch, then a training step.
pub fn epoch(net: Net, opt: Optimizer, batch: usize, be: BackendRef) -> Result<Runner> {
    let mut trainer = trainer(net, opt, &be)?;
    let train = load_fashion_mnist(Split::Train, None)?;
    let mut shuffle = SEED;
    Ok(Box::new(move || {
        shuffle += 1;
        for b in train.batches(batch, Some(shuffle))? {
            let b = b?;
            trainer.train_minibatch(&b.x, &b.y)?;
        }
        Ok(())
    }))
}

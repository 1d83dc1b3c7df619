//! Fashion-MNIST (and MNIST, which has the same files) from disk.
//!
//! Debian's `dataset-fashion-mnist` package installs the four gzip'd IDX files
//! in [`DEFAULT_DIR`]. Another directory can be given by argument or by the
//! environment variable [`ENV_VAR`]; the same loader reads MNIST from a
//! directory holding its files.

use super::{idx, Dataset};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::{fs, io};
use verjus_core::{Error, Result};

/// Where `apt-get install dataset-fashion-mnist` puts the files.
pub const DEFAULT_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// Environment variable naming the directory of the IDX files.
pub const ENV_VAR: &str = "VERJUS_FASHION_MNIST";

/// Number of classes.
pub const CLASSES: usize = 10;

/// The training or the test part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// 60 000 examples.
    Train,
    /// 10 000 examples.
    Test,
}

impl Split {
    fn prefix(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "t10k",
        }
    }
}

/// The directory to read: `dir` if given, else `$VERJUS_FASHION_MNIST` if set
/// (and not empty), else [`DEFAULT_DIR`].
pub fn data_dir(dir: Option<&Path>) -> PathBuf {
    resolve_dir(dir, std::env::var_os(ENV_VAR))
}

fn resolve_dir(dir: Option<&Path>, env: Option<OsString>) -> PathBuf {
    match (dir, env) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(e)) if !e.is_empty() => PathBuf::from(e),
        _ => PathBuf::from(DEFAULT_DIR),
    }
}

/// One split of Fashion-MNIST from [`data_dir`]`(dir)`: images
/// `[N, 1, 28, 28]` f32 in `[0, 1]`, labels `[N]` i64 in `0..10`.
pub fn load_fashion_mnist(split: Split, dir: Option<&Path>) -> Result<Dataset> {
    let dir = data_dir(dir);
    let images_path = find(&dir, &format!("{}-images-idx3-ubyte", split.prefix()))?;
    let labels_path = find(&dir, &format!("{}-labels-idx1-ubyte", split.prefix()))?;
    let images = idx::read_images(&images_path)?;
    if images.dims()[2..] != [28, 28] {
        return Err(Error::file(
            &images_path,
            format!(
                "images are {}x{} (dimensions at byte offsets 8 and 12), expected 28x28",
                images.dims()[2],
                images.dims()[3]
            ),
        ));
    }
    if images.dims()[0] == 0 {
        return Err(Error::file(
            &images_path,
            "holds no images (the count at byte offset 4 is 0)",
        ));
    }
    let labels = idx::read_labels(&labels_path)?;
    let (n, m) = (images.dims()[0], labels.numel());
    if n != m {
        return Err(Error::file(
            &labels_path,
            format!(
                "{m} labels (count at byte offset 4), but {} holds {n} images",
                images_path.display()
            ),
        ));
    }
    if let Some((i, &bad)) = labels
        .as_slice::<i64>()?
        .iter()
        .enumerate()
        .find(|(_, &l)| l < 0 || l >= CLASSES as i64)
    {
        return Err(Error::file(
            &labels_path,
            format!(
                "label {bad} at byte offset {} is not a class 0..{CLASSES}",
                8 + i
            ),
        ));
    }
    Dataset::new(images, labels)
}

/// `dir/name.gz`, else `dir/name`; when neither exists, an error that says how
/// to get the data. Something there that cannot be read (a folder, a dangling
/// link, no permission) is an error naming it: "not found" would send the user
/// to install data that is there.
fn find(dir: &Path, name: &str) -> Result<PathBuf> {
    if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(Error::file(
            dir,
            "is not a folder (give the folder that holds the IDX files)",
        ));
    }
    let gz = dir.join(format!("{name}.gz"));
    for candidate in [&gz, &dir.join(name)] {
        match fs::metadata(candidate) {
            Ok(m) if m.is_file() => return Ok(candidate.clone()),
            Ok(_) => return Err(Error::file(candidate, "is not a regular file")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if candidate.symlink_metadata().is_ok() {
                    return Err(Error::file(candidate, "is a symbolic link to nothing"));
                }
            }
            Err(e) => return Err(Error::file(candidate, format!("cannot be read: {e}"))),
        }
    }
    Err(Error::file(
        gz,
        format!(
            "Fashion-MNIST not found: install it with `apt-get install dataset-fashion-mnist`, \
             or set {ENV_VAR} to the directory holding {name}.gz and the other IDX files"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::idx::write::{gz, idx_bytes};
    use super::*;

    /// A 3-example split in `dir`.
    fn write_split(dir: &Path, split: Split, images: u32, labels: &[u8]) {
        let pixels: Vec<u8> = (0..images * 28 * 28).map(|i| (i % 256) as u8).collect();
        gz(
            &dir.join(format!("{}-images-idx3-ubyte.gz", split.prefix())),
            &idx_bytes(&[images, 28, 28], &pixels),
        );
        gz(
            &dir.join(format!("{}-labels-idx1-ubyte.gz", split.prefix())),
            &idx_bytes(&[labels.len() as u32], labels),
        );
    }

    #[test]
    fn directory_resolution() {
        let arg = Path::new("/arg");
        let env = || Some(OsString::from("/env"));
        assert_eq!(resolve_dir(Some(arg), env()), arg);
        assert_eq!(resolve_dir(None, env()), Path::new("/env"));
        assert_eq!(
            resolve_dir(None, Some(OsString::new())),
            Path::new(DEFAULT_DIR)
        );
        assert_eq!(resolve_dir(None, None), Path::new(DEFAULT_DIR));
    }

    #[test]
    fn loads_a_small_split() {
        let dir = tempfile::tempdir().unwrap();
        write_split(dir.path(), Split::Test, 3, &[9, 0, 4]);
        let data = load_fashion_mnist(Split::Test, Some(dir.path())).unwrap();
        assert_eq!(data.examples().dims(), &[3, 1, 28, 28]);
        assert_eq!(data.labels().to_vec::<i64>().unwrap(), [9, 0, 4]);
        let px = data.examples().as_slice::<f32>().unwrap();
        assert_eq!(px[255], 1.0);
        assert!(px.iter().all(|p| (0.0..=1.0).contains(p)));
    }

    #[test]
    fn inconsistent_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        write_split(dir.path(), Split::Train, 3, &[1, 2]);
        let e = load_fashion_mnist(Split::Train, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("train-labels") && e.contains("2 labels") && e.contains("3 images"),
            "{e}"
        );

        write_split(dir.path(), Split::Train, 2, &[1, 10]);
        let e = load_fashion_mnist(Split::Train, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("label 10 at byte offset 9"), "{e}");

        gz(
            &dir.path().join("train-images-idx3-ubyte.gz"),
            &idx_bytes(&[1, 32, 32], &[0; 32 * 32]),
        );
        let e = load_fashion_mnist(Split::Train, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("32x32"), "{e}");

        write_split(dir.path(), Split::Train, 0, &[]);
        let e = load_fashion_mnist(Split::Train, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("train-images") && e.contains("no images"), "{e}");
    }

    #[test]
    fn missing_data_says_how_to_install_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = load_fashion_mnist(Split::Test, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("apt-get install dataset-fashion-mnist"), "{e}");
        assert!(
            e.contains(ENV_VAR) && e.contains("t10k-images-idx3-ubyte.gz"),
            "{e}"
        );
    }

    #[test]
    fn data_that_is_there_but_unreadable_is_not_called_missing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("t10k-images-idx3-ubyte.gz")).unwrap();
        let e = load_fashion_mnist(Split::Test, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t10k-images-idx3-ubyte.gz") && e.contains("not a regular file"),
            "{e}"
        );
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        let e = load_fashion_mnist(Split::Test, Some(&file))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a-file") && e.contains("is not a folder"), "{e}");
    }

    /// The real test split, where the Debian package is installed.
    #[test]
    fn reads_the_installed_test_split() {
        if !Path::new(DEFAULT_DIR)
            .join("t10k-labels-idx1-ubyte.gz")
            .is_file()
        {
            eprintln!("skipped: {DEFAULT_DIR} is not installed");
            return;
        }
        let data = load_fashion_mnist(Split::Test, Some(Path::new(DEFAULT_DIR))).unwrap();
        assert_eq!(data.examples().dims(), &[10_000, 1, 28, 28]);
        let labels = data.labels().to_vec::<i64>().unwrap();
        assert_eq!(labels[..4], [9, 2, 1, 1]);
        let mut counts = [0; CLASSES];
        for &l in &labels {
            counts[l as usize] += 1;
        }
        assert_eq!(counts, [1000; CLASSES]);
    }
}

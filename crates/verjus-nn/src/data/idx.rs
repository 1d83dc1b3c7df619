//! The IDX format of MNIST and Fashion-MNIST, plain or gzip-compressed.
//!
//! An IDX file is a 4-byte magic (`00 00`, an element-type code, the rank), one
//! big-endian `u32` per dimension, then the elements in row-major order. Only
//! unsigned bytes (type `0x08`), the type both datasets use, are read.
//!
//! Files are untrusted input: every header field is checked, a malformed file is
//! an [`Error::File`] that names the file and the byte offset (in the
//! decompressed stream), and memory is only ever allocated for bytes actually
//! read, never for a size a header merely claims.

use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use verjus_core::{Error, Result, Shape, Tensor};

/// The IDX element type of unsigned bytes.
const UBYTE: u8 = 0x08;

/// The contents of an IDX file of unsigned bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct IdxArray {
    /// The dimensions from the header.
    pub dims: Vec<usize>,
    /// The elements, row-major (as many as the dimensions say).
    pub data: Vec<u8>,
}

impl IdxArray {
    /// Bytes before the elements: the magic and the dimensions.
    pub fn header_len(&self) -> usize {
        header_len(self.dims.len())
    }
}

fn header_len(rank: usize) -> usize {
    4 + 4 * rank
}

/// Reads an IDX file of unsigned bytes with `rank` dimensions; `.gz` (detected by
/// its magic, not its name) is decompressed on the fly, every member of it (as
/// `gzip -d`: `pigz` and `cat a.gz b.gz` write several), so that bytes after
/// the first member are data or an error, never silently ignored.
pub fn read_idx(path: &Path, rank: usize) -> Result<IdxArray> {
    let file = File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))?;
    let mut file = BufReader::new(file);
    let head = file
        .fill_buf()
        .map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        parse(path, MultiGzDecoder::new(file), rank)
    } else {
        parse(path, file, rank)
    }
}

/// Images `[N, rows, cols]` as f32 `[N, 1, rows, cols]` scaled to `[0, 1]`.
pub fn read_images(path: &Path) -> Result<Tensor> {
    let idx = read_idx(path, 3)?;
    let pixels = idx.data.iter().map(|&b| f32::from(b) / 255.0).collect();
    let [n, rows, cols] = [idx.dims[0], idx.dims[1], idx.dims[2]];
    Tensor::from_vec([n, 1, rows, cols], pixels)
}

/// Labels `[N]` as i64.
pub fn read_labels(path: &Path) -> Result<Tensor> {
    let idx = read_idx(path, 1)?;
    let labels = idx.data.iter().map(|&b| i64::from(b)).collect();
    Tensor::from_vec([idx.dims[0]], labels)
}

/// Parses an IDX stream; `path` is for messages.
fn parse(path: &Path, mut r: impl Read, rank: usize) -> Result<IdxArray> {
    let io_err = |e: io::Error| Error::file(path, format!("cannot read: {e}"));
    let mut magic = [0u8; 4];
    let got = read_full(&mut r, &mut magic).map_err(io_err)?;
    if got < 4 {
        return Err(Error::file(
            path,
            format!("not an IDX file: it ends at byte offset {got}, inside the 4-byte magic"),
        ));
    }
    if magic[..2] != [0, 0] {
        return Err(Error::file(
            path,
            format!(
                "not an IDX file: bytes 0-1 are {:02x} {:02x}, expected 00 00",
                magic[0], magic[1]
            ),
        ));
    }
    if magic[2] != UBYTE {
        return Err(Error::file(
            path,
            format!(
                "IDX element type 0x{:02x} at byte offset 2 is not supported (expected 0x08, unsigned bytes)",
                magic[2]
            ),
        ));
    }
    if usize::from(magic[3]) != rank {
        return Err(Error::file(
            path,
            format!("IDX rank {} at byte offset 3, expected {rank}", magic[3]),
        ));
    }
    let mut dims = Vec::with_capacity(rank);
    for i in 0..rank {
        let mut word = [0u8; 4];
        let offset = 4 + 4 * i;
        let got = read_full(&mut r, &mut word).map_err(io_err)?;
        if got < 4 {
            return Err(Error::file(
                path,
                format!(
                    "truncated IDX header: it ends at byte offset {}, inside dimension {i}",
                    offset + got
                ),
            ));
        }
        dims.push(u32::from_be_bytes(word) as usize);
    }
    let header = header_len(rank);
    let len = Shape::new(dims.clone())
        .map_err(|e| {
            Error::file(
                path,
                format!("IDX dimensions {dims:?} (byte offset 4): {e}"),
            )
        })?
        .numel();
    // Read at most one byte more than promised; the buffer grows with the bytes
    // actually read, not with what the header claims.
    let mut data = Vec::new();
    r.take(len as u64 + 1).read_to_end(&mut data).map_err(|e| {
        Error::file(
            path,
            format!("cannot read the data after byte offset {header}: {e}"),
        )
    })?;
    if data.len() < len {
        return Err(Error::file(
            path,
            format!(
                "truncated: dimensions {dims:?} promise {len} bytes after the {header}-byte header, \
                 but the data ends at byte offset {}",
                header + data.len()
            ),
        ));
    }
    if data.len() > len {
        return Err(Error::file(
            path,
            format!(
                "unexpected data at byte offset {}, after the {len} bytes that dimensions {dims:?} promise",
                header + len
            ),
        ));
    }
    Ok(IdxArray { dims, data })
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Test helpers that write IDX files.
#[cfg(test)]
pub(crate) mod write {
    use flate2::write::GzEncoder;
    use std::io::Write;
    use std::path::Path;

    /// The bytes of an IDX file of unsigned bytes.
    pub(crate) fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut out = vec![0, 0, 0x08, dims.len() as u8];
        for d in dims {
            out.extend(d.to_be_bytes());
        }
        out.extend(data);
        out
    }

    /// Writes `bytes` gzip-compressed to `path`.
    pub(crate) fn gz(path: &Path, bytes: &[u8]) {
        let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        std::fs::write(path, enc.finish().unwrap()).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::write::{gz, idx_bytes};
    use super::*;

    fn err(path: &Path, rank: usize) -> String {
        read_idx(path, rank).unwrap_err().to_string()
    }

    #[test]
    fn reads_plain_and_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = idx_bytes(&[2, 2, 3], &[0, 255, 51, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let (plain, zipped) = (dir.path().join("x.idx"), dir.path().join("x.idx.gz"));
        std::fs::write(&plain, &bytes).unwrap();
        gz(&zipped, &bytes);
        for path in [&plain, &zipped] {
            let a = read_idx(path, 3).unwrap();
            assert_eq!(a.dims, [2, 2, 3]);
            assert_eq!(a.header_len(), 16);
            assert_eq!(a.data[..3], [0, 255, 51]);
        }
        let images = read_images(&zipped).unwrap();
        assert_eq!(images.dims(), &[2, 1, 2, 3]);
        assert_eq!(images.as_slice::<f32>().unwrap()[..3], [0.0, 1.0, 0.2]);
    }

    #[test]
    fn every_gzip_member_is_read_and_trailing_bytes_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = idx_bytes(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let (first, second) = (dir.path().join("a.gz"), dir.path().join("b.gz"));
        gz(&first, &bytes[..9]);
        gz(&second, &bytes[9..]);
        let mut joined = std::fs::read(&first).unwrap();
        joined.extend(std::fs::read(&second).unwrap());
        let path = dir.path().join("joined.gz");
        std::fs::write(&path, &joined).unwrap();
        assert_eq!(read_idx(&path, 2).unwrap().data, [1, 2, 3, 4, 5, 6]);

        gz(&path, &bytes);
        let mut trailing = std::fs::read(&path).unwrap();
        trailing.extend(b"GARBAGE");
        std::fs::write(&path, &trailing).unwrap();
        let e = err(&path, 2);
        assert!(
            e.contains("joined.gz") && e.contains("byte offset 12"),
            "{e}"
        );
    }

    #[test]
    fn malformed_files_name_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.gz");

        gz(&path, &idx_bytes(&[3], &[1, 2]));
        let e = err(&path, 1);
        assert!(
            e.contains("bad.gz") && e.contains("ends at byte offset 10"),
            "{e}"
        );

        gz(&path, &idx_bytes(&[2], &[1, 2, 3]));
        let e = err(&path, 1);
        assert!(e.contains("unexpected data at byte offset 10"), "{e}");

        let mut bytes = idx_bytes(&[2], &[1, 2]);
        bytes[1] = 0x42;
        gz(&path, &bytes);
        assert!(err(&path, 1).contains("not an IDX file"));

        let mut bytes = idx_bytes(&[2], &[1, 2]);
        bytes[2] = 0x0d; // float32
        gz(&path, &bytes);
        assert!(err(&path, 1).contains("element type 0x0d at byte offset 2"));

        gz(&path, &idx_bytes(&[2], &[1, 2]));
        let e = err(&path, 3);
        assert!(e.contains("rank 1 at byte offset 3, expected 3"), "{e}");

        gz(&path, &idx_bytes(&[2, 2, 2], &[])[..9]);
        let e = err(&path, 3);
        assert!(e.contains("byte offset 9, inside dimension 1"), "{e}");

        gz(&path, &[0, 0]);
        assert!(err(&path, 1).contains("byte offset 2, inside the 4-byte magic"));

        // A header that claims 2^96 bytes is refused without allocating them, and
        // one that claims 4 GiB with 2 bytes behind it is merely truncated.
        gz(&path, &idx_bytes(&[u32::MAX, u32::MAX, u32::MAX], &[1, 2]));
        assert!(err(&path, 3).contains("too large"));
        gz(&path, &idx_bytes(&[u32::MAX], &[1, 2]));
        assert!(err(&path, 1).contains("truncated"));

        let mut corrupt = std::fs::read(&path).unwrap();
        let n = corrupt.len();
        corrupt.truncate(n - 6);
        std::fs::write(&path, corrupt).unwrap();
        assert!(read_idx(&path, 1).is_err());

        let e = err(&dir.path().join("missing.gz"), 1);
        assert!(e.contains("missing.gz") && e.contains("cannot open"), "{e}");
    }
}

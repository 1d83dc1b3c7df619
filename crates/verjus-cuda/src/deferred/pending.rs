//! The host half of the deferred range checks: which checks were launched
//! since the last read, the layout of the device-side record the check kernels
//! write, and turning a read record into the error a user sees.
//!
//! Pure bookkeeping (no driver calls), so it is tested without a GPU.

use verjus_core::Error;

/// Words (`u64`) of the device record. Word 0 is the scratch word of the
/// check kernel now running: the smallest bad position (`u64::MAX`: none),
/// which the commit kernel moves into words 1-3 and resets (`kernels/index.cu`).
pub(crate) const RECORD_WORDS: usize = 4;
/// Word 1: 1 + the number of the first failed check (0: no failure).
pub(crate) const FAILED: usize = 1;
/// Word 2: the bad value's position in its indices.
pub(crate) const POSITION: usize = 2;
/// Word 3: the bad value (an `i64`'s bits).
pub(crate) const VALUE: usize = 3;
/// The record with nothing found: where it starts and what a report resets it to.
pub(crate) const CLEAR: [u64; RECORD_WORDS] = [u64::MAX, 0, 0, 0];

/// Checks launched without a read before the host reads the record anyway (a
/// wait once per this many checks keeps the list short in a loop that never
/// reads).
pub(crate) const MAX_PENDING: usize = 1024;

/// What a check compares the values against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Range {
    /// Indices into axis `axis` of length `len` (index_select, index_add).
    Axis { axis: usize, len: usize },
    /// Labels of `classes` classes (softmax_cross_entropy).
    Classes(usize),
}

impl Range {
    /// The values are valid in `[0, bound())`.
    pub fn bound(self) -> usize {
        match self {
            Range::Axis { len, .. } => len,
            Range::Classes(classes) => classes,
        }
    }
}

/// One launched check: the op that asked for it and its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Check {
    pub op: &'static str,
    pub range: Range,
}

/// The checks launched since the record was last read, in launch order (a
/// check's number is its place here).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    checks: Vec<Check>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// Whether the record should be read before the next check is added.
    pub fn is_full(&self) -> bool {
        self.checks.len() >= MAX_PENDING
    }

    /// Adds a check; returns its number for the commit kernel.
    pub fn push(&mut self, check: Check) -> u64 {
        self.checks.push(check);
        (self.checks.len() - 1) as u64
    }

    /// Forgets every pending check (their kernels all ran before `record`
    /// was read) and returns the error of the first that failed, if any. The
    /// caller resets the device record when this returns an error.
    pub fn settle(&mut self, record: &[u64; RECORD_WORDS], reader: &str) -> Option<Error> {
        let checks = std::mem::take(&mut self.checks);
        let failed = record[FAILED];
        if failed == 0 {
            return None;
        }
        let found = format!("found at the next read from the GPU, by {reader}");
        let (position, value) = (record[POSITION], record[VALUE] as i64);
        let Some(check) = usize::try_from(failed - 1).ok().and_then(|n| checks.get(n)) else {
            return Some(Error::Device {
                device: "cuda".into(),
                msg: format!(
                    "{reader}: the range check record names check {failed} of {} pending \
                     (bad value {value} at position {position}; {found})",
                    checks.len()
                ),
            });
        };
        let msg = match check.range {
            Range::Axis { axis, len } => format!(
                "index {value} at position {position} is out of range for axis {axis} of \
                 length {len} ({found})"
            ),
            Range::Classes(classes) => {
                format!("label {value} at row {position} is outside [0, {classes}) ({found})")
            }
        };
        Some(Error::invalid(check.op, msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELECT: Check = Check {
        op: "index_select",
        range: Range::Axis { axis: 0, len: 10 },
    };
    const LOSS: Check = Check {
        op: "softmax_cross_entropy",
        range: Range::Classes(5),
    };

    /// The record the kernels leave when check `number` failed first.
    fn failed(number: u64, position: u64, value: i64) -> [u64; RECORD_WORDS] {
        let mut r = CLEAR;
        r[FAILED] = number + 1;
        r[POSITION] = position;
        r[VALUE] = value as u64;
        r
    }

    #[test]
    fn a_clear_record_reports_nothing_and_forgets_the_checks() {
        let mut p = Pending::default();
        assert_eq!(p.push(SELECT), 0);
        assert_eq!(p.push(LOSS), 1);
        assert!(p.settle(&CLEAR, "download").is_none());
        assert!(p.is_empty());
        assert_eq!(p.push(LOSS), 0, "numbers restart after a read");
    }

    #[test]
    fn the_failed_check_is_named_with_index_position_and_axis() {
        let mut p = Pending::default();
        p.push(LOSS);
        let n = p.push(SELECT);
        let e = p.settle(&failed(n, 3, 12), "download").unwrap().to_string();
        assert_eq!(
            e,
            "index_select: invalid argument: index 12 at position 3 is out of range for axis 0 \
             of length 10 (found at the next read from the GPU, by download)"
        );
        assert!(p.is_empty(), "a report clears the pending checks");
        assert!(p.settle(&CLEAR, "synchronize").is_none());
    }

    #[test]
    fn a_bad_label_names_its_row_and_the_classes() {
        let mut p = Pending::default();
        let n = p.push(LOSS);
        let e = p
            .settle(&failed(n, 2, -1_000_001), "synchronize")
            .unwrap()
            .to_string();
        assert!(e.starts_with("softmax_cross_entropy: "), "{e}");
        assert!(
            e.contains("label -1000001 at row 2 is outside [0, 5)"),
            "{e}"
        );
        assert!(e.contains("by synchronize"), "{e}");
    }

    #[test]
    fn the_check_the_record_names_is_reported() {
        // The commit kernel keeps the first failed check (the conformance
        // check `errors_out_of_range_indices` makes two bad calls before a
        // read on the GPU); the host reports whichever check the record names.
        let mut p = Pending::default();
        let first = p.push(Check {
            op: "index_add",
            range: Range::Axis { axis: 1, len: 4 },
        });
        p.push(LOSS);
        let e = p
            .settle(&failed(first, 0, 7), "download")
            .unwrap()
            .to_string();
        assert!(e.starts_with("index_add: "), "{e}");
        assert!(e.contains("for axis 1 of length 4"), "{e}");
    }

    #[test]
    fn a_record_naming_no_pending_check_is_a_device_error() {
        let mut p = Pending::default();
        p.push(SELECT);
        let e = p.settle(&failed(5, 1, 2), "download").unwrap();
        assert!(matches!(e, Error::Device { .. }), "{e}");
        assert!(e.to_string().contains("check 6 of 1 pending"), "{e}");
    }

    #[test]
    fn the_list_is_full_at_its_limit() {
        let mut p = Pending::default();
        for _ in 0..MAX_PENDING - 1 {
            p.push(SELECT);
        }
        assert!(!p.is_full());
        p.push(SELECT);
        assert!(p.is_full());
        assert_eq!(Range::Classes(5).bound(), 5);
        assert_eq!(Range::Axis { axis: 2, len: 9 }.bound(), 9);
    }
}

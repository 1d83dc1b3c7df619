//! Every method of the `Backend` trait has a conformance check: a method added
//! to the trait without one fails here, instead of a backend that forgot it
//! failing at run time with `Unsupported`.
//!
//! A method is covered by the check of its own name in the suite's list
//! (`__conformance_list!`, the one declaration the suite's tests are made
//! from), or by the checks `OTHER_NAMES` gives for it, or it is one of the
//! `INFRASTRUCTURE` methods that every check runs through.

/// Declares `CHECKS`: the names of the suite's checks, from the list that
/// makes its tests.
macro_rules! check_names {
    (($($_args:tt)*); $($name:ident => $check:path,)*) => {
        const CHECKS: &[&str] = &[$(stringify!($name)),*];
    };
}

verjus_conformance::__conformance_list! { check_names; () }

/// Methods every check calls (to name the backend, allocate, move data and
/// run the work): a failure in them fails the whole suite.
const INFRASTRUCTURE: &[&str] = &[
    "name",
    "device",
    "synchronize",
    "run_scoped",
    "alloc_zeroed",
    "alloc_output",
    "upload",
    "download",
];

/// Methods whose checks have other names.
const OTHER_NAMES: &[(&str, &[&str])] = &[
    ("random", &["random_uniform", "random_normal"]),
    ("pool2d", &["max_pool2d", "avg_pool2d"]),
    (
        "pool2d_backward",
        &["max_pool2d_backward", "avg_pool2d_backward"],
    ),
    ("lstm_reserve_len", &["lstm_sequence", "lstm_cell"]),
];

/// The methods of `trait Backend`, read from its source.
fn backend_methods() -> Vec<String> {
    let source = include_str!("../../verjus-core/src/backend.rs");
    let start = source
        .find("pub trait Backend")
        .expect("backend.rs declares the Backend trait");
    let body = &source[start..];
    let end = body.find("\n}\n").expect("the trait's body ends");
    body[..end]
        .lines()
        .filter_map(|line| line.strip_prefix("    fn "))
        .map(|rest| rest.split(['(', '<']).next().unwrap_or(rest).to_string())
        .collect()
}

#[test]
fn every_backend_method_has_a_conformance_check() {
    let methods = backend_methods();
    assert!(methods.len() > 40, "read only {methods:?} from backend.rs");
    let missing: Vec<&String> = methods
        .iter()
        .filter(|m| {
            !CHECKS.contains(&m.as_str())
                && !INFRASTRUCTURE.contains(&m.as_str())
                && !OTHER_NAMES.iter().any(|(name, _)| name == m)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "Backend methods without a conformance check (add one to __conformance_list! \
         in crates/verjus-conformance/src/lib.rs): {missing:?}"
    );
}

#[test]
fn the_coverage_tables_name_real_methods_and_checks() {
    let methods = backend_methods();
    for name in INFRASTRUCTURE
        .iter()
        .chain(OTHER_NAMES.iter().map(|(name, _)| name))
    {
        assert!(
            methods.iter().any(|m| m == name),
            "{name} is no Backend method"
        );
        assert!(!CHECKS.contains(name), "{name} has a check of its own name");
    }
    for (name, checks) in OTHER_NAMES {
        for check in *checks {
            assert!(CHECKS.contains(check), "{name}: no check named {check}");
        }
    }
}

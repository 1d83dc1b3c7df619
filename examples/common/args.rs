//! Command-line values for the examples: a flag's value parsed, or a device.
//!
//! Shared by the Fashion-MNIST loop ([`super`]) and `char_lm`, which includes
//! this file alone (`#[path]`) so that it does not carry the Fashion loop.

use std::error::Error as StdError;
use verjus::{Device, Error};

pub type AnyResult<T> = Result<T, Box<dyn StdError>>;

/// The value after `flag`, parsed.
pub fn value<T: std::str::FromStr>(flag: &str, value: Option<String>) -> AnyResult<T> {
    let bad = |what: &str| Error::invalid("arguments", format!("{flag} needs {what}"));
    let value = value.ok_or_else(|| bad("a value"))?;
    Ok(value
        .parse()
        .map_err(|_| bad(&format!("a valid value, not {value:?}")))?)
}

/// The device named after `flag` (`cpu`, `cuda`, `cuda:N`).
pub fn device(flag: &str, value: Option<String>) -> AnyResult<Device> {
    let value =
        value.ok_or_else(|| Error::invalid("arguments", format!("{flag} needs a value")))?;
    Ok(value.parse()?)
}

//! Values from flags and variables: where each came from, the environment with empty values unset, and number and port parsing with the launcher's errors.

use super::LauncherError;
use std::collections::BTreeMap;
use std::str::FromStr;

/// A value and the flag or variable it came from, for error messages.
#[derive(Clone, Debug)]
pub(super) struct Sourced<T> {
    pub(super) value: T,
    pub(super) from: String,
}

pub(super) fn sourced<T>(value: T, from: impl Into<String>) -> Sourced<T> {
    Sourced {
        value,
        from: from.into(),
    }
}

/// The environment, with empty values treated as unset.
pub(super) struct Env<'a>(pub(super) &'a BTreeMap<String, String>);

impl Env<'_> {
    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    pub(super) fn has_any(&self, keys: &[&str]) -> bool {
        keys.iter().any(|k| self.get(k).is_some())
    }

    /// The first of `keys` that is set, as (key, value).
    pub(super) fn first<'k>(&self, keys: &[&'k str]) -> Option<(&'k str, &str)> {
        keys.iter().find_map(|k| self.get(k).map(|v| (*k, v)))
    }

    pub(super) fn number<T: FromStr>(
        &self,
        keys: &[&str],
        expected: &'static str,
        fix: &str,
    ) -> Result<Option<Sourced<T>>, LauncherError> {
        self.first(keys)
            .map(|(k, v)| parse_number(k, v, expected, fix).map(|n| sourced(n, k)))
            .transpose()
    }
}

pub(super) fn parse_number<T: FromStr>(
    name: &str,
    value: &str,
    expected: &'static str,
    fix: &str,
) -> Result<T, LauncherError> {
    value.trim().parse().map_err(|_| LauncherError::BadValue {
        name: name.to_string(),
        value: value.to_string(),
        expected,
        fix: fix.to_string(),
    })
}

pub(super) const RANK_EXPECTED: &str = "a node rank (a whole number from 0)";
pub(super) const RANK_FIX: &str = "set it to this node's rank, or give --node-rank";
pub(super) const NNODES_EXPECTED: &str = "a number of nodes (a whole number from 1)";
pub(super) const NNODES_FIX: &str = "set it to the number of nodes, or give --nnodes";
pub(super) const PORT_EXPECTED: &str = "a port number (1-65535)";

pub(super) fn parse_port(name: &str, value: &str, fix: &str) -> Result<u16, LauncherError> {
    let port: u16 = parse_number(name, value, PORT_EXPECTED, fix)?;
    if port == 0 {
        return Err(LauncherError::BadValue {
            name: name.into(),
            value: value.into(),
            expected: PORT_EXPECTED,
            fix: fix.into(),
        });
    }
    Ok(port)
}

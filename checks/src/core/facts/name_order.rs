//! Where each address of a resolved name came from on the node that resolved it, and what the
//! first address (the one a TCPStore client dials first, and waits on for its whole connect
//! timeout) gave: the facts `cluster.fqdn`, `cluster.master-resolution` and
//! `cluster.master-elsewhere` judge the resolver's order with.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where one address of a name came from: a line of a hosts file, or the resolver's next
/// source (DNS, per `/etc/nsswitch.conf`).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct AddressOrigin {
    /// The address, as the resolver gave it.
    pub address: String,
    /// `files` (a hosts file), or the nsswitch source after it that gave the address (`dns`,
    /// `resolve`, `myhostname`, ...).
    pub source: String,
    /// The hosts file (`/etc/hosts`) when `source` is `files`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The 1-based line of `file` that maps the name to the address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// That line as written, its blanks collapsed to single spaces (at most 256 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl AddressOrigin {
    /// `/etc/hosts line 2`, or `DNS` / `nsswitch source myhostname`.
    pub fn describe(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{f} line {l}"),
            _ if self.source == "dns" || self.source.is_empty() => "DNS".to_string(),
            _ => format!("nsswitch source {}", self.source),
        }
    }
}

/// One connect a node made to the first address a name resolved to, on the master port,
/// bounded by the run's connect timeout.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct FirstDial {
    pub address: String,
    pub port: u16,
    /// `ok`, `refused`, `timeout`, `unreachable` or `error`.
    pub result: String,
    /// The error in words (empty when it connected).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// How long the connect was given, in seconds.
    pub timeout_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_says_its_file_and_line_or_its_source() {
        let line = AddressOrigin {
            address: "10.0.0.9".into(),
            source: "files".into(),
            file: Some("/etc/hosts".into()),
            line: Some(2),
            text: Some("10.0.0.9 fake-host".into()),
        };
        assert_eq!(line.describe(), "/etc/hosts line 2");
        let dns = AddressOrigin {
            source: "dns".into(),
            ..Default::default()
        };
        assert_eq!(dns.describe(), "DNS");
        let other = AddressOrigin {
            source: "myhostname".into(),
            ..Default::default()
        };
        assert_eq!(other.describe(), "nsswitch source myhostname");
    }
}

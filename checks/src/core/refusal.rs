//! A node the coordinator turned away, and why (the data `cluster.refused` judges).

use serde::{Deserialize, Serialize};

/// Why the coordinator turned a node away.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum RefusalKind {
    /// It does not know the job's secret.
    Secret,
    /// It was started with another `--nnodes`, or a rank outside it.
    Nnodes,
    /// It runs another preflight protocol version.
    Version,
    /// Its rank had already joined from another host.
    RankTaken,
    /// Its address is not one of the known hosts'.
    NotAdmitted,
    /// What it sent broke a limit (too many interfaces, a huge hostname, ...).
    Limits,
    /// It advertised a data listener that is not its own (another host's address, a port of
    /// 0 or the master's): refused, so no node is sent to a host that did not join.
    Listener,
}

/// One node the coordinator refused.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The address it connected from.
    pub address: String,
    /// The rank it said it is (unverified when the secret was wrong).
    pub claimed_rank: Option<u32>,
    /// Its hostname, when it got as far as sending its facts.
    pub hostname: Option<String>,
    pub kind: RefusalKind,
    /// What differs, in words.
    pub reason: String,
    /// For [`RefusalKind::RankTaken`]: the host that holds the rank (it keeps it).
    pub holder: Option<String>,
}

impl Refusal {
    /// "10.0.0.9 (gpu09)" or "10.0.0.9".
    pub fn who(&self) -> String {
        match &self.hostname {
            Some(h) => format!("{} ({h})", self.address),
            None => self.address.clone(),
        }
    }
}

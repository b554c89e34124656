//! System facts: limits, /dev/shm, name lookups and the settings that bite at scale.

use super::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct SysFacts {
    /// Size of /dev/shm in bytes.
    pub shm_bytes: Option<u64>,
    pub shm_error: Option<String>,
    /// RLIMIT_MEMLOCK soft limit in bytes; None means unlimited.
    pub memlock_soft: Option<u64>,
    pub memlock_hard: Option<u64>,
    pub memlock_error: Option<String>,
    /// What this host's name resolves to, in resolver order.
    pub hostname_addrs: Vec<IpAddr>,
    pub hostname_error: Option<String>,
    /// What Python's `socket.getfqdn()` gives here (the canonical name of the hostname): the
    /// name torchrun's c10d rendezvous publishes for the node of rank 0 unless `--local-addr`
    /// is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fqdn: Option<String>,
    /// Cluster mode under c10d: what this node resolved rank 0's FQDN to (`cluster.fqdn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_fqdn: Option<NameLookup>,
    /// `net.netfilter.nf_conntrack_tcp_timeout_established` in seconds: how long this node's
    /// own connection tracking keeps a silent connection; None where conntrack is not loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conntrack_established_s: Option<u64>,
}

/// A name and what one node's resolver gave for it.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct NameLookup {
    pub name: String,
    /// In the resolver's order (getaddrinfo's, after RFC 6724 sorting): the order a TCPStore
    /// client dials them in.
    pub addresses: Vec<IpAddr>,
    /// Why nothing was found (no such name, a slow DNS).
    pub error: Option<String>,
    /// Where each address came from (a hosts file line, DNS), in `addresses`' order; empty in
    /// facts of releases before it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<AddressOrigin>,
    /// The connect this node made to the first address on the master port when that address
    /// was not one it knew as rank 0's; absent when it was, or nothing resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_dial: Option<FirstDial>,
}

/// What the scale checks read (`checks/src/scale/`): every value is None when it could not be
/// read, with the reason in `errors` (keyed by the value's name).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct ScaleFacts {
    /// Set by the probe; false in facts of releases before these checks.
    pub probed: bool,
    /// `net.core.somaxconn`: the cap on every listen() backlog.
    pub somaxconn: Option<u64>,
    /// `net.ipv4.tcp_max_syn_backlog`.
    pub tcp_max_syn_backlog: Option<u64>,
    /// `net.ipv4.tcp_abort_on_overflow`: 1 turns a full accept queue into resets.
    pub tcp_abort_on_overflow: Option<u64>,
    /// `net.ipv4.ip_local_port_range` as [low, high].
    pub port_range: Option<[u32; 2]>,
    /// `net.ipv4.ip_local_reserved_ports` as [low, high] ranges.
    pub reserved_ports: Vec<[u32; 2]>,
    /// `net.ipv4.neigh.default.gc_thresh3`.
    pub neigh_gc_thresh3_v4: Option<u64>,
    /// `net.ipv6.neigh.default.gc_thresh3`.
    pub neigh_gc_thresh3_v6: Option<u64>,
    /// RLIMIT_NOFILE (soft, hard) a process started like this one gets; None = unlimited.
    pub nofile_soft: Option<u64>,
    pub nofile_hard: Option<u64>,
    /// RLIMIT_NPROC (soft, hard); None = unlimited.
    pub nproc_soft: Option<u64>,
    pub nproc_hard: Option<u64>,
    /// The real uid of this process (RLIMIT_NPROC does not bind uid 0).
    pub uid: Option<u32>,
    /// The tightest cgroup pids limit on the way to the root.
    pub pids: Option<PidsLimit>,
    /// NCCL shared-memory files in /dev/shm and whether a live process still holds them.
    pub nccl_shm: Vec<ShmFile>,
    /// Non-zero GIDs of RoCE (Ethernet link layer) ports.
    pub gids: Vec<GidEntry>,
    /// `arp_ignore` per interface, plus "all".
    pub arp_ignore: BTreeMap<String, u64>,
    /// `rp_filter` per interface, plus "all" (1 strict, 2 loose; the kernel uses the larger of
    /// "all" and the interface's own).
    pub rp_filter: BTreeMap<String, u64>,
    /// `ip rule show` lines; None when not read (fixture roots, no `ip`).
    pub ip_rules: Option<Vec<String>>,
    /// Why a value could not be read, keyed by its name.
    pub errors: BTreeMap<String, String>,
}

impl ScaleFacts {
    pub fn is_unprobed(&self) -> bool {
        !self.probed
    }
}

/// A cgroup's pids controller: `pids.max` (None = "max") and `pids.current`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct PidsLimit {
    /// The cgroup the limit is set on (as /proc/self/cgroup names it).
    pub cgroup: String,
    /// "v1" or "v2".
    pub version: String,
    pub max: Option<u64>,
    pub current: Option<u64>,
}

/// One NCCL shared-memory file under /dev/shm.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(default)]
pub struct ShmFile {
    pub name: String,
    pub bytes: u64,
    /// Processes that map it or hold it open; empty means its owners are gone (unless
    /// `unverified`).
    pub holders: Vec<u32>,
    /// The file's owner (uid).
    pub owner_uid: Option<u32>,
    /// Some process of the file's owner could not be read (another user's, without root), or the
    /// scan ran out of time: no holder found does not prove the owners gone.
    pub unverified: bool,
    /// Seconds since it was last modified, when known.
    pub age_s: Option<u64>,
}

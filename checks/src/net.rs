//! Checks for network interfaces, plus the name rules for virtual interfaces.

use crate::CheckContext;
use crate::model::{Finding, NodeFacts};
use std::net::IpAddr;

/// Name prefixes of virtual interfaces NCCL should not use.
pub const VIRTUAL_PREFIXES: &[&str] = &[
    "docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "lo",
];

/// True when the name looks like a container/VM bridge or tunnel.
pub fn is_virtual_name(name: &str) -> bool {
    VIRTUAL_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Not loopback, not unspecified, not IPv6 link-local.
pub fn is_usable_addr(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => !a.is_loopback() && !a.is_unspecified() && !a.is_link_local(),
        IpAddr::V6(a) => {
            !a.is_loopback() && !a.is_unspecified() && (a.segments()[0] & 0xffc0) != 0xfe80
        }
    }
}

pub fn check(_facts: &NodeFacts, _ctx: &CheckContext) -> Vec<Finding> {
    Vec::new()
}

/// Placeholder until the ranking lands.
pub fn candidate_interfaces(facts: &crate::model::NetFacts) -> Vec<&crate::model::Interface> {
    facts
        .interfaces
        .iter()
        .filter(|i| i.up && !i.usable_addrs().is_empty())
        .collect()
}

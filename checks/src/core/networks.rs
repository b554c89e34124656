//! Candidate networks as the judgments see them: the members (one interface and address per
//! node), and each network's evaluation (pairs that worked, throughput, failures).

use super::LinkResult;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One node's interface on a network.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Member {
    pub interface: String,
    pub address: IpAddr,
    /// The prefix the address was configured with ("10.200.2.0/24", a /32 on a cloud VM).
    #[serde(default)]
    pub subnet: String,
    pub mtu: Option<u32>,
    pub speed_mbps: Option<u64>,
    pub is_virtual: bool,
}

/// One address per node, grouped by subnet or interface name and completed by reachability.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Network {
    /// The subnet when every member sits in one ("10.200.2.0/24"), else "eth1 across 3 subnets".
    pub id: String,
    /// rank -> that node's interface on this network.
    pub members: BTreeMap<u32, Member>,
}

impl Network {
    /// The distinct subnets of the members, in order.
    pub fn subnets(&self) -> Vec<String> {
        let set: BTreeSet<&str> = self.members.values().map(|m| m.subnet.as_str()).collect();
        set.into_iter().map(str::to_string).collect()
    }

    /// True when the members sit in more than one subnet: traffic crosses a router.
    pub fn routed(&self) -> bool {
        self.subnets().len() > 1
    }

    /// True when the members' addresses are IPv6.
    pub fn is_ipv6(&self) -> bool {
        self.members
            .values()
            .next()
            .is_some_and(|m| m.address.is_ipv6())
    }

    /// What a firewall on a node should accept connections from: the subnets (up to four),
    /// else the smallest prefix that covers every member address.
    pub fn sources(&self) -> Vec<String> {
        let subnets = self.subnets();
        if subnets.len() <= 4 {
            return subnets;
        }
        let addrs: Vec<IpAddr> = self.members.values().map(|m| m.address).collect();
        covering_prefix(&addrs).into_iter().collect()
    }
}

/// The smallest prefix holding every address (all of one family), e.g. 10.200.8.0/20.
pub fn covering_prefix(addrs: &[IpAddr]) -> Option<String> {
    let first = *addrs.first()?;
    let (bits, width): (u128, u32) = match first {
        IpAddr::V4(a) => (u32::from(a) as u128, 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    };
    let mut len = width;
    for a in &addrs[1..] {
        let other = match (first, a) {
            (IpAddr::V4(_), IpAddr::V4(b)) => u32::from(*b) as u128,
            (IpAddr::V6(_), IpAddr::V6(b)) => u128::from(*b),
            _ => return None,
        };
        let diff = (bits ^ other) << (128 - width);
        len = len.min(diff.leading_zeros().min(width));
    }
    Some(prefix_of(first, len as u8))
}

/// "10.200.1.0/24" for 10.200.1.7 with prefix 24; the same for IPv6.
pub fn prefix_of(addr: IpAddr, prefix: u8) -> String {
    match addr {
        IpAddr::V4(a) => {
            let p = prefix.min(32);
            let mask: u32 = if p == 0 { 0 } else { u32::MAX << (32 - p) };
            format!("{}/{p}", Ipv4Addr::from(u32::from(a) & mask))
        }
        IpAddr::V6(a) => {
            let p = prefix.min(128);
            let mask: u128 = if p == 0 { 0 } else { u128::MAX << (128 - p) };
            format!("{}/{p}", Ipv6Addr::from(u128::from(a) & mask))
        }
    }
}

/// A network judged by the links measured on it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NetworkEval {
    pub network: Network,
    /// Ordered pairs among `ranks` whose connection to the member address was ok.
    pub pairs_ok: usize,
    /// Ordered pairs that should exist among `ranks` (n*(n-1)).
    pub pairs_total: usize,
    /// Every node has a member and every ordered pair connected.
    pub fully_connected: bool,
    /// Lowest measured pair throughput, Gbit/s.
    pub min_throughput_gbit_s: Option<f64>,
    /// Lowest rated speed among members, Mbit/s.
    pub min_rated_mbps: Option<u64>,
    pub all_physical: bool,
    pub same_name: bool,
    /// Links on this network that did not come back ok.
    pub failures: Vec<LinkResult>,
}

impl NetworkEval {
    /// Interface name on every member when they agree.
    pub fn common_name(&self) -> Option<&str> {
        let mut names = self.network.members.values().map(|m| m.interface.as_str());
        let first = names.next()?;
        names.all(|n| n == first).then_some(first)
    }
}

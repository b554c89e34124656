//! `sys.neigh-table`: the neighbour table's hard cap (`gc_thresh3`) against the peers this node
//! talks to on its on-link subnets (nodes × this node's addresses on that subnet). Past the
//! cap the kernel logs 'neighbor table overflow' and new connections fail at random.

use super::job::{Job, NO_WORLD};
use crate::core::{Finding, Fix, NodeFacts, Status};
use std::net::IpAddr;

pub use crate::sys::scale::ids::NEIGH_TABLE as ID;

/// Hosts a subnet of this prefix can hold (saturating).
fn capacity(v4: bool, prefix: u8) -> u64 {
    let bits = if v4 { 32 } else { 128 } - u32::from(prefix.min(if v4 { 32 } else { 128 }));
    if bits >= 63 {
        u64::MAX
    } else {
        (1u64 << bits).saturating_sub(2).max(1)
    }
}

fn network(addr: &IpAddr, prefix: u8) -> (IpAddr, u8) {
    match addr {
        IpAddr::V4(a) => {
            let p = prefix.min(32);
            let mask = if p == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(p))
            };
            (IpAddr::V4((u32::from(*a) & mask).into()), p)
        }
        IpAddr::V6(a) => {
            let p = prefix.min(128);
            let mask = if p == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(p))
            };
            (IpAddr::V6((u128::from(*a) & mask).into()), p)
        }
    }
}

/// Peers on this node's on-link subnets: Σ over subnets of min(nodes × addresses here, room).
pub fn peers(facts: &NodeFacts, nnodes: u64, v4: bool) -> (u64, Vec<String>) {
    let mut subnets: std::collections::BTreeMap<(IpAddr, u8), u64> = Default::default();
    for i in facts
        .net
        .interfaces
        .iter()
        .filter(|i| i.up && !i.is_virtual())
    {
        let addrs = if v4 { &i.ipv4 } else { &i.ipv6 };
        for a in addrs {
            let on_link = if v4 { a.prefix < 32 } else { a.prefix < 128 };
            if on_link && crate::net::is_usable_addr(&a.addr) {
                *subnets.entry(network(&a.addr, a.prefix)).or_default() += 1;
            }
        }
    }
    let mut total = 0u64;
    let mut words = Vec::new();
    for ((net, prefix), k) in subnets {
        let n = nnodes.saturating_mul(k).min(capacity(v4, prefix));
        total = total.saturating_add(n);
        words.push(format!(
            "{net}/{prefix}: min({nnodes} nodes × {k}, room {}) = {n}",
            capacity(v4, prefix)
        ));
    }
    (total, words)
}

pub fn check(facts: &NodeFacts, job: &Job) -> Finding {
    let s = &facts.scale;
    let Some(nnodes) = job.nnodes else {
        return Finding::new(
            ID,
            Status::Skip,
            "neighbour table",
            format!(
                "gc_thresh3 {}; {NO_WORLD}",
                s.neigh_gc_thresh3_v4
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "not readable".into())
            ),
        )
        .with("gc_thresh3_v4", s.neigh_gc_thresh3_v4);
    };
    let (p4, w4) = peers(facts, nnodes, true);
    let (p6, w6) = peers(facts, nnodes, false);
    let mut short = Vec::new();
    if let Some(t) = s.neigh_gc_thresh3_v4.filter(|t| *t < p4) {
        short.push(("net.ipv4.neigh.default", "IPv4", t, p4));
    }
    if let Some(t) = s.neigh_gc_thresh3_v6.filter(|t| p6 > 0 && *t < p6) {
        short.push(("net.ipv6.neigh.default", "IPv6", t, p6));
    }
    let base = |status, summary: String| {
        Finding::new(ID, status, "neighbour table", summary)
            .with("gc_thresh3_v4", s.neigh_gc_thresh3_v4)
            .with("gc_thresh3_v6", s.neigh_gc_thresh3_v6)
            .with("peers_v4", p4)
            .with("peers_v6", p6)
            .with("estimate", [w4, w6].concat())
    };
    if s.neigh_gc_thresh3_v4.is_none() && s.neigh_gc_thresh3_v6.is_none() {
        return base(
            Status::Skip,
            "gc_thresh3 not readable here (a network namespace other than the host's shares the host's table)".into(),
        );
    }
    if short.is_empty() {
        return base(
            Status::Pass,
            format!(
                "neighbour table holds the {} on-link peers of {nnodes} nodes",
                p4 + p6
            ),
        );
    }
    let mut settings = Vec::new();
    let mut words = Vec::new();
    for (prefix, fam, t, need) in &short {
        let t3 = need.saturating_mul(2).max(4096);
        settings.push((format!("{prefix}.gc_thresh1"), (t3 / 4).to_string()));
        settings.push((format!("{prefix}.gc_thresh2"), (t3 / 2).to_string()));
        settings.push((format!("{prefix}.gc_thresh3"), t3.to_string()));
        words.push(format!("{fam} gc_thresh3 {t} < {need} on-link peers"));
    }
    let refs: Vec<(&str, String)> = settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let mut fix = Fix::new(
        "Raise the neighbour table's thresholds above the number of on-link peers (twice, for headroom), now and at boot.",
    );
    for c in crate::infra::sysctl::sysctl_fix("neigh", &refs) {
        fix = fix.command(c);
    }
    base(
        Status::Warn,
        format!(
            "{} for {}: expect 'neighbour table overflow' in dmesg and random connection failures",
            words.join(", "),
            job.world_words()
        ),
    )
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IfAddr, Interface};
    use crate::sys::scale::testkit::{ctx, defaults};

    fn node_with(addrs: &[(&str, &str, u8)]) -> NodeFacts {
        let mut f = defaults();
        for (name, a, prefix) in addrs {
            let addr: IpAddr = a.parse().unwrap();
            let mut i = f.net.interfaces.iter().position(|i| i.name == *name);
            if i.is_none() {
                f.net.interfaces.push(Interface {
                    name: name.to_string(),
                    up: true,
                    ..Default::default()
                });
                i = Some(f.net.interfaces.len() - 1);
            }
            let ifc = &mut f.net.interfaces[i.unwrap()];
            let ia = IfAddr {
                addr,
                prefix: *prefix,
            };
            if addr.is_ipv4() {
                ifc.ipv4.push(ia)
            } else {
                ifc.ipv6.push(ia)
            }
        }
        f
    }

    #[test]
    fn two_nics_on_a_flat_16_of_a_1024_node_job_overflow_the_default_1024() {
        let f = node_with(&[
            ("eth0", "10.0.1.5", 16),
            ("eth1", "10.0.2.5", 16),
            ("ib0", "192.168.0.5", 30),
        ]);
        let out = check(&f, &Job::of(&f, &ctx(7, 1024, 8)));
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert_eq!(out.evidence["peers_v4"], 2048 + 2);
        let cmds = &out.fix.as_ref().unwrap().commands;
        assert!(
            cmds.iter()
                .any(|c| c == "sysctl -w net.ipv4.neigh.default.gc_thresh3=4100"),
            "{cmds:?}"
        );
    }

    #[test]
    fn a_small_job_or_point_to_point_addresses_pass() {
        let f = node_with(&[("eth0", "10.0.1.5", 16), ("ens5", "172.31.0.9", 32)]);
        assert_eq!(check(&f, &Job::of(&f, &ctx(1, 64, 8))).status, Status::Pass);
        assert_eq!(
            check(&f, &Job::of(&f, &crate::core::CheckContext::default())).status,
            Status::Skip
        );
    }
}

//! `link.mtu-blackhole`: a connection was established but a large message stalled, and the largest don't-fragment packet that passed is below the interfaces' MTU: something between the nodes drops larger frames silently.

use crate::core::ClusterInput;
use crate::core::cluster_common::ranks_phrase;
use crate::core::{Finding, Fix, LinkResult, Status};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

pub use crate::link::ids::MTU_BLACKHOLE as ID;

/// The MTU to set: 1500 when the path carries about that (the probe's search stops within
/// 8 bytes), else the largest size that passed.
fn fix_mtu(passed: u32) -> u32 {
    if (1492..=1500).contains(&passed) {
        1500
    } else {
        passed
    }
}

/// The MTU of the interface of `rank` that has `addr` (the receiver) or carries traffic on
/// the network of `addr` (the sender: the interface of the same name, else its only
/// interface with that MTU knowledge).
fn interface_mtu(input: &ClusterInput, rank: u32, name: &str) -> Option<(String, u32)> {
    let facts = input.facts(rank)?;
    let i = facts.net.interfaces.iter().find(|i| i.name == name)?;
    Some((i.name.clone(), i.mtu?))
}

/// A stalled link, the largest size that passed, and the sender's and receiver's interface
/// (name, MTU) when known.
type Hole<'a> = (
    &'a LinkResult,
    u32,
    Option<(String, u32)>,
    Option<(String, u32)>,
);

pub(crate) fn mtu_blackhole(input: &ClusterInput) -> Finding {
    // A stall whose path MTU is below what the receiving interface is set to.
    let holes: Vec<Hole> = input
        .links
        .records()
        .filter(|l| l.stalled)
        .filter_map(|l| {
            let to = interface_mtu(input, l.to, &l.interface);
            let from = interface_mtu(input, l.from, &l.interface);
            let largest_iface = [&to, &from]
                .iter()
                .filter_map(|x| x.as_ref().map(|(_, m)| *m))
                .max()?;
            let passed = l.mtu?;
            (passed < largest_iface).then_some((l, passed, from, to))
        })
        .collect();
    let Some((first, passed, from_if, to_if)) = holes.first().cloned() else {
        let stalled: Vec<&LinkResult> = input.links.records().filter(|l| l.stalled).collect();
        return Finding::new(
            ID,
            Status::Pass,
            "links",
            if stalled.is_empty() {
                "no connection stalled on a large message".to_string()
            } else {
                format!(
                    "{} connection(s) stalled on a large message, but don't-fragment packets of the interfaces' MTU passed: not an MTU black hole (see the links' errors)",
                    stalled.len()
                )
            },
        )
        .with("stalled", stalled.len());
    };
    let smallest = holes.iter().map(|h| h.1).min().unwrap_or(passed);
    let mtu_text = |x: &Option<(String, u32)>| {
        x.as_ref().map_or("an unknown MTU".to_string(), |(n, m)| {
            format!("{n} at MTU {m}")
        })
    };
    let more = holes.len().saturating_sub(1);
    let summary = format!(
        "{} -> {} on {} ({}): the connection was established but a large message stalled; {} has {} and {} has {}, yet the largest don't-fragment packet that passed was {passed} bytes: something between them (a switch, a link) carries less than the interfaces' MTU and drops larger frames without telling (an MTU black hole){}",
        input.who(first.from),
        input.who(first.to),
        first.interface,
        first.address,
        input.who(first.from),
        mtu_text(&from_if),
        input.who(first.to),
        mtu_text(&to_if),
        if more > 0 {
            format!("; {more} more pair(s) the same")
        } else {
            String::new()
        }
    );
    // Every node on a stalled pair whose interface is set above what the path carries.
    let mut too_big: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut iface_mtus: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for (l, _, from, to) in &holes {
        for (rank, x) in [(l.from, from), (l.to, to)] {
            if let Some((name, m)) = x {
                iface_mtus.insert(rank.to_string(), json!({"interface": name, "mtu": m}));
                if *m > smallest {
                    too_big.entry(name.clone()).or_default().insert(rank);
                }
            }
        }
    }
    let target = fix_mtu(smallest);
    let ranks: Vec<u32> = too_big
        .values()
        .flatten()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let biggest = iface_mtus
        .values()
        .filter_map(|v| v["mtu"].as_u64())
        .max()
        .unwrap_or(u64::from(passed));
    let mut fix = Fix::new(format!(
        "On {}, set the interface MTU to what the path carries ({target}), or raise the MTU of the switch (and every link) between the nodes to {biggest}; then rerun. Persist it (netplan `mtu:`, NetworkManager `802-3-ethernet.mtu`).",
        ranks_phrase(&ranks)
    ));
    for name in too_big.keys() {
        fix = fix.command(format!("ip link set dev {name} mtu {target}"));
    }
    let pairs: Vec<serde_json::Value> = holes
        .iter()
        .map(|(l, p, _, _)| {
            json!({"from": l.from, "to": l.to, "interface": l.interface, "address": l.address, "largest_passed": p})
        })
        .collect();
    Finding::new(
        ID,
        Status::Fail,
        format!("{}->{} {}", first.from, first.to, first.interface),
        summary,
    )
    .on_node(Some(first.to))
    .with("largest_passed", smallest)
    .with("interface_mtus", iface_mtus)
    .with("pairs", pairs)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::LinkOutcome;
    use crate::testkit::*;

    fn jumbo(c: &mut Cluster) {
        for f in &mut c.facts {
            f.net.interfaces[0].mtu = Some(9000);
        }
    }

    #[test]
    fn a_stall_with_a_small_path_is_a_black_hole_with_the_mtu_fix() {
        let mut c = Cluster::healthy(2);
        jumbo(&mut c);
        for l in &mut c.links {
            if l.address.starts_with("10.0.0.") {
                l.stalled = true;
                l.mtu = Some(1496);
                l.result = LinkOutcome::Error;
            }
        }
        let fs = c.findings();
        let f = only(&fs, ID);
        assert_eq!(f.status, Status::Fail, "{}", f.summary);
        assert!(f.summary.contains("eno1 at MTU 9000"), "{}", f.summary);
        assert!(
            f.summary
                .contains("largest don't-fragment packet that passed was 1496 bytes"),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("MTU black hole"), "{}", f.summary);
        assert_eq!(commands(f), vec!["ip link set dev eno1 mtu 1500"]);
        assert!(
            f.fix
                .as_ref()
                .unwrap()
                .hint
                .contains("raise the MTU of the switch")
        );
        assert_eq!(f.evidence["largest_passed"], 1496);
        assert_eq!(f.evidence["interface_mtus"]["0"]["mtu"], 9000);
    }

    #[test]
    fn no_stall_or_a_stall_at_full_mtu_is_no_black_hole() {
        let mut c = Cluster::healthy(2);
        jumbo(&mut c);
        let fs = c.findings();
        assert_eq!(only(&fs, ID).status, Status::Pass);
        for l in &mut c.links {
            l.stalled = true;
            l.mtu = Some(9000);
        }
        let fs = c.findings();
        let f = only(&fs, ID);
        assert_eq!(f.status, Status::Pass);
        assert!(f.summary.contains("not an MTU black hole"), "{}", f.summary);
    }
}

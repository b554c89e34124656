//! `link.mtu-mismatch`: interface MTUs that differ on the chosen network, or a path that carries less than the interfaces.

use crate::core::ClusterInput;
use crate::core::NetworkEval;
use crate::core::cluster_common::{MemberAddrs, rank_map, ranks_phrase};
use crate::core::{Finding, Fix, Status};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) fn mtu_mismatch(input: &ClusterInput) -> Finding {
    let Some(eval) = input.chosen else {
        return Finding::new(
            crate::link::ids::MTU_MISMATCH,
            Status::Skip,
            "mtu",
            "no network connects every node, so none is chosen to compare MTUs on",
        );
    };
    let joined = input.joined();
    let mtus: BTreeMap<u32, u32> = eval
        .network
        .members
        .iter()
        .filter(|(r, _)| joined.contains(r))
        .filter_map(|(r, m)| m.mtu.map(|mtu| (*r, mtu)))
        .collect();
    // Path MTUs per ordered pair: n² of them, so the evidence keeps the pairs that carry less
    // than the interfaces (at most PAIRS_SHOWN) and a count of the rest, never every pair.
    // One pass: how many were measured and the least, and only the narrow pairs kept.
    let interface_floor = mtus.values().copied().min();
    let (mut measured, mut measured_min) = (0usize, None::<u32>);
    let mut narrow_all: Vec<(u32, u32, u32)> = Vec::new();
    let count = |from: u32, to: u32, mtu: Option<u32>| {
        let Some(m) = mtu.filter(|_| from != to) else {
            return;
        };
        measured += 1;
        measured_min = Some(measured_min.map_or(m, |x| x.min(m)));
        if interface_floor.is_some_and(|i| m < i) {
            narrow_all.push((from, to, m));
        }
    };
    // The table's cells read as bytes (a target judged once), the records one by one.
    let members = MemberAddrs::of(eval);
    let count = std::cell::RefCell::new(count);
    input.links.scan(
        |to, address| members.is_member(to, address).then_some(()),
        |l, ()| (count.borrow_mut())(l.from, l.to, l.mtu),
        |l, ()| (count.borrow_mut())(l.from, l.to, l.mtu),
    );
    // A table's links in their (from, to) order, as the evidence lists them (a list's: as given).
    if input.links.is_dense() {
        narrow_all.sort_by_key(|(from, to, _)| (*from, *to));
    }
    let subject = eval
        .common_name()
        .map(|n| format!("{} {n}", eval.network.id))
        .unwrap_or_else(|| eval.network.id.clone());
    let narrow: BTreeMap<String, u32> = narrow_all
        .iter()
        .take(PAIRS_SHOWN)
        .map(|(a, b, m)| (format!("{a}->{b}"), *m))
        .collect();
    let base = |status, summary: String| {
        Finding::new(
            crate::link::ids::MTU_MISMATCH,
            status,
            subject.clone(),
            summary,
        )
        .with("network", &eval.network.id)
        .with("mtu", rank_map(&mtus))
        .with("path_mtu", &narrow)
        .with("path_mtu_measured", measured)
        .with("path_mtu_narrower", narrow_all.len())
        .with("path_mtu_min", measured_min)
    };
    let distinct: BTreeSet<u32> = mtus.values().copied().collect();
    if distinct.len() > 1 {
        return interface_mtus_differ(input, eval, &mtus, base(Status::Warn, String::new()));
    }
    let iface_mtu = distinct.into_iter().next();
    if let (Some(i), Some(lowest)) = (iface_mtu, narrow_all.iter().map(|(_, _, m)| *m).min()) {
        let mut pairs: Vec<&str> = narrow.keys().map(|k| k.as_str()).take(8).collect();
        let more = narrow_all.len() - pairs.len();
        let more = if more > 0 {
            format!(" and {more} more pair(s)")
        } else {
            String::new()
        };
        pairs.sort_unstable();
        let summary = format!(
            "every node's interface on {} has MTU {i}, but the path carries only {lowest} between {}{more}: something in between (a switch) has a smaller MTU, and large packets are dropped",
            eval.network.id,
            pairs.join(", ")
        );
        return base(Status::Warn, summary).fix(
            mtu_commands(input, eval, &mtus.keys().copied().collect::<Vec<_>>(), lowest)
                .into_iter()
                .fold(
                    Fix::new(format!(
                        "Raise the MTU of the switches between the nodes to {i}, or lower every node's interface to {lowest}{}",
                        PERSIST_HINT
                    )),
                    Fix::command,
                ),
        );
    }
    let summary = match iface_mtu {
        Some(m) => format!("MTU {m} on every node's interface on {}", eval.network.id),
        None => format!("no MTU known on {}", eval.network.id),
    };
    base(Status::Pass, summary)
}

/// Narrow pairs named in the evidence; the count says how many there were in all.
const PAIRS_SHOWN: usize = 64;

const PERSIST_HINT: &str = ". `ip link` does not survive a reboot: also set it where the interface is configured (netplan `mtu:`, `nmcli connection modify <conn> 802-3-ethernet.mtu <mtu>`, or MTU= in ifcfg)";

fn mtu_commands(input: &ClusterInput, eval: &NetworkEval, ranks: &[u32], mtu: u32) -> Vec<String> {
    ranks
        .iter()
        .filter_map(|r| {
            eval.network.members.get(r).map(|m| {
                format!(
                    "ip link set dev {} mtu {mtu}   # on {}",
                    m.interface,
                    input.who(*r)
                )
            })
        })
        .collect()
}

/// The value most nodes have; on a tie the smaller, which every switch carries.
fn common_mtu(mtus: &BTreeMap<u32, u32>) -> Option<u32> {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for m in mtus.values() {
        *counts.entry(*m).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(m, _)| m)
}

fn interface_mtus_differ(
    input: &ClusterInput,
    eval: &NetworkEval,
    mtus: &BTreeMap<u32, u32>,
    base: Finding,
) -> Finding {
    let common = common_mtu(mtus).unwrap_or(1500);
    let odd: Vec<u32> = mtus
        .iter()
        .filter(|(_, m)| **m != common)
        .map(|(r, _)| *r)
        .collect();
    let mut by_mtu: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (r, m) in mtus {
        by_mtu.entry(*m).or_default().push(*r);
    }
    let listing: Vec<String> = by_mtu
        .iter()
        .map(|(m, rs)| format!("{m} on {}", ranks_phrase(rs)))
        .collect();
    let mut f = base;
    f.summary = format!(
        "MTU differs on {}: {} (small messages pass, large ones can hang)",
        eval.network.id,
        listing.join("; ")
    );
    f.with("common_mtu", common).with("odd_ranks", &odd).fix(
        mtu_commands(input, eval, &odd, common).into_iter().fold(
            Fix::new(format!(
                "Set MTU {common} (what most nodes have) on {}{PERSIST_HINT}",
                ranks_phrase(&odd)
            )),
            Fix::command,
        ),
    )
}

#[cfg(test)]
mod tests {
    use crate::core::Status;
    use crate::testkit::*;
    use serde_json::json;

    #[test]
    fn mtu_mismatch_warns_with_the_common_value_for_the_odd_node() {
        let mut c = Cluster::healthy(3);
        c.facts[1].net.interfaces[0].mtu = Some(9000);
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::MTU_MISMATCH);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["mtu"]["1"], json!(9000));
        assert_eq!(f.evidence["common_mtu"], json!(1500));
        assert_eq!(
            commands(f),
            vec!["ip link set dev eno1 mtu 1500   # on rank 1 (node02)"]
        );
        assert!(f.fix.as_ref().unwrap().hint.contains("netplan"));
    }

    #[test]
    fn narrow_path_mtu_warns_even_when_interfaces_agree() {
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            f.net.interfaces[0].mtu = Some(9000);
        }
        assert_eq!(
            only(&c.findings(), crate::link::ids::MTU_MISMATCH).status,
            Status::Pass
        );
        for l in &mut c.links {
            l.mtu = Some(if l.address.starts_with("10.") {
                1500
            } else {
                9000
            });
        }
        let fs = c.findings();
        let f = only(&fs, crate::link::ids::MTU_MISMATCH);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["path_mtu"]["0->1"], json!(1500));
        assert!(f.summary.contains("only 1500"), "{}", f.summary);
    }
}

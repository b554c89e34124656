//! `link.slow`: pairs whose measured TCP throughput is under half the median, or under half the rated speed of a link one stream can fill.

use super::ClusterInput;
use super::common::links_on;
use crate::model::{Finding, Fix, Status};
use crate::networks::NetworkEval;
use crate::stats::median;
use std::collections::{BTreeMap, BTreeSet};

/// A pair whose throughput is below this share of the median (or of its rated speed) is slow.
pub const SLOW_SHARE: f64 = 0.5;

/// One TCP stream rarely fills more than this (Gbit/s), so faster rated links are judged by the median only.
const RATED_CHECK_MAX_GBIT: f64 = 25.0;

pub(super) fn slow_links(input: &ClusterInput) -> Vec<Finding> {
    let Some(eval) = input.chosen else {
        return vec![Finding::new(
            "link.slow",
            Status::Skip,
            "throughput",
            "no network connects every node, so none is chosen to measure",
        )];
    };
    let mut best: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    for l in links_on(input, eval) {
        let Some(tp) = l
            .throughput_gbit_s
            .map(f64::from)
            .filter(|t| t.is_finite() && *t >= 0.0)
        else {
            continue;
        };
        let e = best.entry((l.from, l.to)).or_insert(tp);
        *e = e.max(tp);
    }
    let mut all: Vec<f64> = best.values().copied().collect();
    let Some(med) = median(&mut all) else {
        return vec![
            Finding::new(
                "link.slow",
                Status::Skip,
                eval.network.id.clone(),
                format!("no throughput was measured on {}", eval.network.id),
            )
            .with("network", &eval.network.id),
        ];
    };
    let mut out = Vec::new();
    let slow: Vec<((u32, u32), Finding)> = best
        .iter()
        .filter_map(|((from, to), tp)| {
            slow_pair(input, eval, *from, *to, *tp, med).map(|f| ((*from, *to), f))
        })
        .collect();
    let slow_nodes = slow_nodes(&best, &slow);
    for (rank, pairs, node_med) in &slow_nodes {
        out.push(slow_node(input, eval, *rank, *pairs, *node_med, med));
    }
    let named: BTreeSet<u32> = slow_nodes.iter().map(|(r, _, _)| *r).collect();
    out.extend(
        slow.into_iter()
            .filter(|((a, b), _)| !named.contains(a) && !named.contains(b))
            .map(|(_, f)| f),
    );
    if out.is_empty() {
        let min = best.values().copied().fold(f64::INFINITY, f64::min);
        out.push(
            Finding::new(
                "link.slow",
                Status::Pass,
                eval.network.id.clone(),
                format!(
                    "{} pairs on {}: median {med:.2} Gbit/s, slowest {min:.2} Gbit/s",
                    best.len(),
                    eval.network.id
                ),
            )
            .with("network", &eval.network.id)
            .with("median_gbit_s", med)
            .with("min_gbit_s", min)
            .with("pairs", best.len()),
        );
    }
    out
}

/// A measured ordered pair and its throughput.
type PairTp = ((u32, u32), f64);

/// Nodes whose every measured pair (at least two) is slow: the node is slow, not its links.
/// Returns (rank, pairs, the median of its pairs). A pair counts for both of its ends.
fn slow_nodes(
    best: &BTreeMap<(u32, u32), f64>,
    slow: &[((u32, u32), Finding)],
) -> Vec<(u32, usize, f64)> {
    let slow_pairs: BTreeSet<(u32, u32)> = slow.iter().map(|(p, _)| *p).collect();
    let mut per: BTreeMap<u32, Vec<PairTp>> = BTreeMap::new();
    for (pair, tp) in best {
        per.entry(pair.0).or_default().push((*pair, *tp));
        per.entry(pair.1).or_default().push((*pair, *tp));
    }
    let mut out = Vec::new();
    for (rank, pairs) in per {
        let peers: BTreeSet<u32> = pairs
            .iter()
            .map(|((a, b), _)| if *a == rank { *b } else { *a })
            .collect();
        if peers.len() < 2 || !pairs.iter().all(|(p, _)| slow_pairs.contains(p)) {
            continue;
        }
        let mut tps: Vec<f64> = pairs.iter().map(|(_, t)| *t).collect();
        let m = median(&mut tps).unwrap_or(0.0);
        out.push((rank, pairs.len(), m));
    }
    out
}

/// One finding for a node whose every pair is slow.
fn slow_node(
    input: &ClusterInput,
    eval: &NetworkEval,
    rank: u32,
    pairs: usize,
    node_med: f64,
    med: f64,
) -> Finding {
    let iface = eval
        .network
        .members
        .get(&rank)
        .map(|m| m.interface.clone())
        .unwrap_or_default();
    Finding::new(
        "link.slow",
        Status::Warn,
        format!("{rank} {iface}"),
        format!(
            "{} is slow with every peer on {}: its {pairs} measured pairs have a median of {node_med:.2} Gbit/s against the cluster's {med:.2} Gbit/s, so the node (its NIC, its link to the switch, or its load), not one link, is the cause",
            input.who(rank),
            eval.network.id
        ),
    )
    .on_node(Some(rank))
    .with("network", &eval.network.id)
    .with("node", rank)
    .with("pairs", pairs)
    .with("node_median_gbit_s", node_med)
    .with("median_gbit_s", med)
    .fix(
        Fix::new(format!(
            "Check {}'s NIC: negotiated speed and duplex, errors, traffic shaping, and what else runs there",
            input.who(rank)
        ))
        .command(format!("ethtool {iface}   # on {}", input.who(rank)))
        .command(format!("ip -s link show {iface}   # on {}", input.who(rank)))
        .command(format!("tc qdisc show dev {iface}   # on {}", input.who(rank))),
    )
}

/// The lower rated speed of the two ends, in Gbit/s. A virtual interface's speed (a veth or a
/// bridge port says 10000 Mb/s whatever carries it) is the kernel's placeholder, not a rate.
fn rated_gbit(eval: &NetworkEval, from: u32, to: u32) -> Option<f64> {
    let rate = |r: u32| {
        eval.network
            .members
            .get(&r)
            .filter(|m| !m.is_virtual)
            .and_then(|m| m.speed_mbps)
    };
    let (a, b) = (rate(from), rate(to));
    let mbps = match (a, b) {
        (Some(x), Some(y)) => x.min(y),
        (x, y) => x.or(y)?,
    };
    (mbps > 0).then_some(mbps as f64 / 1000.0)
}

fn slow_pair(
    input: &ClusterInput,
    eval: &NetworkEval,
    from: u32,
    to: u32,
    tp: f64,
    med: f64,
) -> Option<Finding> {
    let rated = rated_gbit(eval, from, to);
    let below_median = tp < SLOW_SHARE * med;
    let below_rated = rated.is_some_and(|r| r <= RATED_CHECK_MAX_GBIT && tp < SLOW_SHARE * r);
    if !below_median && !below_rated {
        return None;
    }
    let iface_from = eval.network.members.get(&from).map(|m| m.interface.clone());
    let iface_to = eval.network.members.get(&to).map(|m| m.interface.clone());
    let iface = iface_to.clone().or(iface_from.clone()).unwrap_or_default();
    let mut reasons = Vec::new();
    if below_median {
        reasons.push(format!(
            "under half the median of all pairs ({med:.2} Gbit/s)"
        ));
    }
    if let (true, Some(r)) = (below_rated, rated) {
        reasons.push(format!("under half the rated {r:.0} Gbit/s"));
    }
    let mut fix = Fix::new(format!(
        "Check cabling, negotiated speed/duplex and traffic shaping on both ends ({} and {})",
        input.who(from),
        input.who(to)
    ));
    for (r, name) in [(from, &iface_from), (to, &iface_to)] {
        if let Some(n) = name {
            fix = fix
                .command(format!("ethtool {n}   # on {}", input.who(r)))
                .command(format!("tc qdisc show dev {n}   # on {}", input.who(r)));
        }
    }
    Some(
        Finding::new(
            "link.slow",
            Status::Warn,
            format!("{from}->{to} {iface}"),
            format!(
                "{} -> {} on {} measured {tp:.2} Gbit/s: {}",
                input.who(from),
                input.who(to),
                eval.network.id,
                reasons.join(" and ")
            ),
        )
        .with("network", &eval.network.id)
        .with("from", from)
        .with("to", to)
        .with("measured_gbit_s", tp)
        .with("median_gbit_s", med)
        .with("rated_gbit_s", rated)
        .fix(fix),
    )
}

#[cfg(test)]
mod tests {
    use crate::cluster::testkit::*;
    use crate::model::{LinkOutcome, Status};
    use serde_json::json;

    #[test]
    fn slow_pair_below_half_the_median_warns() {
        let mut c = Cluster::healthy(3);
        for l in &mut c.links {
            if l.from == 0 && l.to == 2 && l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(1.0);
            }
        }
        let fs = c.findings();
        let v = with_id(&fs, "link.slow");
        assert_eq!(v.len(), 1, "{v:#?}");
        let f = v[0];
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.subject, "0->2 eno1");
        assert_eq!(f.evidence["measured_gbit_s"], json!(1.0));
        assert_eq!(f.evidence["median_gbit_s"], json!(9.0));
        assert_eq!(f.evidence["rated_gbit_s"], json!(10.0));
        assert!(commands(f).contains(&"ethtool eno1   # on rank 2 (node03)".to_string()));
    }

    #[test]
    fn a_node_slow_with_every_peer_is_named_once_as_the_node() {
        let mut c = Cluster::healthy(8);
        for l in &mut c.links {
            if (l.from == 5 || l.to == 5) && l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(0.5);
            }
        }
        // One more slow pair elsewhere stays a pair.
        for l in &mut c.links {
            if l.from == 1 && l.to == 2 && l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(1.0);
            }
        }
        let fs = c.findings();
        let v = with_id(&fs, "link.slow");
        assert_eq!(v.len(), 2, "{v:#?}");
        let node = v.iter().find(|f| f.node == Some(5)).expect("rank 5 named");
        assert!(
            node.summary.contains("slow with every peer"),
            "{}",
            node.summary
        );
        assert_eq!(node.evidence["pairs"], json!(14));
        assert!(v.iter().any(|f| f.subject.starts_with("1->2")));
    }

    #[test]
    fn slow_against_rated_speed_only_where_one_stream_can_fill_the_link() {
        let mut c = Cluster::healthy(2);
        for l in &mut c.links {
            if l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(2.0);
            }
        }
        // 2 of a rated 10 Gbit/s on every pair: all slow, though equal to the median.
        let fs = c.findings();
        let v = with_id(&fs, "link.slow");
        assert_eq!(v.len(), 2);
        assert!(v[0].summary.contains("rated 10 Gbit/s"), "{}", v[0].summary);
        // 30 of a rated 200 Gbit/s is what one TCP stream gets: not flagged.
        for f in &mut c.facts {
            f.net.interfaces[0].speed_mbps = Some(200_000);
        }
        for l in &mut c.links {
            if l.result == LinkOutcome::Ok {
                l.throughput_gbit_s = Some(30.0);
            }
        }
        assert_eq!(only(&c.findings(), "link.slow").status, Status::Pass);
    }

    #[test]
    fn slow_skips_without_measurements() {
        let mut c = Cluster::healthy(2);
        for l in &mut c.links {
            l.throughput_gbit_s = None;
        }
        assert_eq!(only(&c.findings(), "link.slow").status, Status::Skip);
    }
}

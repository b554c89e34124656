//! The second pass: a node that failed with many peers is tested again against a partner whose
//! links all worked, so the report tells a bad node (it fails with a known-good partner too)
//! from bad links (it works with the partner). A link that works on the second pass was a
//! passing fault and counts as ok.

use super::ctx::{Lap, Phase, PhaseCtx};
use crate::runtime::budget::probe_budget;
use crate::runtime::members::JoinedNode;
use crate::runtime::members::links::exchange;
use crate::transport::wire::{Msg, Peer};
use preflight_checks::model::{LinkOutcome, LinkResult, SecondPass};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// A node is tested again when it failed with at least this many peers...
const MIN_FAILED_PEERS: usize = 3;
/// ... or with at least this share of them.
const FAILED_SHARE: f64 = 0.25;
/// Nodes tested again at most (the worst first): a cluster broken everywhere needs no more.
const MAX_NODES: usize = 32;

/// The second pass.
pub struct Retest;

impl Phase for Retest {
    fn name(&self) -> &'static str {
        "second pass"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        let t = ctx.run.job.timing;
        let limit = probe_budget(t.connect_timeout, t.pings, 64) + Duration::from_secs(5);
        let second = run(
            &mut ctx.members,
            &mut ctx.links,
            t.pings,
            t.connect_timeout,
            limit,
        );
        if second.is_empty() {
            return Lap::Untimed;
        }
        ctx.run.events.log(format!(
            "coordinator: second pass: {}",
            second
                .iter()
                .map(|p| format!(
                    "rank {} against rank {}: {} (out {}, in {})",
                    p.node,
                    p.partner,
                    p.verdict,
                    p.outbound.as_str(),
                    p.inbound.as_str()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ));
        ctx.found.second = second;
        Lap::Timed
    }
}

/// Per node, the peers it failed with (either direction), from the probe's links.
fn failed_peers(links: &[LinkResult]) -> BTreeMap<u32, BTreeSet<u32>> {
    let mut out: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for l in links.iter().filter(|l| l.result != LinkOutcome::Ok) {
        out.entry(l.from).or_default().insert(l.to);
        out.entry(l.to).or_default().insert(l.from);
    }
    out
}

/// The nodes to test again, worst first, and the partner: a node whose every link worked but
/// those with the nodes tested again (rank 0 first, else the lowest rank).
pub(crate) fn pick(alive: &[u32], links: &[LinkResult]) -> Option<(u32, Vec<(u32, usize)>)> {
    let failed = failed_peers(links);
    if failed.is_empty() {
        return None;
    }
    let bad = worst_nodes(&failed, alive);
    let bad_set: BTreeSet<u32> = bad.iter().map(|(r, _)| *r).collect();
    let partner = alive
        .iter()
        .copied()
        .find(|r| !bad_set.contains(r) && failed.get(r).is_none_or(|p| p.is_subset(&bad_set)))?;
    (!bad.is_empty()).then_some((partner, bad))
}

/// The nodes that failed with many peers, worst first, at most [`MAX_NODES`]: greedily, the node
/// with the most failed peers, then again with its failures set aside (a node that failed only
/// with a bad node is not bad itself).
fn worst_nodes(failed: &BTreeMap<u32, BTreeSet<u32>>, alive: &[u32]) -> Vec<(u32, usize)> {
    let peers = alive.len().saturating_sub(1).max(1);
    let enough =
        |n: usize| n >= 2 && (n >= MIN_FAILED_PEERS || n as f64 >= FAILED_SHARE * peers as f64);
    let mut left: BTreeMap<u32, BTreeSet<u32>> = failed
        .iter()
        .filter(|(r, _)| alive.contains(r))
        .map(|(r, p)| (*r, p.clone()))
        .collect();
    let mut bad = Vec::new();
    while bad.len() < MAX_NODES {
        let Some((worst, n)) = left
            .iter()
            .map(|(r, p)| (*r, p.len()))
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        else {
            break;
        };
        if !enough(n) {
            break;
        }
        let first = failed.get(&worst).map_or(n, |p| p.len());
        bad.push((worst, first));
        left.remove(&worst);
        for p in left.values_mut() {
            p.remove(&worst);
        }
    }
    bad
}

/// Runs the second pass and returns what it found; links that now work are updated in `links`.
fn run(
    members: &mut [JoinedNode],
    links: &mut [LinkResult],
    pings: u32,
    connect_timeout: Duration,
    limit: Duration,
) -> Vec<SecondPass> {
    let alive: Vec<u32> = members.iter().filter(|m| m.alive).map(|m| m.rank).collect();
    let Some((partner, bad)) = pick(&alive, links) else {
        return Vec::new();
    };
    let listeners: HashMap<u32, Peer> = members
        .iter()
        .map(|m| {
            (
                m.rank,
                Peer {
                    rank: m.rank,
                    listeners: m.listeners.clone(),
                },
            )
        })
        .collect();
    let bad_ranks: Vec<u32> = bad.iter().map(|(r, _)| *r).collect();
    let admitted: Vec<String> = Vec::new();
    let order_for = |rank: u32| -> Option<Msg> {
        let peers: Vec<Peer> = if rank == partner {
            bad_ranks
                .iter()
                .filter_map(|r| listeners.get(r).cloned())
                .collect()
        } else if bad_ranks.contains(&rank) {
            listeners.get(&partner).cloned().into_iter().collect()
        } else {
            return None;
        };
        Some(Msg::Probe {
            peers,
            pings,
            connect_timeout_ms: connect_timeout.as_millis() as u64,
            admitted: admitted.clone(),
            resolve: None,
            deadline_ms: None,
        })
    };
    let got = exchange(members, limit, "the second pass", |m| order_for(m.rank));
    let mut out = Vec::new();
    for (node, failed) in bad {
        let worst = |from: u32, to: u32| -> LinkOutcome {
            let mine: Vec<&LinkResult> = got
                .iter()
                .filter(|l| l.from == from && l.to == to)
                .collect();
            if mine.is_empty() {
                return LinkOutcome::Error;
            }
            mine.iter()
                .map(|l| l.result)
                .find(|r| *r != LinkOutcome::Ok)
                .unwrap_or(LinkOutcome::Ok)
        };
        let outbound = worst(node, partner);
        let inbound = worst(partner, node);
        let address = got
            .iter()
            .find(|l| l.from == partner && l.to == node)
            .map(|l| l.address.to_string())
            .unwrap_or_default();
        let verdict = if outbound == LinkOutcome::Ok && inbound == LinkOutcome::Ok {
            "links"
        } else {
            "node"
        };
        out.push(SecondPass {
            node,
            partner,
            address,
            failed_peers: failed as u32,
            outbound,
            inbound,
            verdict: verdict.into(),
        });
    }
    // A first-pass failure that works now was passing: the link is ok, after a retry.
    let index: HashMap<(u32, u32, &str), &LinkResult> = got
        .iter()
        .filter(|l| l.result == LinkOutcome::Ok)
        .map(|l| ((l.from, l.to, l.address.as_str()), l))
        .collect();
    for l in links.iter_mut().filter(|l| l.result != LinkOutcome::Ok) {
        if let Some(g) = index.get(&(l.from, l.to, l.address.as_str())) {
            l.result = LinkOutcome::Ok;
            l.rtt_us = g.rtt_us;
            l.rtt_p99_us = g.rtt_p99_us;
            l.retries += 1 + g.retries;
            l.error = None;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(from: u32, to: u32, ok: bool) -> LinkResult {
        LinkResult {
            from,
            to,
            address: format!("10.200.1.{}", to + 1).into(),
            result: if ok {
                LinkOutcome::Ok
            } else {
                LinkOutcome::Timeout
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_node_failing_with_many_peers_is_picked_one_failed_link_is_not() {
        // Node 3 of 8 fails inbound with everyone; one more bad link 1 -> 5.
        let mut links = Vec::new();
        for a in 0..8u32 {
            for b in 0..8u32 {
                if a != b {
                    links.push(link(a, b, b != 3 && !(a == 1 && b == 5)));
                }
            }
        }
        let failed = failed_peers(&links);
        assert_eq!(failed[&3].len(), 7);
        assert_eq!(failed[&1].len(), 2);
        assert_eq!(failed[&5].len(), 2);
        let alive: Vec<u32> = (0..8).collect();
        let bad: Vec<u32> = worst_nodes(&failed, &alive)
            .iter()
            .map(|(r, _)| *r)
            .collect();
        assert_eq!(bad, vec![3], "only the node with many failures");
    }
}

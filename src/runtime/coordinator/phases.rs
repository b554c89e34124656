//! The measurement phases the coordinator schedules: orders out, replies in within a deadline; connectivity, throughput in rounds of disjoint pairs, path MTU.

use super::gather::{Step, Wait, gather, lose};
use super::{CoordConfig, JoinedNode};
use crate::transport::auth;
use crate::transport::wire::{Listener, Msg, Peer, Target, write_msg};
use preflight_checks::model::{LinkResult, NodeFacts};
use preflight_checks::networks;
use std::collections::BTreeMap;
use std::time::Duration;

/// Sends each alive member its order (None: nothing for it); returns the indices of the members asked.
pub(in crate::runtime) fn send_orders(
    members: &mut [JoinedNode],
    phase: &str,
    order: impl Fn(&JoinedNode) -> Option<Msg>,
) -> Vec<usize> {
    let mut asked = Vec::new();
    for (i, m) in members.iter_mut().enumerate().filter(|(_, m)| m.alive) {
        let Some(msg) = order(m) else { continue };
        m.stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .ok();
        match write_msg(&mut m.stream, &msg) {
            Ok(()) => asked.push(i),
            Err(e) => lose(m, phase, &e.to_string()),
        }
    }
    asked
}

fn is_links(m: &Msg) -> bool {
    matches!(
        m,
        Msg::ProbeDone { .. } | Msg::BulkDone { .. } | Msg::MtuDone { .. }
    )
}

/// Sends each alive member its order (None: nothing for it) and collects the links every node
/// answers, all at once, within `limit`.
pub(super) fn exchange(
    members: &mut [JoinedNode],
    limit: Duration,
    phase: &str,
    order: impl Fn(&JoinedNode) -> Option<Msg>,
) -> Vec<LinkResult> {
    let asked = send_orders(members, phase, order);
    let mut links = Vec::new();
    gather(
        members,
        &asked,
        phase,
        Wait::within(limit),
        is_links,
        |m, msg| match msg {
            Msg::ProbeDone { links: l }
            | Msg::BulkDone { links: l }
            | Msg::MtuDone { links: l } => {
                links.extend(l.into_iter().filter(|x| x.from == m.rank));
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
    links
}

/// A phase's natural limit, but never past `--timeout` + 5 s: a node waiting for its next order
/// gives up at `--timeout` + 10 s (see the agent), so every phase must end before that.
fn bounded(cfg: &CoordConfig, natural: Duration) -> Duration {
    natural.min(cfg.join_timeout + Duration::from_secs(5))
}

pub(super) fn probe_phase(members: &mut [JoinedNode], cfg: &CoordConfig) -> Vec<LinkResult> {
    let peers: Vec<Peer> = members
        .iter()
        .map(|m| Peer {
            rank: m.rank,
            listeners: m.listeners.clone(),
        })
        .collect();
    let t = cfg.timing;
    // Every address of every admitted node: where it connected from and what it has.
    let admitted: Vec<String> = members
        .iter()
        .flat_map(|m| {
            let own = m
                .facts
                .net
                .interfaces
                .iter()
                .flat_map(|i| i.usable_addrs())
                .map(|a| a.addr);
            std::iter::once(crate::transport::gate::canonical(m.peer.ip())).chain(own)
        })
        .map(|ip| ip.to_string())
        .collect();
    let limit = bounded(
        cfg,
        t.connect_timeout * 2 + auth::HANDSHAKE_TIMEOUT * 2 + Duration::from_secs(10),
    );
    exchange(members, limit, "the connectivity test", |m| {
        Some(Msg::Probe {
            peers: peers.iter().filter(|p| p.rank != m.rank).cloned().collect(),
            pings: t.pings,
            connect_timeout_ms: t.connect_timeout.as_millis() as u64,
            admitted: admitted.clone(),
        })
    })
}

/// Round-robin rounds of disjoint pairs (circle method): n-1 rounds for even n, n for odd.
pub fn rounds(ranks: &[u32]) -> Vec<Vec<(u32, u32)>> {
    let mut v: Vec<Option<u32>> = ranks.iter().map(|r| Some(*r)).collect();
    if v.len() % 2 == 1 {
        v.push(None);
    }
    let n = v.len();
    let mut out = Vec::new();
    if n < 2 {
        return out;
    }
    for _ in 0..n - 1 {
        let round: Vec<(u32, u32)> = (0..n / 2)
            .filter_map(|i| match (v[i], v[n - 1 - i]) {
                (Some(a), Some(b)) => Some((a.min(b), a.max(b))),
                _ => None,
            })
            .collect();
        out.push(round);
        let last = v.pop().expect("n >= 2");
        v.insert(1, last);
    }
    out
}

pub(super) fn alive_facts(members: &[JoinedNode]) -> Vec<(u32, &NodeFacts)> {
    members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, &m.facts))
        .collect()
}

pub(super) fn listener_for(m: &JoinedNode, address: &str) -> Option<Listener> {
    m.listeners.iter().find(|l| l.address == address).cloned()
}

/// Partial networks (not every node reaches them) measured on the pairs that work, at most.
const PARTIAL_NETWORKS_MEASURED: usize = 3;

/// True when the probe connected `from` to `to`'s address on this network.
fn probed_ok(links: &[LinkResult], from: u32, to: u32, addr: &str) -> bool {
    links.iter().any(|l| {
        l.from == from
            && l.to == to
            && l.address == addr
            && l.result == preflight_checks::model::LinkOutcome::Ok
    })
}

/// Throughput in rounds of disjoint pairs (both directions at once): on every fully connected
/// network, and on the pairs that work of the best few partial ones, so a faster network that
/// some node breaks can be weighed against the one chosen.
pub(super) fn bulk_phase(members: &mut [JoinedNode], cfg: &CoordConfig, links: &mut [LinkResult]) {
    let nodes: Vec<(u32, NodeFacts)> = members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, m.facts.clone()))
        .collect();
    let refs: Vec<(u32, &NodeFacts)> = nodes.iter().map(|(r, f)| (*r, f)).collect();
    let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&refs, links), links, &ranks);
    let dur = cfg.timing.bulk;
    let measured: Vec<&networks::NetworkEval> = evals
        .iter()
        .filter(|e| e.fully_connected)
        .chain(
            evals
                .iter()
                .filter(|e| !e.fully_connected && e.pairs_ok > 0)
                .take(PARTIAL_NETWORKS_MEASURED),
        )
        .collect();
    for net in measured {
        for round in rounds(&ranks) {
            let mut orders: BTreeMap<u32, Vec<Target>> = BTreeMap::new();
            for (a, b) in round {
                for (from, to) in [(a, b), (b, a)] {
                    let Some(m_to) = members.iter().find(|m| m.rank == to && m.alive) else {
                        continue;
                    };
                    let Some(addr) = net.network.members.get(&to).map(|x| x.address.to_string())
                    else {
                        continue;
                    };
                    if !probed_ok(links, from, to, &addr) {
                        continue;
                    }
                    if let Some(l) = listener_for(m_to, &addr) {
                        orders.entry(from).or_default().push(Target {
                            rank: to,
                            listener: l,
                        });
                    }
                }
            }
            if orders.is_empty() {
                continue;
            }
            let limit = bounded(
                cfg,
                dur + cfg.timing.connect_timeout
                    + auth::HANDSHAKE_TIMEOUT
                    + Duration::from_secs(10),
            );
            let got = exchange(members, limit, "the throughput test", |m| {
                orders.get(&m.rank).map(|t| Msg::Bulk {
                    targets: t.clone(),
                    duration_ms: dur.as_millis() as u64,
                })
            });
            merge(links, &got, |dst, src| {
                dst.throughput_gbit_s = src.throughput_gbit_s;
                if src.error.is_some() {
                    dst.error = src.error.clone();
                }
                if src.stalled {
                    dst.stalled = true;
                    dst.mtu = src.mtu;
                }
            });
        }
    }
}

/// Path MTU from every node to every other on the chosen network.
pub(super) fn mtu_phase(members: &mut [JoinedNode], cfg: &CoordConfig, links: &mut [LinkResult]) {
    let refs = alive_facts(members);
    let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&refs, links), links, &ranks);
    let Some(chosen) = networks::choose(&evals).cloned() else {
        return;
    };
    let orders: BTreeMap<u32, (Vec<Target>, u32)> = chosen
        .network
        .members
        .iter()
        .map(|(rank, own)| {
            let targets = chosen
                .network
                .members
                .iter()
                .filter(|(r, _)| *r != rank)
                .filter_map(|(r, peer)| {
                    let m = members.iter().find(|m| m.rank == *r)?;
                    Some(Target {
                        rank: *r,
                        listener: listener_for(m, &peer.address.to_string())?,
                    })
                })
                .collect();
            (*rank, (targets, own.mtu.unwrap_or(1500)))
        })
        .collect();
    let got = exchange(
        members,
        bounded(cfg, Duration::from_secs(20)),
        "the MTU test",
        |m| {
            orders.get(&m.rank).map(|(t, mtu)| Msg::Mtu {
                targets: t.clone(),
                max_mtu: *mtu,
            })
        },
    );
    merge(links, &got, |dst, src| {
        if !dst.stalled || src.mtu.is_some() {
            dst.mtu = src.mtu
        }
    });
}

/// Copies fields from `got` into the matching (from, to, address) links.
pub(super) fn merge(
    links: &mut [LinkResult],
    got: &[LinkResult],
    f: impl Fn(&mut LinkResult, &LinkResult),
) {
    for g in got {
        if let Some(l) = links
            .iter_mut()
            .find(|l| l.from == g.from && l.to == g.to && l.address == g.address)
        {
            f(l, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_cover_every_pair_once_with_disjoint_pairs() {
        for n in 2..=9u32 {
            let ranks: Vec<u32> = (0..n).collect();
            let rs = rounds(&ranks);
            assert_eq!(rs.len() as u32, if n % 2 == 0 { n - 1 } else { n });
            let mut seen = std::collections::BTreeSet::new();
            for r in &rs {
                let mut used = std::collections::BTreeSet::new();
                for (a, b) in r {
                    assert!(used.insert(*a) && used.insert(*b), "rank reused in a round");
                    assert!(seen.insert((*a, *b)), "pair repeated");
                }
            }
            assert_eq!(seen.len() as u32, n * (n - 1) / 2);
        }
    }
}

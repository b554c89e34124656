//! The measurement phases the coordinator schedules: orders out, replies in within a deadline; connectivity, throughput in rounds of disjoint pairs (see `runtime::schedule`), path MTU.

use super::gather::{Step, Wait, gather, lose};
use super::{CoordConfig, JoinedNode};
use crate::runtime::agent::dial::paced;
use crate::runtime::schedule;
use crate::transport::auth;
use crate::transport::wire::{Listener, Msg, Peer, Target, WireError, encode_msg, write_frame};
use preflight_checks::model::{Labels, LinkResult, NodeFacts};
use preflight_checks::networks;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Sends each alive member its order (None: nothing for it); returns the indices of the members asked.
pub(in crate::runtime) fn send_orders(
    members: &mut [JoinedNode],
    phase: &str,
    order: impl Fn(&JoinedNode) -> Option<Msg>,
) -> Vec<usize> {
    send_frames(members, phase, |m| {
        order(m).map(|msg| encode_msg(&msg).map(Arc::new))
    })
}

/// Sends each alive member its frame (None: nothing for it), [`SEND_WINDOW`] at once so a slow
/// receiver holds up no one; returns the indices of the members sent to. A frame shared by many
/// members (an `Arc`) is serialised once.
pub(in crate::runtime) fn send_frames(
    members: &mut [JoinedNode],
    phase: &str,
    frame: impl Fn(&JoinedNode) -> Option<Result<Arc<Vec<u8>>, WireError>>,
) -> Vec<usize> {
    let mut jobs: Vec<(usize, TcpStream, Arc<Vec<u8>>)> = Vec::new();
    for (i, m) in members.iter_mut().enumerate().filter(|(_, m)| m.alive) {
        match frame(m) {
            None => {}
            Some(Err(e)) => lose(m, phase, &e.to_string()),
            Some(Ok(f)) => match m.stream.try_clone() {
                Ok(s) => jobs.push((i, s, f)),
                Err(e) => lose(m, phase, &e.to_string()),
            },
        }
    }
    let results = paced(&jobs, SEND_WINDOW, |(_, s, f)| {
        let mut s = s;
        s.set_write_timeout(Some(Duration::from_secs(10))).ok();
        write_frame(&mut s, f)
    });
    let mut asked = Vec::new();
    for ((i, _, _), r) in jobs.iter().zip(results) {
        match r {
            Ok(()) => asked.push(*i),
            Err(e) => lose(&mut members[*i], phase, &e.to_string()),
        }
    }
    asked
}

/// Sends in flight at once from the coordinator.
pub(in crate::runtime) const SEND_WINDOW: usize = 64;

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
    let mut got = Vec::new();
    collect_links(members, &asked, Wait::within(limit), phase, |batch| {
        got.extend(batch)
    });
    got
}

/// [`exchange`], with each node's answer copied into the matching links by `f` as it arrives:
/// no phase holds a second copy of every link.
fn exchange_into(
    members: &mut [JoinedNode],
    wait: Wait,
    phase: &str,
    order: impl Fn(&JoinedNode) -> Option<Msg>,
    links: &mut [LinkResult],
    f: impl Fn(&mut LinkResult, &LinkResult),
) {
    let asked = send_orders(members, phase, order);
    collect_links(members, &asked, wait, phase, |batch| {
        merge(links, &batch, &f)
    });
}

/// Collects the links each asked node answers (its own only), all at once, within `wait`, and
/// hands each node's batch to `take` as it arrives, checked for sense and with its strings
/// shared ([`Labels`]: a million links to a thousand addresses hold a thousand strings). A
/// node's progress reports keep it from counting as silent.
fn collect_links(
    members: &mut [JoinedNode],
    asked: &[usize],
    wait: Wait,
    phase: &str,
    mut take: impl FnMut(Vec<LinkResult>),
) {
    let sense = super::limits::LinkSense::of(members);
    let mut labels = Labels::default();
    let mut own = |rank: u32, batch: Vec<LinkResult>| {
        let mut batch: Vec<LinkResult> = batch.into_iter().filter(|x| x.from == rank).collect();
        sense.check(&mut batch);
        for l in &mut batch {
            labels.intern(&mut l.interface);
            labels.intern(&mut l.address);
        }
        take(batch);
    };
    gather(members, asked, phase, wait, is_links, |m, msg| match msg {
        Msg::ProbeProgress { .. } => Step::More,
        Msg::ProbeDone { links: l, resolved } => {
            own(m.rank, l);
            if let Some(r) = resolved {
                m.facts.sys.master_fqdn = Some(super::limits::bounded_lookup(r));
            }
            Step::Done
        }
        Msg::BulkDone { links: l } | Msg::MtuDone { links: l } => {
            own(m.rank, l);
            Step::Done
        }
        _ => Step::Unexpected,
    });
}

/// The order the coordinator keeps its links in (from, to, address), so [`find`] looks one up
/// without an index the size of the cluster squared.
fn link_key(l: &LinkResult) -> (u32, u32, &str) {
    (l.from, l.to, l.address.as_str())
}

/// Puts `links` in [`link_key`] order, the order [`find`] needs.
pub(in crate::runtime) fn sort_links(links: &mut [LinkResult]) {
    links.sort_unstable_by(|a, b| link_key(a).cmp(&link_key(b)));
}

/// Where the link (from, to, address) is in `links` (kept in [`link_key`] order).
pub(in crate::runtime) fn find(
    links: &[LinkResult],
    from: u32,
    to: u32,
    address: &str,
) -> Option<usize> {
    links
        .binary_search_by(|l| link_key(l).cmp(&(from, to, address)))
        .ok()
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
    let peers_listeners: Vec<usize> = peers.iter().map(|p| p.listeners.len()).collect();
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
    // Each node connects to every listener of every other node; the one with the most to
    // reach sets the pings per link. The phase follows the work: a node goes on starting
    // connects while it reports progress, up to --timeout, and one silent for
    // PROBE_SILENCE is given up on.
    let most_targets = members
        .iter()
        .map(|m| {
            peers
                .iter()
                .filter(|p| p.rank != m.rank)
                .map(|p| p.listeners.len())
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    let pings = crate::runtime::pings_per_link(t.pings, most_targets);
    let deadline = cfg.join_timeout;
    let wait = Wait {
        limit: bounded(cfg, deadline + Duration::from_secs(5)),
        silence: crate::runtime::PROBE_SILENCE,
    };
    // One order for every node (each skips itself), serialised once.
    // Under c10d, rank 0's FQDN (what torchrun publishes) for every node to resolve.
    let resolve = cfg
        .resolve_fqdn
        .then(|| members.iter().find(|m| m.rank == 0))
        .flatten()
        .and_then(|m| m.facts.sys.fqdn.clone());
    let order = encode_msg(&Msg::Probe {
        peers,
        pings,
        connect_timeout_ms: t.connect_timeout.as_millis() as u64,
        admitted,
        resolve,
        deadline_ms: Some(deadline.as_millis() as u64),
    })
    .map(Arc::new);
    let asked = send_frames(members, "the connectivity test", |_| {
        Some(match &order {
            Ok(f) => Ok(f.clone()),
            Err(e) => Err(WireError::Malformed(e.to_string())),
        })
    });
    // Every node's links to every listener of the others, reserved once: a vector grown by
    // doubling would hold two copies of a million links for a moment.
    let listeners: usize = peers_listeners.iter().sum();
    let expected: usize = peers_listeners.iter().map(|own| listeners - own).sum();
    let mut links = Vec::with_capacity(expected);
    collect_links(members, &asked, wait, "the connectivity test", |batch| {
        links.extend(batch)
    });
    // A node that lies may name one link twice: each is kept and judged (later phases update
    // one of them).
    sort_links(&mut links);
    links
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

/// What the throughput phase did: the schedule's name, the rounds run, and the ordered pairs
/// measured again (from, to, the address of `to`).
pub(super) struct BulkDone {
    pub schedule: String,
    pub rounds: u32,
    pub retested: Vec<(u32, u32, String)>,
}

/// Throughput in rounds of disjoint pairs (both directions at once): on every fully connected
/// network, and on the pairs that work of the best few partial ones, so a faster network that
/// some node breaks can be weighed against the one chosen.
pub(super) fn bulk_phase(
    members: &mut [JoinedNode],
    cfg: &CoordConfig,
    links: &mut [LinkResult],
) -> BulkDone {
    let (ranks, evals) = {
        let refs = alive_facts(members);
        let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
        let evals = networks::evaluate(&networks::discover(&refs, links), links, &ranks);
        (ranks, evals)
    };
    let k = cfg.timing.matchings;
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
    let index: HashMap<u32, usize> = members
        .iter()
        .enumerate()
        .map(|(i, m)| (m.rank, i))
        .collect();
    let mut rounds_run = 0u32;
    let mut retested = Vec::new();
    for net in measured {
        // A partial network is measured on the ring of the nodes it has.
        let on_net: Vec<u32> = ranks
            .iter()
            .copied()
            .filter(|r| net.network.members.contains_key(r))
            .collect();
        let rounds = schedule::schedule(&on_net, k, cfg.nnodes as u64);
        rounds_run += run_rounds(members, cfg, links, &index, net, &rounds, false);
        // The suspects of a first judgment are measured again against known-fast partners and
        // among themselves, in at most three rounds of disjoint pairs whatever n, and each pair
        // keeps its better figure: a pair slowed by a busy moment is not called slow, while a
        // slow node, pair or cut is slow both times (ClusterKit retests bad pairs; DLRover
        // pairs the slowest with the fastest).
        let measured_pairs: HashSet<(u32, u32)> = rounds.iter().flatten().copied().collect();
        let retest = retest_rounds(links, net, cfg.min_link_gbit, &on_net, &measured_pairs);
        rounds_run += run_rounds(members, cfg, links, &index, net, &retest, true);
        for &(a, b) in retest.iter().flatten() {
            for (from, to) in [(a, b), (b, a)] {
                if let Some(m) = net.network.members.get(&to) {
                    retested.push((from, to, m.address.to_string()));
                }
            }
        }
    }
    BulkDone {
        schedule: schedule::describe(ranks.len(), k),
        rounds: rounds_run,
        retested,
    }
}

/// Runs each round of pairs on `net` (those that connected); returns how many ran.
fn run_rounds(
    members: &mut [JoinedNode],
    cfg: &CoordConfig,
    links: &mut [LinkResult],
    index: &HashMap<u32, usize>,
    net: &networks::NetworkEval,
    rounds: &[Vec<(u32, u32)>],
    retest: bool,
) -> u32 {
    let orders: Vec<BTreeMap<u32, Vec<Target>>> = rounds
        .iter()
        .map(|round| round_orders(round, members, index, net, links))
        .filter(|o| !o.is_empty())
        .collect();
    for o in &orders {
        run_bulk_round(members, cfg, links, o, retest);
    }
    orders.len() as u32
}

/// The rounds that measure the suspects of `link.slow`'s judgment on `net` again
/// ([`preflight_checks::fail_slow::retest_plan`]); none when nothing is slow.
fn retest_rounds(
    links: &[LinkResult],
    net: &networks::NetworkEval,
    min_link_gbit: Option<f64>,
    ranks: &[u32],
    measured: &HashSet<(u32, u32)>,
) -> Vec<Vec<(u32, u32)>> {
    use preflight_checks::fail_slow;
    let samples = preflight_checks::cluster::throughput_samples(links, net, min_link_gbit);
    let verdict = fail_slow::judge(&samples, fail_slow::throughput_rule);
    fail_slow::retest_plan(&verdict, ranks, measured)
}

/// Both directions of every pair of `round` that connected on `net`, as each sender's targets.
fn round_orders(
    round: &[(u32, u32)],
    members: &[JoinedNode],
    index: &HashMap<u32, usize>,
    net: &networks::NetworkEval,
    links: &[LinkResult],
) -> BTreeMap<u32, Vec<Target>> {
    let mut orders: BTreeMap<u32, Vec<Target>> = BTreeMap::new();
    for &(a, b) in round {
        for (from, to) in [(a, b), (b, a)] {
            let Some(m_to) = index.get(&to).map(|i| &members[*i]).filter(|m| m.alive) else {
                continue;
            };
            let Some(addr) = net.network.members.get(&to).map(|x| x.address.to_string()) else {
                continue;
            };
            let probed_ok = find(links, from, to, &addr)
                .is_some_and(|i| links[i].result == preflight_checks::model::LinkOutcome::Ok);
            if !probed_ok {
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
    orders
}

/// One throughput round; a retest keeps each pair's better figure.
fn run_bulk_round(
    members: &mut [JoinedNode],
    cfg: &CoordConfig,
    links: &mut [LinkResult],
    orders: &BTreeMap<u32, Vec<Target>>,
    retest: bool,
) {
    let dur = cfg.timing.bulk;
    let limit = bounded(
        cfg,
        dur + cfg.timing.connect_timeout + auth::HANDSHAKE_TIMEOUT + Duration::from_secs(10),
    );
    let order = |m: &JoinedNode| {
        orders.get(&m.rank).map(|t| Msg::Bulk {
            targets: t.clone(),
            duration_ms: dur.as_millis() as u64,
        })
    };
    exchange_into(
        members,
        Wait::within(limit),
        "the throughput test",
        order,
        links,
        |dst, src| {
            if retest {
                if let Some(t) = src.throughput_gbit_s
                    && dst.throughput_gbit_s.is_none_or(|d| t > d)
                {
                    dst.throughput_gbit_s = Some(t);
                }
                return;
            }
            dst.throughput_gbit_s = src.throughput_gbit_s;
            if src.error.is_some() {
                dst.error = src.error.clone();
            }
            if src.stalled {
                dst.stalled = true;
                dst.mtu = src.mtu;
            }
        },
    );
}

/// Path MTU from every node to every other on the chosen network.
pub(super) fn mtu_phase(members: &mut [JoinedNode], cfg: &CoordConfig, links: &mut [LinkResult]) {
    let refs = alive_facts(members);
    let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&refs, links), links, &ranks);
    let Some(chosen) = networks::choose(&evals).cloned() else {
        return;
    };
    // Each member's listener on the chosen network, looked up once (not once per pair).
    let on_net: Vec<Target> = chosen
        .network
        .members
        .iter()
        .filter_map(|(r, peer)| {
            let m = members.iter().find(|m| m.rank == *r)?;
            Some(Target {
                rank: *r,
                listener: listener_for(m, &peer.address.to_string())?,
            })
        })
        .collect();
    let orders: BTreeMap<u32, (Vec<Target>, u32)> = chosen
        .network
        .members
        .iter()
        .map(|(rank, own)| {
            let targets = on_net.iter().filter(|t| t.rank != *rank).cloned().collect();
            (*rank, (targets, own.mtu.unwrap_or(1500)))
        })
        .collect();
    let order = |m: &JoinedNode| {
        orders.get(&m.rank).map(|(t, mtu)| Msg::Mtu {
            targets: t.clone(),
            max_mtu: *mtu,
        })
    };
    // Each node probes every peer, so the phase follows its work: a node reports progress once
    // a second and is given up on after PROBE_SILENCE without one, up to --timeout.
    let wait = Wait {
        limit: bounded(cfg, cfg.join_timeout + Duration::from_secs(5)),
        silence: crate::runtime::PROBE_SILENCE,
    };
    exchange_into(members, wait, "the MTU test", order, links, |dst, src| {
        if !dst.stalled || src.mtu.is_some() {
            dst.mtu = src.mtu
        }
    });
}

/// Copies fields from `got` into the matching (from, to, address) links of `links` (kept in
/// [`link_key`] order), each looked up by binary search.
pub(super) fn merge(
    links: &mut [LinkResult],
    got: &[LinkResult],
    f: impl Fn(&mut LinkResult, &LinkResult),
) {
    for g in got {
        if let Some(i) = find(links, g.from, g.to, &g.address) {
            f(&mut links[i], g);
        }
    }
}

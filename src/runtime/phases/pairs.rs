//! Throughput in rounds of disjoint pairs, both directions at once (the schedule is
//! `runtime::schedule`: a ring plus random matchings), then the suspects measured again against
//! known-fast partners; each node's side ([`answer`]) runs its bulk transfers.

use super::answer::base_link;
use super::ctx::{BulkDone, Lap, Phase, PhaseCtx, bounded};
use super::state::NodeState;
use crate::measure::{mtu, tcp};
use crate::runtime::dial::{self, paced};
use crate::runtime::members::links::exchange_into;
use crate::runtime::members::{JoinedNode, Wait, alive_facts, find, listener_for};
use crate::runtime::rendezvous::Rendezvous;
use crate::runtime::schedule;
use crate::transport::auth::{self, Secret};
use crate::transport::wire::{Listener, Msg, Target};
use preflight_checks::model::{LinkOutcome, LinkResult};
use preflight_checks::networks;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// The throughput phase.
pub struct Pairs;

impl Phase for Pairs {
    fn name(&self) -> &'static str {
        "throughput"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        let events = &ctx.run.events;
        events.step();
        events.phase("throughput");
        ctx.found.bulk = bulk_phase(&mut ctx.members, ctx.run, &mut ctx.links);
        Lap::Timed
    }
}

/// Partial networks (not every node reaches them) measured on the pairs that work, at most.
const PARTIAL_NETWORKS_MEASURED: usize = 3;

/// Throughput in rounds of disjoint pairs (both directions at once): on every fully connected
/// network, and on the pairs that work of the best few partial ones, so a faster network that
/// some node breaks can be weighed against the one chosen.
fn bulk_phase(members: &mut [JoinedNode], run: &Rendezvous, links: &mut [LinkResult]) -> BulkDone {
    let (ranks, evals) = {
        let refs = alive_facts(members);
        let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
        let view = preflight_checks::model::Links::borrowed(links);
        let evals = networks::evaluate(&networks::discover(&refs, &view), &view, &ranks);
        (ranks, evals)
    };
    let k = run.job.timing.matchings;
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
        let rounds = schedule::schedule(&on_net, k, run.nnodes() as u64);
        rounds_run += run_rounds(members, run, links, &index, net, &rounds, false);
        // The suspects of a first judgment are measured again against known-fast partners and
        // among themselves, in at most three rounds of disjoint pairs whatever n, and each pair
        // keeps its better figure: a pair slowed by a busy moment is not called slow, while a
        // slow node, pair or cut is slow both times (ClusterKit retests bad pairs; DLRover
        // pairs the slowest with the fastest).
        let measured_pairs: HashSet<(u32, u32)> = rounds.iter().flatten().copied().collect();
        let retest = retest_rounds(links, net, run.job.min_link_gbit, &on_net, &measured_pairs);
        rounds_run += run_rounds(members, run, links, &index, net, &retest, true);
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
    run: &Rendezvous,
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
        run_bulk_round(members, run, links, o, retest);
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
    run: &Rendezvous,
    links: &mut [LinkResult],
    orders: &BTreeMap<u32, Vec<Target>>,
    retest: bool,
) {
    let dur = run.job.timing.bulk;
    let limit = bounded(
        run,
        dur + run.job.timing.connect_timeout + auth::HANDSHAKE_TIMEOUT + Duration::from_secs(10),
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

/// A node's side: both directions' bulk transfer to each target (`Msg::Bulk`).
pub fn answer(node: &NodeState, targets: &[Target], duration_ms: u64) -> Msg {
    Msg::BulkDone {
        links: bulk_targets(
            node.rank,
            node.nnodes,
            targets,
            Duration::from_millis(duration_ms),
            &node.secret,
        ),
    }
}

fn bulk_targets(
    me: u32,
    nnodes: u32,
    targets: &[Target],
    dur: Duration,
    secret: &Secret,
) -> Vec<LinkResult> {
    let until = Instant::now() + Duration::from_secs(8);
    paced(targets, dial::CONNECT_WINDOW, |t| {
        let mut link = base_link(me, t.rank, &t.listener);
        let (opened, retries) = dial::open(
            me,
            nnodes,
            t.rank,
            &t.listener,
            Duration::from_secs(3),
            secret,
            until,
        );
        link.retries = retries;
        match opened {
            Ok(mut s) => match tcp::bulk(&mut s, dur, STALL.min(dur + Duration::from_secs(10))) {
                Ok(gbit) => {
                    link.result = LinkOutcome::Ok;
                    link.throughput_gbit_s = Some(((gbit * 1000.0).round() / 1000.0) as f32);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    // Connected, authenticated, and then a large write made no progress:
                    // probe the path MTU (DF datagrams, bounded) before calling it lost.
                    link.result = LinkOutcome::Error;
                    link.stalled = true;
                    link.mtu = stalled_path_mtu(&t.listener, secret);
                    link.error = Some(format!(
                        "throughput test stalled: the connection was established but a large transfer made no progress for {} s; {}",
                        STALL.as_secs(),
                        if link.mtu.is_some() {
                            "the path MTU from don't-fragment probes is in `mtu`"
                        } else {
                            "no don't-fragment probe was answered"
                        }
                    ).into());
                }
                Err(e) => {
                    link.result = LinkOutcome::Error;
                    link.error = Some(format!("throughput test failed: {e}").into());
                }
            },
            Err(f) => {
                link.result = f.outcome;
                link.handshake = f.handshake;
                link.error = Some(f.error.into());
            }
        }
        link
    })
}

/// How long a bulk write may make no progress before the transfer counts as stalled.
const STALL: Duration = Duration::from_secs(3);

/// The path MTU to a listener whose bulk transfer stalled (bounded: about 15 probes of at
/// most 300 ms; sizes the local route refuses cost nothing).
fn stalled_path_mtu(l: &Listener, secret: &Secret) -> Option<u32> {
    let ip: IpAddr = l.address.parse().ok()?;
    let local = if ip.is_ipv6() {
        IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::from([0, 0, 0, 0])
    };
    mtu::path_mtu(local, SocketAddr::new(ip, l.port), 65535, secret)
        .ok()
        .flatten()
}

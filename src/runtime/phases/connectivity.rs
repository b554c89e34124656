//! The connectivity phase: every node connects to every listener of every other node,
//! authenticates and pings (the coordinator's order, then each node's side: [`answer`]).

use super::answer::{Counted, base_link, with_progress};
use super::ctx::{Lap, Phase, PhaseCtx};
use super::state::NodeState;
use crate::measure::tcp;
use crate::runtime::budget::{PROBE_SILENCE, pings_per_link, probe_budget};
use crate::runtime::dial::{self, paced};
use crate::runtime::members::links::collect_links;
use crate::runtime::members::{Wait, send_frames, sort_links};
use crate::transport::auth::Secret;
use crate::transport::wire::{Listener, Msg, Peer, WireError, encode_msg};
use preflight_checks::model::{LinkOutcome, LinkResult};
use preflight_checks::stats::percentile;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

/// The connectivity phase.
pub struct Connectivity;

impl Phase for Connectivity {
    fn name(&self) -> &'static str {
        "connectivity"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        ctx.run.events.phase("connectivity");
        ctx.links = probe_phase(ctx);
        Lap::Timed
    }
}

/// Every node connects to every listener of every other node, authenticates and pings; the
/// links, in `members::links` order.
fn probe_phase(ctx: &mut PhaseCtx) -> Vec<LinkResult> {
    let run = ctx.run;
    let limit = ctx.bounded(run.join_timeout() + Duration::from_secs(5));
    let members = &mut ctx.members[..];
    let peers: Vec<Peer> = members
        .iter()
        .map(|m| Peer {
            rank: m.rank,
            listeners: m.listeners.clone(),
        })
        .collect();
    let peers_listeners: Vec<usize> = peers.iter().map(|p| p.listeners.len()).collect();
    let t = run.job.timing;
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
    let pings = pings_per_link(t.pings, most_targets);
    let deadline = run.join_timeout();
    let wait = Wait {
        limit,
        silence: PROBE_SILENCE,
    };
    // One order for every node (each skips itself), serialised once.
    // Under c10d, rank 0's FQDN (what torchrun publishes) for every node to resolve.
    let resolve = run
        .resolve_fqdn()
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

/// The connectivity order as a node reads it (`Msg::Probe`).
pub struct ProbeOrder {
    pub peers: Vec<Peer>,
    pub pings: u32,
    pub connect_timeout_ms: u64,
    /// Every admitted node's addresses (empty in the second pass: the list stands).
    pub admitted: Vec<String>,
    /// A name to resolve beside the connects (rank 0's FQDN under c10d).
    pub resolve: Option<String>,
    pub deadline_ms: Option<u64>,
}

/// A node's side: probes every peer in the order (itself left out) within the order's deadline
/// (or the budget for its targets), with progress reports on `stream`; returns the answer and
/// the time the probe may take, which the node adds to its wait for the next order.
pub fn answer(node: &mut NodeState, stream: &TcpStream, o: ProbeOrder) -> (Msg, Duration) {
    // A later probe (the second pass) names no one new: the list stands.
    if !o.admitted.is_empty() {
        node.admitted
            .allow(o.admitted.iter().filter_map(|a| a.parse().ok()));
    }
    let timeout = Duration::from_millis(o.connect_timeout_ms);
    // The order lists every node, this one too (one order for all): skip ourselves.
    let peers: Vec<Peer> = o
        .peers
        .into_iter()
        .filter(|x| x.rank != node.rank)
        .collect();
    let targets = peers.iter().map(|p| p.listeners.len()).sum();
    let budget = o
        .deadline_ms
        .map(Duration::from_millis)
        .unwrap_or_else(|| probe_budget(timeout, o.pings, targets));
    // Rank 0's FQDN as this node's resolver gives it (bounded: 2 s), traced to its sources, and
    // its first address dialled when it is not rank 0's (bounded by the connect timeout),
    // beside the connects, so a c10d job's TCPStore name is judged in the order its workers
    // dial it, where they run.
    let rank0 = super::fqdn::known_rank0(
        peers
            .iter()
            .filter(|x| x.rank == 0)
            .flat_map(|x| x.listeners.iter().filter_map(|l| l.address.parse().ok())),
        node.facts
            .master_resolution
            .as_ref()
            .and_then(|m| m.joined_via.as_deref()),
        (node.rank == 0)
            .then(|| super::fqdn::own_addrs(&node.facts))
            .as_deref(),
    );
    let (root, rank, port) = (node.root.clone(), node.rank, node.master_port);
    let resolved = o
        .resolve
        .filter(|n| !n.is_empty() && n.len() <= 255)
        .map(|n| {
            std::thread::spawn(move || super::fqdn::lookup(&root, &n, &rank0, rank, port, timeout))
        });
    let (me, nnodes, pings) = (node.rank, node.nnodes, o.pings);
    let secret = &node.secret;
    let links = with_progress(stream, |done| {
        let until = Instant::now() + budget;
        probe_peers(me, nnodes, &peers, pings, timeout, secret, until, done)
    });
    let reply = Msg::ProbeDone {
        links,
        resolved: resolved.and_then(|h| h.join().ok()),
    };
    (reply, budget)
}

/// Probes every peer's listeners: [`dial::CONNECT_WINDOW`] at a time, in ring order from this
/// node, each connect retried before it counts as failed; targets not reached before `until`
/// (the phase's deadline) are reported as not tried, so the answer always comes in time.
/// `done` counts the links with a result.
#[allow(clippy::too_many_arguments)]
fn probe_peers(
    me: u32,
    nnodes: u32,
    peers: &[Peer],
    pings: u32,
    timeout: Duration,
    secret: &Secret,
    until: Instant,
    done: &AtomicU32,
) -> Vec<LinkResult> {
    let mut work: Vec<(u32, Listener)> = peers
        .iter()
        .flat_map(|p| p.listeners.iter().map(move |l| (p.rank, l.clone())))
        .collect();
    work.sort_by_key(|(rank, l)| (dial::ring_offset(me, *rank, nnodes), l.address.clone()));
    let total = work.len();
    let pacer = dial::Pacer::default();
    paced(&work, dial::CONNECT_WINDOW, |(rank, l)| {
        let mut link = base_link(me, *rank, l);
        let _counted = Counted(done);
        // The whole link (connect, handshake, pings) holds a place in the adaptive window.
        let mut slot = pacer.enter();
        if Instant::now() + timeout > until {
            link.result = LinkOutcome::Error;
            link.error = Some(format!(
                "not tried: the connectivity phase's time ran out before this node reached it ({total} links to test from this node)"
            ).into());
            return link;
        }
        let started = Instant::now();
        let (opened, retries) = dial::open(me, nnodes, *rank, l, timeout, secret, until);
        slot.after(started.elapsed(), &opened, retries);
        link.retries = retries;
        match opened {
            Ok(mut s) => match tcp::ping(&mut s, pings, Duration::from_secs(5)) {
                Ok(mut rtts) => {
                    link.result = LinkOutcome::Ok;
                    rtts.sort_by(f64::total_cmp);
                    link.rtt_us = percentile(&rtts, 0.50).map(|v| v as f32);
                    link.rtt_p99_us = percentile(&rtts, 0.99).map(|v| v as f32);
                }
                // Connected and authenticated: the pair works; only its RTT is unknown.
                Err(e) => {
                    link.result = LinkOutcome::Ok;
                    link.error = Some(format!(
                        "connected and authenticated, but the pings got no answer in time (a loaded node?): {e}"
                    ).into());
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

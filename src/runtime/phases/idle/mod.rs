//! The idle test's two orders: after the connectivity phase every node holds a few connections to its ring successor on the chosen network silent (while throughput, path MTU, the all-reduce and the per-rail tests run), then, once the idle time has passed, uses them again; each node's answer goes into its facts (`link.idle-timeout` judges them).

pub mod node;

use super::ctx::{IdleHold, Lap, Phase, PhaseCtx};
use crate::runtime::members::{
    JoinedNode, Step, Wait, alive_facts, find, gather, listener_for, send_orders,
};
use crate::runtime::rendezvous::Rendezvous;
use crate::transport::wire::{Msg, Target};
use preflight_checks::model::{LinkOutcome, LinkResult};
use preflight_checks::networks;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// Connections each node holds to its ring successor.
pub const STREAMS: u32 = 2;
/// How long a reused connection is given to answer: a path that carries data answers in
/// milliseconds, and TCP retransmits a lost byte several times within it.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// Links one node may report back (it holds one target; more is a node out of protocol).
const LINKS_PER_NODE: usize = 4;

/// The idle test's first order, after the connectivity phase: hold connections silent.
pub struct Hold;

impl Phase for Hold {
    fn name(&self) -> &'static str {
        "idle hold"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        ctx.found.idle = hold(&mut ctx.members, ctx.run, &ctx.links);
        Lap::Untimed
    }
}

/// The idle test's second order, after the traffic phases: use the held connections again.
pub struct Check;

impl Phase for Check {
    fn name(&self) -> &'static str {
        "idle connections"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        // The held connections have been silent through every phase since the connectivity test.
        let Some(holding) = ctx.found.idle.take() else {
            return Lap::Untimed;
        };
        ctx.run.events.phase("idle connections");
        check(&mut ctx.members, holding);
        Lap::Timed
    }
}

/// Each node's ring successor on the chosen network, among the alive nodes whose probe of that
/// address succeeded: one target per node whatever the cluster's size (a ring of two tests
/// both directions of its one pair).
fn ring_targets(members: &[JoinedNode], links: &[LinkResult]) -> BTreeMap<u32, Target> {
    let refs = alive_facts(members);
    let ranks: Vec<u32> = refs.iter().map(|(r, _)| *r).collect();
    let evals = networks::evaluate(&networks::discover(&refs, links), links, &ranks);
    let Some(chosen) = networks::choose(&evals) else {
        return BTreeMap::new();
    };
    // Looked up once per node, not scanned: thousands of nodes cost a map, never n^2.
    let by_rank: HashMap<u32, &JoinedNode> = members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, m))
        .collect();
    let on_net: Vec<(u32, String)> = chosen
        .network
        .members
        .iter()
        .filter(|(r, _)| by_rank.contains_key(r))
        .map(|(r, m)| (*r, m.address.to_string()))
        .collect();
    if on_net.len() < 2 {
        return BTreeMap::new();
    }
    let mut out = BTreeMap::new();
    for (i, (from, _)) in on_net.iter().enumerate() {
        let (to, addr) = &on_net[(i + 1) % on_net.len()];
        let ok = find(links, *from, *to, addr).is_some_and(|k| links[k].result == LinkOutcome::Ok);
        let listener = by_rank.get(to).and_then(|m| listener_for(m, addr));
        if let (true, Some(listener)) = (ok, listener) {
            out.insert(
                *from,
                Target {
                    rank: *to,
                    listener,
                },
            );
        }
    }
    out
}

/// Orders every alive node to hold its connections (an empty order for a node without a
/// target: it still learns that the next order may take the idle time); `None` when the test
/// is off or no pair can be held.
fn hold(members: &mut [JoinedNode], run: &Rendezvous, links: &[LinkResult]) -> Option<IdleHold> {
    if run.job.idle_test.is_zero() {
        return None;
    }
    let targets = ring_targets(members, links);
    if targets.is_empty() {
        run.events
            .log("coordinator: idle test skipped: no two nodes share a network that works");
        return None;
    }
    let idle = run.job.idle_test;
    let asked = send_orders(members, "the idle test", |m| {
        Some(Msg::IdleOpen {
            targets: targets.get(&m.rank).cloned().into_iter().collect(),
            streams: STREAMS,
            idle_ms: idle.as_millis() as u64,
        })
    });
    // Opening is a few connects and one echo each (see `idle::node`): bounded well under this.
    let wait =
        Wait::within(Duration::from_secs(30).min(run.join_timeout() + Duration::from_secs(5)));
    let is_final = |m: &Msg| matches!(m, Msg::IdleHeld { .. });
    let mut held = 0u32;
    gather(
        members,
        &asked,
        "the idle test",
        wait,
        is_final,
        |_, msg| match msg {
            Msg::IdleHeld { held: h } => {
                held = held.saturating_add(h);
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
    run.events.log(format!(
        "coordinator: idle test: {held} connections between ring neighbours held silent for {} s",
        idle.as_secs()
    ));
    Some(IdleHold {
        since: Instant::now(),
        idle,
        asked,
    })
}

/// Waits out what is left of the silence, then has every node asked to hold use its
/// connections again; each node's answer lands in its facts (`idle_test`).
fn check(members: &mut [JoinedNode], holding: IdleHold) {
    let left = (holding.since + holding.idle).saturating_duration_since(Instant::now());
    std::thread::sleep(left);
    let answer_ms = ANSWER_WAIT.as_millis() as u64;
    let ranks: HashSet<u32> = holding
        .asked
        .iter()
        .filter_map(|i| members.get(*i))
        .map(|m| m.rank)
        .collect();
    let asked = send_orders(members, "the idle test", |m| {
        ranks
            .contains(&m.rank)
            .then_some(Msg::IdleCheck { answer_ms })
    });
    let wait = Wait::within(ANSWER_WAIT + Duration::from_secs(10));
    let is_final = |m: &Msg| matches!(m, Msg::IdleDone { .. });
    gather(
        members,
        &asked,
        "the idle test",
        wait,
        is_final,
        |m, msg| match msg {
            Msg::IdleDone { mut test } => {
                let rank = m.rank;
                test.links.retain(|l| l.from == rank);
                test.links.truncate(LINKS_PER_NODE);
                // What a node says is capped, as its other answers are; a number that is not
                // finite would not survive the report's JSON.
                let finite = |v: f64| {
                    if v.is_finite() {
                        v.clamp(0.0, 1e6)
                    } else {
                        0.0
                    }
                };
                test.idle_s = finite(test.idle_s);
                test.answer_wait_s = finite(test.answer_wait_s);
                for l in &mut test.links {
                    l.silent_s = finite(l.silent_s);
                    l.error = l.error.take().map(|e| e.chars().take(512).collect());
                    l.interface = l.interface.chars().take(64).collect();
                    l.address = l.address.chars().take(64).collect();
                    l.answered = l.answered.min(l.opened);
                }
                m.facts.idle_test = Some(test);
                Step::Done
            }
            _ => Step::Unexpected,
        },
    );
}

//! The coordinator: runs inside rank 0 on the master port; admits authenticated nodes, schedules the
//! measurements, judges the cluster and sends every node the same report.

mod admit;
mod delivery;
mod gather;
mod idle;
mod limits;
mod phases;
mod second_pass;
pub(crate) mod verdict;

pub(super) use delivery::{json_size, shared_copy};
pub(super) use gather::{Step, Wait, gather};
pub(super) use phases::{find, send_orders, sort_links};
pub(crate) use second_pass::pick as second_pass_pick;

use super::Timing;
use super::allreduce::{self, AllreducePlan};
use super::rail_phase::{self, RailPlan};
use crate::advise::C10dAdvice;
use crate::runtime::job::JobShape;
use crate::transport::auth::{Secret, SecretSource};
use crate::transport::events::{Events, FinishOnDrop};
use crate::transport::gate::Gate;
use crate::transport::wire::{Listener, ReportRef, WireError, encode_msg};
use preflight_checks::model::{Measurement, NodeFacts, PhaseTime, PlacementInfo, Report};
use preflight_checks::networks;
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// What the coordinator needs to know about the job.
#[derive(Clone, Debug)]
pub struct CoordConfig {
    pub nnodes: u32,
    /// The master's address as the nodes dial it (for `cluster.auth`).
    pub master_addr: String,
    pub master_port: u16,
    pub join_timeout: Duration,
    /// Added to the join window only: how long a node may still be multiplying on its GPUs
    /// before it joins (`GemmPlan::join_grace`).
    pub join_grace: Duration,
    pub timing: Timing,
    pub expected_hosts: Vec<String>,
    pub secret: Secret,
    pub shape: JobShape,
    pub script: Vec<String>,
    pub allreduce: AllreducePlan,
    pub min_busbw: Option<f64>,
    /// `--min-link-gbit`.
    pub min_link_gbit: Option<f64>,
    /// Why the coordinator listened on another port than the master port (under torchrun).
    pub coordinator_note: Option<String>,
    /// Where progress and log lines go.
    pub events: Events,
    /// Where the secret came from (`cluster.auth`).
    pub secret_source: SecretSource,
    /// This node's own addresses (admitted with the known hosts').
    pub own_addrs: Vec<std::net::IpAddr>,
    /// How the ranks were found, for the report (`placement`).
    pub placement: PlacementInfo,
    /// Set when ranks are assigned at join (c10d): the launch commands keep the c10d rendezvous.
    pub c10d: Option<C10dAdvice>,
    /// The healthy set's constraints, for a failing cluster.
    pub healthy: preflight_checks::cluster::healthy_set::HealthyOptions,
    /// `--rdzv-backend=c10d`: every node resolves rank 0's FQDN, the name torchrun publishes
    /// (`cluster.fqdn`).
    pub resolve_fqdn: bool,
    /// `--idle-test`: how long the ring neighbours' connections stay silent before they are
    /// used again (zero: no idle test).
    pub idle_test: Duration,
}

/// A node that joined.
pub(super) struct JoinedNode {
    pub(super) rank: u32,
    pub(super) stream: TcpStream,
    /// Where it connected from.
    pub(super) peer: std::net::SocketAddr,
    pub(super) facts: NodeFacts,
    pub(super) listeners: Vec<Listener>,
    /// It asked for the whole report (`--full-report`).
    pub(super) whole_report: bool,
    pub(super) alive: bool,
    /// Why it stopped answering (set with `alive = false`).
    pub(super) lost: Option<String>,
}

/// Runs the whole coordination on the calling thread and returns the report it sent.
pub fn coordinate(listener: TcpListener, cfg: CoordConfig) -> Report {
    let events = &cfg.events;
    let gate = Gate::open().sized_for(cfg.nnodes);
    match admit::known_addresses(&cfg.expected_hosts, &cfg.own_addrs) {
        Ok(addrs) => gate.allow(addrs),
        Err(why) if !cfg.expected_hosts.is_empty() => events.log(format!(
            "coordinator: admitting any address that knows the secret: {why}"
        )),
        Err(_) => {}
    }
    let admitted = admit::admit(listener, &cfg, &gate);
    let refused = admitted.refused;
    let mut members = admitted.members;
    let ranks: Vec<u32> = members.iter().map(|m| m.rank).collect();
    events.log(format!(
        "coordinator: {} of {} nodes joined (ranks {:?})",
        ranks.len(),
        cfg.nnodes,
        ranks
    ));
    let sizes = cfg.allreduce.sizes.len() as u64;
    let configs = if cfg.allreduce.compare_env.is_empty() {
        1
    } else {
        2
    };
    let finish = FinishOnDrop(events);
    events.start(3 + sizes * configs);
    let mut clock = PhaseClock::start();
    events.phase("connectivity");
    let mut links = phases::probe_phase(&mut members, &cfg);
    log_losses(&mut members, events);
    clock.lap("connectivity");
    let second = second_pass::run(
        &mut members,
        &mut links,
        cfg.timing.pings,
        cfg.timing.connect_timeout,
        crate::runtime::probe_budget(cfg.timing.connect_timeout, cfg.timing.pings, 64)
            + Duration::from_secs(5),
    );
    if !second.is_empty() {
        events.log(format!(
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
        log_losses(&mut members, events);
        clock.lap("second pass");
    }
    // The idle test's connections stay silent while the later phases run.
    let holding = idle::hold(&mut members, &cfg, &links);
    log_losses(&mut members, events);
    events.step();
    events.phase("throughput");
    let bulk = phases::bulk_phase(&mut members, &cfg, &mut links);
    log_losses(&mut members, events);
    clock.lap("throughput");
    events.step();
    events.phase("path MTU");
    phases::mtu_phase(&mut members, &cfg, &mut links);
    log_losses(&mut members, events);
    clock.lap("path MTU");
    events.step();
    let mut recommendation = verdict::advise(
        &verdict::seen(&members),
        &links,
        &cfg,
        BTreeMap::new(),
        None,
    );
    let evals = {
        let seen = verdict::seen(&members);
        let nodes = verdict::alive_or_joined(&seen);
        let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
        networks::evaluate(&networks::discover(&nodes, &links), &links, &ranks)
    };
    let outcome = allreduce::measure_allreduce(
        &mut members,
        &evals,
        &recommendation,
        &cfg.allreduce,
        events,
    );
    log_losses(&mut members, events);
    clock.lap("all-reduce");
    let (over, why) = allreduce::preferred_overrides(&outcome.results, &cfg.allreduce.compare_env);
    let rail_plan = RailPlan {
        mode: cfg.allreduce.mode,
        matchings: cfg.timing.matchings,
        seed: cfg.nnodes as u64,
        timeout: cfg.join_timeout,
    };
    let rails = rail_phase::measure_rails(&mut members, &recommendation, &rail_plan, events);
    log_losses(&mut members, events);
    if rails.not_run.is_none() {
        clock.lap("per-rail tests");
    }
    // The held connections have been silent through every phase since the connectivity test.
    if let Some(holding) = holding {
        events.phase("idle connections");
        idle::check(&mut members, holding);
        log_losses(&mut members, events);
        clock.lap("idle connections");
    }
    let counters_after = rail_phase::counters_after(&mut members, cfg.join_timeout);
    log_losses(&mut members, events);
    if over.is_some() || rails.verdict.is_some() {
        recommendation = verdict::advise(
            &verdict::seen(&members),
            &links,
            &cfg,
            over.unwrap_or_default(),
            rails.verdict.as_ref(),
        );
    }
    recommendation.reasons.extend(why);
    recommendation.reasons.extend(outcome.notes.iter().cloned());
    drop(finish);
    let measurement = Measurement {
        links_total: links.len() as u64,
        links_retried: links.iter().filter(|l| l.retries > 0).count() as u64,
        connect_window: crate::runtime::agent::dial::CONNECT_WINDOW as u32,
        throughput_schedule: bulk.schedule,
        throughput_rounds: bulk.rounds,
        second_pass: second,
        phases: clock.phases,
    };
    let mut report = verdict::build_report(
        verdict::take_members(&mut members),
        links,
        &cfg,
        recommendation,
        verdict::Traffic {
            allreduce: outcome,
            rails: verdict::RailReport {
                outcome: rails,
                counters_after,
            },
        },
        &refused,
        &bulk.retested,
    );
    report.measurement = Some(measurement);
    deliver(&mut members, &report, events);
    report
}

/// Sends every alive node its copy of the report, each kind serialised and compressed once and
/// sent in parallel: up to 64 nodes the whole report; above, the shared copy without the other
/// nodes' facts and the links ([`delivery::shared_copy`]) to every node that did not ask for the
/// whole one. A whole report too large to send goes out per node (its own links and facts).
fn deliver(members: &mut [JoinedNode], report: &Report, events: &Events) {
    let frame = |r: &Report| encode_msg(&ReportRef { report: r }).map(Arc::new);
    let shared = (report.nodes.len() > crate::report_compact::COMPACT_ABOVE)
        .then(|| frame(&delivery::shared_copy(report)));
    let gets_whole = |m: &JoinedNode| shared.is_none() || m.whole_report;
    let whole_size = members
        .iter()
        .any(|m| m.alive && gets_whole(m))
        .then(|| delivery::json_size(report));
    if let Some(whole) = whole_size.filter(|w| *w > delivery::WHOLE_REPORT_CAP) {
        events.log(format!(
            "coordinator: the report is {whole} bytes of JSON; each node that asked for it whole gets its own links and facts and every finding (see `trimmed` in its report)"
        ));
    }
    let whole = whole_size.and_then(|w| (w <= delivery::WHOLE_REPORT_CAP).then(|| frame(report)));
    let sent = phases::send_frames(members, "the report", |m| {
        let own = || match &whole {
            Some(Ok(f)) => Ok(f.clone()),
            Some(Err(e)) => Err(WireError::Malformed(e.to_string())),
            None => {
                let size = whole_size.unwrap_or(usize::MAX);
                frame(&delivery::report_for(report, m.rank, size))
            }
        };
        Some(match &shared {
            Some(Ok(f)) if !gets_whole(m) => Ok(f.clone()),
            Some(Err(e)) if !gets_whole(m) => Err(WireError::Malformed(e.to_string())),
            _ => own(),
        })
    });
    let alive = members.iter().filter(|m| m.alive).count();
    if sent.len() < alive {
        events.log(format!(
            "coordinator: the report reached {} of {alive} nodes",
            sent.len()
        ));
    }
    log_losses(members, events);
}

/// Wall time of each phase, in order.
struct PhaseClock {
    since: std::time::Instant,
    phases: Vec<PhaseTime>,
}

impl PhaseClock {
    fn start() -> PhaseClock {
        PhaseClock {
            since: std::time::Instant::now(),
            phases: Vec::new(),
        }
    }

    fn lap(&mut self, phase: &str) {
        let now = std::time::Instant::now();
        self.phases.push(PhaseTime {
            phase: phase.into(),
            seconds: ((now - self.since).as_secs_f64() * 1000.0).round() / 1000.0,
        });
        self.since = now;
    }
}

/// Logs every node lost since the last call, once.
fn log_losses(members: &mut [JoinedNode], events: &Events) {
    for m in members.iter_mut() {
        if let Some(why) = m.lost.take() {
            events.log(format!("coordinator: lost rank {} {why}", m.rank));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::wire::read_msg;
    use preflight_checks::model::Mode;
    use std::net::TcpStream;

    /// A member connected to a reader over loopback: (the member, the node's end).
    fn member(rank: u32, whole_report: bool) -> (JoinedNode, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let node = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (stream, peer) = l.accept().unwrap();
        let m = JoinedNode {
            rank,
            stream,
            peer,
            facts: NodeFacts::default(),
            listeners: Vec::new(),
            whole_report,
            alive: true,
            lost: None,
        };
        (m, node)
    }

    fn report(n: u32) -> Report {
        let mut b = crate::report::ReportBuilder::new(Mode::Cluster);
        for r in 0..n {
            let mut f = NodeFacts {
                hostname: format!("node{r:03}"),
                ..Default::default()
            };
            f.net.interfaces = vec![Default::default()];
            b = b.node(r, f);
        }
        b.build()
    }

    /// Up to 64 nodes every rank gets the whole report; above, the shared copy, except a rank
    /// that asked for the whole one.
    #[test]
    fn each_rank_gets_the_copy_its_size_and_flag_call_for() {
        for (n, whole_for) in [(3u32, None), (70, Some(5u32))] {
            let (mut members, mut ends): (Vec<_>, Vec<_>) =
                (1..4).map(|r| member(r, Some(r) == whole_for)).unzip();
            if let Some(w) = whole_for {
                let (m, e) = member(w, true);
                members.push(m);
                ends.push(e);
            }
            let r = report(n);
            deliver(&mut members, &r, &Events::default());
            for (m, end) in members.iter().zip(&mut ends) {
                end.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                    .unwrap();
                let got: Report = match read_msg(end).unwrap() {
                    crate::transport::wire::Msg::Report { report } => *report,
                    other => panic!("{other:?}"),
                };
                assert_eq!(got.nodes.len(), n as usize);
                let whole = n <= 64 || m.whole_report;
                assert_eq!(got.trimmed.is_none(), whole, "rank {} of {n}", m.rank);
                assert_eq!(
                    got.nodes.iter().all(|x| !x.facts.net.interfaces.is_empty()),
                    whole,
                    "rank {} of {n}",
                    m.rank
                );
            }
        }
    }
}

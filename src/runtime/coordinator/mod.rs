//! The coordinator: runs inside rank 0 on the master port; admits authenticated nodes, schedules the
//! measurements, judges the cluster and sends every node the same report.

mod admit;
mod delivery;
mod gather;
mod limits;
mod phases;
mod verdict;

pub(super) use gather::{Step, Wait, gather};
pub(super) use phases::send_orders;

use super::Timing;
use super::allreduce::{self, AllreducePlan};
use crate::advise::C10dAdvice;
use crate::runtime::job::JobShape;
use crate::transport::auth::{Secret, SecretSource};
use crate::transport::events::{Events, FinishOnDrop};
use crate::transport::gate::Gate;
use crate::transport::wire::{Listener, Msg, write_msg};
use preflight_checks::model::{NodeFacts, PlacementInfo, Report};
use preflight_checks::networks;
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// What the coordinator needs to know about the job.
#[derive(Clone, Debug)]
pub struct CoordConfig {
    pub nnodes: u32,
    /// The master's address as the nodes dial it (for `cluster.auth`).
    pub master_addr: String,
    pub master_port: u16,
    pub join_timeout: Duration,
    pub timing: Timing,
    pub expected_hosts: Vec<String>,
    pub secret: Secret,
    pub shape: JobShape,
    pub script: Vec<String>,
    pub allreduce: AllreducePlan,
    pub min_busbw: Option<f64>,
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
}

/// A node that joined.
pub(super) struct JoinedNode {
    pub(super) rank: u32,
    pub(super) stream: TcpStream,
    /// Where it connected from.
    pub(super) peer: std::net::SocketAddr,
    pub(super) facts: NodeFacts,
    pub(super) listeners: Vec<Listener>,
    pub(super) alive: bool,
    /// Why it stopped answering (set with `alive = false`).
    pub(super) lost: Option<String>,
}

/// Runs the whole coordination on the calling thread and returns the report it sent.
pub fn coordinate(listener: TcpListener, cfg: CoordConfig) -> Report {
    let events = &cfg.events;
    let gate = Gate::open();
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
    events.phase("connectivity");
    let mut links = phases::probe_phase(&mut members, &cfg);
    log_losses(&mut members, events);
    events.step();
    events.phase("throughput");
    phases::bulk_phase(&mut members, &cfg, &mut links);
    log_losses(&mut members, events);
    events.step();
    events.phase("path MTU");
    phases::mtu_phase(&mut members, &cfg, &mut links);
    log_losses(&mut members, events);
    events.step();
    let mut recommendation = verdict::advise(&members, &links, &cfg, BTreeMap::new());
    let evals = {
        let nodes = verdict::alive_or_joined(&members);
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
    let (over, why) = allreduce::preferred_overrides(&outcome.results, &cfg.allreduce.compare_env);
    if let Some(over) = over {
        recommendation = verdict::advise(&members, &links, &cfg, over);
    }
    recommendation.reasons.extend(why);
    recommendation.reasons.extend(outcome.notes.iter().cloned());
    drop(finish);
    let report = verdict::build_report(&members, &links, &cfg, recommendation, outcome, &refused);
    let whole = delivery::json_size(&report);
    if whole > delivery::WHOLE_REPORT_CAP {
        events.log(format!(
            "coordinator: the report is {whole} bytes of JSON; each node gets its own links and facts and every finding (see `trimmed` in its report)"
        ));
    }
    for m in members.iter_mut().filter(|m| m.alive) {
        m.stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .ok();
        let copy = delivery::report_for(&report, m.rank, whole).into_owned();
        if let Err(e) = write_msg(
            &mut m.stream,
            &Msg::Report {
                report: Box::new(copy),
            },
        ) {
            events.log(format!(
                "coordinator: could not send the report to rank {}: {e}",
                m.rank
            ));
        }
    }
    report
}

/// Logs every node lost since the last call, once.
fn log_losses(members: &mut [JoinedNode], events: &Events) {
    for m in members.iter_mut() {
        if let Some(why) = m.lost.take() {
            events.log(format!("coordinator: lost rank {} {why}", m.rank));
        }
    }
}

//! The coordinator: runs inside rank 0 on the master port; runs the phases in order (`phases`:
//! the join admits authenticated nodes, then the measurements), judges the cluster (`verdict`)
//! and sends every node the same report (`delivery`).

mod delivery;
pub(crate) mod verdict;

pub(crate) use delivery::{json_size, shared_copy};

use super::advice;
use super::members::{JoinedNode, log_losses, send_frames};
use super::phases::{self, Lap, PhaseCtx};
use super::rendezvous::Rendezvous;
use crate::transport::events::{Events, FinishOnDrop};
use crate::transport::wire::{ReportRef, WireError, encode_msg};
use preflight_checks::model::{Links, Measurement, PhaseTime, Report};
use std::net::TcpListener;
use std::sync::Arc;

/// Runs the whole coordination on the calling thread and returns the report it sent.
pub fn coordinate(listener: TcpListener, run: Rendezvous) -> Report {
    let events = &run.events;
    let mut ctx = PhaseCtx::new(&run);
    let finish = FinishOnDrop(events);
    let mut clock = PhaseClock::start();
    for mut phase in phases::in_order(listener) {
        match phase.run(&mut ctx) {
            Lap::Begin => {
                events.start(progress_steps(&run));
                clock = PhaseClock::start();
            }
            Lap::Timed => clock.lap(phase.name()),
            Lap::Untimed => {}
        }
        log_losses(&mut ctx.members, events);
    }
    let PhaseCtx {
        mut members,
        refused,
        links,
        found,
        ..
    } = ctx;
    // Nothing changes a link from here: above 64 nodes the links that connected and carry
    // nothing else go in a dense table (11 bytes a pair, not 80).
    let links = Links::of(links, members.len());
    let (over, why) = found.preferred;
    let rails_verdict = found.traffic.rails.outcome.verdict.as_ref();
    let mut recommendation = match found.recommendation {
        Some(first) if over.is_none() && rails_verdict.is_none() => first,
        _ => advice::advise(
            &advice::seen(&members),
            &links,
            &run,
            over.unwrap_or_default(),
            rails_verdict,
        ),
    };
    recommendation.reasons.extend(why);
    recommendation
        .reasons
        .extend(found.traffic.allreduce.notes.iter().cloned());
    drop(finish);
    let measurement = Measurement {
        links_total: links.len() as u64,
        links_retried: links.records().filter(|l| l.retries > 0).count() as u64,
        connect_window: crate::runtime::dial::CONNECT_WINDOW as u32,
        throughput_schedule: found.bulk.schedule,
        throughput_rounds: found.bulk.rounds,
        second_pass: found.second,
        phases: clock.phases,
    };
    let mut report = verdict::build_report(
        verdict::take_members(&mut members),
        links,
        &run,
        recommendation,
        found.traffic,
        &refused,
        &found.bulk.retested,
    );
    report.measurement = Some(measurement);
    deliver(&mut members, &report, events);
    report
}

/// The progress bar's steps: the connectivity, throughput and MTU phases, and one per size of
/// each all-reduce configuration (the advice, and `--compare-env`'s).
fn progress_steps(run: &Rendezvous) -> u64 {
    let plan = &run.job.allreduce;
    let configs = if plan.compare_env.is_empty() { 1 } else { 2 };
    3 + plan.sizes.len() as u64 * configs
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
    let sent = send_frames(members, "the report", |m| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::wire::read_msg;
    use preflight_checks::model::{Mode, NodeFacts};
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

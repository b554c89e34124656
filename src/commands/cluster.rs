//! `preflight cluster`: this node's part of the cluster run, once per node under any launcher
//! that starts several tasks per node (torchrun, srun, mpirun, MPICH): local rank 0 takes part;
//! the other local tasks wait for it and end with its code, printing one line each.

use super::{Outcome, Shown};
use crate::cli::exit;
use crate::config::{ClusterJob, View};
use crate::placement::local_group::{self, FOLLOWER_GRACE, JoinError, Limits, LocalGroup};
use crate::placement::local_tasks::{Launcher, LayoutError};
use crate::report::{ReportBuilder, add_findings};
use crate::runtime::agent;
use crate::runtime::group_files::GroupFiles;
use crate::transport::events::Events;
use preflight_checks::model::{Finding, Mode, NodeFacts};

pub fn cluster(job: ClusterJob, view: View, events: &Events) -> anyhow::Result<Outcome> {
    let group = match local_group::detect(&job.env) {
        Ok(None) => return this_node(&job, view, events),
        Ok(Some(group)) => group,
        Err(layout) => {
            events.log(layout.to_string());
            return Ok(layout_only(
                view,
                local_group::layout_finding(&layout, None),
            ));
        }
    };
    if group.local_rank == 0 {
        lead(&job, view, events, &group)
    } else {
        follow(&job, view, events, &group)
    }
}

/// Local rank 0: claims the node, takes part, adds what the other tasks found wrong, and
/// publishes the verdict.
fn lead(
    job: &ClusterJob,
    view: View,
    events: &Events,
    group: &LocalGroup,
) -> anyhow::Result<Outcome> {
    // Registered for removal if this run is interrupted; kept once the code is published.
    let files = match group.claim() {
        Ok(files) => files,
        Err(JoinError::Taken { other_pid, .. }) => {
            return Ok(taken(view, events, group, 0, other_pid));
        }
        Err(JoinError::Io(e)) => return Err(e),
    };
    let mut result = this_node(job, view, events);
    if let Ok(Outcome::Report(shown)) = &mut result {
        let missing = if group.launcher == Launcher::Torchrun {
            Vec::new()
        } else {
            group.missing_followers(FOLLOWER_GRACE)
        };
        let conflict = group.conflict();
        if let Some(f) = group.mismatch_finding(conflict.as_deref(), &missing, Some(shown.rank)) {
            events.log(format!("{}: {}", group.who(), f.summary));
            add_findings(&mut shown.report, [f]);
        }
    }
    let code = result.as_ref().map_or(exit::CANNOT_RUN, Outcome::exit_code);
    let status = match &result {
        Ok(Outcome::Report(shown)) => shown.report.status.to_string(),
        Ok(_) => "unknown".to_string(),
        Err(_) => "error".to_string(),
    };
    if let Err(e) = group.publish(code, &status) {
        events.log(format!(
            "could not tell the other local tasks this node's exit code ({e:#}); they end with exit 2"
        ));
    }
    drop(files);
    result
}

/// Any other local rank: announces itself, waits for local rank 0's verdict and ends with it.
fn follow(
    job: &ClusterJob,
    view: View,
    events: &Events,
    group: &LocalGroup,
) -> anyhow::Result<Outcome> {
    match group.register() {
        Ok(()) => {}
        Err(JoinError::Taken { rank, other_pid }) => {
            return Ok(taken(view, events, group, rank, other_pid));
        }
        // Not fatal: the leader then names this task as missing, and the verdict still comes.
        Err(JoinError::Io(e)) => events.log(format!("{}: {e:#}", group.who())),
    }
    let limits = Limits::for_timeout(job.timeout.as_secs());
    let verdict = group.follow(limits)?;
    events.log(group.verdict_line(&verdict));
    Ok(Outcome::Exit(verdict.code))
}

/// Another live task of this run holds the same local rank: tell the leader, and fail.
fn taken(view: View, events: &Events, group: &LocalGroup, rank: u32, other_pid: u32) -> Outcome {
    let problem = format!(
        "two tasks on {} claim local rank {rank} (pid {other_pid} and pid {})",
        group.host,
        std::process::id()
    );
    group.note_conflict(&problem);
    let layout = LayoutError {
        launcher: group.launcher,
        problem,
        vars: group.vars.clone(),
        fix: format!(
            "give every task its own local rank (a wrapper or module file must not set {}), or run the preflight step with one task per node: {}",
            group.vars.keys().cloned().collect::<Vec<_>>().join(", "),
            group.launcher.one_per_node()
        ),
    };
    events.log(layout.to_string());
    layout_only(view, local_group::layout_finding(&layout, group.node_index))
}

/// A node report holding only the layout finding: this task did not take part.
fn layout_only(view: View, finding: Finding) -> Outcome {
    let facts = NodeFacts {
        hostname: local_group::hostname(),
        ..NodeFacts::default()
    };
    let report = ReportBuilder::single(Mode::Node, 0, facts)
        .findings([finding.on_node(Some(0))])
        .build();
    Outcome::Report(Box::new(Shown {
        report,
        view,
        rank: 0,
        your_command: None,
    }))
}

fn this_node(job: &ClusterJob, view: View, events: &Events) -> anyhow::Result<Outcome> {
    let done = agent::run_node(job, events)?;
    if let Some(why) = crate::history::record_node(
        &job.probe.history,
        &done.report,
        "cluster",
        &job.env,
        done.rank,
    ) {
        events.log(format!("history: this run was not recorded: {why}"));
    }
    Ok(Outcome::Report(Box::new(Shown {
        report: done.report,
        view,
        rank: done.rank,
        your_command: None,
    })))
}

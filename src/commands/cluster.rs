//! `preflight cluster`: this node's part of the cluster run, once per node under torchrun
//! (local rank 0 takes part; the other local ranks wait for it and end with its code).

use super::{Outcome, Shown};
use crate::cli::exit;
use crate::config::{ClusterJob, View};
use crate::runtime::agent;
use crate::runtime::local_group::{self, Limits};
use crate::transport::events::Events;

pub fn cluster(job: ClusterJob, view: View, events: &Events) -> anyhow::Result<Outcome> {
    let Some(group) = local_group::detect(&job.env)? else {
        return this_node(&job, view, events);
    };
    if group.local_rank == 0 {
        // Registered for removal if this run is interrupted; kept once the code is published.
        let files = group.claim()?;
        let result = this_node(&job, view, events);
        let code = result.as_ref().map_or(exit::CANNOT_RUN, Outcome::exit_code);
        if let Err(e) = group.publish(code) {
            events.log(format!(
                "could not tell the other local ranks this node's exit code ({e:#}); they end with exit 2"
            ));
        }
        drop(files);
        result
    } else {
        events.log(format!(
            "local rank {} of {}: local rank 0 takes part for this node; waiting for it",
            group.local_rank, group.local_world_size
        ));
        let limits = Limits::for_timeout(job.timeout.as_secs());
        Ok(Outcome::Exit(group.follow(limits, events)?))
    }
}

fn this_node(job: &ClusterJob, view: View, events: &Events) -> anyhow::Result<Outcome> {
    let done = agent::run_node(job, events)?;
    Ok(Outcome::Report(Box::new(Shown {
        report: done.report,
        view,
        rank: done.rank,
        your_command: None,
    })))
}

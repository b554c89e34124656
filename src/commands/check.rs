//! `preflight check`: this node's facts (probed, or from `--facts`), judged and advised.

use super::{Outcome, Shown, load_facts};
use crate::config::CheckJob;
use crate::runtime::node::{judge, probe_facts};
use preflight_checks::root::Root;

pub fn check(job: CheckJob) -> anyhow::Result<Outcome> {
    let facts = match &job.facts_file {
        Some(path) => load_facts(path)?,
        None => probe_facts(
            &Root::at(&job.probe.root),
            job.master_port,
            job.probe.no_gpu,
        ),
    };
    let report = judge(facts, job.master_port, job.shape, &job.script);
    Ok(Outcome::Report(Box::new(Shown {
        report,
        view: job.view,
        rank: 0,
        your_command: None,
    })))
}

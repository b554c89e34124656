//! `preflight facts`: this node's facts, to be judged later with `check --facts`.

use super::Outcome;
use crate::config::FactsJob;
use crate::runtime::node::probe_facts;
use preflight_checks::root::Root;

pub fn facts(job: FactsJob) -> Outcome {
    let facts = probe_facts(
        &Root::at(&job.probe.root),
        job.master_port,
        job.probe.no_gpu,
        job.probe.seams.as_ref(),
    );
    Outcome::Facts {
        facts: Box::new(facts),
        output: job.output,
    }
}

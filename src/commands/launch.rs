//! `preflight launch`: the recommended launch from a saved cluster report.

use super::Outcome;
use crate::config::LaunchJob;
use crate::recipe;

pub fn launch(job: &LaunchJob) -> anyhow::Result<Outcome> {
    let report = recipe::load(&job.report)?;
    let plan = recipe::plan(&report, &job.report, job.nproc_per_node, &job.script)?;
    Ok(Outcome::Launch {
        plan: Box::new(plan),
        format: job.format,
        source: job.report.clone(),
    })
}

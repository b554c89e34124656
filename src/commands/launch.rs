//! `preflight launch`: the recommended launch from a saved cluster report.

use super::Outcome;
use crate::config::LaunchJob;
use crate::launchline::args::split_shell;
use crate::recipe;

pub fn launch(job: &LaunchJob) -> anyhow::Result<Outcome> {
    let report = recipe::load(&job.report)?;
    let split = |line: &str| split_shell(line).map_err(|e| e.to_string());
    let plan = recipe::plan(
        &report,
        &job.report,
        job.nproc_per_node,
        &job.script,
        &split,
    )?;
    Ok(Outcome::Launch {
        plan: Box::new(plan),
        format: job.format,
        source: job.report.clone(),
    })
}

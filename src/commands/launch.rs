//! `preflight launch`: the recommended launch from a saved cluster report (with `--healthy-set`, on the healthy set only).

use super::Outcome;
use crate::config::LaunchJob;
use crate::launchline::args::split_shell;
use crate::recipe;

pub fn launch(job: &LaunchJob) -> anyhow::Result<Outcome> {
    let report = recipe::load(&job.report)?;
    let split = |line: &str| split_shell(line).map_err(|e| e.to_string());
    let plan = if job.healthy_set {
        let computed = job.recompute.as_ref().and_then(|opts| {
            let input = crate::advise::healthy::HealthyInput {
                opts: opts.clone(),
                nproc_per_node: job.nproc_per_node,
                script: job.script.clone(),
            };
            // A passing cluster has no healthy set; with --exclude-slow the set without its
            // slow nodes (the faster set) is still one to launch on.
            use preflight_checks::cluster::healthy_set::{healthy_set, set_of};
            let set = healthy_set(&report, opts)
                .or_else(|| opts.exclude_slow.then(|| set_of(&report, opts)).flatten())?;
            Some(crate::advise::healthy::advise(&report, &set, &input))
        });
        let saved = report
            .recommendation
            .as_ref()
            .and_then(|r| r.healthy_set.as_ref());
        let set = if job.recompute.is_some() {
            computed.as_ref()
        } else {
            saved
        };
        recipe::plan_healthy(
            &report,
            set,
            &job.report,
            job.nproc_per_node,
            &job.script,
            &split,
        )?
    } else {
        recipe::plan(
            &report,
            &job.report,
            job.nproc_per_node,
            &job.script,
            &split,
        )?
    };
    Ok(Outcome::Launch {
        plan: Box::new(plan),
        format: job.format,
        source: job.report.clone(),
    })
}

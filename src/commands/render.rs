//! `preflight render`: a saved report (cluster or node), read with `preflight launch`'s checks
//! and caps, shown again in any format; the exit code is `check`'s for that report.

use super::{Outcome, Shown};
use crate::config::RenderJob;
use crate::recipe;

pub fn render(job: RenderJob) -> anyhow::Result<Outcome> {
    let report = recipe::read(&job.report)?;
    Ok(Outcome::Report(Box::new(Shown {
        report,
        view: job.view,
        rank: 0,
        your_command: None,
    })))
}

//! One module per subcommand. Each takes a validated job and returns an [`Outcome`]: what to
//! show and how to end. None of them prints; `app` renders the outcome.

pub mod check;
pub mod cluster;
pub mod explain;
pub mod facts;
pub mod launch;
pub mod render;
pub mod torchrun;

use crate::cli::LaunchFormat;
use crate::config::{Job, View};
use crate::measure::nccl::worker::WorkerSpec;
use crate::recipe::LaunchPlan;
use crate::transport::events::Events;
use preflight_checks::catalog::Entry;
use preflight_checks::model::{NodeFacts, Report};
use std::path::{Path, PathBuf};

/// What a command produced, for `app` to render.
#[derive(Debug)]
pub enum Outcome {
    /// A report, shown as the view says; `rank` is the node printing it.
    Report(Box<Shown>),
    /// Facts as JSON, to stdout or a file.
    Facts {
        facts: Box<NodeFacts>,
        output: Option<PathBuf>,
    },
    Explain(&'static Entry),
    ExplainList,
    /// The recommended launch from `source`.
    Launch {
        plan: Box<LaunchPlan>,
        format: LaunchFormat,
        source: PathBuf,
    },
    Schema,
    /// The hidden NCCL worker: it speaks its protocol on stdin/stdout.
    NcclWorker(WorkerSpec),
    /// Nothing to show; end with this code (a torchrun follower: local rank 0 reported).
    Exit(u8),
}

/// A report and how to show it.
#[derive(Debug)]
pub struct Shown {
    pub report: Report,
    pub view: View,
    /// The node printing it: the table is whole on rank 0, this node's part elsewhere.
    pub rank: u32,
    /// `preflight torchrun`: the user's command for this node, fixed (table only).
    pub your_command: Option<YourCommand>,
}

/// The user's own command for this node, with the recommended environment and corrections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YourCommand {
    pub rank: u32,
    pub command: String,
    pub corrections: usize,
    /// The line's own environment words the advice replaced ("NAME=yours -> recommended").
    pub env_replaced: Vec<String>,
}

/// Runs one validated job.
pub fn run(job: Job, events: &Events) -> anyhow::Result<Outcome> {
    match job {
        Job::Check(j) => check::check(j),
        Job::Facts(j) => Ok(facts::facts(j)),
        Job::Cluster(j, view) => cluster::cluster(*j, view, events),
        Job::Torchrun(j) => torchrun::torchrun(*j, events),
        Job::Launch(j) => launch::launch(&j),
        Job::Render(j) => render::render(j),
        Job::Explain(j) => explain::explain(&j),
        Job::Schema => Ok(Outcome::Schema),
        Job::NcclWorker(spec) => Ok(Outcome::NcclWorker(spec)),
    }
}

/// Most bytes a facts file may hold: one node's facts are tens of KB.
pub const MAX_FACTS: u64 = 64 << 20;

/// Reads a facts file written by `preflight facts`: a regular file of at most [`MAX_FACTS`]
/// bytes (a FIFO, a device or a huge file is refused, not read).
pub fn load_facts(path: &Path) -> anyhow::Result<NodeFacts> {
    use preflight_checks::root::{FileError, read_regular};
    let bytes = read_regular(path, MAX_FACTS).map_err(|e| match e {
        FileError::Io(e) => anyhow::anyhow!("cannot read facts file {}: {e}", path.display()),
        refused => anyhow::anyhow!(
            "cannot read facts file {}: {refused}; give the JSON file written by `preflight facts -o FILE`",
            path.display()
        ),
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a preflight facts file: {e}", path.display()))
}

/// 0 when nothing failed (and, with `strict`, nothing warned); 1 otherwise.
pub fn report_exit_code(report: &Report, strict: bool) -> u8 {
    use crate::cli::exit;
    use preflight_checks::model::Status;
    let bad = report.findings.iter().any(|f| {
        matches!(f.status, Status::Fail | Status::Error) || (strict && f.status == Status::Warn)
    });
    if bad { exit::FINDINGS } else { exit::OK }
}

impl Outcome {
    /// The exit code this outcome ends with (the NCCL worker's comes from the worker itself).
    pub fn exit_code(&self) -> u8 {
        use crate::cli::exit;
        use preflight_checks::model::Status;
        match self {
            Outcome::Report(s) => {
                let code = report_exit_code(&s.report, s.view.strict);
                let proceed =
                    s.view.proceed_with_healthy_set && crate::advise::healthy::usable(&s.report);
                if proceed { exit::OK } else { code }
            }
            Outcome::Launch { plan, .. }
                if plan.healthy.is_none()
                    && matches!(plan.status, Status::Fail | Status::Error) =>
            {
                exit::FINDINGS
            }
            Outcome::Exit(code) => *code,
            _ => exit::OK,
        }
    }
}

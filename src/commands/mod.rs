//! One module per subcommand. Each takes a validated job and returns an [`Outcome`]: what to
//! show and how to end. None of them prints; `app` renders the outcome.

pub mod check;
pub mod cluster;
pub mod explain;
pub mod explain_log;
pub mod facts;
pub mod hang;
pub mod history;
pub mod hooks;
pub mod launch;
pub mod render;
pub mod simulate;
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
    /// An entry, with this host's own finding where the entry is about this host's setup.
    Explain(&'static Entry, Option<preflight_checks::model::Finding>),
    /// `explain ID` for an error `explain --log` names (`gloo.peer-closed`).
    ExplainSignature(&'static preflight_checks::explain_log::signatures::Signature),
    /// `explain ID` for the job's own fault `explain --log` names (`job.mismatch`).
    ExplainJobCause(&'static preflight_checks::explain_log::signatures_sources::JobCause),
    ExplainList,
    /// `explain --coverage`: the error texts `--log` recognises, by source.
    /// `explain --coverage`; true: as JSON, every format string with its mapping.
    ExplainCoverage(bool),
    /// `explain --log`: the answer, as JSON when true.
    ExplainLog(
        Box<preflight_checks::explain_log::answer::Explanation>,
        bool,
    ),
    /// The recommended launch from `source`.
    Launch {
        plan: Box<LaunchPlan>,
        format: LaunchFormat,
        source: PathBuf,
    },
    Schema,
    /// The hidden NCCL worker: it speaks its protocol on stdin/stdout.
    NcclWorker(WorkerSpec),
    GemmWorker(crate::measure::gemm::worker::GemmSpec),
    /// A simulated cluster: the summary, and the report to write where asked.
    Simulated {
        report: Box<Report>,
        /// What was modelled and how long the simulation took.
        heading: String,
        output: Option<PathBuf>,
    },
    /// Nothing to show; end with this code (a torchrun follower: local rank 0 reported).
    Exit(u8),
    /// `check --slurm-health` / `--slurm-prolog`: what the hook did, and the report for `-o`.
    Hook(Box<Hooked>),
    /// `preflight history`: what the store or the reports remember, as JSON when true.
    History(Box<preflight_checks::history::HistoryView>, bool),
    /// Text to print as it is (`history --export`, `--import`).
    Text(String),
}

/// A Slurm hook's run: the report (kept as `-o` and `--prom-file` say) and what it did.
#[derive(Debug)]
pub struct Hooked {
    pub shown: Shown,
    pub result: hooks::HookResult,
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
        Job::Check(j) => check::check(*j),
        Job::Facts(j) => Ok(facts::facts(j)),
        Job::Cluster(j, view) => cluster::cluster(*j, view, events),
        Job::Torchrun(j) => torchrun::torchrun(*j, events),
        Job::Launch(j) => launch::launch(&j),
        Job::Render(j) => render::render(j),
        Job::Explain(j) => explain::explain(&j),
        Job::Schema => Ok(Outcome::Schema),
        Job::NcclWorker(spec) => Ok(Outcome::NcclWorker(spec)),
        Job::GemmWorker(spec) => Ok(Outcome::GemmWorker(spec)),
        Job::Simulate(j) => simulate::simulate(j),
        Job::History(j) => history::history(j),
    }
}

/// Most bytes a facts file may hold: one node's facts are tens of KB.
pub const MAX_FACTS: u64 = 16 << 20;

/// The `schema` field `preflight facts` writes at the top of a facts file.
pub const FACTS_SCHEMA: &str = "preflight.facts.v1";

/// What a facts file may hold, counted before it is parsed: a node with thousands of
/// interfaces (veths on a Kubernetes host) fits; millions of empty ones do not.
pub const FACTS_BUDGET: preflight_checks::budget::Budget = preflight_checks::budget::Budget {
    what: "the facts file",
    bytes: MAX_FACTS as usize,
    values: 1 << 20,
    items: 4096,
    string: 1 << 20,
    depth: 16,
    paths: &[],
};

/// The document `preflight facts` writes: the facts, with their `schema` first among the keys
/// `check --facts` looks for.
pub fn facts_document(facts: &NodeFacts) -> serde_json::Value {
    let mut v = serde_json::to_value(facts).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        map.insert("schema".into(), FACTS_SCHEMA.into());
    }
    v
}

/// Reads a facts file written by `preflight facts`: a regular file of at most [`MAX_FACTS`]
/// bytes (a FIFO, a device or a huge file is refused, not read), within [`FACTS_BUDGET`]
/// (counted before parsing), and a facts document (its schema, or a hostname and interfaces
/// in files of older releases): a report, a list or any other JSON is refused, saying what
/// it is.
pub fn load_facts(path: &Path) -> anyhow::Result<NodeFacts> {
    use preflight_checks::root::{FileError, read_regular};
    let shown = path.display();
    let give = "give the JSON file written by `preflight facts -o FILE`";
    let bytes = read_regular(path, MAX_FACTS).map_err(|e| match e {
        FileError::Io(e) => anyhow::anyhow!("cannot read facts file {shown}: {e}"),
        refused => anyhow::anyhow!("cannot read facts file {shown}: {refused}; {give}"),
    })?;
    preflight_checks::budget::scan(&bytes, &FACTS_BUDGET).map_err(|e| {
        anyhow::anyhow!(
            "{shown} is not a preflight facts file: {e} (one node's facts are tens of KB); {give}"
        )
    })?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{shown} is not a preflight facts file: {e}; {give}"))?;
    if let Some(what) = not_facts(&value) {
        return Err(anyhow::anyhow!(
            "{shown} is not a preflight facts file: it is {what}; {give}"
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| anyhow::anyhow!("{shown} is not a preflight facts file: {e}; {give}"))
}

/// What a JSON document is when it is not one node's facts.
fn not_facts(v: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let map = match v {
        Value::Object(map) => map,
        Value::Array(a) => return Some(format!("a JSON list of {} items", a.len())),
        Value::String(_) => return Some("a JSON string".into()),
        Value::Number(_) => return Some("a JSON number".into()),
        Value::Bool(_) | Value::Null => return Some(format!("the JSON value {v}")),
    };
    match map.get("schema") {
        Some(Value::String(s)) if s == FACTS_SCHEMA => return None,
        Some(Value::String(s)) if s == preflight_checks::model::SCHEMA => {
            let mode = map.get("mode").and_then(|m| m.as_str()).unwrap_or("?");
            return Some(format!(
                "a preflight {mode} report (schema {s}); judge a report with `preflight render`, or save facts with `preflight facts -o FILE`"
            ));
        }
        Some(other) => {
            let s = other.to_string();
            return Some(format!(
                "a JSON object with schema {}, not {FACTS_SCHEMA}",
                s.chars().take(80).collect::<String>()
            ));
        }
        None => {}
    }
    // Files of releases before the schema field: a hostname and the interfaces.
    let hostname = map.get("hostname").is_some_and(|h| h.is_string());
    let net = map
        .get("net")
        .and_then(|n| n.get("interfaces"))
        .is_some_and(|i| i.is_array());
    if hostname && net {
        return None;
    }
    let keys: Vec<&str> = map.keys().take(8).map(|k| k.as_str()).collect();
    Some(format!(
        "a JSON object without a facts schema, hostname or net.interfaces (keys: {})",
        if keys.is_empty() {
            "none".to_string()
        } else {
            keys.join(", ")
        }
    ))
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
            Outcome::Report(s) => match s.view.format {
                // A TaskProlog's non-zero exit stops the job's tasks: only when the job's own
                // MASTER_PORT is held by another running job (its print line says so).
                crate::cli::Format::TaskProlog => {
                    if crate::render::taskprolog::fails_task(&s.report) {
                        exit::FINDINGS
                    } else {
                        exit::OK
                    }
                }
                crate::cli::Format::Npd => crate::render::npd::exit_code(&s.report, s.view.strict),
                _ => {
                    let code = report_exit_code(&s.report, s.view.strict);
                    let proceed = s.view.proceed_with_healthy_set
                        && crate::advise::healthy::usable(&s.report);
                    if proceed { exit::OK } else { code }
                }
            },
            Outcome::Hook(h) => h.result.code,
            Outcome::Launch { plan, .. }
                if plan.healthy.is_none()
                    && matches!(plan.status, Status::Fail | Status::Error) =>
            {
                exit::FINDINGS
            }
            Outcome::Exit(code) => *code,
            Outcome::History(view, _) if !view.lemons.is_empty() => exit::FINDINGS,
            _ => exit::OK,
        }
    }
}

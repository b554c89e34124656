//! `launch.*` findings: a parsed torchrun command judged against this node's facts.
//!
//! Pure: everything that touches the OS (the probe, name resolution, reading the
//! script) happens in the caller and arrives in [`Context`]. Each check returns
//! its finding and, where the flag can be fixed on this node, a [`Correction`]
//! that `rewrite` applies to the user's own words.
//!
//! One submodule per concern; [`check`] calls each in turn.

mod args;
mod endpoint;
mod legacy;
mod line;
#[cfg(test)]
mod line_tests;
mod nodes;
mod nproc;
mod rendezvous;
#[cfg(test)]
mod tests;

pub use endpoint::hosts_store;
pub use line::ScriptFile;
pub use nproc::per_node;

pub use super::rewrite::Correction;
use crate::launchline::args::{Launcher, Parsed};
use crate::placement::{DEFAULT_MASTER_PORT, DEFAULT_RDZV_PORT, split_endpoint};
use preflight_checks::model::{Finding, NodeFacts, Status};

/// Rendezvous backends torch registers itself.
pub const BACKENDS: [&str; 4] = ["static", "c10d", "etcd", "etcd-v2"];

/// What the checks know beyond the parsed command.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    pub facts: &'a NodeFacts,
    /// What the endpoint's host resolved to on this node (None: not resolved, e.g. standalone).
    pub resolved: Option<Resolved>,
    /// The script's text, when it is a readable local file (legacy `--local-rank` check).
    pub script_text: Option<String>,
    /// An address other nodes can reach this node on (the recommendation's choice), for fixes.
    pub this_addr: Option<String>,
    /// What the job says beyond the line, and what was found of the script here.
    pub job: LineJob,
}

/// What the command knows of the job beyond the line itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineJob {
    /// This node's rank as the run resolves it (flags, then Slurm, then the torchrun/Kubernetes
    /// environment); None: the line's own `--node-rank` (or torchrun's default 0).
    pub rank: Option<u32>,
    /// Where the rank came from when `rank` is set ("SLURM_NODEID", ...).
    pub rank_from: Option<String>,
    /// The job is CPU-only (`--no-gpu` or `--expect-gpus 0`): no GPU is no failure.
    pub cpu_only: bool,
    /// The script as found in the working directory; None when not looked at (facts from a file).
    pub script_file: Option<ScriptFile>,
}

pub use crate::placement::Resolved;

/// The rendezvous the command asks for, as torchrun reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandShape {
    /// (min, max) nodes; None when `--nnodes` is malformed.
    pub nnodes: Option<(u32, u32)>,
    /// `--node-rank` (torchrun's default 0 when absent or malformed).
    pub rank: u32,
    pub rank_given: bool,
    pub backend: String,
    pub standalone: bool,
    /// Host and port of the store (static: master, else the rendezvous endpoint); None for standalone.
    pub endpoint: Option<(String, u16)>,
    /// Which flag the endpoint came from: "--rdzv-endpoint", "--master-addr/--master-port", "default".
    pub endpoint_from: &'static str,
    /// Why the endpoint could not be read, when it could not.
    pub endpoint_error: Option<String>,
}

impl CommandShape {
    /// The most nodes the job may have.
    pub fn max_nodes(&self) -> u32 {
        self.nnodes.map(|(_, max)| max).unwrap_or(1)
    }

    pub fn is_multi_node(&self) -> bool {
        self.max_nodes() > 1 && !self.standalone
    }
}

/// Parses `N` or `MIN:MAX` as torchrun does.
pub fn parse_nnodes(v: &str) -> Result<(u32, u32), String> {
    let parts: Vec<&str> = v.split(':').collect();
    let num = |s: &str| {
        s.trim().parse::<u32>().map_err(|_| {
            format!(
                "{} is not a whole number",
                preflight_checks::shellword::quoted(s)
            )
        })
    };
    match parts.as_slice() {
        [n] => num(n).map(|n| (n, n)),
        [a, b] => Ok((num(a)?, num(b)?)),
        _ => Err(format!(
            "{} is not N or MIN:MAX",
            preflight_checks::shellword::quoted(v)
        )),
    }
}

/// Reads the rendezvous out of the parsed flags.
pub fn shape_of(p: &Parsed) -> CommandShape {
    let nnodes = match p.value("nnodes") {
        Some(v) => parse_nnodes(v).ok(),
        None => Some((1, 1)),
    };
    let rank_value = p
        .value("node-rank")
        .and_then(|v| v.trim().parse::<u32>().ok());
    let backend = p.value("rdzv-backend").unwrap_or("static").to_string();
    let standalone = p.has("standalone");
    let mut out = CommandShape {
        nnodes,
        rank: rank_value.unwrap_or(0),
        rank_given: p.has("node-rank"),
        backend: backend.clone(),
        standalone,
        endpoint: None,
        endpoint_from: "default",
        endpoint_error: None,
    };
    if standalone {
        return out;
    }
    let rdzv = p.value("rdzv-endpoint").filter(|v| !v.trim().is_empty());
    // `--rdzv-endpoint=localhost:0` (torchtitan's run_train.sh): the c10d store binds a free
    // port, which works on one node only, as --standalone does.
    if let Some(host) = rdzv
        .and_then(|v| v.trim().strip_suffix(":0"))
        .filter(|h| !h.is_empty() && backend != "static" && out.max_nodes() <= 1)
    {
        out.endpoint = Some((host.to_string(), 0));
        out.endpoint_from = "--rdzv-endpoint";
        return out;
    }
    match (rdzv, backend.as_str()) {
        (Some(v), b) => {
            out.endpoint_from = "--rdzv-endpoint";
            match split_endpoint(v) {
                Ok((host, Some(port))) => out.endpoint = Some((host, port)),
                Ok((_, None)) if b == "static" => {
                    out.endpoint_error = Some(format!(
                        "--rdzv-endpoint={v} has no port, and the static backend needs one (torchrun: \"Port is absent in endpoint\")"
                    ))
                }
                Ok((host, None)) => out.endpoint = Some((host, DEFAULT_RDZV_PORT)),
                Err(e) => out.endpoint_error = Some(format!("--rdzv-endpoint: {e}")),
            }
        }
        (None, "static") => {
            out.endpoint_from = "--master-addr/--master-port";
            let host = p.value("master-addr").unwrap_or("127.0.0.1");
            let host = host.trim_start_matches('[').trim_end_matches(']');
            match p.value("master-port") {
                None => out.endpoint = Some((host.to_string(), DEFAULT_MASTER_PORT)),
                Some(v) => match v.trim().parse::<u16>() {
                    Ok(port) if port > 0 => out.endpoint = Some((host.to_string(), port)),
                    _ => {
                        out.endpoint_error =
                            Some(format!("--master-port={v} is not a port (1-65535)"))
                    }
                },
            }
        }
        (None, _) => out.endpoint = Some(("localhost".to_string(), DEFAULT_RDZV_PORT)),
    }
    out
}

/// The spelling to show for a flag: the user's own when present, else the canonical dash form.
fn flag(p: &Parsed, name: &str) -> String {
    p.last(name)
        .map(|o| o.spelled.clone())
        .unwrap_or_else(|| format!("--{name}"))
}

fn finding(
    id: preflight_checks::core::FindingId,
    status: Status,
    rank: u32,
    subject: impl Into<String>,
    summary: String,
) -> Finding {
    Finding::new(id, status, subject, summary).on_node(Some(rank))
}

/// Every `launch.*` finding, each with the correction this node can make for it, if any.
pub fn check(p: &Parsed, ctx: &Context) -> Vec<(Finding, Option<Correction>)> {
    let mut plan = shape_of(p);
    if let Some(rank) = ctx.job.rank {
        plan.rank = rank;
    }
    if p.launcher == Launcher::Other {
        let mut out: Vec<_> = line::program(p, &plan).into_iter().collect();
        out.extend(line::variables(p, &plan));
        out.extend(line::script(p, &plan, ctx));
        return out;
    }
    let mut out = vec![line::program(p, &plan).unwrap_or_else(|| args::args(p, &plan))];
    if p.launcher.is_torch() {
        out.push(args::unknown_flags(p, &plan));
    }
    out.extend(line::variables(p, &plan));
    out.push(nodes::nnodes(p, &plan));
    out.push(nodes::node_rank(p, &plan));
    out.push(nproc::nproc(p, &plan, ctx.facts, ctx.job.cpu_only));
    out.extend(rendezvous::standalone(p, &plan));
    out.extend(rendezvous::rdzv_backend(p, &plan));
    out.push(endpoint::endpoint(p, &plan, ctx));
    if plan.endpoint.as_ref().is_some_and(|(_, port)| *port == 0) {
        out.push((
            finding(
                preflight_checks::launch::ids::PORT,
                Status::Pass,
                plan.rank,
                "0",
                "port 0: torchrun's c10d store binds a free port on this node (one node only)"
                    .into(),
            ),
            None,
        ));
    } else {
        out.push(endpoint::port(p, &plan, ctx));
    }
    out.extend(line::script(p, &plan, ctx));
    out.extend(legacy::legacy(p, &plan, ctx.script_text.as_deref()));
    out
}

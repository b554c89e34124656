//! `launch.*` findings: a parsed torchrun command judged against this node's facts.
//!
//! Pure: everything that touches the OS (the probe, name resolution, reading the
//! script) happens in the caller and arrives in [`Context`]. Each check returns
//! its finding and, where the flag can be fixed on this node, a [`Correction`]
//! that `rewrite` applies to the user's own words.

use super::args::{Launcher, Parsed, Problem};
use crate::placement::{DEFAULT_MASTER_PORT, DEFAULT_RDZV_PORT, split_endpoint};
use preflight_checks::model::{BindStatus, Finding, Fix, NodeFacts, Status};
use preflight_checks::net::host_port;
use std::net::IpAddr;

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
}

/// The endpoint host's resolution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub host: String,
    pub addrs: Vec<IpAddr>,
    pub error: Option<String>,
}

/// A change to the user's command that fixes a finding on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Correction {
    /// Give the last occurrence of option `name` this value (add the option when absent).
    SetValue { name: &'static str, value: String },
    /// Drop every occurrence of option `name`.
    Remove { name: &'static str },
    /// Drop the word at this index (an option torchrun rejects).
    RemoveWord { index: usize },
}

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
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("{s:?} is not a whole number"))
    };
    match parts.as_slice() {
        [n] => num(n).map(|n| (n, n)),
        [a, b] => Ok((num(a)?, num(b)?)),
        _ => Err(format!("{v:?} is not N or MIN:MAX")),
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
    id: &str,
    status: Status,
    rank: u32,
    subject: impl Into<String>,
    summary: String,
) -> Finding {
    Finding::new(id, status, subject, summary).on_node(Some(rank))
}

/// Every `launch.*` finding, each with the correction this node can make for it, if any.
pub fn check(p: &Parsed, ctx: &Context) -> Vec<(Finding, Option<Correction>)> {
    let plan = shape_of(p);
    let mut out = vec![
        args(p, &plan),
        unknown_flags(p, &plan),
        nnodes(p, &plan),
        node_rank(p, &plan),
        nproc(p, &plan, ctx.facts),
    ];
    out.extend(standalone(p, &plan));
    out.extend(rdzv_backend(p, &plan));
    out.push(endpoint(p, &plan, ctx));
    out.push(port(p, &plan, ctx));
    out.extend(legacy(p, &plan, ctx.script_text.as_deref()));
    out
}

// ----- launch.args, launch.unknown-flag -----

fn args(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let mut bad = Vec::new();
    for problem in &p.problems {
        match problem {
            Problem::MissingValue { word, .. } => bad.push(format!("{word} needs a value")),
            Problem::ValueOnFlag { word, .. } => bad.push(format!(
                "{word}: {} is a flag and takes no value (torchrun: \"ignored explicit argument\")",
                word.split('=').next().unwrap_or(word)
            )),
            Problem::NoScript => bad.push(
                "no training script: torchrun needs the script (or module with -m) after its options"
                    .into(),
            ),
            _ => {}
        }
    }
    if bad.is_empty() {
        let what = if p.has("module") { "module" } else { "script" };
        let f = finding(
            "launch.args",
            Status::Pass,
            plan.rank,
            p.script().unwrap_or_default(),
            format!(
                "torchrun reads the command: {what} {} with {} argument(s) of its own",
                p.script().unwrap_or_default(),
                p.script_args().len()
            ),
        )
        .with("script", p.script())
        .with("script_args", p.script_args())
        .with("launcher", format!("{:?}", p.launcher));
        return (f, None);
    }
    let f = finding(
        "launch.args",
        Status::Fail,
        plan.rank,
        "command",
        format!(
            "torchrun on rank {} would reject this command: {}",
            plan.rank,
            bad.join("; ")
        ),
    )
    .with("problems", &bad)
    .fix(Fix::new(
        "give every option that takes one a value (--flag=value), and put the script after the options",
    ));
    (f, None)
}

fn unknown_flags(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let mut words = Vec::new();
    let mut hints = Vec::new();
    let mut correction = None;
    for problem in &p.problems {
        match problem {
            Problem::Unknown { word, .. } => {
                words.push(word.clone());
                hints.push(match super::args::suggest(word) {
                    Some(s) => format!("{word}: did you mean {s}?"),
                    None => format!("{word}: not a torchrun option; move it after the script if the script takes it"),
                });
            }
            Problem::LaunchOnly { index, word } => {
                words.push(word.clone());
                hints.push(format!(
                    "{word}: only torch.distributed.launch takes it; torchrun always sets LOCAL_RANK, so drop it"
                ));
                correction = Some(Correction::RemoveWord { index: *index });
            }
            _ => {}
        }
    }
    if words.is_empty() {
        let f = finding(
            "launch.unknown-flag",
            Status::Pass,
            plan.rank,
            "options",
            format!(
                "every option before the script is one torchrun knows ({} given)",
                p.opts.len()
            ),
        )
        .with(
            "options",
            p.opts.iter().map(|o| o.spelled.clone()).collect::<Vec<_>>(),
        );
        return (f, None);
    }
    let f = finding(
        "launch.unknown-flag",
        Status::Fail,
        plan.rank,
        words.join(" "),
        format!(
            "torchrun on rank {} stops with \"unrecognized arguments: {}\"",
            plan.rank,
            words.join(" ")
        ),
    )
    .with("unknown", &words)
    .fix(Fix::new(hints.join("; ")));
    (f, correction)
}

// ----- launch.nnodes, launch.node-rank -----

fn nnodes(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let name = flag(p, "nnodes");
    let given = p.value("nnodes");
    let rank = plan.rank;
    let f = match (given, plan.nnodes) {
        (Some(v), None) => finding(
            "launch.nnodes",
            Status::Fail,
            rank,
            v,
            format!("{name}={v} on rank {rank} is neither N nor MIN:MAX; torchrun stops"),
        )
        .with("nnodes", v)
        .fix(Fix::new(format!("use {name}=2 (two nodes) or {name}=1:4 (elastic)"))),
        (Some(v), Some((min, max))) if min == 0 || min > max => {
            let fixed = if min > max && max > 0 {
                format!("{max}:{min}")
            } else {
                "1".to_string()
            };
            let f = finding(
                "launch.nnodes",
                Status::Fail,
                rank,
                v,
                format!("{name}={v} on rank {rank}: torchrun needs 0 < MIN <= MAX (assert 0 < min_nodes <= max_nodes)"),
            )
            .with("nnodes", v)
            .fix(Fix::new(format!("use {name}={fixed}")));
            return (
                f,
                Some(Correction::SetValue {
                    name: "nnodes",
                    value: fixed,
                }),
            );
        }
        (Some(v), Some((min, max))) if min != max && plan.backend == "static" && !plan.standalone => {
            finding(
                "launch.nnodes",
                Status::Warn,
                rank,
                v,
                format!("{name}={v} is an elastic range, but the static rendezvous needs a fixed count and waits for {max} nodes"),
            )
            .with("nnodes", v)
            .fix(Fix::new(format!("use --rdzv-backend=c10d with {name}={v}, or a fixed {name}={max}")))
        }
        (None, _) if multi_node_hint(p, plan).is_some() => {
            let why = multi_node_hint(p, plan).unwrap_or_default();
            let at_least = (plan.rank + 1).max(2);
            finding(
                "launch.nnodes",
                Status::Fail,
                rank,
                "--nnodes",
                format!("--nnodes is missing, so torchrun on rank {rank} runs a 1-node job on its own although {why}"),
            )
            .with("nnodes", "1:1 (default)")
            .with("because", why)
            .fix(Fix::new(format!("add --nnodes=N with N the number of nodes (at least {at_least}), the same on every node")))
        }
        _ => {
            let (min, max) = plan.nnodes.unwrap_or((1, 1));
            let shown = given.unwrap_or("1 (default)");
            finding(
                "launch.nnodes",
                Status::Pass,
                rank,
                shown,
                if min == max {
                    format!("{max} node(s)")
                } else {
                    format!("elastic: {min} to {max} nodes")
                },
            )
            .with("min", min)
            .with("max", max)
        }
    };
    (f, None)
}

/// Why the command looks multi-node although `--nnodes` is absent.
fn multi_node_hint(p: &Parsed, plan: &CommandShape) -> Option<String> {
    if plan.standalone {
        return None;
    }
    if plan.rank > 0 {
        return Some(format!("{}={}", flag(p, "node-rank"), plan.rank));
    }
    match &plan.endpoint {
        Some((host, _))
            if !is_loopback_name(host) && (p.has("master-addr") || p.has("rdzv-endpoint")) =>
        {
            Some(format!(
                "the rendezvous is on {host}, another machine's address"
            ))
        }
        _ => None,
    }
}

fn is_loopback_name(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn node_rank(p: &Parsed, plan: &CommandShape) -> (Finding, Option<Correction>) {
    let name = flag(p, "node-rank");
    let max = plan.max_nodes();
    let given = p.value("node-rank");
    if let Some(v) = given {
        if v.trim().parse::<u32>().is_err() {
            let f = finding(
                "launch.node-rank",
                Status::Fail,
                0,
                v,
                format!("{name}={v} is not a whole number; torchrun stops"),
            )
            .with("node_rank", v)
            .fix(Fix::new(format!(
                "use {name}=R with R this node's rank, 0..{}",
                max.saturating_sub(1)
            )));
            return (f, None);
        }
    }
    // `--nnodes=0` (max 0) is launch.nnodes' failure; there is no rank range to hold this one to.
    if plan.nnodes.is_some() && max > 0 && plan.rank >= max && !plan.standalone {
        let last = max - 1;
        let f = finding(
            "launch.node-rank",
            Status::Fail,
            plan.rank,
            plan.rank.to_string(),
            format!(
                "{name}={} but {} node(s): ranks run 0..{last}, so torchrun waits forever for nodes that do not exist",
                plan.rank, max
            ),
        )
        .with("node_rank", plan.rank)
        .with("nnodes", max);
        if max == 1 {
            let f = f.fix(Fix::new(format!("a 1-node job is rank 0: use {name}=0")));
            return (
                f,
                Some(Correction::SetValue {
                    name: "node-rank",
                    value: "0".into(),
                }),
            );
        }
        return (
            f.fix(Fix::new(format!(
                "use {name}=R with R in 0..{last}, a different one on each node"
            ))),
            None,
        );
    }
    if plan.is_multi_node() && plan.backend == "static" && !plan.rank_given {
        let f = finding(
            "launch.node-rank",
            Status::Fail,
            0,
            "--node-rank",
            format!(
                "--node-rank is missing in a {max}-node static rendezvous: every node takes the default rank 0 and they never form a group"
            ),
        )
        .with("nnodes", max)
        .fix(Fix::new(format!(
            "add --node-rank=R on each node (0 on the master, 1..{} on the others), or use --rdzv-backend=c10d which assigns ranks",
            max - 1
        )));
        return (f, None);
    }
    let f = finding(
        "launch.node-rank",
        Status::Pass,
        plan.rank,
        plan.rank.to_string(),
        if plan.backend != "static" && !plan.standalone && plan.is_multi_node() {
            format!(
                "the {} rendezvous assigns node ranks; this node reads as rank {}",
                plan.backend, plan.rank
            )
        } else {
            format!("node rank {} of {}", plan.rank, max)
        },
    )
    .with("node_rank", plan.rank)
    .with("given", plan.rank_given);
    (f, None)
}

// ----- launch.nproc -----

fn nproc(p: &Parsed, plan: &CommandShape, facts: &NodeFacts) -> (Finding, Option<Correction>) {
    let name = flag(p, "nproc-per-node");
    let value = p.value("nproc-per-node").unwrap_or("1");
    let shown = if p.has("nproc-per-node") {
        value.to_string()
    } else {
        "1 (default)".to_string()
    };
    let rank = plan.rank;
    let counted = facts.gpu.nvml_error.is_none();
    let visible = preflight_checks::visible_devices::visible_gpu_count(facts);
    let base = |status, summary: String| {
        finding("launch.nproc", status, rank, shown.clone(), summary)
            .with("nproc_per_node", value)
            .with("visible_gpus", counted.then_some(visible))
            .with(
                "cuda_visible_devices",
                facts.env.get("CUDA_VISIBLE_DEVICES"),
            )
    };
    match value.trim() {
        "cpu" => (base(Status::Pass, "one CPU worker per core (--nproc-per-node=cpu)".into()), None),
        v @ ("gpu" | "auto" | "xpu") => {
            if !counted {
                let why = facts.gpu.nvml_error.clone().unwrap_or_default();
                return (base(Status::Skip, format!("{name}={v}: GPUs could not be counted here ({why})")), None);
            }
            if visible == 0 && v == "gpu" {
                let f = base(Status::Fail, format!("{name}=gpu on rank {rank}, but no GPU is visible: torchrun stops with \"Cuda is not available\""))
                    .fix(Fix::new(format!("check the driver and CUDA_VISIBLE_DEVICES, or use {name}=cpu")));
                return (f, None);
            }
            (base(Status::Pass, format!("{name}={v} starts {visible} worker(s): the visible GPUs")), None)
        }
        v => match v.parse::<u32>() {
            Ok(0) | Err(_) => {
                let f = base(Status::Fail, format!("{name}={v} on rank {rank} is not a worker count; torchrun accepts a number, gpu, cpu, xpu or auto"))
                    .fix(Fix::new(format!("use {name}={}", if counted && visible > 0 { visible.to_string() } else { "gpu".into() })));
                (f, None)
            }
            Ok(n) if !counted => (
                base(Status::Skip, format!("{n} worker(s); GPUs could not be counted here ({})", facts.gpu.nvml_error.clone().unwrap_or_default())),
                None,
            ),
            Ok(n) if n > visible && visible > 0 => {
                let f = base(
                    Status::Fail,
                    format!("{name}={n} but rank {rank} has only {visible} visible GPU(s): workers {visible}..{} fail with \"invalid device ordinal\" or share a GPU", n - 1),
                )
                .fix(Fix::new(format!("use {name}={visible}, or make more GPUs visible (CUDA_VISIBLE_DEVICES)")));
                (f, Some(Correction::SetValue { name: "nproc-per-node", value: visible.to_string() }))
            }
            Ok(n) if n > visible => {
                let f = base(Status::Fail, format!("{name}={n} but rank {rank} has no visible GPU"))
                    .fix(Fix::new(format!("check the driver and CUDA_VISIBLE_DEVICES, or use {name}=cpu for a CPU job")));
                (f, None)
            }
            Ok(n) if n < visible && !p.has("nproc-per-node") => (
                base(Status::Warn, format!("--nproc-per-node is not given: torchrun starts 1 worker and {} of the {visible} GPUs stay idle", visible - 1))
                    .fix(Fix::new(format!("add --nproc-per-node={visible} (or gpu) to use every GPU"))),
                None,
            ),
            Ok(n) => (base(Status::Pass, format!("{n} worker(s) on {visible} visible GPU(s)")), None),
        },
    }
}

// ----- launch.standalone, launch.rdzv-backend -----

fn standalone(p: &Parsed, plan: &CommandShape) -> Option<(Finding, Option<Correction>)> {
    if !plan.standalone {
        return None;
    }
    let rank = plan.rank;
    let multi: Vec<String> = [
        "nnodes",
        "node-rank",
        "master-addr",
        "master-port",
        "rdzv-endpoint",
        "rdzv-backend",
        "rdzv-id",
    ]
    .iter()
    .filter_map(|n| p.last(n))
    .filter(|o| o.name != "nnodes" || plan.max_nodes() > 1)
    .map(|o| format!("{}={}", o.spelled, o.value.clone().unwrap_or_default()))
    .collect();
    let points_elsewhere = p.has("rdzv-endpoint") || p.has("master-addr");
    if plan.max_nodes() > 1 {
        let f = finding(
            "launch.standalone",
            Status::Fail,
            rank,
            "--standalone",
            format!(
                "--standalone with {}: each node starts its own local rendezvous on a free port and ignores the others, so the {} nodes never form one job",
                multi.join(" "),
                plan.max_nodes()
            ),
        )
        .with("multi_node_flags", &multi);
        if points_elsewhere {
            return Some((
                f.fix(Fix::new(
                    "drop --standalone; the rendezvous flags already given then apply",
                )),
                Some(Correction::Remove { name: "standalone" }),
            ));
        }
        return Some((
            f.fix(Fix::new("drop --standalone and give --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT (rank 0's address), the same on every node")),
            None,
        ));
    }
    if !multi.is_empty() {
        let f = finding(
            "launch.standalone",
            Status::Warn,
            rank,
            "--standalone",
            format!(
                "--standalone ignores {}: torchrun picks its own local endpoint and id",
                multi.join(" ")
            ),
        )
        .with("ignored", &multi)
        .fix(Fix::new(
            "drop the ignored flags, or drop --standalone if this is meant to be multi-node",
        ));
        return Some((f, None));
    }
    Some((
        finding(
            "launch.standalone",
            Status::Pass,
            rank,
            "--standalone",
            "single node: torchrun hosts its rendezvous locally on a free port".into(),
        ),
        None,
    ))
}

fn rdzv_backend(p: &Parsed, plan: &CommandShape) -> Vec<(Finding, Option<Correction>)> {
    let mut out = Vec::new();
    let rank = plan.rank;
    if let Some(v) = p.value("rdzv-backend") {
        let name = flag(p, "rdzv-backend");
        let f = match v {
            "static" | "c10d" => finding("launch.rdzv-backend", Status::Pass, rank, v, format!("rendezvous backend {v}")),
            "etcd" | "etcd-v2" => finding(
                "launch.rdzv-backend",
                Status::Warn,
                rank,
                v,
                format!("{name}={v} needs an etcd server (v2 API) at the endpoint and the python-etcd package on every node; preflight cannot rendezvous through etcd"),
            )
            .fix(Fix::new(format!("unless you run etcd, use {name}=c10d with --rdzv-endpoint=HOST:PORT on a node (no extra service)"))),
            other => {
                let near = BACKENDS.iter().min_by_key(|b| super::args::edit_distance(b, other)).copied().unwrap_or("c10d");
                finding(
                    "launch.rdzv-backend",
                    Status::Fail,
                    rank,
                    other,
                    format!("{name}={other} on rank {rank} is not a rendezvous backend torch registers ({}); torchrun stops unless a plugin registers it", BACKENDS.join(", ")),
                )
                .fix(Fix::new(format!("use {name}={near}")))
            }
        };
        let fix = (!BACKENDS.contains(&v) && super::args::edit_distance("c10d", v) <= 2).then_some(
            Correction::SetValue {
                name: "rdzv-backend",
                value: "c10d".into(),
            },
        );
        out.push((f.with("backend", v).with("known", BACKENDS), fix));
    }
    if let Some(v) = p.value("rdzv-conf").filter(|v| !v.is_empty()) {
        let bad: Vec<&str> = v
            .split(',')
            .filter(|kv| !kv.is_empty())
            .filter(|kv| kv.split_once('=').is_none_or(|(k, _)| k.trim().is_empty()))
            .collect();
        let f = if bad.is_empty() {
            finding(
                "launch.rdzv-conf",
                Status::Pass,
                rank,
                v,
                format!("rendezvous configuration {v}"),
            )
        } else {
            finding(
                "launch.rdzv-conf",
                Status::Fail,
                rank,
                v,
                format!("{}={v}: {} not KEY=VALUE; torchrun stops with \"The rendezvous configuration string must be in format <key1>=<value1>,...\"", flag(p, "rdzv-conf"), bad.join(", ")),
            )
            .fix(Fix::new(format!("write it as {}=key1=value1,key2=value2", flag(p, "rdzv-conf"))))
        };
        out.push((f.with("rdzv_conf", v), None));
    }
    out
}

// ----- launch.endpoint, launch.port -----

/// Is this address one of this node's (or loopback)?
fn is_local(facts: &NodeFacts, ip: &IpAddr) -> bool {
    ip.is_loopback()
        || facts
            .net
            .interfaces
            .iter()
            .any(|i| i.ipv4.iter().chain(i.ipv6.iter()).any(|a| a.addr == *ip))
}

/// Does this node host the store (bind the port)?
pub fn hosts_store(plan: &CommandShape, resolved: Option<&Resolved>, facts: &NodeFacts) -> bool {
    if plan.standalone || plan.backend.starts_with("etcd") {
        return false;
    }
    let local =
        resolved.is_some_and(|r| !r.addrs.is_empty() && r.addrs.iter().all(|a| is_local(facts, a)));
    match plan.backend.as_str() {
        "static" => plan.rank == 0,
        _ => local,
    }
}

fn endpoint(p: &Parsed, plan: &CommandShape, ctx: &Context) -> (Finding, Option<Correction>) {
    let rank = plan.rank;
    if plan.standalone {
        return (
            finding(
                "launch.endpoint",
                Status::Pass,
                rank,
                "standalone",
                "--standalone: the rendezvous is local to this node".into(),
            ),
            None,
        );
    }
    if let Some(e) = &plan.endpoint_error {
        let f = finding(
            "launch.endpoint",
            Status::Fail,
            rank,
            "endpoint",
            format!("rank {rank}: {e}"),
        )
        .fix(Fix::new(format!(
            "give HOST:PORT, e.g. {}=10.0.0.1:{DEFAULT_RDZV_PORT}",
            flag(p, "rdzv-endpoint")
        )));
        return (f, None);
    }
    let Some((host, port)) = plan.endpoint.clone() else {
        return (
            finding(
                "launch.endpoint",
                Status::Skip,
                rank,
                "endpoint",
                "no rendezvous endpoint".into(),
            ),
            None,
        );
    };
    let subject = host_port(&host, port);
    let resolved = ctx.resolved.clone().unwrap_or_default();
    let local_addrs: Vec<String> = ctx
        .facts
        .net
        .interfaces
        .iter()
        .flat_map(|i| i.usable_addrs())
        .map(|a| a.addr.to_string())
        .collect();
    let base = |status, summary: String| {
        finding("launch.endpoint", status, rank, subject.clone(), summary)
            .with("host", &host)
            .with("port", port)
            .with("from", plan.endpoint_from)
            .with("backend", &plan.backend)
            .with(
                "resolved",
                resolved
                    .addrs
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>(),
            )
            .with("this_node_addresses", &local_addrs)
    };
    let use_addr = ctx
        .this_addr
        .clone()
        .unwrap_or_else(|| "<rank 0's address>".into());
    if let Some(err) = &resolved.error {
        let f = base(
            Status::Fail,
            format!("rank {rank} cannot resolve the rendezvous host {host}: {err}"),
        )
        .fix(Fix::new(format!(
            "use an IP address, or add {host} to /etc/hosts on every node"
        )));
        return (f, None);
    }
    if resolved.addrs.is_empty() {
        return (base(Status::Skip, format!("{host} was not resolved")), None);
    }
    let all_loopback = resolved.addrs.iter().all(|a| a.is_loopback());
    if plan.is_multi_node() && all_loopback {
        let f = base(
            Status::Fail,
            format!("{subject} is loopback ({}) in a {}-node job: the other nodes connect to themselves and wait until the rendezvous times out", resolved.addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", "), plan.max_nodes()),
        )
        .fix(Fix::new(format!("use rank 0's address reachable by every node instead of {host}, e.g. {}", host_port(&use_addr, port))));
        return (f, None);
    }
    let local = resolved.addrs.iter().all(|a| is_local(ctx.facts, a));
    if plan.backend == "static" && rank == 0 && !local {
        let f = base(
            Status::Fail,
            format!("rank 0 hosts the static rendezvous, but {host} ({}) is not this machine: the other nodes would look for the master elsewhere", resolved.addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")),
        )
        .fix(Fix::new(format!("run rank 0 on {host}, or point every node at this machine: {}={use_addr}", flag(p, if plan.endpoint_from == "--rdzv-endpoint" { "rdzv-endpoint" } else { "master-addr" }))));
        return (f, None);
    }
    if plan.backend.starts_with("etcd") {
        return (
            base(
                Status::Warn,
                format!("{subject} must be an etcd server; preflight's cluster run cannot use it"),
            ),
            None,
        );
    }
    let role = if hosts_store(plan, Some(&resolved), ctx.facts) {
        "this node hosts the rendezvous store there".to_string()
    } else {
        format!("rank {rank} connects to it; the cluster run checks that it is reachable")
    };
    (
        base(
            Status::Pass,
            format!(
                "{subject} resolves to {}; {role}",
                resolved
                    .addrs
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .with("local", local),
        None,
    )
}

fn port(p: &Parsed, plan: &CommandShape, ctx: &Context) -> (Finding, Option<Correction>) {
    let rank = plan.rank;
    let Some((host, port)) = plan.endpoint.clone() else {
        return (
            finding(
                "launch.port",
                Status::Skip,
                rank,
                "port",
                "no fixed port: --standalone picks a free one".into(),
            ),
            None,
        );
    };
    if !hosts_store(plan, ctx.resolved.as_ref(), ctx.facts) {
        return (
            finding(
                "launch.port",
                Status::Skip,
                rank,
                port.to_string(),
                format!("rank {rank} does not bind {port}; the node that hosts {host} does"),
            )
            .with("port", port),
            None,
        );
    }
    let facts = &ctx.facts.ports;
    if facts.port != port {
        return (
            finding(
                "launch.port",
                Status::Skip,
                rank,
                port.to_string(),
                format!(
                    "port {port} was not probed on this node (the facts are for {})",
                    facts.port
                ),
            )
            .with("port", port),
            None,
        );
    }
    let held = facts.ipv4.status == BindStatus::InUse || facts.ipv6.status == BindStatus::InUse;
    let base = |status, summary: String| {
        finding("launch.port", status, rank, port.to_string(), summary)
            .with("port", port)
            .with("ipv4", facts.ipv4.status)
            .with("ipv6", facts.ipv6.status)
            .with("holders", &facts.holders)
            .with("suggested_free", facts.suggested_free)
    };
    if !held {
        return match facts.ipv4.status {
            BindStatus::Free => (
                base(
                    Status::Pass,
                    format!("port {port} is free on rank {rank}, which binds it"),
                ),
                None,
            ),
            s => (
                base(
                    Status::Warn,
                    format!(
                        "port {port} could not be test-bound on rank {rank} ({s:?}); see port.in-use"
                    ),
                ),
                None,
            ),
        };
    }
    let who: Vec<String> = facts
        .holders
        .iter()
        .filter_map(|h| {
            Some(format!(
                "pid {} ({})",
                h.pid?,
                h.command.clone().unwrap_or_default()
            ))
        })
        .collect();
    let who = if who.is_empty() {
        "a process this user cannot see".to_string()
    } else {
        who.join(", ")
    };
    let summary = format!(
        "port {port} is held on rank {rank} by {who}: torchrun fails with \"Address already in use\""
    );
    let Some(free) = facts.suggested_free else {
        return (
            base(Status::Fail, summary).fix(Fix::new(format!(
                "stop {who}, or choose another port on every node"
            ))),
            None,
        );
    };
    let correction = if plan.endpoint_from == "--rdzv-endpoint" {
        Correction::SetValue {
            name: "rdzv-endpoint",
            value: host_port(&host, free),
        }
    } else {
        Correction::SetValue {
            name: "master-port",
            value: free.to_string(),
        }
    };
    let flag_text = match &correction {
        Correction::SetValue { name, value } => format!("{}={value}", flag(p, name)),
        _ => String::new(),
    };
    (
        base(Status::Fail, summary).fix(Fix::new(format!(
            "use {flag_text} (bound successfully here) on every node, or stop {who}"
        ))),
        Some(correction),
    )
}

// ----- launch.legacy -----

fn legacy(
    p: &Parsed,
    plan: &CommandShape,
    script: Option<&str>,
) -> Option<(Finding, Option<Correction>)> {
    if p.launcher != Launcher::Launch {
        return None;
    }
    let rank = plan.rank;
    let subject = "torch.distributed.launch";
    if p.has("use-env") {
        return Some((
            finding("launch.legacy", Status::Warn, rank, subject, "torch.distributed.launch is deprecated; with --use-env it behaves as torchrun (LOCAL_RANK in the environment)".into())
                .fix(Fix::new("replace `python -m torch.distributed.launch --use-env` with `torchrun`")),
            None,
        ));
    }
    let reads_arg = script.map(|s| s.contains("local_rank") || s.contains("local-rank"));
    let script_name = p.script().unwrap_or_default();
    match reads_arg {
        Some(false) => Some((
            finding(
                "launch.legacy",
                Status::Fail,
                rank,
                subject,
                format!("torch.distributed.launch without --use-env passes --local-rank=N to {script_name}, which never mentions local_rank: its argument parser stops with \"unrecognized arguments: --local-rank=0\""),
            )
            .with("script", script_name)
            .fix(Fix::new("add --use-env (the script then reads LOCAL_RANK from the environment), or switch to torchrun")),
            Some(Correction::SetValue { name: "use-env", value: String::new() }),
        )),
        Some(true) => Some((
            finding("launch.legacy", Status::Warn, rank, subject, format!("torch.distributed.launch is deprecated; {script_name} reads local_rank, so --local-rank=N works"))
                .with("script", script_name)
                .fix(Fix::new("switch to torchrun and read LOCAL_RANK from the environment")),
            None,
        )),
        None => Some((
            finding(
                "launch.legacy",
                Status::Warn,
                rank,
                subject,
                format!("torch.distributed.launch without --use-env passes --local-rank=N to {script_name} (torch < 2.0: --local_rank=N); the script must accept it"),
            )
            .with("script", script_name)
            .fix(Fix::new("make the script accept --local-rank (parser.add_argument(\"--local-rank\", \"--local_rank\", type=int)), or add --use-env and read LOCAL_RANK")),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launchline::args::{parse, split_shell_words};
    use preflight_checks::model::{BindResult, PortHolder};

    fn ib_node() -> NodeFacts {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/facts/ib-node.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn held(mut facts: NodeFacts, port: u16) -> NodeFacts {
        facts.ports.port = port;
        facts.ports.ipv4 = BindResult {
            status: BindStatus::InUse,
            error: None,
        };
        facts.ports.suggested_free = Some(port + 1);
        facts.ports.holders = vec![PortHolder {
            pid: Some(4242),
            command: Some("python train.py".into()),
            local_address: format!("0.0.0.0:{port}"),
            inode: 1,
        }];
        facts
    }

    /// Judges one command line on `facts`, resolving the endpoint host to `addrs`.
    fn judge(line: &str, facts: &NodeFacts, addrs: &[&str]) -> Vec<(Finding, Option<Correction>)> {
        let p = parse(split_shell_words(line).unwrap());
        let pl = shape_of(&p);
        let resolved = pl.endpoint.as_ref().map(|(host, _)| Resolved {
            host: host.clone(),
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            error: None,
        });
        let ctx = Context {
            facts,
            resolved,
            script_text: None,
            this_addr: Some("192.168.100.11".into()),
        };
        check(&p, &ctx)
    }

    fn get<'a>(
        all: &'a [(Finding, Option<Correction>)],
        id: &str,
    ) -> &'a (Finding, Option<Correction>) {
        all.iter().find(|(f, _)| f.id == id).unwrap_or_else(|| {
            panic!(
                "no {id} in {:#?}",
                all.iter().map(|(f, _)| &f.id).collect::<Vec<_>>()
            )
        })
    }

    fn status(all: &[(Finding, Option<Correction>)], id: &str) -> Status {
        get(all, id).0.status
    }

    #[test]
    fn a_healthy_two_node_command_passes_everything() {
        let all = judge(
            "torchrun --nnodes=2 --nproc_per_node=8 --node-rank=0 --master-addr=10.1.0.11 --master-port=29500 train.py",
            &ib_node(),
            &["10.1.0.11"],
        );
        for (f, c) in &all {
            assert_eq!(f.status, Status::Pass, "{f:#?}");
            assert!(c.is_none());
            assert_eq!(f.node, Some(0));
        }
    }

    #[test]
    fn more_workers_than_gpus_is_lowered_to_the_visible_count() {
        let all = judge(
            "torchrun --nproc-per-node=16 --standalone t.py",
            &ib_node(),
            &[],
        );
        let (f, c) = get(&all, "launch.nproc");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.evidence["visible_gpus"], 8);
        assert!(f.fix.as_ref().unwrap().hint.contains("--nproc-per-node=8"));
        assert_eq!(
            c,
            &Some(Correction::SetValue {
                name: "nproc-per-node",
                value: "8".into()
            })
        );
        assert_eq!(
            status(
                &judge(
                    "torchrun --nproc-per-node=gpu --standalone t.py",
                    &ib_node(),
                    &[]
                ),
                "launch.nproc"
            ),
            Status::Pass
        );
        assert_eq!(
            status(
                &judge(
                    "torchrun --nproc-per-node=four --standalone t.py",
                    &ib_node(),
                    &[]
                ),
                "launch.nproc"
            ),
            Status::Fail
        );
        assert_eq!(
            status(
                &judge("torchrun --standalone t.py", &ib_node(), &[]),
                "launch.nproc"
            ),
            Status::Warn
        );
    }

    /// Found by the property tests (tests/it/props.rs, `torchrun_word_vectors`), shrunk to
    /// one word: the rank check computed `max - 1` with max 0 and overflowed.
    #[test]
    fn zero_nodes_fails_nnodes_without_overflowing_the_rank_range() {
        for line in [
            "--nnodes=0",
            "torchrun --nnodes=0 t.py",
            "torchrun --nnodes=2:0 --node-rank=1 t.py",
        ] {
            let all = judge(line, &ib_node(), &[]);
            assert_eq!(get(&all, "launch.nnodes").0.status, Status::Fail, "{line}");
            assert!(
                !get(&all, "launch.node-rank")
                    .0
                    .summary
                    .contains("ranks run"),
                "{line}"
            );
        }
    }

    #[test]
    fn node_rank_beyond_nnodes_one_is_reset_to_zero() {
        // github.com/FoundationVision/VAR/issues/108: "stuck for a long time".
        let all = judge(
            "torchrun --nproc_per_node=4 --nnodes=1 --node_rank=3 --master_addr=192.168.1.1 --master_port=12345 train.py",
            &ib_node(),
            &["192.168.1.1"],
        );
        let (f, c) = get(&all, "launch.node-rank");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(3));
        assert_eq!(
            c,
            &Some(Correction::SetValue {
                name: "node-rank",
                value: "0".into()
            })
        );
    }

    #[test]
    fn static_multi_node_without_node_rank_or_nnodes() {
        let all = judge(
            "torchrun --nnodes=2 --master-addr=10.1.0.11 t.py",
            &ib_node(),
            &["10.1.0.11"],
        );
        assert_eq!(status(&all, "launch.node-rank"), Status::Fail);
        let all = judge(
            "torchrun --node-rank=1 --master-addr=10.9.0.1 t.py",
            &ib_node(),
            &["10.9.0.1"],
        );
        let (f, _) = get(&all, "launch.nnodes");
        assert_eq!(f.status, Status::Fail);
        assert!(f.fix.as_ref().unwrap().hint.contains("at least 2"));
        let all = judge("torchrun --nnodes=4:2 --standalone t.py", &ib_node(), &[]);
        assert_eq!(
            get(&all, "launch.nnodes").1,
            Some(Correction::SetValue {
                name: "nnodes",
                value: "2:4".into()
            })
        );
        assert_eq!(
            status(
                &judge("torchrun --nnodes=x t.py", &ib_node(), &[]),
                "launch.nnodes"
            ),
            Status::Fail
        );
        assert_eq!(
            status(
                &judge(
                    "torchrun --nnodes=1:4 --node-rank=0 t.py",
                    &ib_node(),
                    &["127.0.0.1"]
                ),
                "launch.nnodes"
            ),
            Status::Warn
        );
    }

    #[test]
    fn standalone_with_multi_node_flags_is_dropped() {
        let all = judge(
            "torchrun --standalone --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.1.0.11 t.py",
            &ib_node(),
            &["10.1.0.11"],
        );
        let (f, c) = get(&all, "launch.standalone");
        assert_eq!(f.status, Status::Fail);
        assert_eq!(c, &Some(Correction::Remove { name: "standalone" }));
        let alone = judge("torchrun --standalone --rdzv-id=5 t.py", &ib_node(), &[]);
        assert_eq!(status(&alone, "launch.standalone"), Status::Warn);
    }

    #[test]
    fn loopback_endpoint_in_a_multi_node_job_and_a_foreign_master_on_rank_0() {
        // github.com/jamesafranke/ViT_clouds: --nnodes=1:2 --rdzv_endpoint=localhost:6000
        let all = judge(
            "torchrun --nnodes=1:2 --nproc_per_node=4 --rdzv_id=100 --rdzv_backend=c10d --rdzv_endpoint=localhost:6000 t.py",
            &ib_node(),
            &["127.0.0.1"],
        );
        let (f, _) = get(&all, "launch.endpoint");
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.fix.as_ref().unwrap().hint.contains("192.168.100.11:6000"),
            "{f:#?}"
        );
        let foreign = judge(
            "torchrun --nnodes=2 --node-rank=0 --master-addr=10.9.9.9 t.py",
            &ib_node(),
            &["10.9.9.9"],
        );
        assert_eq!(status(&foreign, "launch.endpoint"), Status::Fail);
        let other_rank = judge(
            "torchrun --nnodes=2 --node-rank=1 --master-addr=10.9.9.9 t.py",
            &ib_node(),
            &["10.9.9.9"],
        );
        assert_eq!(status(&other_rank, "launch.endpoint"), Status::Pass);
        assert_eq!(status(&other_rank, "launch.port"), Status::Skip);
    }

    #[test]
    fn an_unresolvable_host_and_a_static_endpoint_without_port_fail() {
        let p = parse(
            split_shell_words("torchrun --nnodes=2 --node-rank=1 --master-addr=nosuch t.py")
                .unwrap(),
        );
        let facts = ib_node();
        let ctx = Context {
            facts: &facts,
            resolved: Some(Resolved {
                host: "nosuch".into(),
                addrs: vec![],
                error: Some("failed to lookup".into()),
            }),
            script_text: None,
            this_addr: None,
        };
        assert_eq!(status(&check(&p, &ctx), "launch.endpoint"), Status::Fail);
        let all = judge(
            "torchrun --nnodes=2 --node-rank=1 --rdzv-endpoint=10.1.0.11 t.py",
            &facts,
            &[],
        );
        assert_eq!(status(&all, "launch.endpoint"), Status::Fail);
        assert_eq!(
            shape_of(&parse(
                split_shell_words("torchrun --rdzv-backend=c10d --rdzv-endpoint=h t.py").unwrap()
            ))
            .endpoint,
            Some(("h".into(), 29400))
        );
    }

    #[test]
    fn a_held_port_moves_to_the_free_one_in_the_flag_that_named_it() {
        let facts = held(ib_node(), 29500);
        let all = judge(
            "torchrun --nnodes=2 --node-rank=0 --master-addr=10.1.0.11 t.py",
            &facts,
            &["10.1.0.11"],
        );
        let (f, c) = get(&all, "launch.port");
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("pid 4242"), "{}", f.summary);
        assert_eq!(
            c,
            &Some(Correction::SetValue {
                name: "master-port",
                value: "29501".into()
            })
        );
        let all = judge(
            "torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.1.0.11:29500 t.py",
            &facts,
            &["10.1.0.11"],
        );
        assert_eq!(
            get(&all, "launch.port").1,
            Some(Correction::SetValue {
                name: "rdzv-endpoint",
                value: "10.1.0.11:29501".into()
            })
        );
        // A c10d node that does not host the endpoint does not bind it.
        let all = judge(
            "torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.9.0.1:29500 t.py",
            &facts,
            &["10.9.0.1"],
        );
        assert_eq!(status(&all, "launch.port"), Status::Skip);
    }

    #[test]
    fn backends_conf_and_unknown_flags() {
        let all = judge(
            "torchrun --rdzv-backend=c10 --rdzv-conf=timeout --nproc-per-nod=2 --standalone t.py",
            &ib_node(),
            &[],
        );
        assert_eq!(
            get(&all, "launch.rdzv-backend").1,
            Some(Correction::SetValue {
                name: "rdzv-backend",
                value: "c10d".into()
            })
        );
        assert_eq!(status(&all, "launch.rdzv-conf"), Status::Fail);
        let (f, c) = get(&all, "launch.unknown-flag");
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.fix
                .as_ref()
                .unwrap()
                .hint
                .contains("did you mean --nproc-per-node"),
            "{f:#?}"
        );
        assert!(c.is_none());
        let etcd = judge(
            "torchrun --rdzv-backend=etcd --rdzv-endpoint=etcd:2379 --nnodes=2 t.py",
            &ib_node(),
            &["10.5.0.1"],
        );
        assert_eq!(status(&etcd, "launch.rdzv-backend"), Status::Warn);
        let use_env = judge("torchrun --use_env --standalone t.py", &ib_node(), &[]);
        assert_eq!(
            get(&use_env, "launch.unknown-flag").1,
            Some(Correction::RemoveWord { index: 1 })
        );
        let missing = judge("torchrun --nnodes", &ib_node(), &[]);
        assert_eq!(status(&missing, "launch.args"), Status::Fail);
    }

    #[test]
    fn legacy_launch_without_use_env_needs_a_script_that_reads_local_rank() {
        let p = parse(
            split_shell_words(
                "python -m torch.distributed.launch --nproc_per_node=2 --standalone main.py",
            )
            .unwrap(),
        );
        let facts = ib_node();
        let with = |text: Option<&str>| {
            let ctx = Context {
                facts: &facts,
                resolved: None,
                script_text: text.map(str::to_string),
                this_addr: None,
            };
            get(&check(&p, &ctx), "launch.legacy").clone()
        };
        let (f, c) = with(Some("import os\nrank = int(os.environ['LOCAL_RANK'])\n"));
        assert_eq!(f.status, Status::Fail);
        assert_eq!(
            c,
            Some(Correction::SetValue {
                name: "use-env",
                value: String::new()
            })
        );
        assert_eq!(
            with(Some("parser.add_argument('--local_rank', type=int)"))
                .0
                .status,
            Status::Warn
        );
        assert_eq!(with(None).0.status, Status::Warn);
        let env = parse(
            split_shell_words("python -m torch.distributed.launch --use_env --standalone main.py")
                .unwrap(),
        );
        let ctx = Context {
            facts: &facts,
            resolved: None,
            script_text: None,
            this_addr: None,
        };
        assert_eq!(get(&check(&env, &ctx), "launch.legacy").1, None);
    }
}

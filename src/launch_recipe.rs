//! `preflight launch`: the recommended launch from a saved cluster report, as torchrun commands, an sbatch script or a Kubernetes `env:` list.
//!
//! Everything comes from the report's `recommendation` (env, node_env, master address and
//! port, the launch commands); nothing is measured here. The node rank of each command is the
//! rank preflight measured, because rank 0 must be the host that owns the master address.

use crate::advise::{env_prefix, shell_quote};
use crate::cli::{LaunchArgs, LaunchFormat, exit};
use preflight_checks::model::{Mode, Recommendation, Report, SCHEMA, Status};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why no launch could be printed; each message says what to rerun.
#[derive(Debug, Error)]
pub enum LaunchError {
    #[error(
        "cannot read the report {path}: {reason}; write it with `preflight cluster --format json -o {path}` (rank 0's file has the whole cluster)"
    )]
    Unreadable { path: PathBuf, reason: String },
    #[error(
        "{path} is not a preflight JSON report ({reason}); give the file written by `preflight cluster --format json -o FILE`"
    )]
    NotAReport { path: PathBuf, reason: String },
    #[error(
        "{path} is a single-node report (mode {mode}); `preflight launch` needs a cluster report: run `preflight cluster ... -o FILE` on every node and give rank 0's file"
    )]
    NotCluster { path: PathBuf, mode: String },
    #[error(
        "{path} has no launch to recommend ({why}); status {status}, failing: {failing}. Fix those findings and rerun `preflight cluster ... -o {path}` on every node"
    )]
    NoRecommendation {
        path: PathBuf,
        why: &'static str,
        status: String,
        failing: String,
    },
    #[error(
        "{path}: {what} {value:?} cannot be put in a shell script or manifest as it is; the report was edited or damaged: rerun `preflight cluster ... -o {path}`"
    )]
    Unsafe {
        path: PathBuf,
        what: &'static str,
        value: String,
    },
}

/// What every format needs, taken out of the report once.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub nnodes: u32,
    pub nproc_per_node: u32,
    pub master_addr: String,
    pub master_port: u16,
    /// Shared by every node.
    pub env: BTreeMap<String, String>,
    /// Per node, in rank order: rank, hostname, its own extra values.
    pub nodes: Vec<PlanNode>,
    /// The script and its arguments, already shell-quoted.
    pub script: String,
    /// Worst status of the report.
    pub status: Status,
    pub source: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlanNode {
    pub rank: u32,
    pub hostname: String,
    pub env: BTreeMap<String, String>,
}

/// Runs `preflight launch`: prints the launch; exit 1 when the report has failing findings.
pub fn run(args: LaunchArgs) -> anyhow::Result<u8> {
    let report = load(&args.report)?;
    let plan = plan(&report, &args)?;
    crate::output::stdout(&render(&plan, args.format))?;
    if matches!(plan.status, Status::Fail | Status::Error) {
        crate::cluster::log(&format!(
            "{} has failing findings (status {}): the launch above is what preflight recommends, but fix those first",
            args.report.display(),
            status_word(plan.status)
        ));
        return Ok(exit::FINDINGS);
    }
    Ok(exit::OK)
}

/// Reads a cluster report, telling a missing file, garbage, and a node report apart.
pub fn load(path: &Path) -> Result<Report, LaunchError> {
    let text = std::fs::read_to_string(path).map_err(|e| LaunchError::Unreadable {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let not_report = |reason: String| LaunchError::NotAReport {
        path: path.into(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_report(format!("not JSON: {e}")))?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(other) => return Err(not_report(format!("schema {other:?}, expected {SCHEMA:?}"))),
        None => return Err(not_report("no \"schema\" field".into())),
    }
    let report: Report =
        serde_json::from_value(value).map_err(|e| not_report(format!("bad field: {e}")))?;
    if report.mode != Mode::Cluster {
        return Err(LaunchError::NotCluster {
            path: path.into(),
            mode: "node".into(),
        });
    }
    Ok(report)
}

fn status_word(s: Status) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{s:?}"))
}

/// Works out nodes, env, master and script from the report and the flags.
pub fn plan(report: &Report, args: &LaunchArgs) -> Result<Plan, LaunchError> {
    let path = args.report.as_path();
    let no_rec = |why| {
        let failing: Vec<String> = report
            .findings
            .iter()
            .filter(|f| matches!(f.status, Status::Fail | Status::Error))
            .map(|f| match f.node {
                Some(r) => format!("{} on rank {r}", f.id),
                None => f.id.clone(),
            })
            .collect();
        LaunchError::NoRecommendation {
            path: path.into(),
            why,
            status: status_word(report.status),
            failing: if failing.is_empty() {
                "none".into()
            } else {
                failing.join(", ")
            },
        }
    };
    let rec = report
        .recommendation
        .as_ref()
        .ok_or_else(|| no_rec("the cluster run did not complete"))?;
    let first = rec.launch.first().ok_or_else(|| no_rec("no node joined"))?;
    let master_addr = rec
        .master_addr
        .clone()
        .ok_or_else(|| no_rec("no network reaches every node, so there is no master address"))?;
    let nnodes = flag_value(&first.command, "--nnodes=")
        .unwrap_or(rec.launch.len() as u32)
        .max(1);
    let nproc_per_node = args
        .nproc_per_node
        .or_else(|| flag_value(&first.command, "--nproc-per-node="))
        .unwrap_or(1);
    let nodes = rec
        .launch
        .iter()
        .map(|l| PlanNode {
            rank: l.node_rank,
            hostname: report
                .nodes
                .iter()
                .find(|n| n.rank == l.node_rank)
                .map(|n| n.hostname.clone())
                .unwrap_or_default(),
            env: rec
                .node_env
                .get(&l.node_rank.to_string())
                .cloned()
                .unwrap_or_default(),
        })
        .collect();
    let plan = Plan {
        nnodes,
        nproc_per_node,
        master_addr,
        master_port: rec.master_port,
        env: rec.env.clone(),
        nodes,
        script: script_words(args, rec),
        status: report.status,
        source: path.display().to_string(),
    };
    check_safe(&plan, path)?;
    Ok(plan)
}

/// `--script S -- args`, or `-- S args`, else the script in the report's own commands, else train.py.
fn script_words(args: &LaunchArgs, rec: &Recommendation) -> String {
    let words: Vec<String> = args
        .script
        .iter()
        .chain(args.script_args.iter())
        .cloned()
        .collect();
    if !words.is_empty() {
        return words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
    }
    let marker = format!("--master-port={} ", rec.master_port);
    rec.launch
        .first()
        .and_then(|l| l.command.split_once(&marker))
        .map(|(_, tail)| tail.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "train.py".into())
}

/// The number after `flag` (e.g. `--nnodes=`) in one of our own torchrun commands.
fn flag_value(command: &str, flag: &str) -> Option<u32> {
    command
        .split_whitespace()
        .find_map(|w| w.strip_prefix(flag))
        .and_then(|v| v.parse().ok())
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_host_like(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:[]%".contains(c))
}

/// Names and hosts go into scripts unquoted in places: refuse anything but plain ones.
fn check_safe(plan: &Plan, path: &Path) -> Result<(), LaunchError> {
    let unsafe_ = |what, value: &str| LaunchError::Unsafe {
        path: path.into(),
        what,
        value: value.into(),
    };
    let names = plan
        .env
        .keys()
        .chain(plan.nodes.iter().flat_map(|n| n.env.keys()));
    if let Some(bad) = names.into_iter().find(|k| !is_var_name(k)) {
        return Err(unsafe_("the variable name", bad));
    }
    if !is_host_like(&plan.master_addr) {
        return Err(unsafe_("the master address", &plan.master_addr));
    }
    if let Some(n) = plan
        .nodes
        .iter()
        .find(|n| !n.hostname.is_empty() && !is_host_like(&n.hostname))
    {
        return Err(unsafe_("the hostname", &n.hostname));
    }
    Ok(())
}

/// The launch in `format`.
pub fn render(plan: &Plan, format: LaunchFormat) -> String {
    match format {
        LaunchFormat::Torchrun => torchrun(plan),
        LaunchFormat::Sbatch => sbatch(plan),
        LaunchFormat::K8sEnv => k8s_env(plan),
    }
}

fn header(plan: &Plan, format: &str) -> String {
    format!(
        "# preflight launch --format {format}: from {} (status {}, {} node(s) measured)\n",
        plan.source,
        status_word(plan.status),
        plan.nodes.len()
    )
}

fn node_label(n: &PlanNode) -> String {
    if n.hostname.is_empty() {
        format!("node rank {}", n.rank)
    } else {
        format!("node rank {} ({})", n.rank, n.hostname)
    }
}

fn torchrun_args(plan: &Plan, rank: &str, addr: &str, port: &str) -> String {
    format!(
        "torchrun --nnodes={} --nproc-per-node={} --node-rank={rank} --master-addr={addr} --master-port={port} {}",
        plan.nnodes, plan.nproc_per_node, plan.script
    )
}

fn torchrun(plan: &Plan) -> String {
    let mut out = header(plan, "torchrun");
    out.push_str("# Run each line on its node.\n");
    let port = plan.master_port.to_string();
    for n in &plan.nodes {
        let mut env = plan.env.clone();
        env.extend(n.env.clone());
        let prefix = env_prefix(&env);
        let sep = if prefix.is_empty() { "" } else { " " };
        out.push_str(&format!("# {}\n", node_label(n)));
        out.push_str(&format!(
            "{prefix}{sep}{}\n",
            torchrun_args(plan, &n.rank.to_string(), &plan.master_addr, &port)
        ));
    }
    out
}

fn short(host: &str) -> &str {
    host.split('.').next().unwrap_or(host)
}

fn sbatch(plan: &Plan) -> String {
    let mut out = String::from("#!/bin/bash\n");
    out.push_str(&format!("#SBATCH --nodes={}\n", plan.nnodes));
    out.push_str("#SBATCH --ntasks-per-node=1\n");
    out.push_str(&format!(
        "#SBATCH --gpus-per-node={}\n",
        plan.nproc_per_node
    ));
    let hosts: Vec<&str> = plan
        .nodes
        .iter()
        .map(|n| short(&n.hostname))
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.len() == plan.nodes.len() && !hosts.is_empty() {
        out.push_str(&format!("#SBATCH --nodelist={}\n", hosts.join(",")));
    }
    out.push_str(&header(plan, "sbatch"));
    out.push_str(
        "# The environment was measured on the nodes in --nodelist; on other nodes run\n\
         # examples/slurm/preflight.sbatch there first. Node ranks follow preflight's ranks:\n\
         # rank 0 must be the host that owns MASTER_ADDR.\n\
         set -euo pipefail\n\n",
    );
    for (k, v) in &plan.env {
        out.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    out.push_str(&format!(
        "export MASTER_ADDR={}\nexport MASTER_PORT={}\n\n",
        shell_quote(&plan.master_addr),
        plan.master_port
    ));
    // The per-node part runs on every node under srun; the script words travel as "$@".
    let mut body = String::from("case \"${SLURMD_NODENAME:-$(hostname -s)}\" in\n");
    for n in &plan.nodes {
        let pattern = if n.hostname.is_empty() {
            format!("rank{}-unknown-host", n.rank)
        } else {
            let s = short(&n.hostname);
            format!("{s}|{s}.*")
        };
        let own: String = n
            .env
            .iter()
            .map(|(k, v)| format!("; export {k}={}", shell_quote(v)))
            .collect();
        body.push_str(&format!("  {pattern}) NODE_RANK={}{own} ;;\n", n.rank));
    }
    body.push_str(
        "  *) echo \"preflight launch: node $(hostname) was not measured by preflight; rerun preflight cluster on this allocation\" >&2; exit 2 ;;\n\
         esac\n",
    );
    body.push_str(&format!(
        "exec torchrun --nnodes={} --nproc-per-node={} --node-rank=\"$NODE_RANK\" --master-addr=\"$MASTER_ADDR\" --master-port=\"$MASTER_PORT\" \"$@\"\n",
        plan.nnodes, plan.nproc_per_node
    ));
    out.push_str(&format!(
        "srun --kill-on-bad-exit=1 bash -c {} bash {}\n",
        shell_quote(&body),
        plan.script
    ));
    out
}

fn yaml_str(v: &str) -> String {
    // A JSON string is a valid YAML double-quoted scalar.
    serde_json::to_string(v).unwrap_or_else(|_| "\"\"".into())
}

fn k8s_env(plan: &Plan) -> String {
    let mut out = header(plan, "k8s-env");
    out.push_str(
        "# Paste under the container's `env:`. torchrun reads PET_NNODES and PET_NPROC_PER_NODE as\n\
         # --nnodes and --nproc-per-node; give it --node-rank=$(JOB_COMPLETION_INDEX) in an Indexed Job.\n",
    );
    out.push_str(&format!(
        "# MASTER_ADDR: use pod 0's stable name (<job>-0.<headless-service>); preflight measured rank 0 at {}.\n",
        plan.master_addr
    ));
    let mut vars: Vec<(String, String)> = plan
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    vars.push(("MASTER_PORT".into(), plan.master_port.to_string()));
    vars.push(("PET_NNODES".into(), plan.nnodes.to_string()));
    vars.push(("PET_NPROC_PER_NODE".into(), plan.nproc_per_node.to_string()));
    for (k, v) in vars {
        out.push_str(&format!("- name: {k}\n  value: {}\n", yaml_str(&v)));
    }
    let own: Vec<&PlanNode> = plan.nodes.iter().filter(|n| !n.env.is_empty()).collect();
    if !own.is_empty() {
        out.push_str(
            "# Per-node values (these differ between nodes; set them in that pod only, or in a wrapper\n\
             # that switches on JOB_COMPLETION_INDEX):\n",
        );
        for n in own {
            let vals: Vec<String> = n.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("#   {}: {}\n", node_label(n), vals.join(" ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_and_names() {
        let c = "A=1 torchrun --nnodes=4 --nproc-per-node=8 --node-rank=0 --master-addr=x --master-port=29500 t.py";
        assert_eq!(flag_value(c, "--nnodes="), Some(4));
        assert_eq!(flag_value(c, "--nproc-per-node="), Some(8));
        assert_eq!(flag_value(c, "--missing="), None);
        assert!(is_var_name("NCCL_IB_HCA"));
        assert!(!is_var_name("A;B"));
        assert!(!is_var_name("1A"));
        assert!(is_host_like("fd00::1"));
        assert!(!is_host_like("a b"));
        assert!(!is_host_like("$(x)"));
    }
}

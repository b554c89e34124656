//! The recommended launch taken out of a saved cluster report (`preflight launch`): nodes, env,
//! master and script, checked safe to put into a script; `render::launch` prints it.
//!
//! Everything comes from the report's `recommendation` (env, node_env, master address and
//! port, the launch commands); nothing is measured here. The node rank of each command is the
//! rank preflight measured, because rank 0 must be the host that owns the master address.

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
pub struct LaunchPlan {
    pub nnodes: u32,
    pub nproc_per_node: u32,
    pub master_addr: String,
    pub master_port: u16,
    /// Shared by every node.
    pub env: BTreeMap<String, String>,
    /// Per node, in rank order: rank, hostname, its own extra values.
    pub nodes: Vec<LaunchNode>,
    /// The script and its arguments, already shell-quoted.
    pub script: String,
    /// Worst status of the report.
    pub status: Status,
    pub source: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LaunchNode {
    pub rank: u32,
    pub hostname: String,
    pub env: BTreeMap<String, String>,
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

/// Works out nodes, env, master and script from the report and the flags.
pub fn plan(
    report: &Report,
    path: &Path,
    nproc_per_node: Option<u32>,
    script: &[String],
) -> Result<LaunchPlan, LaunchError> {
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
            status: report.status.to_string(),
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
    let nproc_per_node = nproc_per_node
        .or_else(|| flag_value(&first.command, "--nproc-per-node="))
        .unwrap_or(1);
    let nodes = rec
        .launch
        .iter()
        .map(|l| LaunchNode {
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
    let plan = LaunchPlan {
        nnodes,
        nproc_per_node,
        master_addr,
        master_port: rec.master_port,
        env: rec.env.clone(),
        nodes,
        script: script_words(script, rec),
        status: report.status,
        source: path.display().to_string(),
    };
    check_safe(&plan, path)?;
    Ok(plan)
}

/// `--script S -- args`, or `-- S args`, else the script in the report's own commands, else train.py.
fn script_words(words: &[String], rec: &Recommendation) -> String {
    if !words.is_empty() {
        return words
            .iter()
            .map(|w| crate::shell::quote(w))
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
fn check_safe(plan: &LaunchPlan, path: &Path) -> Result<(), LaunchError> {
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

//! The recommended launch taken out of a saved cluster report (`preflight launch`): nodes, env,
//! master and script, checked safe to put into a script; `render::launch` prints it.
//!
//! Everything comes from the report's `recommendation` (env, node_env, master address and
//! port, the launch commands); nothing is measured here. The node rank of each command is the
//! rank preflight measured, because rank 0 must be the host that owns the master address.
//!
//! A report is data from other machines (or a file someone edited), never a script: every
//! command is built again from structured fields, each word shell-quoted. The script words are
//! the report's own first command split into shell words (the caller passes the splitter,
//! `launchline::args::split_shell`) and quoted one by one, so `; touch X #` in a report is an
//! argument, never a command. Names and hosts must be plain, and no value may hold a control
//! character or a bidi override; a report that breaks either is refused, naming the field.

use preflight_checks::model::{
    HealthySetAdvice, LaunchCommand, Mode, Recommendation, Report, SCHEMA, Status,
};
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
        "cannot read the report {path}: {reason}; give the JSON file written by `preflight cluster --format json -o FILE` (rank 0's file has the whole cluster)"
    )]
    NotAFile { path: PathBuf, reason: String },
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
        "{path} has no healthy set (status {status}): preflight computes one only when the cluster fails; a report written before it, or of a passing cluster, launches on every node with `preflight launch --report {path}` (or, without the nodes link.slow names slow, with `--healthy-set --exclude-slow`)"
    )]
    NoHealthySet { path: PathBuf, status: String },
    #[error(
        "{path}: the healthy set cannot be launched: {why}. Fix those findings and rerun `preflight cluster ... -o {path}`, or give lower --min-nodes / --nodes-multiple-of"
    )]
    HealthySetTooSmall { path: PathBuf, why: String },
    #[error(
        "{path}: {field} = {value} {why}, so it cannot be put in a shell script or manifest; the report was edited or damaged: rerun `preflight cluster ... -o {path}`"
    )]
    Unsafe {
        path: PathBuf,
        /// Where in the report, as a JSON path (`recommendation.master_addr`).
        field: String,
        /// The value, Debug-quoted (control characters escaped) and cut to 200 characters.
        value: String,
        why: String,
    },
}

/// Most bytes a saved report may hold. It grows with the square of the node count (one link
/// per ordered pair, per network): 8 nodes are 160 KB, about 1000 nodes 300 MB. A FIFO, a
/// device or a bigger file is refused before anything is read.
pub const MAX_REPORT: u64 = 512 << 20;

/// What a saved report may hold, counted before it is parsed: values, items and strings at
/// the scale of the largest cluster (4096 nodes; about 1000 with every link), so a file of
/// millions of empty entries is refused, not parsed.
pub const REPORT_BUDGET: preflight_checks::budget::Budget = preflight_checks::budget::Budget {
    what: "the report",
    bytes: MAX_REPORT as usize,
    values: 16 << 20,
    items: 4 << 20,
    // The longest legitimate string is a network's `link_matrix` (one byte per ordered pair,
    // deflated and base64): 16.7 million pairs at 4096 nodes, tens of MiB at most.
    string: 64 << 20,
    depth: 32,
    paths: &[("nodes", 4096), ("nodes[].facts.net.interfaces", 4096)],
};

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
    /// Set when the report's ranks were assigned at join (`placement.source` "c10d-join"):
    /// the commands keep torchrun's c10d rendezvous and give no `--node-rank`.
    pub c10d: Option<C10dLaunch>,
    /// Set for `--healthy-set`: the launch is on the healthy set only (`nodes` are its nodes,
    /// `rank` their rank within it).
    pub healthy: Option<HealthyPlan>,
}

/// What the healthy-set formats need beyond the nodes of the set.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct HealthyPlan {
    /// Nodes the job expected.
    pub total: u32,
    /// The set's hosts in hostlist syntax.
    pub hosts: String,
    /// The excluded hosts in hostlist syntax ("" when none).
    pub exclude: String,
    /// Each excluded node: hostname, its finding ids, and its Kubernetes node name when its
    /// pod's environment gave one (`PREFLIGHT_NODE_NAME` or `NODE_NAME` from `spec.nodeName`).
    pub excluded: Vec<(String, Vec<String>, Option<String>)>,
}

/// torchrun's c10d rendezvous, as the report's own commands use it.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct C10dLaunch {
    /// `--rdzv-id`, unquoted, when the report's commands carry one.
    pub rdzv_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LaunchNode {
    pub rank: u32,
    pub hostname: String,
    pub env: BTreeMap<String, String>,
}

/// Reads a cluster report, telling a missing file, garbage, and a node report apart. Only a
/// regular file of at most [`MAX_REPORT`] bytes is read (a FIFO or a device is refused unopened).
pub fn load(path: &Path) -> Result<Report, LaunchError> {
    let report = read(path)?;
    if report.mode != Mode::Cluster {
        return Err(LaunchError::NotCluster {
            path: path.into(),
            mode: "node".into(),
        });
    }
    Ok(report)
}

/// Reads a saved report of either mode (`preflight render`), with [`load`]'s checks: a regular
/// file of at most [`MAX_REPORT`] bytes, UTF-8 JSON with this schema.
pub fn read(path: &Path) -> Result<Report, LaunchError> {
    use preflight_checks::root::{FileError, read_regular};
    let unreadable = |reason: String| LaunchError::Unreadable {
        path: path.into(),
        reason,
    };
    let bytes = read_regular(path, MAX_REPORT).map_err(|e| match e {
        FileError::Io(e) => unreadable(e.to_string()),
        refused => LaunchError::NotAFile {
            path: path.into(),
            reason: refused.to_string(),
        },
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| unreadable("stream did not contain valid UTF-8".into()))?;
    let not_report = |reason: String| LaunchError::NotAReport {
        path: path.into(),
        reason,
    };
    preflight_checks::budget::scan(text.as_bytes(), &REPORT_BUDGET)
        .map_err(|e| not_report(e.to_string()))?;
    // The schema first (the rest skipped unallocated), then the typed report: no tree of
    // JSON values is built for the whole file.
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<serde_json::Value>,
    }
    let head: Head =
        serde_json::from_str(&text).map_err(|e| not_report(format!("not JSON: {e}")))?;
    match head.schema.as_ref().map(|s| s.as_str()) {
        Some(Some(SCHEMA)) => {}
        Some(Some(other)) => {
            return Err(not_report(format!("schema {other:?}, expected {SCHEMA:?}")));
        }
        Some(None) => {
            return Err(not_report(format!(
                "schema {}, expected {SCHEMA:?}",
                head.schema.unwrap_or_default()
            )));
        }
        None => return Err(not_report("no \"schema\" field".into())),
    }
    let mut report: Report =
        serde_json::from_str(&text).map_err(|e| not_report(format!("bad field: {e}")))?;
    // A report saved before findings carried their action gets its catalog's.
    preflight_checks::registry::assign_remedies(&mut report.findings);
    Ok(report)
}

/// How the caller splits a command line into shell words (`launchline::args::split_shell`).
pub type SplitWords<'a> = &'a dyn Fn(&str) -> Result<Vec<String>, String>;

/// Works out nodes, env, master and script from the report and the flags; `split` splits the
/// report's own command when no script is given.
pub fn plan(
    report: &Report,
    path: &Path,
    nproc_per_node: Option<u32>,
    script: &[String],
    split: SplitWords,
) -> Result<LaunchPlan, LaunchError> {
    let host = |rank: u32| {
        report
            .nodes
            .iter()
            .find(|n| n.rank == rank)
            .map(|n| n.hostname.clone())
            .unwrap_or_default()
    };
    plan_from(
        report,
        report.recommendation.as_ref(),
        &host,
        path,
        nproc_per_node,
        script,
        split,
    )
}

/// The launch on the report's healthy set (`preflight launch --healthy-set`): `set` is the
/// report's own `recommendation.healthy_set`, or one computed again with other constraints.
pub fn plan_healthy(
    report: &Report,
    set: Option<&HealthySetAdvice>,
    path: &Path,
    nproc_per_node: Option<u32>,
    script: &[String],
    split: SplitWords,
) -> Result<LaunchPlan, LaunchError> {
    let Some(set) = set else {
        return Err(LaunchError::NoHealthySet {
            path: path.into(),
            status: report.status.to_string(),
        });
    };
    if !set.constraints.met {
        return Err(LaunchError::HealthySetTooSmall {
            path: path.into(),
            why: set
                .why
                .clone()
                .unwrap_or_else(|| "it misses the constraints".into()),
        });
    }
    // The set's own recommendation, its node ranks being the ranks within the set.
    let rec = Recommendation {
        env: set.env.clone(),
        node_env: set
            .launch
            .iter()
            .filter_map(|l| {
                Some((
                    l.node_rank.to_string(),
                    set.node_env.get(&l.node.to_string())?.clone(),
                ))
            })
            .collect(),
        master_addr: set.master_addr.clone(),
        master_port: set.master_port,
        launch: set
            .launch
            .iter()
            .map(|l| LaunchCommand {
                node_rank: l.node_rank,
                command: l.command.clone(),
            })
            .collect(),
        ..Default::default()
    };
    let host = |rank: u32| {
        set.launch
            .iter()
            .find(|l| l.node_rank == rank)
            .map(|l| l.hostname.clone())
            .unwrap_or_default()
    };
    let mut plan = plan_from(
        report,
        Some(&rec),
        &host,
        path,
        nproc_per_node,
        script,
        split,
    )?;
    // Ranks within the set come from the set, whatever the report's placement was.
    plan.c10d = None;
    let k8s_name = |rank: u32| {
        let env = &report.node(rank)?.facts.env;
        env.get("PREFLIGHT_NODE_NAME")
            .or_else(|| env.get("NODE_NAME"))
            .filter(|v| is_host_like(v))
            .cloned()
    };
    plan.healthy = Some(HealthyPlan {
        total: set.total,
        hosts: set.hosts.clone(),
        exclude: set.exclude_hosts.clone(),
        excluded: set
            .excluded
            .iter()
            .map(|e| (e.hostname.clone(), e.reasons.clone(), k8s_name(e.node)))
            .collect(),
    });
    let refuse = |field: &str, value: &str| {
        Err(unsafe_value(
            path,
            field.into(),
            value,
            "is not a plain host list (letters, digits and -_.:[],% only)".into(),
        ))
    };
    let list_like = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:[]%,".contains(c))
    };
    if !list_like(&set.hosts) {
        return refuse("recommendation.healthy_set.hosts", &set.hosts);
    }
    if !list_like(&set.exclude_hosts) {
        return refuse(
            "recommendation.healthy_set.exclude_hosts",
            &set.exclude_hosts,
        );
    }
    if let Some(e) = set
        .excluded
        .iter()
        .find(|e| !e.hostname.is_empty() && !is_host_like(&e.hostname))
    {
        return refuse(
            "recommendation.healthy_set.excluded[].hostname",
            &e.hostname,
        );
    }
    Ok(plan)
}

fn plan_from(
    report: &Report,
    rec: Option<&Recommendation>,
    host: &dyn Fn(u32) -> String,
    path: &Path,
    nproc_per_node: Option<u32>,
    script: &[String],
    split: SplitWords,
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
    let rec = rec.ok_or_else(|| no_rec("the cluster run did not complete"))?;
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
            hostname: host(l.node_rank),
            env: rec
                .node_env
                .get(&l.node_rank.to_string())
                .cloned()
                .unwrap_or_default(),
        })
        .collect();
    let c10d = report
        .placement
        .as_ref()
        .is_some_and(|p| p.source == crate::placement::C10D_JOIN);
    let c10d = if c10d {
        Some(C10dLaunch {
            rdzv_id: rdzv_id(rec, path, split)?,
        })
    } else {
        None
    };
    let plan = LaunchPlan {
        nnodes,
        nproc_per_node,
        master_addr,
        master_port: rec.master_port,
        env: rec.env.clone(),
        nodes,
        script: script_words(script, rec, path, split, c10d.is_some())?,
        status: report.status,
        source: path.display().to_string(),
        c10d,
        healthy: None,
    };
    check_safe(&plan, path)?;
    Ok(plan)
}

fn quote_all(words: &[String]) -> String {
    words
        .iter()
        .map(|w| crate::shell::quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `--rdzv-id=ID` of the report's first command (split as a shell would), if any.
fn rdzv_id(
    rec: &Recommendation,
    path: &Path,
    split: SplitWords,
) -> Result<Option<String>, LaunchError> {
    let Some(all) = first_command_words(rec, path, split)? else {
        return Ok(None);
    };
    let id = all
        .iter()
        .find_map(|w| w.strip_prefix("--rdzv-id="))
        .map(str::to_string);
    if let Some(id) = id.as_deref().filter(|id| has_control(id)) {
        return Err(control_in_first_command(path, id));
    }
    Ok(id)
}

/// `--script S -- args`, or `-- S args`, else the words after `--master-port=N` (c10d: after
/// the last `--rdzv-*` flag) in the report's first command (split as a shell would, then each
/// quoted again), else train.py.
fn script_words(
    words: &[String],
    rec: &Recommendation,
    path: &Path,
    split: SplitWords,
    c10d: bool,
) -> Result<String, LaunchError> {
    if !words.is_empty() {
        return Ok(quote_all(words));
    }
    let Some(all) = first_command_words(rec, path, split)? else {
        return Ok("train.py".into());
    };
    let marker = format!("--master-port={}", rec.master_port);
    let at = if c10d {
        all.iter().rposition(|w| w.starts_with("--rdzv-"))
    } else {
        all.iter().position(|w| *w == marker)
    };
    let tail = match at {
        Some(i) => &all[i + 1..],
        None => &[][..],
    };
    if let Some(w) = tail.iter().find(|w| has_control(w)) {
        return Err(control_in_first_command(path, w));
    }
    Ok(if tail.is_empty() {
        "train.py".into()
    } else {
        quote_all(tail)
    })
}

/// Where the report's own command stands, as refusals name it.
const FIRST_COMMAND: &str = "recommendation.launch[0].command";
const CONTROL: &str = "holds a control character or a bidi override";

/// The report's first command split as a shell would; None when it has none.
fn first_command_words(
    rec: &Recommendation,
    path: &Path,
    split: SplitWords,
) -> Result<Option<Vec<String>>, LaunchError> {
    let Some(first) = rec.launch.first() else {
        return Ok(None);
    };
    split(&first.command).map(Some).map_err(|e| {
        unsafe_value(
            path,
            FIRST_COMMAND.into(),
            &first.command,
            format!("does not split into shell words ({e})"),
        )
    })
}

/// The refusal of a word of the report's first command that holds a control character.
fn control_in_first_command(path: &Path, word: &str) -> LaunchError {
    unsafe_value(path, FIRST_COMMAND.into(), word, CONTROL.into())
}

/// A refusal naming the field; the value is Debug-quoted and cut, whatever it holds.
fn unsafe_value(path: &Path, field: String, value: &str, why: String) -> LaunchError {
    const SHOWN: usize = 200;
    let mut shown: String = value.chars().take(SHOWN).collect();
    let cut = shown.len() < value.len();
    shown = format!("{shown:?}");
    if cut {
        shown.push_str(&format!(" (cut; {} bytes in all)", value.len()));
    }
    LaunchError::Unsafe {
        path: path.into(),
        field,
        value: shown,
        why,
    }
}

fn has_control(s: &str) -> bool {
    s.chars().any(crate::shell::is_control)
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

/// Names and hosts go into scripts unquoted in places: refuse anything but plain ones. Values
/// are always quoted, but one with a control character would still reach a terminal or break a
/// comment line: refuse those too.
fn check_safe(plan: &LaunchPlan, path: &Path) -> Result<(), LaunchError> {
    let refuse = |field: String, value: &str, why: &str| {
        Err(unsafe_value(path, field, value, why.to_string()))
    };
    const NOT_A_NAME: &str = "is not a shell variable name ([A-Za-z_][A-Za-z0-9_]*)";
    for (k, v) in &plan.env {
        if !is_var_name(k) {
            return refuse("recommendation.env".into(), k, NOT_A_NAME);
        }
        if has_control(v) {
            return refuse(format!("recommendation.env.{k}"), v, CONTROL);
        }
    }
    for n in &plan.nodes {
        for (k, v) in &n.env {
            let field = format!("recommendation.node_env.\"{}\"", n.rank);
            if !is_var_name(k) {
                return refuse(field, k, NOT_A_NAME);
            }
            if has_control(v) {
                return refuse(format!("{field}.{k}"), v, CONTROL);
            }
        }
    }
    const NOT_A_HOST: &str =
        "is not a plain host name or address (letters, digits and -_.:[]% only)";
    if !is_host_like(&plan.master_addr) {
        return refuse(
            "recommendation.master_addr".into(),
            &plan.master_addr,
            NOT_A_HOST,
        );
    }
    if let Some(n) = plan
        .nodes
        .iter()
        .find(|n| !n.hostname.is_empty() && !is_host_like(&n.hostname))
    {
        return refuse(
            format!("the hostname of rank {} (nodes[].hostname)", n.rank),
            &n.hostname,
            NOT_A_HOST,
        );
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

    fn split(line: &str) -> Result<Vec<String>, String> {
        crate::launchline::args::split_shell(line).map_err(|e| e.to_string())
    }

    fn rec_with(command: &str) -> Recommendation {
        Recommendation {
            master_port: 29500,
            launch: vec![preflight_checks::model::LaunchCommand {
                node_rank: 0,
                command: command.into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn script_words_are_split_and_quoted_again() {
        let p = Path::new("r.json");
        let head = "A=1 torchrun --nnodes=2 --master-port=29500 ";
        let words =
            |tail: &str| script_words(&[], &rec_with(&format!("{head}{tail}")), p, &split, false);
        assert_eq!(
            words("train.py --config 'my run.yaml'").unwrap(),
            "train.py --config 'my run.yaml'"
        );
        assert_eq!(words("t.py; touch X #").unwrap(), "'t.py;' touch X '#'");
        assert_eq!(words("$(touch X)").unwrap(), "'$(touch' 'X)'");
        assert_eq!(words("`touch X`").unwrap(), "'`touch' 'X`'");
        assert_eq!(words("t.py\ntouch X").unwrap(), "t.py touch X");
        assert_eq!(words("").unwrap(), "train.py");
        let e = words("t.py 'a\u{1b}b'").unwrap_err().to_string();
        assert!(e.contains("recommendation.launch[0].command"), "{e}");
        assert!(
            e.contains("control character") && !e.contains('\u{1b}'),
            "{e}"
        );
        let e = words("t.py 'open").unwrap_err().to_string();
        assert!(e.contains("does not split into shell words"), "{e}");
        // Words given on the command line win and are quoted as they are.
        let given = ["my train.py".to_string(), "--x".into()];
        assert_eq!(
            script_words(&given, &rec_with("junk 'open"), p, &split, false).unwrap(),
            "'my train.py' --x"
        );
    }
}

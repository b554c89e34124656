//! `preflight check --slurm-health` (HealthCheckProgram) and `--slurm-prolog` (Prolog): the
//! node's verdict as Slurm's contract wants it, and with `--drain` the node drained with a
//! reason a person can act on, `preflight: <finding id>: <short cause>` (as LBNL NHC does).
//!
//! Slurm only logs a health check's exit status, so the health mode drains (and later resumes)
//! the node itself, for the node's problems only (a user problem fails the check but leaves the
//! node in service; the reason carries `[node_problem]` and the action); a prolog's non-zero exit makes Slurm drain the node ("Prolog error") and
//! requeue the job, and a reason set first is kept, so `--drain` there names the cause.

pub mod decide;
pub mod scontrol;

use crate::cli::exit;
use crate::config::{SlurmHook, SlurmMode};
use crate::render::{drain, sanitize};
use decide::{Action, NodeState, decide};
use preflight_checks::model::{Action as ModelAction, Finding, Problem, Report, Status};
use scontrol::Slurm;

/// What the hook did, in lines for stdout, and the exit status Slurm gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookResult {
    pub lines: Vec<String>,
    pub code: u8,
}

/// Findings shown per run; the reason counts the rest.
const SHOWN: usize = 5;

/// The findings that make the node unfit: `fail` (with `strict`, `warn` too), fails first, and
/// among them the node's problems first, the costliest action first. A lemon (a fault that
/// comes and goes) while the node passes now is said, not drained for, unless `drain_lemons`.
pub fn unfit(report: &Report, strict: bool, drain_lemons: bool) -> Vec<&Finding> {
    let mut v: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| {
            let lemon = f.is(preflight_checks::history::ids::LEMON);
            (!lemon && (f.status == Status::Fail || (strict && f.status == Status::Warn)))
                || (lemon && drain_lemons)
        })
        .collect();
    v.sort_by_key(|f| {
        std::cmp::Reverse((
            f.status,
            node_problem(f),
            f.action.unwrap_or(ModelAction::None),
        ))
    });
    v
}

/// The lemons the report names (said in the verdict and the drain reason, drained for only with
/// `--drain-lemons`).
fn lemons(report: &Report) -> Vec<&Finding> {
    report
        .findings
        .iter()
        .filter(|f| f.is(preflight_checks::history::ids::LEMON))
        .collect()
}

/// The node's problem, or one whose owner is not known (a report of an older release): what a
/// health check drains for. A user problem (the job's launch or environment) is not.
pub fn node_problem(f: &Finding) -> bool {
    f.problem != Some(Problem::User)
}

/// The findings the hook drains for: the node's problems only, in the health check and in the
/// prolog alike (a prolog that fails makes Slurm drain the node, so a user problem there, such
/// as a port another running job holds, passes the prolog and fails the job's tasks in its
/// TaskProlog instead).
fn drain_worthy<'a>(bad: &[&'a Finding]) -> Vec<&'a Finding> {
    bad.iter().copied().filter(|f| node_problem(f)).collect()
}

/// The node's Slurm name: `--slurm-node`/SLURMD_NODENAME, else the hostname up to its first dot.
pub fn node_name(hook: &SlurmHook, report: &Report) -> String {
    hook.node.clone().unwrap_or_else(|| {
        let h = report
            .nodes
            .first()
            .map(|n| n.hostname.as_str())
            .unwrap_or_default();
        h.split('.').next().unwrap_or_default().to_string()
    })
}

/// Runs the hook over this node's report.
pub fn run(hook: &SlurmHook, report: &Report, slurm: &dyn Slurm) -> HookResult {
    let node = node_name(hook, report);
    let bad = unfit(report, hook.strict, hook.drain_lemons);
    let mut lines = verdict_lines(&node, &bad, report);
    let worthy = drain_worthy(&bad);
    let user_only = worthy.is_empty() && !bad.is_empty();
    let lemons = lemons(report);
    if !hook.drain_lemons {
        for l in &lemons {
            lines.push(format!(
                "preflight: {node}: lemon, not drained for (it passes now; --drain-lemons drains): {}",
                sanitize::line(&l.summary)
            ));
        }
    }
    // Health: Slurm only logs the status. Prolog: a failing exit drains the node and requeues
    // the job, so only the node's own problems fail it.
    let verdict = match hook.mode {
        SlurmMode::Prolog if user_only => exit::OK,
        _ if bad.is_empty() => exit::OK,
        _ => exit::FINDINGS,
    };
    // The reason: the drain-worthy findings, then the lemons the operator should know of.
    let mut parts: Vec<drain::Part> = worthy.iter().map(|f| drain::part(f)).collect();
    if !parts.is_empty() && !hook.drain_lemons {
        parts.extend(lemons.iter().map(|f| drain::part(f)));
    }
    if user_only {
        lines.push(format!(
            "preflight: {node}: not drained: only user problems (the job's launch or environment, or another running job's, not the node){}",
            if hook.mode == SlurmMode::Prolog {
                "; the prolog passes (Slurm drains the node of a failing prolog), and the job's TaskProlog says it in the task's output"
            } else {
                ""
            }
        ));
    }
    if !hook.drain {
        return HookResult {
            lines,
            code: verdict,
        };
    }
    if node.is_empty() {
        lines.push(
            "cannot drain: this node's Slurm name is unknown (no SLURMD_NODENAME, no hostname); give --slurm-node NAME".into(),
        );
        return HookResult {
            lines,
            code: failed_call(hook, verdict),
        };
    }
    drain_or_resume(hook, slurm, &node, &parts, user_only, verdict, lines)
}

/// Each line of a hook's output with the time (UTC, to the second) and the job it ran for,
/// as a log file wants them: `2026-12-07T23:41:07Z job 42 preflight: node2: ...`.
pub fn stamped(lines: &[String], report: &Report) -> String {
    let now = crate::history::now();
    let day = preflight_checks::infra::date::utc_minute(now).replacen(' ', "T", 1);
    let stamp = format!("{day}:{:02}Z", now.rem_euclid(60));
    let job = report
        .nodes
        .first()
        .and_then(|n| n.facts.env.get("SLURM_JOB_ID"))
        .map(|j| format!(" job {}", sanitize::line(j)))
        .unwrap_or_default();
    let mut out = String::new();
    for l in lines {
        out.push_str(&format!("{stamp}{job} {l}\n"));
    }
    out
}

/// What the hook prints of the node's verdict: the findings that make it unfit, or that it passes.
fn verdict_lines(node: &str, bad: &[&Finding], report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for f in bad.iter().take(SHOWN) {
        let remedy = f
            .remedy_of()
            .map(|r| format!(" {} {}", r.problem.tag(), r.action))
            .unwrap_or_default();
        lines.push(format!(
            "preflight: {node}: {} {}{remedy}: {}",
            f.status,
            f.id,
            sanitize::line(&f.summary)
        ));
    }
    if bad.len() > SHOWN {
        lines.push(format!("preflight: {node}: and {} more", bad.len() - SHOWN));
    }
    if bad.is_empty() {
        // The warnings by id (a port a running job holds, a firewall rule): none drains.
        let mut warned: Vec<&str> = report
            .findings
            .iter()
            .filter(|f| f.status == Status::Warn)
            .map(|f| f.id.as_str())
            .collect();
        warned.dedup();
        let warned = if warned.is_empty() {
            String::new()
        } else {
            format!(": {}", warned.join(", "))
        };
        lines.push(format!(
            "preflight: {node}: passes (report status {}{warned})",
            report.status
        ));
    }
    lines
}

/// `--drain`: reads the node's state and drains, resumes or leaves it as `decide()` says
/// (with `--dry-run` only says what it would run); `lines` gets what was done. `user_only`:
/// the node fails for user problems only, which `want` (None) does not drain for.
fn drain_or_resume(
    hook: &SlurmHook,
    slurm: &dyn Slurm,
    node: &str,
    want: &[drain::Part],
    user_only: bool,
    verdict: u8,
    mut lines: Vec<String>,
) -> HookResult {
    let state = match slurm.node(node) {
        Ok(s) => s,
        Err(e) if hook.dry_run => {
            lines.push(format!(
                "node state unknown ({e}); planned as for an idle node without a reason"
            ));
            NodeState {
                state: "idle".into(),
                reason: None,
            }
        }
        Err(e) => {
            lines.push(format!("cannot read {node}'s state, nothing changed: {e}"));
            return HookResult {
                lines,
                code: failed_call(hook, verdict),
            };
        }
    };
    let mut action = decide(node, &state, want);
    if let Action::Leave { why } = &mut action {
        // decide() saw nothing to drain for; the node fails, for user problems only.
        if user_only && *why == format!("{node} passes ({})", state.state) {
            *why = format!("{node} has user problems only ({})", state.state);
        }
    }
    if hook.mode == SlurmMode::Prolog {
        if let Action::Resume { .. } = action {
            action = Action::Leave {
                why: format!("{node} passes; the health check (--slurm-health --drain) resumes it"),
            };
        }
    }
    let (args, done) = match &action {
        Action::Leave { why } => {
            lines.push(format!("left alone: {why}"));
            return HookResult {
                lines,
                code: verdict,
            };
        }
        Action::Drain { reason } => (
            vec![
                "update".to_string(),
                format!("NodeName={node}"),
                "State=DRAIN".into(),
                format!("Reason={reason}"),
            ],
            format!("drained {node}"),
        ),
        Action::Resume { was } => (
            vec![
                "update".to_string(),
                format!("NodeName={node}"),
                "State=RESUME".into(),
            ],
            if user_only {
                format!(
                    "resumed {node} (user problems only, which do not keep a node drained; \
                     preflight had drained it: {was})"
                )
            } else {
                format!("resumed {node} (it passes again; preflight had drained it: {was})")
            },
        ),
    };
    let shown = format!(
        "scontrol {}",
        args.iter()
            .map(|a| shown_arg(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if hook.dry_run {
        lines.push("dry run, nothing changed; --drain would run:".into());
        lines.push(shown);
        return HookResult {
            lines,
            code: verdict,
        };
    }
    match slurm.scontrol(&args) {
        Ok(()) => {
            lines.push(format!("{done}: {shown}"));
            HookResult {
                lines,
                code: verdict,
            }
        }
        Err(e) => {
            lines.push(format!("could not change {node}: {e}"));
            HookResult {
                lines,
                code: failed_call(hook, verdict),
            }
        }
    }
}

/// A Slurm call failed: the health check says so (2); the prolog's verdict stands (a failing
/// node still exits non-zero, and Slurm drains it as "Prolog error").
fn failed_call(hook: &SlurmHook, verdict: u8) -> u8 {
    match hook.mode {
        SlurmMode::Health => exit::CANNOT_RUN,
        SlurmMode::Prolog => verdict,
    }
}

/// `Reason=preflight: x` as a shell word: `Reason="preflight: x"`, the way people type it.
fn shown_arg(a: &str) -> String {
    match a.split_once('=') {
        Some((k, v)) if v.contains(' ') && !v.contains(['"', '\\', '$', '`']) => {
            format!("{k}=\"{v}\"")
        }
        _ => crate::shell::quote(a),
    }
}

#[cfg(test)]
mod tests;

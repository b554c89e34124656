//! A fault that stands: a finding this node has had in every one of its runs since it first
//! appeared is the same fault, not a lemon. Its own finding says so, in one clause of its
//! summary (since when, in how many runs) and in its evidence (`standing_since`,
//! `standing_runs`), and nothing else in the report changes.

use super::{RunInfo, merge, run_key};
use crate::core::{NodeRun, Report, Status};

/// The clause a standing finding's summary ends with (after `; `), as the terminal finds it.
pub fn clause(since: i64, runs: usize, at_least: bool) -> String {
    format!(
        "standing since {} UTC ({}{runs} runs)",
        crate::infra::date::utc_minute(since),
        if at_least { "at least " } else { "" }
    )
}

/// Marks every non-pass finding of `report` on a node whose own past runs (its
/// `facts.history`, this run left out) had the same id in each run back to when it first
/// appeared: its summary gets [`clause`], its evidence the time and the count.
pub fn mark_standing(report: &mut Report, info: &RunInfo) {
    let this_job = info.job.as_deref().map(|j| format!("job:{j}"));
    let mut past: Vec<(u32, Vec<NodeRun>, u64)> = Vec::new();
    for n in &report.nodes {
        let Some(h) = &n.facts.history else { continue };
        let mine: Vec<NodeRun> = h
            .runs
            .iter()
            .filter(|r| r.run != info.run && Some(run_key(r)) != this_job)
            .cloned()
            .collect();
        let mut mine = merge(&mine);
        mine.sort_by_key(|r| r.time);
        if !mine.is_empty() {
            past.push((n.rank, mine, h.total_runs));
        }
    }
    for f in report.findings.iter_mut().filter(|f| {
        matches!(f.status, Status::Warn | Status::Fail | Status::Error)
            && !f.id.starts_with("history.")
    }) {
        let Some((_, runs, total)) = past.iter().find(|(r, _, _)| Some(*r) == f.node) else {
            continue;
        };
        let streak: Vec<&NodeRun> = runs
            .iter()
            .rev()
            .take_while(|r| r.findings.iter().any(|g| g.id == f.id))
            .collect();
        let Some(first) = streak.last() else { continue };
        let count = streak.len() + 1;
        let at_least = streak.len() == runs.len() && *total > runs.len() as u64;
        let text = clause(first.time, count, at_least);
        f.summary = format!("{}; {text}", f.summary);
        f.evidence
            .insert("standing_since".into(), first.time.into());
        f.evidence.insert("standing_runs".into(), count.into());
        f.evidence.insert("standing".into(), text.into());
    }
}

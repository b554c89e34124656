//! What `preflight history` shows: per node its runs, first and last seen, failing runs and
//! how often it flapped between pass and fail, its findings by count, and the lemons with the
//! rule that named each. Bounded for a person: the nodes with most failures first.

use super::Catalog;
use crate::core::{Finding, NodeRun};
use serde::Serialize;
use std::collections::BTreeMap;

/// Findings listed per node.
pub const FINDINGS_SHOWN: usize = 8;

/// One finding id on one node.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct FindingCount {
    pub id: String,
    /// Runs that had it.
    pub runs: usize,
    /// Unix seconds of the first and last run that had it.
    pub first_seen: i64,
    pub last_seen: i64,
    /// In every run of the node since it first appeared: a standing fault, not a lemon.
    pub standing: bool,
}

/// One node's runs.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct NodeView {
    pub node: String,
    pub runs: usize,
    pub first_seen: i64,
    pub last_seen: i64,
    /// Runs with a `fail` or `error` finding.
    pub failed_runs: usize,
    /// Times it went from passing to failing or back, run after run.
    pub flaps: usize,
    /// Its findings, most frequent first (at most [`FINDINGS_SHOWN`]).
    pub findings: Vec<FindingCount>,
    /// Finding ids beyond those listed.
    pub more_findings: usize,
}

/// The whole answer.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct HistoryView {
    /// Runs: the records of one run id (or one job) count once however many nodes' reports
    /// carry them.
    pub runs: usize,
    /// Node-runs: each node's runs, once each, summed over the nodes.
    pub node_runs: usize,
    /// Records read (a report of a cluster run holds one per node; many reports repeat them).
    pub records: usize,
    /// Report and export files read (`--reports DIR`); absent for a store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reports: Option<usize>,
    /// Where the store is and why there (a node-local place when the default folder is on a
    /// network file system); absent for `--reports`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Nodes, those with most failed runs first.
    pub nodes: Vec<NodeView>,
    /// `history.lemon` findings, each with its rule, action and fix.
    pub lemons: Vec<Finding>,
    /// What was skipped or cut while reading (files that are not reports, bounds reached).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn failed(r: &NodeRun) -> bool {
    r.findings
        .iter()
        .any(|f| f.status == "fail" || f.status == "error")
}

/// The view of `runs` (any order; a run repeated in many reports counts once).
pub fn view(records: &[NodeRun], catalog: Catalog) -> HistoryView {
    let merged;
    let runs = if super::runs::is_merged(records) {
        records
    } else {
        merged = super::merge(records);
        &merged[..]
    };
    let mut by: BTreeMap<&str, Vec<&NodeRun>> = BTreeMap::new();
    for r in runs {
        by.entry(r.node.as_str()).or_default().push(r);
    }
    let mut nodes: Vec<NodeView> = by
        .into_iter()
        .map(|(node, mut rs)| {
            rs.sort_by_key(|r| r.time);
            let mut ids: BTreeMap<&str, FindingCount> = BTreeMap::new();
            for r in &rs {
                let mut seen: Vec<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
                seen.sort_unstable();
                seen.dedup();
                for id in seen {
                    let c = ids.entry(id).or_insert_with(|| FindingCount {
                        id: id.to_string(),
                        runs: 0,
                        first_seen: r.time,
                        last_seen: r.time,
                        standing: false,
                    });
                    c.runs += 1;
                    c.last_seen = r.time;
                }
            }
            let mut findings: Vec<FindingCount> = ids.into_values().collect();
            for c in &mut findings {
                let since = rs.iter().skip_while(|r| r.time < c.first_seen);
                c.standing = !c.id.starts_with("history.")
                    && since.clone().count() > 1
                    && since
                        .clone()
                        .all(|r| r.findings.iter().any(|f| f.id == c.id));
            }
            findings.sort_by(|a, b| b.runs.cmp(&a.runs).then_with(|| a.id.cmp(&b.id)));
            let more_findings = findings.len().saturating_sub(FINDINGS_SHOWN);
            findings.truncate(FINDINGS_SHOWN);
            let states: Vec<bool> = rs.iter().map(|r| failed(r)).collect();
            NodeView {
                node: node.to_string(),
                runs: rs.len(),
                first_seen: rs.first().map_or(0, |r| r.time),
                last_seen: rs.last().map_or(0, |r| r.time),
                failed_runs: states.iter().filter(|f| **f).count(),
                flaps: states.windows(2).filter(|w| w[0] != w[1]).count(),
                findings,
                more_findings,
            }
        })
        .collect();
    nodes.sort_by(|a, b| {
        b.failed_runs
            .cmp(&a.failed_runs)
            .then_with(|| b.flaps.cmp(&a.flaps))
            .then_with(|| a.node.cmp(&b.node))
    });
    let distinct: std::collections::BTreeSet<&str> = runs.iter().map(|r| r.run.as_str()).collect();
    HistoryView {
        runs: distinct.len(),
        node_runs: runs.len(),
        records: records.len(),
        reports: None,
        store: None,
        nodes,
        lemons: super::describe(runs, catalog),
        notes: Vec::new(),
    }
}

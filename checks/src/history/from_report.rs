//! A report, as the records the history keeps: one [`NodeRun`] per node it judged, each with
//! that node's non-pass findings (worst first, bounded). The store records its own node's; the
//! `history --reports DIR` reader takes every node's.

use crate::core::{
    FIELD_CHARS, Finding, FindingRec, NodeRun, Problem, RUN_FINDINGS, Report, Status,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// What the report itself does not say about its run.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// Run identity shared by the nodes of one cluster run.
    pub run: String,
    /// Unix seconds.
    pub time: i64,
    /// `check`, `cluster`, `slurm-prolog`, `slurm-health`, `npd`, `prom`, ...
    pub mode: String,
    /// The launcher's job id, where known.
    pub job: Option<String>,
}

/// One record per node of `report`, in its node order.
pub fn node_runs(report: &Report, info: &RunInfo) -> Vec<NodeRun> {
    let ranks: Vec<u32> = report.nodes.iter().map(|n| n.rank).collect();
    let mut per: BTreeMap<u32, Vec<FindingRec>> = BTreeMap::new();
    for f in report
        .findings
        .iter()
        .filter(|f| matches!(f.status, Status::Warn | Status::Fail | Status::Error))
    {
        for (rank, rec) in records(report, f, info.time) {
            if ranks.contains(&rank) {
                per.entry(rank).or_default().push(rec);
            }
        }
    }
    // How many nodes had each id.
    let mut with: BTreeMap<String, u32> = BTreeMap::new();
    for recs in per.values() {
        let mut ids: Vec<&str> = recs.iter().map(|r| r.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            *with.entry(id.to_string()).or_default() += 1;
        }
    }
    let healthy = report
        .recommendation
        .as_ref()
        .and_then(|r| r.healthy_set.as_ref());
    report
        .nodes
        .iter()
        .map(|n| {
            let mut findings = per.remove(&n.rank).unwrap_or_default();
            for f in &mut findings {
                f.with = with.get(&f.id).copied().unwrap_or(1);
            }
            findings.sort_by_key(|f| std::cmp::Reverse(severity(&f.status)));
            let dropped = findings.len().saturating_sub(RUN_FINDINGS) as u32;
            findings.truncate(RUN_FINDINGS);
            NodeRun {
                run: clip(&info.run),
                time: info.time,
                node: clip(&n.hostname),
                mode: clip(&info.mode),
                job: info.job.as_deref().map(clip),
                nodes: report.nodes.len() as u32,
                healthy: healthy.map(|h| h.ranks.contains(&n.rank)),
                findings,
                dropped,
            }
        })
        .collect()
}

fn severity(status: &str) -> u8 {
    match status {
        "error" => 3,
        "fail" => 2,
        "warn" => 1,
        _ => 0,
    }
}

/// The records one finding makes: for the node it names (a pair fault: for both ends, each
/// with the other as partner; a GPU's XIDs: one per distinct XID).
fn records(report: &Report, f: &Finding, time: i64) -> Vec<(u32, FindingRec)> {
    let base = FindingRec {
        id: clip(&f.id),
        status: f.status.as_str().to_string(),
        user: f.problem == Some(Problem::User),
        numbers: numbers(&f.evidence),
        gpu: f
            .evidence
            .get("gpu")
            .and_then(Value::as_u64)
            .map(|g| g as u32),
        ..FindingRec::default()
    };
    if let Some(rank) = f.node {
        if f.is(crate::gpu::ids::XID) {
            let at = f
                .evidence
                .get("newest_age_s")
                .and_then(Value::as_i64)
                .map(|age| time - age);
            let mut xids: Vec<u32> = f
                .evidence
                .get("xids")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_u64)
                        .map(|x| x as u32)
                        .collect()
                })
                .unwrap_or_default();
            xids.sort_unstable();
            xids.dedup();
            if !xids.is_empty() {
                return xids
                    .into_iter()
                    .take(RUN_FINDINGS)
                    .map(|x| {
                        let rec = FindingRec {
                            xid: Some(x),
                            at,
                            ..base.clone()
                        };
                        (rank, rec)
                    })
                    .collect();
            }
        }
        return vec![(rank, base)];
    }
    // A fault of one pair (no node named): both ends, each with the other as its partner.
    if f.id.starts_with("link.")
        && let Some((a, b)) = pair(f)
        && a != b
    {
        let name = |r: u32| report.hostname(r).map(clip);
        let (Some(na), Some(nb)) = (name(a), name(b)) else {
            return Vec::new();
        };
        return vec![
            (
                a,
                FindingRec {
                    partner: Some(nb),
                    ..base.clone()
                },
            ),
            (
                b,
                FindingRec {
                    partner: Some(na),
                    ..base
                },
            ),
        ];
    }
    Vec::new()
}

/// The two ranks of a pair finding: its `from`/`to` evidence, else its subject `A->B ...`.
fn pair(f: &Finding) -> Option<(u32, u32)> {
    let rank = |k: &str| f.evidence.get(k).and_then(Value::as_u64).map(|v| v as u32);
    if let (Some(a), Some(b)) = (rank("from"), rank("to")) {
        return Some((a, b));
    }
    let head = f.subject.split_whitespace().next()?;
    let (a, b) = head.split_once("->")?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The evidence's top-level numbers as `key=value`, sorted by key, within [`FIELD_CHARS`].
fn numbers(evidence: &serde_json::Map<String, Value>) -> String {
    let mut out = String::new();
    for (k, v) in evidence {
        let Some(n) = v.as_f64() else { continue };
        let item = if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{k}={}", n as i64)
        } else {
            format!("{k}={n:.3}")
        };
        if out.len() + item.len() + 1 > FIELD_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&item);
    }
    out
}

/// A text cut to [`FIELD_CHARS`] characters.
fn clip(s: &str) -> String {
    s.chars().take(FIELD_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Report {
        let path = format!(
            "{}/../tests/fixtures/reports/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn info() -> RunInfo {
        RunInfo {
            run: "job-7".into(),
            time: 1_800_000_000,
            mode: "cluster".into(),
            job: Some("7".into()),
        }
    }

    #[test]
    fn a_pair_fault_is_kept_on_both_ends_and_a_node_fault_on_its_node() {
        let report = fixture("cluster-3-healthy.json");
        let runs = node_runs(&report, &info());
        assert_eq!(runs.len(), 3);
        let slow: Vec<(String, Option<String>)> = runs
            .iter()
            .flat_map(|r| {
                r.findings
                    .iter()
                    .filter(|f| f.id == crate::link::ids::SLOW.as_str())
                    .map(|f| (r.node.clone(), f.partner.clone()))
            })
            .collect();
        // Four slow directions, each on both of its ends.
        assert_eq!(slow.len(), 8, "{slow:?}");
        assert!(
            slow.iter()
                .all(|(n, p)| p.as_deref().is_some_and(|p| p != n))
        );
        let lib = &runs[0]
            .findings
            .iter()
            .find(|f| f.id == "nccl.library")
            .unwrap();
        assert_eq!(lib.with, 3, "every node warned about its library");
        assert!(runs.iter().all(|r| r.nodes == 3 && r.run == "job-7"));

        let filtered = node_runs(&fixture("cluster-3-filtered-slow.json"), &info());
        let blamed: Vec<&FindingRec> = filtered[2]
            .findings
            .iter()
            .filter(|f| f.id == crate::link::ids::UNREACHABLE.as_str())
            .collect();
        assert_eq!(blamed.len(), 1);
        assert_eq!(blamed[0].partner, None, "the node itself is named");
        assert!(
            filtered[0]
                .findings
                .iter()
                .all(|f| f.id != crate::link::ids::UNREACHABLE.as_str())
        );
    }

    #[test]
    fn a_run_keeps_at_most_its_bound_worst_first() {
        let mut report = fixture("cluster-2-nodes.json");
        let template = report.findings[0].clone();
        report.findings = (0..100)
            .map(|i| {
                let mut f = template.clone();
                f.node = Some(0);
                f.id = format!("x.id{i}");
                f.status = if i == 99 { Status::Error } else { Status::Warn };
                f
            })
            .collect();
        let runs = node_runs(&report, &info());
        assert_eq!(runs[0].findings.len(), RUN_FINDINGS);
        assert_eq!(runs[0].dropped as usize, 100 - RUN_FINDINGS);
        assert_eq!(runs[0].findings[0].id, "x.id99");
    }
}

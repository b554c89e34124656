//! Runs counted once: the records of one node in one run (its job id where it has one, else its
//! run id) are one run however many reports carry them or hooks wrote them, and the question
//! every rule asks of a node's runs in order: did the fault come and go, or does it stand.

use crate::core::{FindingRec, NodeRun};
use std::collections::BTreeMap;

/// The key that makes records one run: the job id (a job's prolog, its tasks' TaskProlog and
/// its cluster run are one run of the node), else the run id (shared by every node of a
/// cluster run).
pub fn run_key(r: &NodeRun) -> String {
    match r.job.as_deref().filter(|j| !j.is_empty()) {
        Some(job) => format!("job:{job}"),
        None => r.run.clone(),
    }
}

fn rank(status: &str) -> u8 {
    match status {
        "error" => 3,
        "fail" => 2,
        "warn" => 1,
        _ => 0,
    }
}

/// One record per node and run ([`run_key`]), in the order each was first seen: the run id
/// becomes the key, the time the earliest, each finding kept once with its worst status, the
/// node out of the healthy set if any record says so.
pub fn merge(runs: &[NodeRun]) -> Vec<NodeRun> {
    let mut at: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out: Vec<NodeRun> = Vec::with_capacity(runs.len());
    for r in runs {
        let key = run_key(r);
        match at.get(&(r.node.clone(), key.clone())) {
            None => {
                at.insert((r.node.clone(), key.clone()), out.len());
                let mut m = r.clone();
                m.run = key;
                out.push(m);
            }
            Some(&i) => fold(&mut out[i], r),
        }
    }
    out
}

/// Whether `runs` are already one record per node and run, as [`merge`] leaves them (each
/// record's run id its key, no node and key twice): merging them again would only copy them.
pub fn is_merged(runs: &[NodeRun]) -> bool {
    let mut seen: std::collections::BTreeSet<(&str, &str)> = std::collections::BTreeSet::new();
    runs.iter().all(|r| {
        let keyed = match r.job.as_deref().filter(|j| !j.is_empty()) {
            Some(job) => r.run.strip_prefix("job:") == Some(job),
            None => true,
        };
        keyed && seen.insert((r.node.as_str(), r.run.as_str()))
    })
}

fn same(a: &FindingRec, b: &FindingRec) -> bool {
    a.id == b.id && a.partner == b.partner && a.gpu == b.gpu && a.xid == b.xid && a.at == b.at
}

fn fold(into: &mut NodeRun, r: &NodeRun) {
    into.time = into.time.min(r.time);
    into.nodes = into.nodes.max(r.nodes);
    into.healthy = match (into.healthy, r.healthy) {
        (Some(a), Some(b)) => Some(a && b),
        (a, b) => a.or(b),
    };
    into.dropped = into.dropped.max(r.dropped);
    for f in &r.findings {
        match into.findings.iter_mut().find(|g| same(g, f)) {
            Some(g) => {
                if rank(&f.status) > rank(&g.status) {
                    g.status = f.status.clone();
                }
                g.with = g.with.max(f.with);
            }
            None => into.findings.push(f.clone()),
        }
    }
}

/// Whether a fault came back after it had gone: in `has` (one entry per run, oldest first) a
/// run with it, later a run without it, and later again a run with it. A fault present in
/// every run since it first appeared *stands*: its own finding says so, and no rule names a
/// lemon for it.
pub fn comes_and_goes(has: impl IntoIterator<Item = bool>) -> bool {
    let mut seen = false;
    let mut gone = false;
    for h in has {
        match (h, seen, gone) {
            (true, true, true) => return true,
            (true, _, _) => seen = true,
            (false, true, _) => gone = true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_comes_and_goes_only_when_it_returns_after_a_run_without_it() {
        let t = true;
        let f = false;
        assert!(comes_and_goes([t, f, t]));
        assert!(comes_and_goes([f, t, f, f, t, t]));
        assert!(!comes_and_goes([t, t, t, t]), "standing");
        assert!(
            !comes_and_goes([f, f, t, t, t]),
            "standing since it appeared"
        );
        assert!(!comes_and_goes([t, t, t, f, f]), "fixed and gone");
        assert!(!comes_and_goes([]));
    }

    fn rec(run: &str, node: &str, job: Option<&str>, id: &str, status: &str) -> NodeRun {
        NodeRun {
            run: run.into(),
            time: 10,
            node: node.into(),
            job: job.map(str::to_string),
            nodes: 1,
            findings: vec![FindingRec {
                id: id.into(),
                status: status.into(),
                with: 1,
                ..FindingRec::default()
            }],
            ..NodeRun::default()
        }
    }

    #[test]
    fn one_run_seen_by_four_reports_and_one_job_seen_by_three_hooks_count_once() {
        let mut runs = Vec::new();
        for _copy in 0..4 {
            for n in ["a", "b", "c", "d"] {
                runs.push(rec("c1", n, None, "x.y", "warn"));
            }
        }
        assert_eq!(merge(&runs).len(), 4);
        assert!(!is_merged(&runs));
        assert!(is_merged(&merge(&runs)));
        let job = vec![
            rec("slurm-prolog-7", "a", Some("7"), "firewall.rules", "warn"),
            rec("taskprolog-7", "a", Some("7"), "firewall.rules", "warn"),
            rec("taskprolog-7", "a", Some("7"), "port.in-use", "fail"),
            rec("run-9", "a", Some("7"), "firewall.rules", "fail"),
        ];
        let m = merge(&job);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].run, "job:7");
        let statuses: Vec<(&str, &str)> = m[0]
            .findings
            .iter()
            .map(|f| (f.id.as_str(), f.status.as_str()))
            .collect();
        assert_eq!(
            statuses,
            vec![("firewall.rules", "fail"), ("port.in-use", "fail")]
        );
    }
}

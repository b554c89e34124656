//! `preflight cluster --nodes-failed FILE --nodes-passed FILE`: the verdict per node as two
//! Slurm hostlists (`node[1-3,7]`), for `srun --exclude=$(cat FILE)` or `scontrol update`.
//!
//! A node failed when a `fail` finding is its own (its `node` is its rank) or when it never
//! joined (`cluster.rendezvous` names it as missing); every other node in the report passed.
//! A cluster-wide finding (a slow all-reduce) blames no node, so it moves no one.

use preflight_checks::hostlist;
use preflight_checks::model::{Report, Status};
use std::collections::BTreeSet;

/// The failed and the passed hostnames, each sorted and without duplicates.
pub fn split(report: &Report) -> (Vec<String>, Vec<String>) {
    let host = |rank: u32| report.hostname(rank).map(str::to_string);
    let mut failed = BTreeSet::new();
    for f in report.findings.iter().filter(|f| f.status == Status::Fail) {
        if let Some(h) = f.node.and_then(host) {
            failed.insert(h);
        }
        if let Some(v) = preflight_checks::rendezvous::verdict::Rendezvous::of(f) {
            for m in v.missing {
                if let Some(h) = m.host.or_else(|| m.rank.and_then(host)) {
                    failed.insert(h);
                }
            }
        }
    }
    failed.retain(|h: &String| !h.is_empty());
    let passed: BTreeSet<String> = report
        .nodes
        .iter()
        .map(|n| n.hostname.clone())
        .filter(|h| !h.is_empty() && !failed.contains(h))
        .collect();
    (failed.into_iter().collect(), passed.into_iter().collect())
}

/// A hostlist file: the compressed list and a newline (an empty line when no node is in it).
pub fn file_text(names: &[String]) -> String {
    format!("{}\n", hostlist::compress(names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Finding, Mode, NodeFacts};

    fn facts(h: &str) -> NodeFacts {
        NodeFacts {
            hostname: h.into(),
            ..Default::default()
        }
    }

    #[test]
    fn own_fails_and_missing_nodes_fail_the_rest_pass() {
        let r = crate::report::ReportBuilder::new(Mode::Cluster)
            .node(0, facts("node1"))
            .node(1, facts("node2"))
            .node(2, facts("node3"))
            .node(3, facts("node4"))
            .findings([
                Finding::new(
                    preflight_checks::core::FindingId::new("link.unreachable"),
                    Status::Fail,
                    "x",
                    "y",
                )
                .on_node(Some(2)),
                Finding::new(
                    preflight_checks::core::FindingId::new("link.slow"),
                    Status::Warn,
                    "x",
                    "y",
                )
                .on_node(Some(1)),
                Finding::new(
                    preflight_checks::core::FindingId::new("collective.busbw"),
                    Status::Fail,
                    "x",
                    "y",
                ),
                Finding::new(
                    preflight_checks::core::FindingId::new("cluster.rendezvous"),
                    Status::Fail,
                    "m",
                    "1 of 6 never joined",
                )
                .with(
                    "missing",
                    serde_json::json!([{"rank": 4, "host": "node5"}, {"rank": 5, "host": null}]),
                ),
            ])
            .build();
        let (failed, passed) = split(&r);
        assert_eq!(failed, vec!["node3", "node5"]);
        assert_eq!(passed, vec!["node1", "node2", "node4"]);
        assert_eq!(file_text(&failed), "node[3,5]\n");
        assert_eq!(file_text(&[]), "\n");
    }
}

//! Report -> CTRF (the Common Test Report Format's JSON, <https://ctrf.io>, spec 1.0.0), so CI
//! dashboards that read CTRF show preflight's findings like any test suite.
//!
//! One test per finding: `pass` is `passed`, `fail` and `error` are `failed` (an `error` is a
//! check that could not run, and CI must not pass it), `skip` is `skipped`, and `warn` is
//! `other`; `rawStatus` keeps preflight's word. The test's `suite` is the node (`rank 1
//! (gpu02)`, or `cluster` for cluster-wide findings), its `message` the summary, its labels the
//! id, node, rank, subject, action and whose problem, and its `extra` the fix and the evidence.
//! The report has no clock of its own, so the summary's `start` and `stop` are when it was
//! rendered.

use preflight_checks::model::{Finding, Report, Status};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The CTRF specification version written.
pub const SPEC_VERSION: &str = "1.0.0";

/// The report as a CTRF document, pretty, with a trailing newline.
pub fn render(report: &Report) -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let mut s = serde_json::to_string_pretty(&document(report, now_ms)).unwrap_or_default();
    s.push('\n');
    s
}

/// The CTRF document, rendered at `now_ms` (milliseconds since the Unix epoch).
pub fn document(report: &Report, now_ms: u64) -> Value {
    let hosts: BTreeMap<u32, &str> = report
        .nodes
        .iter()
        .map(|n| (n.rank, n.hostname.as_str()))
        .collect();
    let tests: Vec<Value> = report
        .findings
        .iter()
        .map(|f| test(f, f.node.and_then(|r| hosts.get(&r).copied())))
        .collect();
    let count = |w: &str| tests.iter().filter(|t| t["status"] == w).count();
    let suites: std::collections::BTreeSet<Option<u32>> =
        report.findings.iter().map(|f| f.node).collect();
    let tool = &report.tool;
    json!({
        "reportFormat": "CTRF",
        "specVersion": SPEC_VERSION,
        "generatedBy": format!("{} {}", tool.name, tool.version),
        "results": {
            "tool": {"name": tool.name, "version": tool.version},
            "summary": {
                "tests": tests.len(),
                "passed": count("passed"),
                "failed": count("failed"),
                "skipped": count("skipped"),
                "pending": 0,
                "other": count("other"),
                "suites": suites.len(),
                "start": now_ms,
                "stop": now_ms,
                "extra": {"status": report.status, "mode": report.mode, "schema": report.schema},
            },
            "tests": tests,
            "environment": {
                "reportName": format!("preflight {}", mode_word(report)),
                "appName": tool.name,
                "appVersion": tool.version,
                "osPlatform": "linux",
            },
        },
    })
}

fn mode_word(report: &Report) -> &'static str {
    match report.mode {
        preflight_checks::model::Mode::Node => "check",
        preflight_checks::model::Mode::Cluster => "cluster",
    }
}

/// CTRF's status for a finding's.
pub fn status(s: Status) -> &'static str {
    match s {
        Status::Pass => "passed",
        Status::Fail | Status::Error => "failed",
        Status::Skip => "skipped",
        Status::Warn => "other",
    }
}

/// One finding as a CTRF test.
fn test(f: &Finding, host: Option<&str>) -> Value {
    let node = match (f.node, host) {
        (Some(r), Some(h)) => format!("rank {r} ({h})"),
        (Some(r), None) => format!("rank {r}"),
        (None, _) => "cluster".to_string(),
    };
    let name = if f.subject.is_empty() {
        format!("{} on {node}", f.id)
    } else {
        format!("{} {} on {node}", f.id, f.subject)
    };
    let mut labels = Map::new();
    labels.insert("id".into(), json!(f.id));
    labels.insert("node".into(), json!(host.unwrap_or(node.as_str())));
    if let Some(r) = f.node {
        labels.insert("rank".into(), json!(r));
    }
    if !f.subject.is_empty() {
        labels.insert("subject".into(), json!(f.subject));
    }
    if let Some(a) = f.action {
        labels.insert("action".into(), json!(a));
    }
    if let Some(p) = f.problem {
        labels.insert("problem".into(), json!(p));
    }
    let mut extra = Map::new();
    if let Some(fix) = &f.fix {
        extra.insert("fix".into(), json!(fix));
    }
    if !f.evidence.is_empty() {
        extra.insert("evidence".into(), Value::Object(f.evidence.clone()));
    }
    let mut t = json!({
        "testId": format!("{}|{}|{}", f.id, node, f.subject),
        "name": name,
        "status": status(f.status),
        "rawStatus": f.status,
        "duration": 0,
        "suite": [node],
        "message": f.summary,
        "tags": [f.id.split('.').next().unwrap_or_default()],
        "labels": labels,
        "type": "preflight",
    });
    if !extra.is_empty() {
        t["extra"] = Value::Object(extra);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Mode, NodeFacts};

    #[test]
    fn each_status_maps_and_the_summary_counts_them() {
        let f = |s: Status, subject: &str| {
            Finding::new(
                preflight_checks::core::FindingId::new("port.in-use"),
                s,
                subject,
                "x",
            )
        };
        let r = crate::report::ReportBuilder::single(
            Mode::Node,
            0,
            NodeFacts {
                hostname: "gpu01".into(),
                ..Default::default()
            },
        )
        .findings([
            f(Status::Pass, "a").on_node(Some(0)),
            f(Status::Warn, "b").on_node(Some(0)),
            f(Status::Fail, "").on_node(Some(0)),
            f(Status::Error, "d"),
            f(Status::Skip, "e"),
        ])
        .build();
        let d = document(&r, 1_700_000_000_000);
        let s = &d["results"]["summary"];
        assert_eq!(
            [
                &s["tests"],
                &s["passed"],
                &s["failed"],
                &s["skipped"],
                &s["other"]
            ],
            [5, 1, 2, 1, 1]
        );
        let t = &d["results"]["tests"][2];
        assert_eq!(t["name"], "port.in-use on rank 0 (gpu01)");
        assert_eq!(t["labels"]["node"], "gpu01");
        assert_eq!(t["labels"]["action"], "restart-job");
        assert_eq!(t["rawStatus"], "fail");
        assert_eq!(d["results"]["tests"][3]["suite"], json!(["cluster"]));
        assert_eq!(s["suites"], 2);
    }
}

//! `--prom-file`: the report as Prometheus metrics for node_exporter's textfile collector.
//!
//! Every metric has HELP and TYPE, a `preflight_` name in base units, and labels whose values
//! are bounded by the cluster: `id` (the finding catalog), `node` (one per node), `status`,
//! `result`, `transport`. There is no label per link: a 1024-node run has 1024 nodes' series,
//! not a million pairs'.

use preflight_checks::model::{Report, Status};
use std::collections::BTreeMap;
use std::fmt::Write;

/// When the run started and how long it took.
#[derive(Clone, Copy, Debug)]
pub struct RunTime {
    /// Seconds since the Unix epoch.
    pub started_unix_s: f64,
    pub duration_s: f64,
}

const STATUSES: [Status; 4] = [Status::Pass, Status::Warn, Status::Fail, Status::Error];

/// The exposition text (version 0.0.4).
pub fn render(report: &Report, time: RunTime) -> String {
    let mut m = Metrics::default();
    m.family(
        "preflight_last_run_timestamp_seconds",
        "Unix time the last preflight run started.",
    );
    m.sample("", &[], time.started_unix_s);
    m.family(
        "preflight_last_run_duration_seconds",
        "How long the last preflight run took, in seconds.",
    );
    m.sample("", &[], time.duration_s);
    m.family(
        "preflight_status",
        "Verdict of the last run: 1 for its status (pass, warn, fail, error), 0 for the others.",
    );
    let mode = match report.mode {
        preflight_checks::model::Mode::Node => "node",
        preflight_checks::model::Mode::Cluster => "cluster",
    };
    for s in STATUSES {
        let v = f64::from(u8::from(report.status == s));
        m.sample("", &[("mode", mode), ("status", s.as_str())], v);
    }
    m.family(
        "preflight_finding_status",
        "Worst status of each finding id per node in the last run: 0 pass or skip, 1 warn, 2 fail, 3 error (node is empty for cluster-wide findings).",
    );
    let host = |rank: u32| {
        report
            .nodes
            .iter()
            .find(|n| n.rank == rank)
            .map(|n| n.hostname.clone())
            .unwrap_or_else(|| format!("rank{rank}"))
    };
    let mut worst: BTreeMap<(String, String), Status> = BTreeMap::new();
    for f in &report.findings {
        let node = f.node.map(host).unwrap_or_default();
        let e = worst.entry((f.id.clone(), node)).or_insert(f.status);
        *e = (*e).max(f.status);
    }
    for ((id, node), s) in &worst {
        let v = match s {
            Status::Skip | Status::Pass => 0.0,
            Status::Warn => 1.0,
            Status::Fail => 2.0,
            Status::Error => 3.0,
        };
        m.sample("", &[("id", id), ("node", node)], v);
    }
    m.family("preflight_nodes", "Nodes in the last run's report.");
    m.sample("", &[], report.nodes.len() as f64);
    if report.mode == preflight_checks::model::Mode::Cluster {
        links(&mut m, report, &host);
    }
    collectives(&mut m, report);
    history(&mut m, report, &host);
    m.text
}

/// Each node's running totals from its history store (counters: they only grow, so
/// `increase()` over a day counts a node's failing runs), and a gauge per lemon named.
fn history(m: &mut Metrics, report: &Report, host: &dyn Fn(u32) -> String) {
    let kept: Vec<_> = report
        .nodes
        .iter()
        .filter_map(|n| n.facts.history.as_ref().map(|h| (n, h)))
        .filter(|(_, h)| h.problem.is_none())
        .collect();
    if !kept.is_empty() {
        m.family_of(
            "preflight_history_runs_total",
            "Runs this node's history store recorded before this one.",
            "counter",
        );
        for (n, h) in &kept {
            m.sample("", &[("node", &n.hostname)], h.total_runs as f64);
        }
        m.family_of(
            "preflight_history_finding_runs_total",
            "Runs of this node (before this one) that had each finding id with each status, from its history store.",
            "counter",
        );
        for (n, h) in &kept {
            for t in &h.totals {
                m.sample(
                    "",
                    &[("node", &n.hostname), ("id", &t.id), ("status", &t.status)],
                    t.runs as f64,
                );
            }
        }
    }
    let lemons: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.is(preflight_checks::history::ids::LEMON))
        .collect();
    if lemons.is_empty() {
        return;
    }
    m.family(
        "preflight_lemon",
        "1 for each lemon this run named: the node (empty for a pair), the rule (repeat, xid-bursts, link-moves, pair, left-out) and what it is about.",
    );
    let mut seen = std::collections::BTreeSet::new();
    for f in lemons {
        let node = f.node.map(host).unwrap_or_default();
        let rule = f
            .evidence
            .get("rule")
            .and_then(|r| r.as_str())
            .unwrap_or("")
            .to_string();
        if seen.insert((node.clone(), rule.clone(), f.subject.clone())) {
            m.sample(
                "",
                &[("node", &node), ("rule", &rule), ("subject", &f.subject)],
                1.0,
            );
        }
    }
}

/// Links counted by result, and each node's throughput aggregates over its measured links.
fn links(m: &mut Metrics, report: &Report, host: &dyn Fn(u32) -> String) {
    m.family(
        "preflight_links",
        "Ordered node pairs measured in the last run, by result (ok, refused, timeout, unreachable, error).",
    );
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for l in &report.links {
        *by.entry(l.result.as_str()).or_default() += 1;
    }
    for (r, n) in &by {
        m.sample("", &[("result", r)], *n as f64);
    }
    let mut per: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for l in &report.links {
        if let Some(g) = l
            .throughput_gbit_s
            .map(f64::from)
            .filter(|g| g.is_finite() && *g >= 0.0)
        {
            per.entry(l.from).or_default().push(g * 1e9 / 8.0);
            per.entry(l.to).or_default().push(g * 1e9 / 8.0);
        }
    }
    for (name, help, pick) in [
        (
            "preflight_node_link_throughput_min_bytes_per_second",
            "Lowest throughput measured on any link from or to the node, in bytes per second.",
            0usize,
        ),
        (
            "preflight_node_link_throughput_median_bytes_per_second",
            "Median throughput of the node's measured links, in bytes per second.",
            1,
        ),
    ] {
        if per.is_empty() {
            break;
        }
        m.family(name, help);
        for (rank, v) in &mut per {
            v.sort_by(f64::total_cmp);
            let x = if pick == 0 { v[0] } else { v[v.len() / 2] };
            m.sample("", &[("node", &host(*rank))], x);
        }
    }
}

/// The bus bandwidth of the largest message of each measured all-reduce.
fn collectives(m: &mut Metrics, report: &Report) {
    let rows: Vec<(String, String, f64)> = report
        .collectives
        .iter()
        .filter_map(|c| {
            let last = c.rows.iter().max_by_key(|r| r.bytes)?;
            let config = if c.config.is_empty() {
                "advice"
            } else {
                c.config.as_str()
            };
            Some((
                c.transport.clone(),
                config.to_string(),
                last.busbw_gb_s * 1e9,
            ))
        })
        .filter(|(_, _, v)| v.is_finite())
        .collect();
    if rows.is_empty() {
        return;
    }
    m.family(
        "preflight_allreduce_busbw_bytes_per_second",
        "All-reduce bus bandwidth of the largest message size (nccl-tests' busbw), in bytes per second.",
    );
    let mut seen = std::collections::BTreeSet::new();
    for (t, c, v) in rows {
        if seen.insert((t.clone(), c.clone())) {
            m.sample("", &[("transport", &t), ("config", &c)], v);
        }
    }
}

#[derive(Default)]
struct Metrics {
    text: String,
    name: String,
}

impl Metrics {
    /// Starts a gauge family: its HELP and TYPE lines.
    fn family(&mut self, name: &str, help: &str) {
        self.family_of(name, help, "gauge");
    }

    /// Starts a family of `kind` (`gauge`, `counter`).
    fn family_of(&mut self, name: &str, help: &str, kind: &str) {
        self.name = name.to_string();
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, suffix: &str, labels: &[(&str, &str)], v: f64) {
        let _ = write!(self.text, "{}{suffix}", self.name);
        if !labels.is_empty() {
            let inner: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
                .collect();
            let _ = write!(self.text, "{{{}}}", inner.join(","));
        }
        let _ = writeln!(self.text, " {}", number(v));
    }
}

/// A label value escaped as the text format says (`\\`, `\"`, `\n`), cut to 256 characters.
fn label_value(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars().take(256) {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_value("a\"b\\c\nd\u{1b}"), "a\\\"b\\\\c\\nd?");
        assert_eq!(number(1.5), "1.5");
        assert_eq!(number(f64::INFINITY), "+Inf");
    }
}

//! The summary of `preflight simulate`: what was modelled, the phase times predicted on that
//! fabric, the verdict the real judgment reached, and how large the report is.

use preflight_checks::hostlist;
use preflight_checks::model::{Report, Status};
use std::collections::BTreeMap;

pub fn render(report: &Report, heading: &str) -> String {
    let mut out = format!("{heading}\n");
    let json = crate::report::json_len(report);
    out.push_str(&format!("status: {}\n", report.status.as_str()));
    if let Some(m) = &report.measurement {
        out.push_str("predicted phase times (s):\n");
        let mut total = 0.0;
        for p in &m.phases {
            total += p.seconds;
            out.push_str(&format!("  {:<14} {:>9.3}\n", p.phase, p.seconds));
        }
        out.push_str(&format!("  {:<14} {:>9.3}\n", "total", total));
        out.push_str(&format!(
            "links: {} ordered pairs, {} needed a retry; throughput: {}, {} rounds\n",
            m.links_total, m.links_retried, m.throughput_schedule, m.throughput_rounds
        ));
        for s in &m.second_pass {
            out.push_str(&format!(
                "second pass: rank {} (failed with {} peers) against rank {}: out {}, in {}: the {}\n",
                s.node,
                s.failed_peers,
                s.partner,
                s.outbound.as_str(),
                s.inbound.as_str(),
                if s.verdict == "node" { "node" } else { "links" }
            ));
        }
    }
    let mut by_id: BTreeMap<(&str, &str), Vec<String>> = BTreeMap::new();
    for f in report
        .findings
        .iter()
        .filter(|f| matches!(f.status, Status::Warn | Status::Fail | Status::Error))
    {
        by_id
            .entry((f.status.as_str(), f.id.as_str()))
            .or_default()
            .push(
                f.node
                    .map_or_else(|| f.subject.clone(), |n| format!("rank{n}")),
            );
    }
    for ((status, id), who) in &by_id {
        out.push_str(&format!(
            "{status} {id}: {} finding(s): {}\n",
            who.len(),
            hostlist::compress_within(who, 60)
        ));
    }
    if let Some(h) = report
        .recommendation
        .as_ref()
        .and_then(|r| r.healthy_set.as_ref())
    {
        out.push_str(&format!(
            "healthy set: train now on {} of {} nodes; left out {} ({}){}\n",
            h.count,
            h.total,
            h.excluded.len(),
            if h.exclude_hosts.is_empty() {
                "-"
            } else {
                h.exclude_hosts.as_str()
            },
            if h.largest {
                ", proven largest"
            } else {
                ", the best found"
            }
        ));
    }
    out.push_str(&format!("report JSON: {json} bytes\n"));
    out
}

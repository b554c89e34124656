//! The connectivity matrix as a heatmap: one n x n table per network, coloured by result and
//! throughput, with RTT, MTU, throughput, the address and the error in each cell's `title`.
//!
//! Links are grouped by the networks the advice itself considers
//! (`preflight_checks::networks`), best first, so the first table (`table#matrix`) is the
//! network the recommendation chose; links on no candidate network make a last table.

use super::escape::text;
use preflight_checks::model::{LinkOutcome, LinkResult, Report};
use preflight_checks::networks::{self, NetworkEval};
use std::fmt::Write;

/// The networks best first, each with the links whose target address is on it.
pub struct Grouped<'a> {
    pub evals: Vec<NetworkEval>,
    pub groups: Vec<(String, Vec<&'a LinkResult>)>,
}

/// Groups the report's links by network (see the module comment).
pub fn group(report: &Report) -> Grouped<'_> {
    let nodes: Vec<(u32, &_)> = report.nodes.iter().map(|n| (n.rank, &n.facts)).collect();
    let ranks: Vec<u32> = report.nodes.iter().map(|n| n.rank).collect();
    let links = preflight_checks::model::Links::borrowed(&report.links);
    let evals = networks::evaluate(&networks::discover(&nodes, &links), &links, &ranks);
    let mut groups: Vec<(String, Vec<&LinkResult>)> = evals
        .iter()
        .map(|e| (e.network.id.clone(), Vec::new()))
        .collect();
    let mut other = Vec::new();
    for l in &report.links {
        let on = evals.iter().position(|e| {
            e.network
                .members
                .get(&l.to)
                .is_some_and(|m| m.address.to_string() == l.address)
        });
        match on {
            Some(i) => groups[i].1.push(l),
            None => other.push(l),
        }
    }
    groups.retain(|(_, links)| !links.is_empty());
    if !other.is_empty() {
        groups.push(("other addresses".to_string(), other));
    }
    Grouped { evals, groups }
}

/// The section: one table per network; empty when the report has no links.
pub fn section(report: &Report, grouped: &Grouped) -> String {
    if grouped.groups.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"connectivity\"><h2>Connectivity</h2>\n<p class=\"note\">Row: from, \
         column: to. Green is a working pair, darker is faster (relative to the fastest pair \
         on that network; pale green: connected, throughput not measured); red did not connect. The number is Gbit/s, else the RTT. Hover a cell for RTT, MTU, throughput, \
         address and error.</p>\n",
    );
    for (i, (label, links)) in grouped.groups.iter().enumerate() {
        let id = if i == 0 {
            "matrix".to_string()
        } else {
            format!("matrix-{}", i + 1)
        };
        let _ = writeln!(out, "<h3>Network {}</h3>", text(label));
        out.push_str(&table(report, &id, label, links));
    }
    out.push_str(LEGEND);
    out.push_str("</section>\n");
    out
}

pub(super) const LEGEND: &str = "<p class=\"legend\"><span class=\"sw\" style=\"background:hsl(130,55%,42%)\"></span>ok, fastest \
<span class=\"sw\" style=\"background:hsl(55,75%,72%)\"></span>ok, slowest \
<span class=\"sw r-timeout\"></span>timeout (filtered) \
<span class=\"sw r-refused\"></span>refused \
<span class=\"sw r-unreachable\"></span>unreachable / error \
<span class=\"sw r-none\"></span>not measured</p>\n";

fn table(report: &Report, id: &str, label: &str, links: &[&LinkResult]) -> String {
    let max_tp = links
        .iter()
        .filter(|l| l.result == LinkOutcome::Ok)
        .filter_map(|l| l.throughput_gbit_s.map(f64::from))
        .filter(|t| t.is_finite())
        .fold(0.0_f64, f64::max);
    let host = |rank: u32| {
        report
            .nodes
            .iter()
            .find(|n| n.rank == rank)
            .map(|n| n.hostname.as_str())
            .unwrap_or("?")
    };
    let mut out = format!(
        "<table class=\"matrix\" id=\"{id}\" data-network=\"{}\">\n<thead><tr><th class=\"corner\">from \\ to</th>",
        text(label)
    );
    for n in &report.nodes {
        let _ = write!(
            out,
            "<th scope=\"col\" title=\"{}\">{}</th>",
            text(&n.hostname),
            n.rank
        );
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for from in &report.nodes {
        let _ = write!(
            out,
            "<tr><th scope=\"row\" title=\"{}\">{}</th>",
            text(&from.hostname),
            from.rank
        );
        for to in &report.nodes {
            let (f, t) = (from.rank, to.rank);
            if f == t {
                let _ = write!(
                    out,
                    "<td class=\"self\" data-from=\"{f}\" data-to=\"{t}\" data-result=\"self\">·</td>"
                );
                continue;
            }
            let link = links.iter().find(|l| l.from == f && l.to == t);
            let Some(l) = link else {
                let _ = write!(
                    out,
                    "<td class=\"r-none\" data-from=\"{f}\" data-to=\"{t}\" data-result=\"none\" title=\"{} -&gt; {}: not measured on this network\">-</td>",
                    text(host(f)),
                    text(host(t))
                );
                continue;
            };
            let result = l.result.as_str();
            let (style, shown) = match (l.result, l.throughput_gbit_s.map(f64::from)) {
                (LinkOutcome::Ok, Some(tp)) if tp.is_finite() => {
                    let r = if max_tp > 0.0 {
                        (tp / max_tp).clamp(0.0, 1.0)
                    } else {
                        1.0
                    };
                    let (hue, light) = (55.0 + 75.0 * r, 72.0 - 30.0 * r);
                    let ink = if light < 52.0 { ";color:#fff" } else { "" };
                    (
                        format!(" style=\"background:hsl({hue:.0},60%,{light:.0}%){ink}\""),
                        format!("{tp:.2}"),
                    )
                }
                (LinkOutcome::Ok, _) => (
                    String::new(),
                    l.rtt_us
                        .filter(|r| r.is_finite())
                        .map_or("ok".to_string(), |r| format!("{r:.0} µs")),
                ),
                _ => (String::new(), result.to_string()),
            };
            let _ = write!(
                out,
                "<td class=\"r-{result}\" data-from=\"{f}\" data-to=\"{t}\" data-result=\"{result}\"{style} title=\"{}\">{shown}</td>",
                title(l, host(f), host(t))
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// The cell's hover text, escaped for an attribute (lines joined by `&#10;`).
fn title(l: &LinkResult, from: &str, to: &str) -> String {
    let mut lines = vec![
        format!(
            "{} (rank {}) -&gt; {} (rank {})",
            text(from),
            l.from,
            text(to),
            l.to
        ),
        format!("result: {}", l.result.as_str()),
        format!(
            "to: {} on {}",
            text(&preflight_checks::net::host_port(&l.address, l.port)),
            text(&l.interface)
        ),
    ];
    if let Some(r) = l.rtt_us {
        let p99 = l
            .rtt_p99_us
            .map(|p| format!(", p99 {p:.0} µs"))
            .unwrap_or_default();
        lines.push(format!("RTT p50 {r:.0} µs{p99}"));
    }
    if let Some(t) = l.throughput_gbit_s {
        lines.push(format!("throughput {t:.2} Gbit/s"));
    }
    if let Some(m) = l.mtu {
        lines.push(format!("path MTU {m}"));
    }
    if let Some(e) = &l.error {
        lines.push(format!("error: {}", text(e)));
    }
    lines.join("&#10;")
}

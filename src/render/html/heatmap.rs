//! Above [`TABLE_MAX`] nodes the connectivity matrix is a canvas per network, one pixel per
//! ordered pair, drawn by the page's script from one byte per cell (`data-cells`, base64): the
//! page stays a few MB at 1024 nodes and draws in a fraction of a second. The failed links and
//! the slowest are listed under each canvas as text.
//!
//! Cell bytes: 0 not measured (and the diagonal), 1 timeout, 2 refused, 3 unreachable or error,
//! 16..=255 ok, higher is faster (throughput relative to the network's fastest pair, or, where no
//! throughput was measured, RTT relative to its slowest).

use super::escape::text;
use crate::report_compact::{self, NetworkLinks, base64};
use preflight_checks::model::{LinkOutcome, Report};
use std::fmt::Write;

/// Most nodes drawn as an HTML table of cells.
pub const TABLE_MAX: usize = 64;
/// Links listed as text under a canvas.
const LISTED: usize = 20;

/// The section, one canvas per network; empty without links.
pub fn section(report: &Report) -> String {
    let nets: Vec<NetworkLinks> = report_compact::networks(report)
        .into_iter()
        .filter(|n| n.measured > 0)
        .collect();
    if nets.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"connectivity\"><h2>Connectivity</h2>\n<p class=\"note\">One pixel per \
         ordered pair (row: from, column: to, in rank order). Green is a working pair, darker is \
         faster (throughput where measured, else RTT); red timed out, orange was refused, dark \
         red unreachable; grey was not measured. The failed and the slowest pairs are listed \
         under each map.</p>\n",
    );
    for (i, net) in nets.iter().enumerate() {
        let id = if i == 0 {
            "matrix".to_string()
        } else {
            format!("matrix-{}", i + 1)
        };
        out.push_str(&canvas(report, &id, net));
    }
    out.push_str(super::matrix::LEGEND);
    out.push_str("</section>\n");
    out
}

fn cells(net: &NetworkLinks) -> Vec<u8> {
    let ok = |c: &&report_compact::Cell| c.result == Some(LinkOutcome::Ok);
    let max_tp = net
        .cells
        .iter()
        .filter(ok)
        .filter_map(|c| c.throughput_gbit_s)
        .fold(0.0_f32, f32::max);
    let max_rtt = net
        .cells
        .iter()
        .filter(ok)
        .filter_map(|c| c.rtt_us)
        .fold(0.0_f32, f32::max);
    net.cells
        .iter()
        .map(|c| match c.result {
            None => 0,
            Some(LinkOutcome::Timeout) => 1,
            Some(LinkOutcome::Refused) => 2,
            Some(LinkOutcome::Unreachable | LinkOutcome::Error | LinkOutcome::Invalid) => 3,
            Some(LinkOutcome::Ok) => {
                let good = match (c.throughput_gbit_s, c.rtt_us) {
                    (Some(t), _) if max_tp > 0.0 => t / max_tp,
                    (_, Some(r)) if max_rtt > 0.0 => 1.0 - 0.5 * r / max_rtt,
                    _ => 0.5,
                };
                16 + (good.clamp(0.0, 1.0) * 239.0).round() as u8
            }
        })
        .collect()
}

fn canvas(report: &Report, id: &str, net: &NetworkLinks) -> String {
    let n = net.ranks.len();
    let bytes = cells(net);
    let failed = bytes.iter().filter(|b| (1..=3).contains(*b)).count();
    let ok = bytes.iter().filter(|b| **b >= 16).count();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<h3>Network {}</h3>\n<p class=\"note\">{ok} of {} measured pairs ok, {failed} failed.</p>",
        text(&net.name),
        net.measured
    );
    let _ = writeln!(
        out,
        "<canvas class=\"heatmap\" id=\"{id}\" width=\"{n}\" height=\"{n}\" data-n=\"{n}\" data-network=\"{}\" data-ok=\"{ok}\" data-failed=\"{failed}\" data-cells=\"{}\">connectivity of {n} nodes</canvas>",
        text(&net.name),
        base64(&bytes)
    );
    // The worst pairs as text: failed first, then the slowest measured.
    let host = |i: usize| {
        let r = net.ranks[i];
        report
            .nodes
            .iter()
            .find(|x| x.rank == r)
            .map(|x| text(&x.hostname))
            .unwrap_or_else(|| format!("rank {r}"))
    };
    let mut rows: Vec<(usize, usize, String)> = Vec::new();
    for f in 0..n {
        for t in 0..n {
            if rows.len() == LISTED {
                break;
            }
            if let Some(r) = net.cell(f, t).result.filter(|r| *r != LinkOutcome::Ok) {
                rows.push((f, t, r.as_str().to_string()));
            }
        }
    }
    let mut measured: Vec<(f32, usize, usize)> = (0..n * n)
        .filter_map(|c| {
            let cell = &net.cells[c];
            (cell.result == Some(LinkOutcome::Ok))
                .then_some(cell.throughput_gbit_s)
                .flatten()
                .map(|g| (g, c / n, c % n))
        })
        .collect();
    measured.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (g, f, t) in measured
        .into_iter()
        .take(LISTED.saturating_sub(rows.len()).min(5))
    {
        rows.push((f, t, format!("ok, {g:.2} Gbit/s")));
    }
    if !rows.is_empty() {
        out.push_str("<table class=\"worst\"><thead><tr><th>from</th><th>to</th><th>result</th></tr></thead><tbody>\n");
        for (f, t, what) in rows {
            let _ = writeln!(
                out,
                "<tr data-from=\"{}\" data-to=\"{}\"><td>{} ({})</td><td>{} ({})</td><td>{}</td></tr>",
                net.ranks[f],
                net.ranks[t],
                net.ranks[f],
                host(f),
                net.ranks[t],
                host(t),
                text(&what)
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out
}

//! The faster set on the page: `section#faster-set` with the prediction with and without the slow nodes (`table#faster-prediction`), the set's hosts and the launch on it (`div#faster-launch`, one `pre.cmd` per node).

use super::command;
use super::escape::{cmd, text};
use preflight_checks::model::Report;
use std::fmt::Write;

/// The section, or nothing when the report offers no faster set.
pub fn section(report: &Report) -> String {
    let Some(f) = report
        .recommendation
        .as_ref()
        .and_then(|r| r.faster_set.as_ref())
    else {
        return String::new();
    };
    let mut out = format!(
        "<section id=\"faster-set\" data-slow=\"{}\"><h2>Faster without {}: ~{:.1}&times; the all-reduce&#39;s bus bandwidth</h2>\n<p>{}</p>\n",
        text(&f.slow_hosts),
        text(&f.slow_hosts),
        f.speedup,
        cmd(&f.summary),
    );
    let _ = writeln!(
        out,
        "<p>link.slow names {} slow with every partner, and a ring all-reduce runs at the pace of its slowest hop. The launch on every node above stays valid; this one trades {} node(s) for speed, and pays above {:.2}&times; ({} / {}).</p>",
        text(&f.slow_hosts),
        f.nodes_with.saturating_sub(f.nodes_without),
        f.break_even,
        f.nodes_with,
        f.nodes_without,
    );
    out.push_str("<table id=\"faster-prediction\"><thead><tr><th></th><th>nodes</th><th>ring bound (Gbit/s)</th><th>bus bandwidth (GB/s)</th><th>s per GB all-reduced</th></tr></thead><tbody>\n");
    let _ = writeln!(
        out,
        "<tr data-set=\"with\"><td>with {}</td><td>{}</td><td>{:.3}</td><td>{:.4} ({})</td><td>{:.3}</td></tr>",
        text(&f.slow_hosts),
        f.nodes_with,
        f.ring_gbit_s_with,
        f.busbw_gb_s_with,
        if f.measured { "measured" } else { "bound" },
        f.seconds_per_gb_with,
    );
    let _ = writeln!(
        out,
        "<tr data-set=\"without\"><td>without</td><td>{}</td><td>{:.3}</td><td>{:.4} (predicted)</td><td>{:.3}</td></tr>",
        f.nodes_without, f.ring_gbit_s_without, f.busbw_gb_s_without, f.seconds_per_gb_without,
    );
    out.push_str("</tbody></table>\n");
    let _ = writeln!(
        out,
        "<p>The set: <code id=\"faster-hosts\">{}</code>; leave out <code>{}</code>.</p>",
        text(&f.set.hosts),
        text(&f.set.exclude_hosts),
    );
    if f.set.constraints.met && !f.set.launch.is_empty() {
        out.push_str("<h3>Launch on the set</h3>\n<div id=\"faster-launch\">\n");
        for l in &f.set.launch {
            let _ = writeln!(
                out,
                "<div class=\"launch\" data-node=\"{}\"><p>{} (rank {} in the set):</p>",
                l.node,
                text(&l.hostname),
                l.node_rank
            );
            out.push_str(&command(&l.command));
            out.push_str("</div>\n");
        }
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
    out
}

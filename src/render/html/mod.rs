//! Report -> one self-contained HTML page: the verdict, the findings with their fixes, the
//! connectivity heatmap, the all-reduce chart, the recommended environment and launch commands,
//! and the nodes. Nothing is fetched: CSS, JS and the SVG chart are inline, and the page's
//! Content-Security-Policy allows no network at all and no script but its own (by hash).
//!
//! Every string from the report goes through [`escape`]; the script reads the page, never
//! writes report data as markup (no `innerHTML`). Stable hooks for tests and scripts:
//! `#verdict[data-status]`, `section#findings div.finding[data-id][data-status][data-node]`,
//! `table#matrix td[data-from][data-to][data-result]`, `svg#busbw-chart g.series circle.pt`,
//! `table.nodes`, `table#env`, `section#faster-set[data-slow]`, and `pre.cmd` for every command
//! (the script adds its Copy button).

mod chart;
pub mod escape;
mod faster;
mod heatmap;
mod matrix;

use crate::report_compact::base64;
use escape::{cmd, text};
use preflight_checks::model::{Action, Finding, Mode, Report, Status};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The whole page.
pub fn render(report: &Report) -> String {
    let grouped = matrix::group(report);
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{}'; img-src data:; base-uri 'none'; form-action 'none'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"{} {}\">\n<title>preflight: {} · {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        base64(&Sha256::digest(SCRIPT.as_bytes())),
        text(&report.tool.name),
        text(&report.tool.version),
        report.status.as_str().to_uppercase(),
        what(report),
    );
    out.push_str(&verdict(report));
    out.push_str(&nav(report, &grouped));
    out.push_str("<main>\n");
    out.push_str(&findings(report));
    if report.nodes.len() > heatmap::TABLE_MAX {
        out.push_str(&heatmap::section(report));
    } else {
        out.push_str(&matrix::section(report, &grouped));
    }
    out.push_str(&chart::section(report));
    out.push_str(&recommendation(report));
    out.push_str(&faster::section(report));
    out.push_str(&nodes(report, &grouped));
    out.push_str("</main>\n");
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    out
}

/// "cluster of 3 nodes" / "node gpu01", escaped.
fn what(report: &Report) -> String {
    match report.mode {
        Mode::Cluster => format!("cluster of {} nodes", report.nodes.len()),
        Mode::Node => format!(
            "node {}",
            report
                .nodes
                .first()
                .map(|n| text(&n.hostname))
                .unwrap_or_default()
        ),
    }
}

fn count(report: &Report, s: Status) -> usize {
    report.findings.iter().filter(|f| f.status == s).count()
}

fn verdict(report: &Report) -> String {
    let (fail, error, warn) = (
        count(report, Status::Fail),
        count(report, Status::Error),
        count(report, Status::Warn),
    );
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let headline = match report.status {
        Status::Pass | Status::Skip => "Ready to launch: every check passed".to_string(),
        Status::Warn => format!(
            "Ready to launch, with {}",
            plural(warn, "warning", "warnings")
        ),
        Status::Fail | Status::Error => {
            let mut parts = Vec::new();
            if fail > 0 {
                parts.push(plural(fail, "failing finding", "failing findings"));
            }
            if error > 0 {
                parts.push(plural(
                    error,
                    "check that could not run",
                    "checks that could not run",
                ));
            }
            if warn > 0 {
                parts.push(plural(warn, "warning", "warnings"));
            }
            format!("Not ready: {}", parts.join(", "))
        }
    };
    let hosts: Vec<String> = report
        .nodes
        .iter()
        .take(8)
        .map(|n| text(&n.hostname))
        .collect();
    let more = report.nodes.len().saturating_sub(8);
    let status = report.status.as_str();
    // A node report names its one host once ("node vm"); a cluster's lists its hosts.
    let who = match report.mode {
        Mode::Node => what(report),
        Mode::Cluster => format!(
            "{} · {}{}",
            what(report),
            hosts.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ),
    };
    let mut out = format!(
        "<header id=\"verdict\" class=\"st-{status}\" data-status=\"{status}\">\n<div class=\"badge big\">{}</div>\n<div>\n<h1>{headline}</h1>\n<p>{who}</p>\n<p class=\"meta\">{} {} · {} · ",
        status.to_uppercase(),
        text(&report.tool.name),
        text(&report.tool.version),
        text(&report.schema),
    );
    let mut counts = Vec::new();
    for s in [
        Status::Fail,
        Status::Error,
        Status::Warn,
        Status::Pass,
        Status::Skip,
    ] {
        let n = count(report, s);
        if n > 0 {
            counts.push(format!("{n} {s}"));
        }
    }
    out.push_str(&counts.join(", "));
    if let Some(p) = &report.placement {
        let _ = write!(out, " · ranks from {}", text(&p.source));
    }
    out.push_str("</p>\n");
    if let Some(t) = &report.trimmed {
        let _ = writeln!(
            out,
            "<p class=\"note\">This is a node's copy of a large report: {} of {} links kept. Rank 0's report is whole.</p>",
            t.links_kept, t.links_total
        );
    }
    out.push_str("</div>\n</header>\n");
    out
}

fn nav(report: &Report, grouped: &matrix::Grouped) -> String {
    let mut links = vec![("findings", "Findings")];
    if !grouped.groups.is_empty() || report.link_matrix.is_some() {
        links.push(("connectivity", "Connectivity"));
    }
    if !report.collectives.is_empty() {
        links.push(("allreduce", "All-reduce"));
    }
    if report.recommendation.is_some() {
        links.push(("recommendation", "Environment and launch"));
    }
    if report
        .recommendation
        .as_ref()
        .is_some_and(|r| r.faster_set.is_some())
    {
        links.push(("faster-set", "Faster set"));
    }
    links.push(("nodes", "Nodes"));
    let items: Vec<String> = links
        .iter()
        .map(|(id, name)| format!("<a href=\"#{id}\">{name}</a>"))
        .collect();
    format!("<nav>{}</nav>\n", items.join(" "))
}

/// Worst first; passing and skipped findings are folded away until asked for.
fn findings(report: &Report) -> String {
    // Worst first; within a status, one id's findings together, ids in order of first appearance.
    let mut first_seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, f) in report.findings.iter().enumerate() {
        first_seen.entry(f.id.as_str()).or_insert(i);
    }
    let mut sorted: Vec<&Finding> = report.findings.iter().collect();
    sorted.sort_by_key(|f| (std::cmp::Reverse(f.status), first_seen[f.id.as_str()]));
    let quiet = sorted
        .iter()
        .filter(|f| matches!(f.status, Status::Pass | Status::Skip))
        .count();
    let mut out = format!(
        "<section id=\"findings\"><h2>Findings</h2>\n<label class=\"toggle\"><input type=\"checkbox\" id=\"show-all\"> show the {quiet} passing and skipped checks</label>\n"
    );
    if quiet == sorted.len() {
        out.push_str(
            "<p class=\"note\">Nothing to fix: every check passed or did not apply.</p>\n",
        );
    }
    // Sorted so, one id's findings of one status are consecutive.
    for group in sorted.chunk_by(|a, b| a.status == b.status && a.id == b.id) {
        if group.len() < GROUP_FROM {
            for f in group {
                out.push_str(&finding(report, f));
            }
            continue;
        }
        out.push_str(&folded(report, group));
    }
    out.push_str("</section>\n");
    out
}

/// Passed or skipped findings of one id shown inside its folded group; the rest are counted.
const FOLDED_PASSES: usize = 16;
/// Warnings, failures or errors of one id shown inside its folded group; the rest are counted.
const FOLDED_PROBLEMS: usize = 256;
/// Findings of one id and status from this many subjects on are folded under one line.
const GROUP_FROM: usize = 4;

/// `WARN link.slow on 56 subjects`, the first summary, and the findings inside (open when failing).
fn folded(report: &Report, group: &[&Finding]) -> String {
    let first = group[0];
    let status = first.status.as_str();
    let quiet = if matches!(first.status, Status::Pass | Status::Skip) {
        " quiet"
    } else {
        ""
    };
    let open = if first.status >= Status::Fail {
        " open"
    } else {
        ""
    };
    let mut out = format!(
        "<details class=\"group st-{status}{quiet}\" data-id=\"{}\" data-count=\"{}\"{open}><summary><span class=\"badge\">{}</span> <code class=\"id\">{}</code> on {} subjects, first: {}</summary>\n",
        text(&first.id),
        group.len(),
        status.to_uppercase(),
        text(&first.id),
        group.len(),
        text(&first.summary),
    );
    // A large cluster's passes would make the page tens of MB: the first few stand for the rest.
    let cap = if first.status >= Status::Warn {
        FOLDED_PROBLEMS
    } else {
        FOLDED_PASSES
    };
    for f in group.iter().take(cap) {
        out.push_str(&finding(report, f));
    }
    if group.len() > cap {
        let _ = writeln!(
            out,
            "<p class=\"note more\">and {} more like these (the JSON report has each)</p>",
            group.len() - cap
        );
    }
    out.push_str("</details>\n");
    out
}

fn finding(report: &Report, f: &Finding) -> String {
    let status = f.status.as_str();
    let quiet = if matches!(f.status, Status::Pass | Status::Skip) {
        " quiet"
    } else {
        ""
    };
    let node = f.node.map(|r| r.to_string()).unwrap_or_default();
    let place = match f.node {
        Some(r) => match report.node(r) {
            Some(n) if report.mode == Mode::Cluster => {
                format!("rank {r} ({})", text(&n.hostname))
            }
            Some(n) => text(&n.hostname),
            None => format!("rank {r}"),
        },
        None => "cluster".to_string(),
    };
    let mut out = format!(
        "<div class=\"finding st-{status}{quiet}\" data-id=\"{}\" data-status=\"{status}\" data-node=\"{node}\">\n<div class=\"fhead\"><span class=\"badge\">{}</span> <code class=\"id\">{}</code> <span class=\"where\">{place}</span>",
        text(&f.id),
        status.to_uppercase(),
        text(&f.id),
    );
    if !f.subject.is_empty() {
        let _ = write!(out, " <span class=\"subject\">{}</span>", text(&f.subject));
    }
    let _ = writeln!(out, "</div>\n<p class=\"summary\">{}</p>", text(&f.summary));
    if let Some(r) = f.remedy_of().filter(|r| r.action != Action::None) {
        let _ = writeln!(
            out,
            "<p class=\"action\" data-action=\"{a}\" data-problem=\"{p}\">Action: <strong>{a}</strong> ({p} problem)</p>",
            a = r.action,
            p = r.problem
        );
    }
    if let Some(fix) = &f.fix {
        out.push_str("<div class=\"fix\">");
        if !fix.hint.is_empty() {
            let _ = write!(out, "<p class=\"hint\">Fix: {}</p>", text(&fix.hint));
        }
        for c in &fix.commands {
            out.push_str(&command(c));
        }
        out.push_str("</div>\n");
    }
    if !f.evidence.is_empty() {
        out.push_str("<details class=\"evidence\"><summary>Evidence</summary><dl>");
        for (k, v) in &f.evidence {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", text(k), text(&v));
        }
        out.push_str("</dl></details>\n");
    }
    out.push_str("</div>\n");
    out
}

/// One command, with room for the Copy button the script adds.
fn command(c: &str) -> String {
    format!(
        "<div class=\"cmdrow\"><pre class=\"cmd\">{}</pre></div>\n",
        cmd(c)
    )
}

fn recommendation(report: &Report) -> String {
    let Some(rec) = &report.recommendation else {
        return String::new();
    };
    let mut out = String::from(
        "<section id=\"recommendation\"><h2>Recommended environment and launch</h2>\n",
    );
    if !rec.env.is_empty() {
        out.push_str("<table id=\"env\"><thead><tr><th>variable</th><th>value (every node)</th></tr></thead><tbody>\n");
        for (k, v) in &rec.env {
            let _ = writeln!(
                out,
                "<tr><td><code>{}</code></td><td><code>{}</code></td></tr>",
                text(k),
                text(v)
            );
        }
        out.push_str("</tbody></table>\n");
        let export = rec
            .env
            .iter()
            .map(|(k, v)| format!("{k}={}", crate::shell::quote(v)))
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&command(&format!("export {export}")));
    }
    if !rec.node_env.is_empty() {
        out.push_str("<h3>Per node</h3>\n<table id=\"node-env\"><thead><tr><th>rank</th><th>host</th><th>variable</th><th>value</th></tr></thead><tbody>\n");
        for (rank, env) in &rec.node_env {
            let host = report
                .nodes
                .iter()
                .find(|n| n.rank.to_string() == *rank)
                .map(|n| text(&n.hostname))
                .unwrap_or_default();
            for (k, v) in env {
                let _ = writeln!(
                    out,
                    "<tr data-rank=\"{}\"><td>{}</td><td>{host}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
                    text(rank),
                    text(rank),
                    text(k),
                    text(v)
                );
            }
        }
        out.push_str("</tbody></table>\n");
    }
    if let Some(addr) = &rec.master_addr {
        let _ = writeln!(
            out,
            "<p>Master: <code id=\"master\">{}</code></p>",
            text(&preflight_checks::net::host_port(addr, rec.master_port))
        );
    }
    if !rec.reasons.is_empty() {
        out.push_str("<h3>Why</h3>\n<ul class=\"reasons\">\n");
        for r in &rec.reasons {
            let _ = writeln!(out, "<li>{}</li>", cmd(r));
        }
        out.push_str("</ul>\n");
    }
    if !rec.launch.is_empty() {
        let blocked = report
            .findings
            .iter()
            .any(|f| matches!(f.status, Status::Fail | Status::Error));
        if blocked {
            out.push_str(
                "<h3>Launch commands</h3>\n<p class=\"blocked\"><strong>Not yet:</strong> fix the failing findings above first, then run preflight again; these commands are what the advice gives so far.</p>\n<div id=\"launch\" class=\"blocked\">\n",
            );
        } else {
            out.push_str("<h3>Launch commands</h3>\n<div id=\"launch\">\n");
        }
        for l in &rec.launch {
            let host = report
                .nodes
                .iter()
                .find(|n| n.rank == l.node_rank)
                .map(|n| format!(" ({})", text(&n.hostname)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "<div class=\"launch\" data-rank=\"{}\"><p>Rank {}{host}:</p>",
                l.node_rank, l.node_rank
            );
            out.push_str(&command(&l.command));
            out.push_str("</div>\n");
        }
        out.push_str("</div>\n");
    }
    if let Some(s) = &rec.standalone {
        out.push_str("<h3>On this node alone</h3>\n");
        out.push_str(&command(s));
    }
    out.push_str("</section>\n");
    out
}

fn nodes(report: &Report, grouped: &matrix::Grouped) -> String {
    let mut out = String::from(
        "<section id=\"nodes\"><h2>Nodes</h2>\n<table class=\"nodes\"><thead><tr><th>rank</th><th>host</th><th>address</th><th>GPUs</th><th>driver</th><th>CUDA</th><th>NCCL</th><th>torch</th></tr></thead><tbody>\n",
    );
    let best = grouped.evals.first();
    for n in &report.nodes {
        let f = &n.facts;
        let addr = best
            .and_then(|e| e.network.members.get(&n.rank))
            .map(|m| format!("{} ({})", m.address, text(&m.interface)))
            .or_else(|| {
                f.net
                    .interfaces
                    .iter()
                    .filter(|i| i.kind != preflight_checks::model::IfKind::Loopback && i.up)
                    .find_map(|i| {
                        i.ipv4
                            .first()
                            .map(|a| format!("{} ({})", a.addr, text(&i.name)))
                    })
            })
            .unwrap_or_else(|| "-".into());
        let gpus = match f.gpu.gpus.first() {
            None => "0".to_string(),
            Some(g) => format!("{} × {}", f.gpu.gpus.len(), text(&g.name)),
        };
        let v = |s: &Option<String>| s.as_deref().map(text).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "<tr data-rank=\"{}\"><td>{}</td><td class=\"host\">{}</td><td>{addr}</td><td>{gpus}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            n.rank,
            n.rank,
            text(&n.hostname),
            v(&f.gpu.driver_version),
            v(&f.gpu.cuda_driver_version),
            v(&f.nccl.version),
            v(&f.nccl.torch_version),
        );
    }
    out.push_str("</tbody></table>\n</section>\n");
    out
}

#[cfg(test)]
mod tests;

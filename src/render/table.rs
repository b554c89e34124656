//! Report -> human table (comfy-table): findings grouped by area, then the recommended environment and commands.

use super::Style;
use super::sanitize::{cut, line, shown};
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table, presets};
use preflight_checks::model::{Finding, Mode, Report, Status};
use serde_json::Value;
use std::fmt::Write;

/// Renders the whole report for a terminal or a log.
pub fn render(report: &Report, style: Style) -> String {
    let mut out = String::new();
    out.push_str(&headline(report));
    out.push('\n');
    if report.mode == Mode::Cluster {
        out.push_str(&super::cluster::nodes_table(report, style));
        out.push('\n');
        out.push_str(&super::cluster::connectivity(report, style));
        out.push_str(&super::collective::blocks(report));
    }
    out.push_str(&findings_table(&report.findings, report.mode, style));
    out.push('\n');
    if let Some(rec) = &report.recommendation {
        out.push('\n');
        out.push_str(&recommendation_block(report, rec));
    }
    out
}

/// Cluster mode on a rank other than 0: this node's findings (and cluster-wide ones) and its own command.
pub fn render_for_rank(report: &Report, style: Style, rank: u32) -> String {
    if rank == 0 || report.mode == Mode::Node {
        return render(report, style);
    }
    let mut own = report.clone();
    own.findings
        .retain(|f| f.node.is_none() || f.node == Some(rank));
    let mut out = headline(&own);
    out.push('\n');
    out.push_str(&findings_table(&own.findings, own.mode, style));
    out.push('\n');
    if let Some(rec) = report
        .recommendation
        .as_ref()
        .filter(|r| r.launch.iter().any(|l| l.node_rank == rank))
    {
        out.push_str("\nYour command (this node is rank ");
        out.push_str(&rank.to_string());
        out.push_str("):\n");
        for l in rec.launch.iter().filter(|l| l.node_rank == rank) {
            out.push_str(&format!("  {}\n", line(&l.command)));
        }
        out.push_str(
            "The full cluster report is printed on rank 0 (or use --format json / --output).\n",
        );
    }
    out
}

fn headline(report: &Report) -> String {
    let hosts: Vec<String> = report
        .nodes
        .iter()
        .map(|n| shown(&n.hostname).into_owned())
        .collect();
    let mut counts = String::new();
    for s in [
        Status::Fail,
        Status::Error,
        Status::Warn,
        Status::Pass,
        Status::Skip,
    ] {
        let n = report.findings.iter().filter(|f| f.status == s).count();
        if n > 0 {
            let _ = write!(
                counts,
                "{}{n} {s}",
                if counts.is_empty() { "" } else { ", " }
            );
        }
    }
    let what = match report.mode {
        Mode::Node => format!("node check on {}", hosts.join(", ")),
        Mode::Cluster => format!("cluster check of {} nodes", report.nodes.len()),
    };
    format!(
        "{} {} · {what} · {counts} · overall {}\n",
        report.tool.name,
        report.tool.version,
        report.status.as_str().to_uppercase()
    )
}

fn status_cell(s: Status, style: Style) -> Cell {
    let cell = Cell::new(s.as_str().to_uppercase());
    if !style.color {
        return cell;
    }
    match s {
        Status::Pass => cell.fg(Color::Green),
        Status::Skip => cell.add_attribute(Attribute::Dim),
        Status::Warn => cell.fg(Color::Yellow).add_attribute(Attribute::Bold),
        Status::Fail => cell.fg(Color::Red).add_attribute(Attribute::Bold),
        Status::Error => cell.fg(Color::Magenta).add_attribute(Attribute::Bold),
    }
}

/// `area` of an id: `net` for `net.no-interface`.
fn area(id: &str) -> &str {
    id.split('.').next().unwrap_or(id)
}

pub(super) fn findings_table(findings: &[Finding], mode: Mode, style: Style) -> String {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(style.width);
    if !style.color {
        table.force_no_tty();
    }
    let mut header = vec!["area", "status", "check", "subject"];
    if mode == Mode::Cluster {
        header.push("node");
    }
    header.extend(["finding", "fix"]);
    table.set_header(header);
    // Stable grouping by area, keeping the checks' own order inside an area.
    let mut areas: Vec<&str> = Vec::new();
    for f in findings {
        if !areas.contains(&area(&f.id)) {
            areas.push(area(&f.id));
        }
    }
    for a in areas {
        let mut first = true;
        for f in findings.iter().filter(|f| area(&f.id) == a) {
            let mut row = vec![
                Cell::new(if first { shown(a) } else { "".into() }),
                status_cell(f.status, style),
                Cell::new(shown(&f.id)),
                Cell::new(shown(&f.subject)),
            ];
            if mode == Mode::Cluster {
                row.push(Cell::new(
                    f.node
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "all".into()),
                ));
            }
            row.push(Cell::new(cut(&finding_text(f), MAX_CELL)));
            row.push(Cell::new(cut(&fix_text(f), MAX_CELL)));
            table.add_row(row);
            first = false;
        }
    }
    table.to_string()
}

/// A cell made of several fields (each already through `shown`) is cut here as a whole.
const MAX_CELL: usize = 4 * super::sanitize::MAX_SHOWN;

/// The summary, plus the evidence for anything that is not a pass; report text escaped.
fn finding_text(f: &Finding) -> String {
    let mut s = shown(&f.summary).into_owned();
    if matches!(f.status, Status::Warn | Status::Fail | Status::Error) {
        for (k, v) in f.evidence.iter().filter(|(_, v)| !v.is_null()) {
            let _ = write!(s, "\n  {}: {}", shown(k), shown(&evidence_value(v)));
        }
    }
    s
}

/// A compact, bounded rendering of one evidence value.
fn evidence_value(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    };
    const MAX: usize = 160;
    if s.chars().count() > MAX {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut}… (full value in --format json)")
    } else {
        s
    }
}

fn fix_text(f: &Finding) -> String {
    match &f.fix {
        None => String::new(),
        Some(fix) => {
            let mut s = shown(&fix.hint).into_owned();
            for c in &fix.commands {
                let _ = write!(s, "\n$ {}", shown(c));
            }
            s
        }
    }
}

fn recommendation_block(report: &Report, rec: &preflight_checks::model::Recommendation) -> String {
    let mut s = String::new();
    let who = match report.mode {
        Mode::Node => report
            .nodes
            .first()
            .map(|n| shown(&n.hostname).into_owned())
            .unwrap_or_default(),
        Mode::Cluster => "every node".to_string(),
    };
    let _ = writeln!(s, "Recommended environment for {who}:");
    for (k, v) in &rec.env {
        let _ = writeln!(s, "  export {}={}", shown(k), line(&crate::shell::quote(v)));
    }
    for (rank, env) in &rec.node_env {
        let _ = writeln!(s, "  on rank {}:", shown(rank));
        for (k, v) in env {
            let _ = writeln!(
                s,
                "    export {}={}",
                shown(k),
                line(&crate::shell::quote(v))
            );
        }
    }
    if !rec.reasons.is_empty() {
        let _ = writeln!(s, "Why:");
        for r in &rec.reasons {
            let _ = writeln!(s, "  - {}", line(r));
        }
    }
    if rec.standalone.is_none() && rec.launch.is_empty() {
        return s;
    }
    let _ = writeln!(s, "Launch:");
    if let Some(one) = &rec.standalone {
        let _ = writeln!(s, "  single node:\n    {}", line(one));
    }
    for l in &rec.launch {
        let label = match report.mode {
            Mode::Node if rec.standalone.is_some() => {
                "multi-node, this node as rank 0 (on the others use --node-rank=1..N-1; set NNODES)"
                    .to_string()
            }
            Mode::Node => format!("this node, rank {}", l.node_rank),
            Mode::Cluster => format!("node rank {}", l.node_rank),
        };
        let _ = writeln!(s, "  {label}:\n    {}", line(&l.command));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_evidence_is_bounded_and_points_to_json() {
        let v = Value::String("x".repeat(500));
        let s = evidence_value(&v);
        assert!(s.chars().count() < 220);
        assert!(s.ends_with("(full value in --format json)"));
    }

    #[test]
    fn scalar_arrays_are_joined() {
        let v = serde_json::json!(["eth0", "ib0", 3]);
        assert_eq!(evidence_value(&v), "eth0, ib0, 3");
    }
}

//! The terminal report, doctor style: one line per area, each problem with its evidence and
//! its fix commands on lines of their own, the cluster's tables, the advice and a verdict.
//!
//! [`render`] takes a report (fresh or saved) and a [`Style`]; it never prints, so
//! `preflight render --format table REPORT.json` can call it as `check` and `cluster` do.

mod advice;
mod areas;
mod cluster;
pub mod collective;
mod faster;
mod healthy;
mod hosts;
pub mod number;
pub mod paint;
mod pairs;
mod problems;
mod summary;
pub mod wrap;

pub use number::bw;
pub use paint::bold;

use super::Style;
use super::sanitize::shown;
use preflight_checks::model::{Finding, Mode, Report};

/// The whole report as rank 0 (or a node check) prints it.
pub fn render(report: &Report, style: Style) -> String {
    render_for_rank(report, style, 0)
}

/// The report as the node of `rank` prints it by default: see [`render_view`].
pub fn render_for_rank(report: &Report, style: Style, rank: u32) -> String {
    render_view(report, style, rank, false)
}

/// The report as the node of `rank` prints it: rank 0 (and a node check) shows everything, as
/// does every rank when `full` (`--full-report`); another rank prints a few lines: its own
/// problems, its own command, where the whole report is, and the cluster's verdict.
pub fn render_view(report: &Report, style: Style, rank: u32, full: bool) -> String {
    let whole = rank == 0 || report.mode == Mode::Node || full;
    // The whole report reads a pair broken both ways as one problem (pairs.rs).
    let folded = if whole { pairs::folded(report) } else { None };
    let report = folded.as_ref().unwrap_or(report);
    let own: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| whole || f.node == Some(rank))
        .collect();
    let mut out = headline(report, style, rank);
    out.push('\n');
    if report.mode == Mode::Cluster && whole {
        if let Some(t) = &report.trimmed {
            // A node's copy of a large report: say so before tables that lack the others' facts.
            out.push_str(&wrap::wrap(
                &format!(
                    "This is a node's copy: {} of {} links and {} nodes' facts are left out ({})",
                    t.links_total.saturating_sub(t.links_kept),
                    t.links_total,
                    t.facts_omitted,
                    shown(&t.why)
                ),
                usize::from(style.width),
                "",
                "  ",
            ));
        }
        out.push_str(&cluster::tables(report, style));
    }
    if whole {
        out.push_str(&areas::lines(report, &own, style));
    }
    let shown_problems = problems::blocks(report, &own, style);
    if !shown_problems.is_empty() {
        if whole {
            out.push('\n');
        }
        out.push_str(&shown_problems);
        out.push('\n');
    } else if whole {
        out.push('\n');
    }
    out.push_str(&advice::advice(report, style, rank, whole));
    out.push_str(&advice::verdict(report, &own, style, whole));
    out.push_str(&healthy::block(report, style, rank, whole));
    out.push_str(&faster::block(report, style, rank, whole));
    out
}

fn headline(report: &Report, style: Style, rank: u32) -> String {
    let dot = paint::dot(style);
    let what = match report.mode {
        Mode::Node => format!(
            "node check on {}",
            report
                .nodes
                .first()
                .map(|n| shown(&n.hostname).into_owned())
                .unwrap_or_default()
        ),
        Mode::Cluster => {
            let me = report
                .nodes
                .iter()
                .find(|n| n.rank == rank)
                .map(|n| format!(", this is rank {rank} ({})", shown(&n.hostname)))
                .unwrap_or_default();
            format!(
                "cluster check of {} node{}{me}",
                report.nodes.len(),
                if report.nodes.len() == 1 { "" } else { "s" }
            )
        }
    };
    let text = format!(
        "{} {} {dot} {what}",
        shown(&report.tool.name),
        shown(&report.tool.version)
    );
    wrap::wrap(
        &paint::bold(&text, style),
        usize::from(style.width),
        "",
        "  ",
    )
}

/// `rank 2 (gpu13)`, the hostname alone in a node report, or `cluster-wide`.
pub(crate) fn where_(report: &Report, node: Option<u32>) -> String {
    match node {
        None => "cluster-wide".to_string(),
        Some(r) => {
            let host = report
                .nodes
                .iter()
                .find(|n| n.rank == r)
                .map(|n| shown(&n.hostname).into_owned());
            match (report.mode, host) {
                (Mode::Node, Some(h)) => h,
                (_, Some(h)) => format!("rank {r} ({h})"),
                (_, None) => format!("rank {r}"),
            }
        }
    }
}

/// Ranks as a short list: `0-3, 5, 7`.
pub(crate) fn ranks_text(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", sorted[i], sorted[j])
        } else if j == i + 1 {
            format!("{}, {}", sorted[i], sorted[j])
        } else {
            sorted[i].to_string()
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// `area` of an id: `net` for `net.no-interface`.
pub(crate) fn area(id: &str) -> &str {
    id.split('.').next().unwrap_or(id)
}

/// `n thing` or `n things`.
pub(crate) fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_compressed() {
        assert_eq!(ranks_text(&[3, 0, 1, 2, 5, 7, 8]), "0-3, 5, 7, 8");
        assert_eq!(ranks_text(&[1]), "1");
        assert_eq!(ranks_text(&[]), "");
    }
}

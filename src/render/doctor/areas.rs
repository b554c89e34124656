//! One line per area (net, ib, gpu, ...) with its mark and counts; with `-v`, every passed or
//! skipped finding of the area under it.

use super::super::Style;
use super::super::sanitize::shown;
use super::{area, count, paint, where_, wrap::wrap};
use preflight_checks::model::{Finding, Mode, Report, Status};
use std::fmt::Write;

/// What an area covers, in words.
fn label(area: &str) -> &str {
    match area {
        "net" => "network interfaces, hostname",
        "ib" => "InfiniBand / RoCE",
        "gpu" => "GPUs",
        "pcie" => "PCIe bridges (ACS)",
        "nccl" => "NCCL library",
        "env" => "NCCL, Gloo and torchrun variables",
        "port" => "master port",
        "firewall" => "firewall",
        "sys" => "shared memory, limits",
        "cluster" => "nodes across the cluster",
        "link" => "links between nodes",
        "collective" => "all-reduce",
        "launch" => "launch",
        other => other,
    }
}

/// The area lines, then (without `-v`) how many details `-v` would show.
pub fn lines(report: &Report, findings: &[&Finding], style: Style) -> String {
    let mut areas: Vec<&str> = Vec::new();
    for f in findings {
        if !areas.contains(&area(&f.id)) {
            areas.push(area(&f.id));
        }
    }
    let name_w = areas.iter().map(|a| a.chars().count()).max().unwrap_or(0);
    let label_w = areas
        .iter()
        .map(|a| label(a).chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    // Above the matrix size a failing report names its failing areas only: the areas where
    // nothing is wrong are one line, so the report does not grow with what passed.
    let wrong = |a: &str| {
        findings.iter().any(|f| {
            area(&f.id) == a && matches!(f.status, Status::Warn | Status::Fail | Status::Error)
        })
    };
    let fold = !style.verbose
        && report.nodes.len() > super::cluster::MATRIX_MAX
        && areas.iter().any(|a| wrong(a));
    let quiet_areas: Vec<&str> = if fold {
        areas.iter().copied().filter(|a| !wrong(a)).collect()
    } else {
        Vec::new()
    };
    for a in areas.iter().filter(|a| !quiet_areas.contains(a)) {
        let of: Vec<&Finding> = findings
            .iter()
            .copied()
            .filter(|f| area(&f.id) == *a)
            .collect();
        let worst = of.iter().map(|f| f.status).max().unwrap_or(Status::Skip);
        // Visible width before the counts: "  X " + name + "  " + label + "  ".
        let lead = 4 + name_w + 2 + label_w + 2;
        let mut tally = counts(&of, false);
        if lead + tally.chars().count() > usize::from(style.width) {
            tally = counts(&of, true);
        }
        // Still too wide: the counts go on a line of their own under the label.
        let (pad, sep) = if lead + tally.chars().count() > usize::from(style.width) {
            (0, "\n      ")
        } else {
            (label_w, "  ")
        };
        let _ = writeln!(
            out,
            "  {} {:<name_w$}  {:<pad$}{sep}{tally}",
            paint::mark(worst, style),
            shown(a),
            label(a),
        );
        if style.verbose {
            for f in of
                .iter()
                .filter(|f| matches!(f.status, Status::Pass | Status::Skip))
            {
                out.push_str(&detail(report, f, style));
            }
        }
    }
    let quiet = findings
        .iter()
        .filter(|f| matches!(f.status, Status::Pass | Status::Skip))
        .count();
    if !quiet_areas.is_empty() {
        let names: Vec<String> = quiet_areas.iter().map(|a| shown(a).into_owned()).collect();
        out.push_str(&wrap(
            &format!(
                "{} nothing wrong in {}",
                paint::mark(Status::Pass, style),
                names.join(", ")
            ),
            usize::from(style.width),
            "  ",
            "    ",
        ));
    }
    if !style.verbose && quiet > 0 {
        let _ = writeln!(
            out,
            "  ({} passed or skipped; -v shows each)",
            count(quiet, "check")
        );
    }
    out
}

/// `1 failure, 2 warnings, 3 passed`, or `not applicable here` when all were skipped;
/// `folded`: passes and skips as one count (`448 passed or skipped`), for a narrow terminal.
fn counts(of: &[&Finding], folded: bool) -> String {
    let n = |s: Status| of.iter().filter(|f| f.status == s).count();
    if of.iter().all(|f| f.status == Status::Skip) {
        return "not applicable here".to_string();
    }
    let mut parts = Vec::new();
    if n(Status::Error) > 0 {
        parts.push(count(n(Status::Error), "error"));
    }
    if n(Status::Fail) > 0 {
        parts.push(count(n(Status::Fail), "failure"));
    }
    if n(Status::Warn) > 0 {
        parts.push(count(n(Status::Warn), "warning"));
    }
    if folded && n(Status::Pass) > 0 && n(Status::Skip) > 0 {
        parts.push(format!(
            "{} passed or skipped",
            n(Status::Pass) + n(Status::Skip)
        ));
        return parts.join(", ");
    }
    if n(Status::Pass) > 0 {
        parts.push(format!("{} passed", n(Status::Pass)));
    }
    if n(Status::Skip) > 0 {
        parts.push(format!("{} skipped", n(Status::Skip)));
    }
    parts.join(", ")
}

/// `-v`: one passed or skipped finding, its id, node and summary, wrapped under its area.
fn detail(report: &Report, f: &Finding, style: Style) -> String {
    let node = match report.mode {
        Mode::Cluster => format!(" ({})", where_(report, f.node)),
        Mode::Node => String::new(),
    };
    let text = format!(
        "{} {}{node}: {}",
        paint::mark(f.status, style),
        shown(&f.id),
        shown(&f.summary)
    );
    wrap(&text, usize::from(style.width), "      ", "          ")
}

//! Each warning, failure and error: what, where, the evidence in a few words, the fix in
//! words, what to do and whose problem it is (`fix (node: reboot): ...`), and every fix
//! command on a line of its own, indented and never wrapped or cut.
//!
//! Findings with one id and status are grouped (eight nodes missing libnccl are one problem
//! with eight ranks; fifty slow links one block with their subjects), their commands listed
//! once each.

use super::super::Style;
use super::super::sanitize::{line, shown};
use super::hosts::{HOSTLIST_MAX, hostlist};
use super::{count, paint, ranks_text, where_, wrap::wrap};
use preflight_checks::model::{Finding, Mode, Report, Status};
use serde_json::Value;
use std::fmt::Write;

/// Indent of a problem's text under its heading.
const TEXT: &str = "    ";
/// Indent of a fix command: deeper than the text, so it stands out and pastes as it is.
const COMMAND: &str = "        ";
/// Fix commands of a group shown without `-v` above the matrix size.
const COMMANDS_LISTED: usize = 6;
/// Members of a group listed one by one without `-v`.
const LISTED: usize = 4;

/// The problem blocks, worst first (errors and failures, then warnings), blank-line separated.
pub fn blocks(report: &Report, findings: &[&Finding], style: Style) -> String {
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    for f in findings
        .iter()
        .copied()
        .filter(|f| matches!(f.status, Status::Warn | Status::Fail | Status::Error))
    {
        match groups
            .iter_mut()
            .find(|g| g[0].id == f.id && g[0].status == f.status)
        {
            Some(g) => g.push(f),
            None => groups.push(vec![f]),
        }
    }
    // Stable: the checks' order within a status.
    groups.sort_by_key(|g| g[0].status < Status::Fail);
    let problems: usize = groups
        .iter()
        .filter(|g| g[0].status >= Status::Fail)
        .map(Vec::len)
        .sum();
    let warnings: usize = groups
        .iter()
        .filter(|g| g[0].status == Status::Warn)
        .map(Vec::len)
        .sum();
    let mut out = String::new();
    if groups.is_empty() {
        return out;
    }
    let mut what = Vec::new();
    if problems > 0 {
        what.push(count(problems, "problem"));
    }
    if warnings > 0 {
        what.push(count(warnings, "warning"));
    }
    let _ = writeln!(
        out,
        "{}:",
        paint::bold(&capitalise(&what.join(", ")), style)
    );
    for g in &groups {
        out.push('\n');
        match same_firewall(findings, g) {
            Some(culprit) => out.push_str(&same_firewall_block(report, g, culprit, style)),
            None => out.push_str(&block(report, g, style)),
        }
    }
    out
}

/// The `link.unreachable` failure that already names each node of a `firewall.rules` warning
/// group as the node whose own firewall drops incoming connections: the same fault seen from
/// the links, whose fix (accept the nodes' network) covers the warning's. `None` otherwise.
fn same_firewall<'a>(findings: &[&'a Finding], g: &[&Finding]) -> Option<&'a Finding> {
    if g[0].id != preflight_checks::firewall::ids::RULES || g[0].status != Status::Warn {
        return None;
    }
    let blames = |f: &Finding, node: u32| {
        f.status >= Status::Fail
            && preflight_checks::link::verdict::Unreachable::of(f)
                .is_some_and(|v| v.cause_node == Some(node) && v.incoming)
            && f.fix.as_ref().is_some_and(|x| !x.commands.is_empty())
    };
    let mut culprit = None;
    for w in g {
        let node = w.node?;
        culprit = Some(*findings.iter().find(|f| blames(f, node))?);
    }
    culprit
}

/// A `firewall.rules` warning about the firewall a failure above already names: its heading
/// and one line pointing at that failure's fix, so one fault is not two fixes.
fn same_firewall_block(report: &Report, g: &[&Finding], culprit: &Finding, style: Style) -> String {
    let width = usize::from(style.width);
    let first = g[0];
    let heading = format!(
        "{} {} {} {} {}",
        paint::mark(first.status, style),
        paint::color(first.status, paint::word(first.status), style),
        paint::bold(&shown(&first.id), style),
        paint::dot(style),
        where_many(report, g),
    );
    let mut out = wrap(&heading, width, "", TEXT);
    out.push_str(&wrap(
        &format!(
            "the firewall {} blames above: its fix covers this warning",
            shown(&culprit.id)
        ),
        width,
        TEXT,
        TEXT,
    ));
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A standing fault's clause (`standing since ... (N runs)`, which the history put at the end of
/// its summary) moved onto the heading where it fits in `width`, so a node checked again and
/// again prints as many lines as the first time: the summary without it, and the heading's
/// tail. None when the finding does not stand or no form of the clause fits.
fn standing_on_heading<'a>(
    f: &'a Finding,
    heading: &str,
    width: usize,
    dot: &str,
) -> Option<(&'a str, String)> {
    let clause = f.evidence.get("standing")?.as_str()?;
    let rest = f.summary.strip_suffix(clause)?.strip_suffix("; ")?;
    let since = f.evidence.get("standing_since")?.as_i64()?;
    let runs = f.evidence.get("standing_runs")?.as_u64()?;
    // `2026-12-07 23:10` without the year: `12-07 23:10`.
    let date = preflight_checks::infra::date::utc_minute(since);
    let day = date.get(5..10).unwrap_or(&date);
    let short = format!("since {} ({runs} runs)", date.get(5..).unwrap_or(&date));
    let shorter = format!("since {day} ({runs} runs)");
    [clause.to_string(), short, shorter]
        .into_iter()
        .map(|c| format!(" {dot} {c}"))
        .find(|tail| super::wrap::width_of(heading) + super::wrap::width_of(tail) <= width)
        .map(|tail| (rest, tail))
}

/// One group of findings with the same id and status.
fn block(report: &Report, g: &[&Finding], style: Style) -> String {
    let width = usize::from(style.width);
    let first = g[0];
    let dot = paint::dot(style);
    let mut out = String::new();
    let same_summary = g.iter().all(|f| f.summary == first.summary);
    // Heading: mark, status, id, where (and the subject when it says more).
    let where_text = where_many(report, g);
    let subject =
        if g.len() == 1 && !first.subject.is_empty() && !where_text.contains(&first.subject) {
            format!(" {dot} {}", shown(&first.subject))
        } else {
            String::new()
        };
    let mut heading = format!(
        "{} {} {} {dot} {where_text}{subject}",
        paint::mark(first.status, style),
        paint::color(first.status, paint::word(first.status), style),
        paint::bold(&shown(&first.id), style),
    );
    let mut summary = first.summary.as_str();
    if g.len() == 1
        && let Some((rest, short)) = standing_on_heading(first, &heading, width, dot)
    {
        heading.push_str(&short);
        summary = rest;
    }
    out.push_str(&wrap(&heading, width, "", TEXT));
    if same_summary {
        out.push_str(&wrap(&shown(summary), width, TEXT, TEXT));
        if g.len() == 1 {
            if let Some(e) = evidence_words(first, style) {
                out.push_str(&wrap(&format!("evidence: {e}"), width, TEXT, TEXT));
            }
        }
    } else {
        let listed = if style.verbose {
            g.len()
        } else {
            LISTED.min(g.len())
        };
        for f in &g[..listed] {
            let who = match report.mode {
                Mode::Cluster if f.node.is_some() => format!("{}: ", where_(report, f.node)),
                _ => String::new(),
            };
            out.push_str(&wrap(
                &format!("- {who}{}", shown(&f.summary)),
                width,
                TEXT,
                &format!("{TEXT}  "),
            ));
        }
        if listed < g.len() {
            out.push_str(&wrap(
                &format!(
                    "- and {} more like these (-v lists them; --format json has all)",
                    g.len() - listed
                ),
                width,
                TEXT,
                &format!("{TEXT}  "),
            ));
        }
    }
    let action = action_words(g);
    let mut hints: Vec<&str> = Vec::new();
    let mut commands: Vec<&str> = Vec::new();
    for fix in g.iter().filter_map(|f| f.fix.as_ref()) {
        if !fix.hint.is_empty() && !hints.contains(&fix.hint.as_str()) {
            hints.push(&fix.hint);
        }
        for c in &fix.commands {
            if !commands.contains(&c.as_str()) {
                commands.push(c);
            }
        }
    }
    // The action rides on the fix's first line (`fix (node: reboot): ...`), a line
    // of its own only when there is no hint.
    if let (Some(a), None) = (&action, hints.first()) {
        out.push_str(&wrap(&format!("action: {a}"), width, TEXT, TEXT));
    }
    // One hint per group: members of a group differ in names only, their commands say which.
    if let Some(h) = hints.first() {
        let others = match hints.len() - 1 {
            0 => String::new(),
            n => format!(" (and likewise for {n} more)"),
        };
        // A hint of several lines (a command's results, one a line) keeps its lines.
        let lines: Vec<&str> = h.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let lead = match (i, &action) {
                (0, Some(a)) => format!("fix ({a}): "),
                (0, None) => "fix: ".to_string(),
                _ => String::new(),
            };
            let tail = if i + 1 == lines.len() { &others } else { "" };
            out.push_str(&wrap(
                &format!("{lead}{}{tail}", shown(l)),
                width,
                TEXT,
                TEXT,
            ));
        }
    }
    // The same command on three nodes or more: once, run on all of them with pdsh.
    let commands = super::hosts::commands(report, &commands);
    // Above the matrix size, a command per node is shown for a few nodes only (without -v).
    let shown = if style.verbose || report.nodes.len() <= super::cluster::MATRIX_MAX {
        commands.len()
    } else {
        COMMANDS_LISTED.min(commands.len())
    };
    for c in &commands[..shown] {
        // Never wrapped or cut here: a command wider than the terminal stays one line.
        let _ = writeln!(out, "{COMMAND}{}", line(c));
    }
    if shown < commands.len() {
        let _ = writeln!(
            out,
            "{COMMAND}# and {} more commands like these, one per node (-v lists them; --format json has all)",
            commands.len() - shown
        );
    }
    out
}

/// The group's costliest action and whose problem it is: `node: reset-gpu`; None
/// when nothing is to be done or the report predates actions.
fn action_words(g: &[&Finding]) -> Option<String> {
    let r = g.iter().filter_map(|f| f.remedy_of()).max_by_key(|r| {
        (
            r.action,
            r.problem == preflight_checks::model::Problem::Node,
        )
    })?;
    (r.action != preflight_checks::model::Action::None)
        .then(|| format!("{}: {}", r.problem, r.action))
}

/// Where a group is: one node's name, `node[01-08] (ranks 0-7)`, or `cluster-wide`.
fn where_many(report: &Report, g: &[&Finding]) -> String {
    let mut ranks: Vec<u32> = g.iter().filter_map(|f| f.node).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let wide = g.iter().any(|f| f.node.is_none());
    match (ranks.len(), wide) {
        (0, _) => "cluster-wide".to_string(),
        (1, false) => where_(report, Some(ranks[0])),
        (_, false) => format!(
            "{} (ranks {})",
            hostlist(report, &ranks, HOSTLIST_MAX),
            ranks_text(&ranks)
        ),
        (_, true) => format!(
            "cluster-wide and {} (ranks {})",
            hostlist(report, &ranks, HOSTLIST_MAX),
            ranks_text(&ranks)
        ),
    }
}

/// The evidence keys the terminal shows for `f`: every key with `-v`; without it only those its
/// catalog entry lists as saying what the summary does not (`Entry::terminal_evidence`).
fn terminal_keys(f: &Finding, verbose: bool) -> Option<&'static [&'static str]> {
    if verbose {
        return None;
    }
    Some(
        preflight_checks::catalog::get(&f.id)
            .map(|e| e.terminal_evidence)
            .unwrap_or(&[]),
    )
}

/// The evidence in a few words: scalar values and short lists the summary does not state
/// (every one of them with `-v`, uncut), at most a few without `-v`.
fn evidence_words(f: &Finding, style: Style) -> Option<String> {
    let ellipsis = if style.unicode { "…" } else { "..." };
    let keys = terminal_keys(f, style.verbose);
    let (max_value, max_items) = if style.verbose {
        (usize::MAX, usize::MAX)
    } else {
        (60, 5)
    };
    let mut parts = Vec::new();
    let mut more = false;
    for (k, v) in &f.evidence {
        if keys.is_some_and(|keys| !keys.contains(&k.as_str())) {
            continue;
        }
        let value = match v {
            Value::Null | Value::Object(_) => continue,
            Value::String(s) if s.is_empty() => continue,
            Value::String(s) => s.clone(),
            Value::Array(items) if items.is_empty() => continue,
            Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array()) => {
                continue;
            }
            Value::Array(items) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", "),
            other => other.to_string(),
        };
        if parts.len() == max_items {
            more = true;
            break;
        }
        let value = if value.chars().count() > max_value {
            format!(
                "{}{ellipsis}",
                value.chars().take(max_value).collect::<String>()
            )
        } else {
            value
        };
        parts.push(format!("{} {}", shown(k), shown(&value)));
    }
    if parts.is_empty() {
        return None;
    }
    let mut s = parts.join("; ");
    if more {
        s.push_str(&format!("; {ellipsis} (--format json has all)"));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_firewall_warning_on_the_node_a_failure_blames_points_at_that_fix() {
        let fail = Finding::new(
            preflight_checks::core::FindingId::new("link.unreachable"),
            Status::Fail,
            "61<->* eth0",
            "drops",
        )
        .on_node(Some(61))
        .with("cause_node", 61)
        .with("cause_direction", "incoming")
        .fix(preflight_checks::model::Fix::new("accept").command("nft insert rule x"));
        let warn = Finding::new(
            preflight_checks::core::FindingId::new("firewall.rules"),
            Status::Warn,
            "29500",
            "not plainly allowed",
        )
        .on_node(Some(61));
        let other = Finding::new(
            preflight_checks::core::FindingId::new("firewall.rules"),
            Status::Warn,
            "29500",
            "not plainly allowed",
        )
        .on_node(Some(7));
        let all = [&fail, &warn, &other];
        assert!(same_firewall(&all, &[&warn]).is_some());
        assert!(same_firewall(&all, &[&warn, &other]).is_none());
        assert!(same_firewall(&all, &[&fail]).is_none());
        let report = crate::report::ReportBuilder::new(Mode::Cluster).build();
        let text = blocks(
            &report,
            &all[..2],
            Style {
                width: 80,
                ..Style::plain()
            },
        );
        assert!(
            text.contains("! warning firewall.rules · rank 61"),
            "{text}"
        );
        assert!(
            text.contains(
                "    the firewall link.unreachable blames above: its fix covers this warning\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("nft insert rule x").count(), 1, "{text}");
    }

    #[test]
    fn evidence_shows_only_what_the_summary_does_not_and_all_of_it_with_v() {
        let f = Finding::new(
            preflight_checks::core::FindingId::new("x.y"),
            Status::Warn,
            "s",
            "sum",
        )
        .with("port", 29500)
        .with("holders", serde_json::json!([{"pid": 1}]))
        .with("names", serde_json::json!(["eth0", "ib0"]))
        .with("long", "z".repeat(100))
        .with("none", Value::Null);
        // An id whose catalog entry lists no key: its summary says it all.
        assert_eq!(evidence_words(&f, Style::plain()), None);
        let verbose = Style {
            verbose: true,
            ..Style::plain()
        };
        assert_eq!(
            evidence_words(&f, verbose).unwrap(),
            format!("long {}; names eth0, ib0; port 29500", "z".repeat(100))
        );
        // A listed key is shown without -v, the others are not.
        let listed = preflight_checks::catalog::all()
            .iter()
            .find(|e| !e.terminal_evidence.is_empty())
            .expect("an entry that lists terminal evidence");
        let key = listed.terminal_evidence[0];
        let f = Finding::new(listed.id, Status::Warn, "s", "sum")
            .with(key, "shown")
            .with("zz_not_listed", "hidden");
        assert_eq!(
            evidence_words(&f, Style::plain()).unwrap(),
            format!("{key} shown")
        );
    }
}

//! The advice and the verdict: the recommended environment and launch commands when nothing
//! fails (else the first problem to fix), and one closing line.

use super::super::Style;
use super::super::sanitize::{line, shown};
use super::{count, paint, ranks_text, where_, wrap::wrap};
use preflight_checks::model::{Finding, Mode, Recommendation, Report, Status};
use std::fmt::Write;

const COMMAND: &str = "    ";

fn failing(f: &Finding) -> bool {
    matches!(f.status, Status::Fail | Status::Error)
}

/// The environment and launch commands (with `-v`, the reasons too) when nothing fails;
/// otherwise what to fix first.
pub fn advice(report: &Report, style: Style, rank: u32, whole: bool) -> String {
    let width = usize::from(style.width);
    let mut out = String::new();
    let failures: Vec<&Finding> = report.findings.iter().filter(|f| failing(f)).collect();
    if !failures.is_empty() {
        out.push_str(&paint::bold(
            &wrap(
                "Fix these first, then run preflight again (the launch commands are printed \
                 when nothing fails):",
                width,
                "",
                "",
            ),
            style,
        ));
        // Every failing id, in the report's order, with its first command; one id failing on
        // many nodes is one entry with their ranks, so the list stays short at any size.
        let mut groups: Vec<(&str, Vec<&Finding>)> = Vec::new();
        for f in failures {
            match groups.iter_mut().find(|(id, _)| *id == f.id) {
                Some((_, fs)) => fs.push(f),
                None => groups.push((&f.id, vec![f])),
            }
        }
        for (_, fs) in groups {
            let f = fs[0];
            let shown_here = whole || fs.iter().any(|f| f.node.is_none() || f.node == Some(rank));
            let place = if shown_here {
                "above"
            } else {
                "in rank 0's report"
            };
            let text = if fs.len() == 1 {
                format!(
                    "{} {} {} ({place})",
                    paint::mark(f.status, style),
                    shown(&f.id),
                    match f.node {
                        None => "across the cluster".to_string(),
                        Some(_) => format!("on {}", where_(report, f.node)),
                    },
                )
            } else {
                let ranks: Vec<u32> = fs.iter().filter_map(|f| f.node).collect();
                let wide = fs.iter().any(|f| f.node.is_none());
                let on = match (ranks.is_empty(), wide) {
                    (true, _) => "across the cluster".to_string(),
                    (false, false) => format!("on ranks {}", ranks_text(&ranks)),
                    (false, true) => {
                        format!("on ranks {} and across the cluster", ranks_text(&ranks))
                    }
                };
                format!(
                    "{} {} {on} ({} findings, {place})",
                    paint::mark(f.status, style),
                    shown(&f.id),
                    fs.len()
                )
            };
            out.push_str(&wrap(&text, width, "  ", "    "));
            // A fix printed above is not printed again: a rank that shows only its own
            // problems gets the first command of the others'.
            if shown_here {
                continue;
            }
            if let Some(cmd) = f.fix.as_ref().and_then(|x| x.commands.first()) {
                let _ = writeln!(out, "{COMMAND}{}", line(cmd));
            }
            if fs.len() > 1 {
                let _ = writeln!(
                    out,
                    "{COMMAND}# then the fix of each of the other {} ({place})",
                    fs.len() - 1
                );
            }
        }
        if !whole {
            out.push_str(&where_whole(report, width));
        }
        out.push('\n');
        return out;
    }
    let Some(rec) = &report.recommendation else {
        return out;
    };
    if !whole {
        let mine: Vec<_> = rec.launch.iter().filter(|l| l.node_rank == rank).collect();
        if !mine.is_empty() {
            let _ = writeln!(out, "Your command (this node is rank {rank}):");
        }
        for l in mine {
            let _ = writeln!(out, "{COMMAND}{}", line(&l.command));
        }
        out.push_str(&where_whole(report, width));
        out.push('\n');
        return out;
    }
    out.push_str(&environment(report, rec, style));
    if style.verbose && !rec.reasons.is_empty() {
        let _ = writeln!(out, "Why:");
        for r in &rec.reasons {
            out.push_str(&wrap(&line(r), width, "  - ", "    "));
        }
    }
    out.push_str(&launch(report, rec, style));
    out.push('\n');
    out
}

/// Where the whole cluster report is, for a rank that prints a few lines.
fn where_whole(report: &Report, width: usize) -> String {
    let host0 = report
        .nodes
        .iter()
        .find(|n| n.rank == 0)
        .map(|n| format!(" ({})", shown(&n.hostname)))
        .unwrap_or_default();
    wrap(
        &format!(
            "The whole cluster report is printed by rank 0{host0}; --full-report prints it on \
             every rank, -o FILE writes it as JSON."
        ),
        width,
        "",
        "",
    )
}

fn environment(report: &Report, rec: &Recommendation, style: Style) -> String {
    let mut s = String::new();
    let who = match report.mode {
        Mode::Node => report
            .nodes
            .first()
            .map(|n| shown(&n.hostname).into_owned())
            .unwrap_or_default(),
        Mode::Cluster => "every node".to_string(),
    };
    if rec.env.is_empty() && rec.node_env.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "{}",
        paint::bold(&format!("Recommended environment for {who}:"), style)
    );
    for (k, v) in &rec.env {
        let _ = writeln!(
            s,
            "{COMMAND}export {}={}",
            shown(k),
            line(&crate::shell::quote(v))
        );
    }
    if report.nodes.len() > super::cluster::MATRIX_MAX {
        // One block per distinct environment, with its hosts.
        let mut same: Vec<(&std::collections::BTreeMap<String, String>, Vec<u32>)> = Vec::new();
        for (rank, env) in &rec.node_env {
            let Ok(r) = rank.parse::<u32>() else { continue };
            match same.iter_mut().find(|(e, _)| *e == env) {
                Some((_, ranks)) => ranks.push(r),
                None => same.push((env, vec![r])),
            }
        }
        for (env, ranks) in same {
            let _ = writeln!(
                s,
                "  on {} (rank{} {}):",
                super::hosts::hostlist(report, &ranks, super::hosts::HOSTLIST_MAX),
                if ranks.len() == 1 { "" } else { "s" },
                ranks_text(&ranks)
            );
            for (k, v) in env {
                let _ = writeln!(
                    s,
                    "{COMMAND}  export {}={}",
                    shown(k),
                    line(&crate::shell::quote(v))
                );
            }
        }
        return s;
    }
    for (rank, env) in &rec.node_env {
        let _ = writeln!(s, "  on rank {}:", shown(rank));
        for (k, v) in env {
            let _ = writeln!(
                s,
                "{COMMAND}  export {}={}",
                shown(k),
                line(&crate::shell::quote(v))
            );
        }
    }
    s
}

fn launch(report: &Report, rec: &Recommendation, style: Style) -> String {
    let width = usize::from(style.width);
    let mut s = String::new();
    if let Some(one) = &rec.standalone {
        let _ = writeln!(s, "{}", paint::bold("Launch on this node alone:", style));
        let _ = writeln!(s, "{COMMAND}{}", line(one));
    }
    // Lines that differ only in --node-rank are one line taking the rank from a variable.
    let (var, _) = rank_variable(report);
    if report.mode == Mode::Cluster
        && (rec.launch.len() > super::cluster::MATRIX_MAX
            || launch_groups(rec, var).len() < rec.launch.len())
    {
        s.push_str(&launch_grouped(report, rec, style));
        return s;
    }
    for l in &rec.launch {
        let label = match report.mode {
            Mode::Node if rec.standalone.is_some() && l.command.contains("$NNODES") => {
                "Launch on several nodes, this node as rank 0 (on the others use \
                 --node-rank=1..N-1; set NNODES):"
                    .to_string()
            }
            Mode::Node if rec.standalone.is_some() => {
                "Launch on several nodes, this node as rank 0 (on the others use \
                 --node-rank=1..N-1):"
                    .to_string()
            }
            Mode::Node => format!("Launch on this node, rank {}:", l.node_rank),
            Mode::Cluster => format!("Launch on {}:", where_(report, Some(l.node_rank))),
        };
        s.push_str(&paint::bold(&wrap(&label, width, "", "  "), style));
        let _ = writeln!(s, "{COMMAND}{}", line(&l.command));
    }
    s
}

/// The launcher's variable holding the node's rank, per the placement source of the report.
fn rank_variable(report: &Report) -> (&'static str, String) {
    match report.placement.as_ref().map(|p| p.source.as_str()) {
        Some("slurm") => ("$SLURM_NODEID", "Slurm sets it on each node".into()),
        Some("torchrun-env") => ("$NODE_RANK", "the launcher sets it on each node".into()),
        _ if report.nodes.len() <= RANKS_NAMED => {
            let each: Vec<String> = report
                .nodes
                .iter()
                .map(|n| format!("{} on {}", n.rank, shown(&n.hostname)))
                .collect();
            (
                "$NODE_RANK",
                format!("set NODE_RANK on each node: {}", each.join(", ")),
            )
        }
        _ if report.nodes.len() <= super::cluster::MATRIX_MAX => (
            "$NODE_RANK",
            "set NODE_RANK on each node to its rank; -v lists each node's".into(),
        ),
        _ => (
            "$NODE_RANK",
            "set NODE_RANK on each node to its rank; --format json lists each node's".into(),
        ),
    }
}

/// Nodes whose rank the launch line's label names one by one.
const RANKS_NAMED: usize = 4;

/// The launch commands with `--node-rank=N` written `--node-rank=VAR`, each distinct one with
/// the ranks it serves, the most served first.
fn launch_groups(rec: &Recommendation, var: &str) -> Vec<(String, Vec<u32>)> {
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for l in &rec.launch {
        let flag = format!("--node-rank={}", l.node_rank);
        let generic = if l.command.contains(&flag) {
            l.command.replacen(&flag, &format!("--node-rank={var}"), 1)
        } else {
            l.command.clone()
        };
        match groups.iter_mut().find(|(c, _)| *c == generic) {
            Some((_, ranks)) => ranks.push(l.node_rank),
            None => groups.push((generic, vec![l.node_rank])),
        }
    }
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.1[0].cmp(&b.1[0])));
    groups
}

/// Launch lines alike but for the rank (and every line above [`super::cluster::MATRIX_MAX`]
/// nodes): one launch line that takes the node's rank from the launcher's variable, and a
/// line of their own only for nodes whose command differs otherwise (their own environment,
/// `node_env`).
fn launch_grouped(report: &Report, rec: &Recommendation, style: Style) -> String {
    let width = usize::from(style.width);
    let (var, how) = rank_variable(report);
    let groups = launch_groups(rec, var);
    let mut s = String::new();
    let uses_var = groups.iter().any(|(c, _)| c.contains(var));
    for (i, (command, ranks)) in groups.iter().enumerate() {
        let who = if ranks.len() == report.nodes.len() {
            format!("every node ({})", count(ranks.len(), "node"))
        } else {
            format!(
                "{} ({}{})",
                super::hosts::hostlist(report, ranks, super::hosts::HOSTLIST_MAX),
                count(ranks.len(), "node"),
                if i == 0 { "" } else { ", its own environment" }
            )
        };
        let label = if uses_var && i == 0 {
            format!("Launch on {who}; {var} is the node's rank ({how}):")
        } else {
            format!("Launch on {who}:")
        };
        s.push_str(&paint::bold(&wrap(&label, width, "", "  "), style));
        let _ = writeln!(s, "{COMMAND}{}", line(command));
    }
    s
}

/// The closing line: ready to launch, or not, with the problems counted and where they are.
pub fn verdict(report: &Report, own: &[&Finding], style: Style, whole: bool) -> String {
    let width = usize::from(style.width);
    let problems: Vec<&Finding> = report.findings.iter().filter(|f| failing(f)).collect();
    let warnings = own.iter().filter(|f| f.status == Status::Warn).count();
    let as_written = report
        .findings
        .iter()
        .any(|f| f.id == preflight_checks::launch::ids::AS_WRITTEN && f.status == Status::Warn);
    let text = if problems.is_empty() && as_written {
        let mut t = format!(
            "{} ready to launch with the commands above, not your command as written: it would hang (launch.as-written)",
            paint::mark(Status::Warn, style)
        );
        if warnings > 1 {
            let _ = write!(t, "; {} above", count(warnings, "warning"));
        }
        t
    } else if problems.is_empty() {
        let mut t = format!("{} ready to launch", paint::mark(Status::Pass, style));
        if warnings > 0 {
            let _ = write!(t, " ({} above)", count(warnings, "warning"));
        }
        t
    } else {
        let mut ranks: Vec<u32> = problems.iter().filter_map(|f| f.node).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let wide = problems.iter().any(|f| f.node.is_none());
        let mut places = Vec::new();
        match (report.mode, ranks.len()) {
            (_, 0) => {}
            (Mode::Node, _) => places.push("on this node".to_string()),
            (Mode::Cluster, 1) => places.push(format!("on rank {}", ranks[0])),
            (Mode::Cluster, _) => places.push(format!("on ranks {}", ranks_text(&ranks))),
        }
        if wide {
            places.push("cluster-wide".to_string());
        }
        let mut t = format!(
            "{} do not launch: {} {}",
            paint::mark(Status::Fail, style),
            count(problems.len(), "problem"),
            places.join(" and ")
        );
        let elsewhere = problems
            .iter()
            .filter(|f| !own.iter().any(|o| std::ptr::eq(*o, **f)))
            .count();
        if !whole && elsewhere > 0 {
            t.push_str(" (see rank 0's report)");
        }
        if warnings > 0 {
            let _ = write!(t, ", and {}", count(warnings, "warning"));
        }
        t
    };
    wrap(&paint::bold(&text, style), width, "", "  ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A failing cluster report holding `findings` (JSON) and nothing else.
    fn report_of(findings: Vec<serde_json::Value>) -> Report {
        serde_json::from_value(json!({
            "schema": "preflight.report.v1",
            "tool": {"name": "preflight", "version": "0"},
            "mode": "cluster",
            "status": "fail",
            "nodes": [],
            "findings": findings,
            "links": [],
            "collectives": [],
            "recommendation": null
        }))
        .expect("a report")
    }

    fn plain(width: u16) -> Style {
        Style {
            color: false,
            width,
            unicode: false,
            verbose: false,
        }
    }

    #[test]
    fn fix_these_first_lists_every_failure_with_its_first_command_in_report_order() {
        let finding = |id: &str, status: &str, node: u32, cmds: &[&str]| {
            json!({"id": id, "status": status, "node": node, "subject": "", "summary": "s",
                   "evidence": {}, "fix": {"hint": "h", "commands": cmds}})
        };
        let report = report_of(vec![
            finding(
                "firewall.rules",
                "warn",
                0,
                &["iptables -I INPUT -s 10.0.0.0/24 -j ACCEPT"],
            ),
            finding(
                "link.unreachable",
                "fail",
                1,
                &[
                    "iptables -I OUTPUT -d 10.0.0.0/24 -j ACCEPT",
                    "iptables-save",
                ],
            ),
            finding("port.in-use", "fail", 0, &["kill 4242"]),
            finding("cluster.versions", "error", 2, &[]),
        ]);
        // The whole report has each fix above: the list names them without repeating one.
        let whole = advice(&report, plain(100), 0, true);
        assert!(
            whole.contains("link.unreachable on rank 1 (above)"),
            "{whole}"
        );
        assert!(
            !whole.contains("iptables") && !whole.contains("kill"),
            "{whole}"
        );
        // Rank 3 prints its own problems only: the list gives each other's first command.
        let text = advice(&report, plain(100), 3, false);
        let unreachable = text.find("link.unreachable").expect(&text);
        let output_fix = text
            .find("    iptables -I OUTPUT -d 10.0.0.0/24 -j ACCEPT")
            .expect(&text);
        let port = text.find("port.in-use").expect(&text);
        let kill = text.find("    kill 4242").expect(&text);
        let versions = text.find("cluster.versions").expect(&text);
        assert!(
            unreachable < output_fix && output_fix < port && port < kill && kill < versions,
            "{text}"
        );
        // Warnings are not in the list; only a failure's first command is.
        assert!(!text.contains("firewall.rules"), "{text}");
        assert!(!text.contains("iptables-save"), "{text}");
    }

    #[test]
    fn one_id_failing_on_many_nodes_is_one_entry_with_their_ranks() {
        let findings: Vec<serde_json::Value> = (0..200u32)
            .map(|r| {
                json!({"id": "link.unreachable", "status": "fail", "node": r, "subject": "",
                       "summary": "s", "evidence": {},
                       "fix": {"hint": "h", "commands": [format!("nc -l -k {}", 40000 + r)]}})
            })
            .chain(std::iter::once(
                json!({"id": "port.in-use", "status": "fail", "node": 0,
                "subject": "", "summary": "s", "evidence": {},
                "fix": {"hint": "h", "commands": ["kill 4242"]}}),
            ))
            .collect();
        let report = report_of(findings);
        let whole = advice(&report, plain(80), 0, true);
        assert!(
            whole.contains("link.unreachable on ranks 0-199 (200 findings, above)"),
            "{whole}"
        );
        assert!(!whole.contains("nc -l"), "the fixes are above: {whole}");
        let text = advice(&report, plain(80), 200, false);
        assert!(text.lines().count() <= 10, "{text}");
        assert!(
            text.contains("link.unreachable on ranks 0-199 (200 findings, in rank 0's report)"),
            "{text}"
        );
        assert!(text.contains("    nc -l -k 40000\n"), "{text}");
        assert!(
            text.contains("# then the fix of each of the other 199 (in rank 0's report)"),
            "{text}"
        );
        assert!(text.contains("    kill 4242"), "{text}");
    }
}

//! `preflight history` for people (a short table: the nodes with most failures, their findings,
//! then the lemons with their rule and fix) and for scripts (JSON).

use super::Style;
use preflight_checks::history::HistoryView;

/// Nodes listed in the table (the rest are counted).
pub const NODES_SHOWN: usize = 20;

/// The JSON document (`preflight.history.v1`).
pub fn json(v: &HistoryView) -> String {
    let mut doc = serde_json::to_value(v).unwrap_or_default();
    if let Some(m) = doc.as_object_mut() {
        m.insert("schema".into(), "preflight.history.v1".into());
    }
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// A date as `YYYY-MM-DD HH:MM` UTC.
fn date(t: i64) -> String {
    preflight_checks::infra::date::utc_minute(t)
}

/// The table.
pub fn table(v: &HistoryView, style: Style) -> String {
    let mut out = String::new();
    let nodes = v.nodes.len();
    let read = match v.reports {
        Some(files) => format!("{files} report(s) read: "),
        None => String::new(),
    };
    out.push_str(&format!(
        "{read}{} run(s) of {nodes} node(s), {} node-run(s) from {} record(s); {} lemon(s)\n",
        v.runs,
        v.node_runs,
        v.records,
        v.lemons.len()
    ));
    if let Some(store) = &v.store {
        out.push_str(&format!("store: {}\n", super::sanitize::line(store)));
    }
    for n in v.nodes.iter().take(NODES_SHOWN) {
        out.push_str(&format!(
            "\n{}: {} run(s) {} .. {}, {} failed, {} flap(s)\n",
            super::sanitize::line(&n.node),
            n.runs,
            date(n.first_seen),
            date(n.last_seen),
            n.failed_runs,
            n.flaps
        ));
        for f in &n.findings {
            out.push_str(&format!(
                "  {:<28} {:>5} run(s)  first {}  last {}{}\n",
                super::sanitize::line(&f.id),
                f.runs,
                date(f.first_seen),
                date(f.last_seen),
                if f.standing { "  standing" } else { "" }
            ));
        }
        if n.more_findings > 0 {
            out.push_str(&format!(
                "  ... and {} more finding id(s)\n",
                n.more_findings
            ));
        }
    }
    if nodes > NODES_SHOWN {
        out.push_str(&format!(
            "\n... and {} more node(s) (--format json lists every one)\n",
            nodes - NODES_SHOWN
        ));
    }
    if !v.lemons.is_empty() {
        out.push_str("\nLemons:\n");
    }
    for l in &v.lemons {
        let rule = l
            .evidence
            .get("rule")
            .and_then(|r| r.as_str())
            .unwrap_or("?");
        let action = l.action.map_or("drain-and-repair", |a| a.as_str());
        out.push_str(&format!(
            "  [{rule}] {}\n",
            super::sanitize::line(&l.subject)
        ));
        out.push_str(&super::doctor::wrap::wrap(
            &super::sanitize::line(&l.summary),
            style.width as usize,
            "    ",
            "    ",
        ));
        if let Some(fix) = &l.fix {
            out.push_str(&super::doctor::wrap::wrap(
                &format!("fix (node: {action}): {}", super::sanitize::line(&fix.hint)),
                style.width as usize,
                "    ",
                "    ",
            ));
            for c in fix.commands.iter().take(1) {
                out.push_str(&format!("        {}\n", super::sanitize::line(c)));
            }
        }
    }
    for n in &v.notes {
        out.push_str(&format!("note: {}\n", super::sanitize::line(n)));
    }
    out
}

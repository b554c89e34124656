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
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        (secs % 3600) / 60
    )
}

/// The table.
pub fn table(v: &HistoryView, style: Style) -> String {
    let mut out = String::new();
    let nodes = v.nodes.len();
    out.push_str(&format!(
        "{} run(s) of {nodes} node(s); {} lemon(s)\n",
        v.runs,
        v.lemons.len()
    ));
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
                "  {:<28} {:>5} run(s)  first {}  last {}\n",
                super::sanitize::line(&f.id),
                f.runs,
                date(f.first_seen),
                date(f.last_seen)
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
            for c in fix.commands.iter().take(1) {
                out.push_str(&format!(
                    "    fix (node: {action}): {}\n",
                    super::sanitize::line(c)
                ));
            }
        }
    }
    for n in &v.notes {
        out.push_str(&format!("note: {}\n", super::sanitize::line(n)));
    }
    out
}

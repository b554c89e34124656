//! Report -> JSON (the `preflight.report.v1` contract).

use preflight_checks::model::Report;

/// Pretty JSON with a trailing newline.
pub fn render(report: &Report) -> String {
    let mut s =
        serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

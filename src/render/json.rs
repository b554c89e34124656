//! Report -> JSON (the `preflight.report.v1` contract).

use preflight_checks::model::Report;

/// Above this many nodes the JSON is written without indentation: at 1024 nodes the
/// indentation alone is several MB.
pub const PRETTY_MAX_NODES: usize = crate::report_compact::COMPACT_ABOVE;

/// JSON with a trailing newline: pretty up to [`PRETTY_MAX_NODES`] nodes, compact above.
pub fn render(report: &Report) -> String {
    let text = if report.nodes.len() > PRETTY_MAX_NODES {
        serde_json::to_string(report)
    } else {
        serde_json::to_string_pretty(report)
    };
    let mut s = text.unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

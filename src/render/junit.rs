//! Report -> JUnit XML, so CI systems (GitLab, Jenkins, GitHub reporters) show findings natively.
//!
//! One `<testsuite>` per node (and one named `cluster` for cluster-wide findings), one
//! `<testcase>` per finding: `fail` and `error` are a `<failure>` (its `type` says which: an
//! `error` finding is a check that could not run, and CI must not pass it), `skip` is
//! `<skipped/>`, and `warn` passes with its summary in `<system-out>`.

use preflight_checks::model::{Finding, Report, Status};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Counts of one suite, or of all of them.
#[derive(Default, Clone, Copy)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl Counts {
    fn of(findings: &[&Finding]) -> Self {
        let n = |s: Status| findings.iter().filter(|f| f.status == s).count();
        Counts {
            tests: findings.len(),
            failures: n(Status::Fail) + n(Status::Error),
            errors: 0,
            skipped: n(Status::Skip),
        }
    }

    fn add(self, o: Counts) -> Self {
        Counts {
            tests: self.tests + o.tests,
            failures: self.failures + o.failures,
            errors: self.errors + o.errors,
            skipped: self.skipped + o.skipped,
        }
    }

    fn attrs(self) -> String {
        format!(
            "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\"",
            self.tests, self.failures, self.errors, self.skipped
        )
    }
}

/// The whole report as a JUnit XML document, with a trailing newline.
pub fn render(report: &Report) -> String {
    let hosts: BTreeMap<u32, &str> = report
        .nodes
        .iter()
        .map(|n| (n.rank, n.hostname.as_str()))
        .collect();
    // `None` (cluster-wide) sorts first, then the ranks in order.
    let mut suites: BTreeMap<Option<u32>, Vec<&Finding>> = BTreeMap::new();
    for f in &report.findings {
        suites.entry(f.node).or_default().push(f);
    }
    let total = suites
        .values()
        .fold(Counts::default(), |acc, fs| acc.add(Counts::of(fs)));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"preflight\" {}>", total.attrs());
    for (node, findings) in &suites {
        suite(
            &mut out,
            *node,
            node.and_then(|r| hosts.get(&r).copied()),
            findings,
        );
    }
    out.push_str("</testsuites>\n");
    out
}

fn suite_name(node: Option<u32>, host: Option<&str>) -> String {
    match (node, host) {
        (None, _) => "cluster".into(),
        (Some(r), Some(h)) if !h.is_empty() => format!("rank {r} ({h})"),
        (Some(r), _) => format!("rank {r}"),
    }
}

fn suite(out: &mut String, node: Option<u32>, host: Option<&str>, findings: &[&Finding]) {
    let host_attr = match host.filter(|h| !h.is_empty()) {
        Some(h) => format!(" hostname=\"{}\"", escape(h)),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" {}{host_attr}>",
        escape(&suite_name(node, host)),
        Counts::of(findings).attrs()
    );
    for f in findings {
        testcase(out, f, node, host);
    }
    out.push_str("  </testsuite>\n");
}

fn area(id: &str) -> &str {
    id.split_once('.').map_or(id, |(a, _)| a)
}

fn testcase(out: &mut String, f: &Finding, node: Option<u32>, host: Option<&str>) {
    let name = if f.subject.is_empty() {
        f.id.clone()
    } else {
        format!("{} {}", f.id, f.subject)
    };
    let open = format!(
        "    <testcase name=\"{}\" classname=\"preflight.{}\"",
        escape(&name),
        escape(area(&f.id))
    );
    let body = || details(f, node, host);
    match f.status {
        Status::Pass => {
            let _ = writeln!(out, "{open}/>");
        }
        Status::Skip => {
            let _ = writeln!(
                out,
                "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                escape(&f.summary)
            );
        }
        Status::Warn => {
            let _ = writeln!(
                out,
                "{open}>\n      <system-out>{}</system-out>\n    </testcase>",
                escape_text(&format!("warn: {}", body()))
            );
        }
        Status::Fail | Status::Error => {
            let _ = writeln!(
                out,
                "{open}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                escape(&f.summary),
                f.status,
                escape_text(&body())
            );
        }
    }
}

/// Plain text for a failure body or system-out: summary, node, evidence as key=value, fix.
fn details(f: &Finding, node: Option<u32>, host: Option<&str>) -> String {
    let mut s = format!("{}\n", f.summary);
    if let Some(r) = node {
        let _ = writeln!(s, "node: {}", suite_name(Some(r), host));
    }
    if !f.evidence.is_empty() {
        s.push_str("evidence:\n");
        for (k, v) in &f.evidence {
            let shown = match v {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            let _ = writeln!(s, "  {k}={shown}");
        }
    }
    if let Some(fix) = &f.fix {
        let _ = writeln!(s, "fix: {}", fix.hint);
        for c in &fix.commands {
            let _ = writeln!(s, "  $ {c}");
        }
    }
    let _ = writeln!(s, "explain: preflight explain {}", f.id);
    s
}

/// Escapes a value for an XML 1.0 attribute: markup characters, and line breaks and tabs
/// as character references so parsers keep them.
pub fn escape(s: &str) -> String {
    escape_with(s, true)
}

/// Escapes XML 1.0 element content: `&`, `<`, `>`; quotes, line breaks and tabs stay as they are.
pub fn escape_text(s: &str) -> String {
    escape_with(s, false)
}

/// Characters XML 1.0 cannot carry at all (control characters other than tab, newline and
/// carriage return; U+FFFE, U+FFFF), and those a terminal would act on (DEL, C1, bidi
/// overrides: `render::sanitize`), are written as a visible `\u{..}` instead.
fn escape_with(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            '\r' => out.push_str("&#13;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' | '\t' => out.push(c),
            // Written as a shell user writes it inside `$'...'` (`\e`, `\x00`, `\uffff`).
            c if super::sanitize::needs_escape(c) || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                preflight_checks::shellword::escaped_char(c, &mut out);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_drops_what_xml_cannot_carry() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;"
        );
        assert_eq!(escape("a\u{1b}[31mb\u{0}"), r"a\e[31mb\x00");
        assert_eq!(escape("l1\nl2\tx"), "l1&#10;l2&#9;x");
        assert_eq!(escape_text("l1\nl2\tx<\"'"), "l1\nl2\tx&lt;\"'");
        assert_eq!(escape_text("]]>"), "]]&gt;");
        assert_eq!(escape("\u{FFFF}é"), r"\uffffé");
        assert_eq!(
            escape_text("a\u{7f}\u{9b}31m\u{202e}b\nc"),
            "a\\x7f\\u009b31m\\u202eb\nc"
        );
    }

    #[test]
    fn fail_and_error_are_both_failures_and_warn_passes() {
        use preflight_checks::model::{Mode, Tool};
        let f = |id: &'static str, status| {
            Finding::new(
                preflight_checks::core::FindingId::new(id),
                status,
                "x",
                format!("{id} summary"),
            )
        };
        let report = Report {
            schema: preflight_checks::model::SCHEMA.into(),
            tool: Tool {
                name: "preflight".into(),
                version: "0".into(),
            },
            mode: Mode::Cluster,
            status: Status::Error,
            placement: None,
            measurement: None,
            nodes: Vec::new(),
            findings: vec![
                f("port.in-use", Status::Fail),
                f("collective.error", Status::Error),
                f("link.slow", Status::Warn),
                f("ib.partial", Status::Skip),
                f("link.mtu-mismatch", Status::Pass),
            ],
            links: Vec::new(),
            collectives: Vec::new(),
            recommendation: None,
            trimmed: None,
            link_matrix: None,
            run_id: None,
        };
        let xml = render(&report);
        assert!(
            xml.contains(r#"tests="5" failures="2" errors="0" skipped="1""#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"type="fail">"#) && xml.contains(r#"type="error">"#),
            "{xml}"
        );
        assert!(!xml.contains("<error"), "{xml}");
        assert!(xml.contains("<system-out>warn: link.slow summary"), "{xml}");
    }

    #[test]
    fn suite_names_say_which_node() {
        assert_eq!(suite_name(None, Some("x")), "cluster");
        assert_eq!(suite_name(Some(2), Some("gpu07")), "rank 2 (gpu07)");
        assert_eq!(suite_name(Some(2), Some("")), "rank 2");
    }
}

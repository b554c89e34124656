//! `--format npd`: a node-problem-detector custom plugin's answer. NPD reads the exit status
//! (0 OK, 1 problem, anything else unknown) and at most 80 characters of stdout, so the line
//! names the worst finding and its cause in plain ASCII.

use preflight_checks::model::{Report, Status};

/// Longest line NPD keeps (its `max_output_length` default).
pub const MAX_LINE: usize = 80;

/// NPD's exit codes.
pub mod code {
    pub const OK: u8 = 0;
    pub const PROBLEM: u8 = 1;
    pub const UNKNOWN: u8 = 2;
}

/// The exit code: 1 when a finding fails (or warns, with `strict`), else 2 when a check could
/// not judge (`error`), else 0.
pub fn exit_code(report: &Report, strict: bool) -> u8 {
    let has = |s: Status| report.findings.iter().any(|f| f.status == s);
    if has(Status::Fail) || (strict && has(Status::Warn)) {
        code::PROBLEM
    } else if has(Status::Error) {
        code::UNKNOWN
    } else {
        code::OK
    }
}

/// One line (with its newline) of at most [`MAX_LINE`] characters: `OK: ...`, or the status
/// and id of the finding that decided the exit code, then its summary, cut.
pub fn render(report: &Report, strict: bool) -> String {
    let worst = |s: Status| report.findings.iter().filter(move |f| f.status == s);
    let line = match exit_code(report, strict) {
        code::OK => {
            let warns: Vec<&str> = worst(Status::Warn).map(|f| f.id.as_str()).collect();
            if warns.is_empty() {
                "OK: preflight passed".to_string()
            } else {
                format!("OK: {} warn: {}", warns.len(), warns.join(","))
            }
        }
        c => {
            let status = if c == code::UNKNOWN {
                Status::Error
            } else if worst(Status::Fail).next().is_some() {
                Status::Fail
            } else {
                Status::Warn
            };
            let mut hits = worst(status);
            let first = hits.next();
            let more = hits.count();
            match first {
                Some(f) => {
                    let more = if more > 0 {
                        format!(" +{more}")
                    } else {
                        String::new()
                    };
                    format!("{status} {}{more}: {}", f.id, f.summary)
                }
                None => format!("{status}"),
            }
        }
    };
    let mut out = ascii_line(&line, MAX_LINE);
    out.push('\n');
    out
}

/// Printable ASCII only (anything else becomes `?`, whitespace a space), cut to `max` chars.
fn ascii_line(s: &str, max: usize) -> String {
    let mut out: String = s
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if out.len() > max {
        out.truncate(max - 3);
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Finding, Mode};

    fn report(f: Vec<Finding>) -> Report {
        crate::report::ReportBuilder::single(Mode::Node, 0, Default::default())
            .findings(f)
            .build()
    }

    #[test]
    fn codes_and_lines() {
        let pass = report(vec![Finding::new(
            preflight_checks::core::FindingId::new("a.b"),
            Status::Pass,
            "",
            "fine",
        )]);
        assert_eq!(
            (render(&pass, false), exit_code(&pass, false)),
            ("OK: preflight passed\n".into(), 0)
        );
        let warn = report(vec![Finding::new(
            preflight_checks::core::FindingId::new("net.hostname-loopback"),
            Status::Warn,
            "",
            "x",
        )]);
        assert_eq!(render(&warn, false), "OK: 1 warn: net.hostname-loopback\n");
        assert_eq!(exit_code(&warn, true), 1);
        let fail = report(vec![
            Finding::new(
                preflight_checks::core::FindingId::new("firewall.rules"),
                Status::Error,
                "",
                "cannot read",
            ),
            Finding::new(
                preflight_checks::core::FindingId::new("port.in-use"),
                Status::Fail,
                "29500",
                "held by pid 1 ".repeat(20),
            ),
        ]);
        let line = render(&fail, false);
        assert!(
            line.starts_with("fail port.in-use: held by pid 1"),
            "{line}"
        );
        assert_eq!(line.trim_end().len(), MAX_LINE);
        assert_eq!(exit_code(&fail, false), 1);
        let err = report(vec![Finding::new(
            preflight_checks::core::FindingId::new("firewall.rules"),
            Status::Error,
            "",
            "\u{1b}é",
        )]);
        assert_eq!(
            (render(&err, false), exit_code(&err, false)),
            ("error firewall.rules: ??\n".into(), 2)
        );
    }
}

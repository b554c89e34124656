//! `preflight explain --log`: each error found with its likely causes in order, the command
//! that confirms each on its own line, ready to paste, and NCCL's network beside them (doctor
//! style); or the `preflight.explain.v1` JSON document.

use super::Style;
use super::doctor::{paint, wrap::wrap};
use super::sanitize;
use preflight_checks::explain_log::answer::{Explained, Explanation};
use preflight_checks::model::Status;

/// The JSON document, pretty, with a final newline.
pub fn json(e: &Explanation) -> String {
    let mut s = serde_json::to_string_pretty(e).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// The answer for people.
pub fn render(e: &Explanation, style: Style) -> String {
    let width = usize::from(style.width).clamp(60, 160);
    let Some(h) = &e.hang else {
        return render_log(e, style, width);
    };
    let mut s = String::new();
    if !e.log.is_empty() {
        s.push_str(&render_log(e, style, width));
        s.push('\n');
    } else {
        s.push_str(&format!(
            "{}\n",
            paint::bold("preflight explain: a hang", style)
        ));
    }
    s.push_str(&super::explain_hang::render(h, style, width));
    s.push('\n');
    s.push_str(&super::explain_hang::verdict(h));
    s
}

/// The log's part: its errors, the unknown error lines, NCCL's network, its verdict.
fn render_log(e: &Explanation, style: Style, width: usize) -> String {
    let a = &e.answer;
    let mut s = format!(
        "{}\n",
        paint::bold(
            &format!(
                "preflight explain: {} ({} lines read{})",
                sanitize::shown(&e.log),
                a.lines_read,
                if a.lines_cut > 0 {
                    format!(", {} cut at 16 KiB", a.lines_cut)
                } else {
                    String::new()
                }
            ),
            style
        )
    );
    if let Some(c) = &a.job.command {
        s.push_str(&wrap(&sanitize::shown(c), width, "  job: ", "       "));
    }
    for err in &a.errors {
        s.push('\n');
        if err.decisive {
            full(&mut s, err, style, width);
        } else {
            short(&mut s, err, style, width);
        }
    }
    if a.errors.is_empty() {
        s.push('\n');
        s.push_str(&wrap(
            "No known error: no line matches an error message preflight knows (NCCL, \
             torch.distributed, gloo, Slurm).",
            width,
            "",
            "",
        ));
    }
    if !a.unmatched.is_empty() {
        s.push('\n');
        s.push_str(&format!(
            "Lines read as errors that match no known message ({}{}):\n",
            a.unmatched_count,
            if a.unmatched_count > a.unmatched.len() as u64 {
                format!(", first {} shown", a.unmatched.len())
            } else {
                String::new()
            }
        ));
        for u in &a.unmatched {
            s.push_str(&format!(
                "  {:>6}  {}\n",
                u.line_no,
                sanitize::shown(&sanitize::cut(&u.line, width.saturating_sub(10)))
            ));
        }
    }
    if let Some(n) = &e.nccl {
        s.push('\n');
        let mut head = format!("NCCL's network: {}", sanitize::shown(&n.summary));
        if let Some(v) = &n.version {
            head.push_str(&format!(" (NCCL {})", sanitize::shown(v)));
        }
        if n.gdrdma {
            head.push_str(", GPUDirect RDMA");
        }
        if let Some(o) = &n.oob_interface {
            head.push_str(&format!(", bootstrap on {}", sanitize::shown(o)));
        }
        s.push_str(&wrap(&head, width, "", "  "));
        if n.notes.is_empty() {
            s.push_str(&wrap(
                "  nothing in NCCL's choice contradicts preflight's advice",
                width,
                "",
                "    ",
            ));
        }
        for note in &n.notes {
            s.push_str(&wrap(
                &format!("{} ({})", sanitize::shown(&note.text), note.id),
                width,
                &format!("  {} ", paint::mark(Status::Warn, style)),
                "    ",
            ));
        }
    }
    s.push('\n');
    s.push_str(&verdict(e));
    s
}

fn place(err: &Explained) -> String {
    let mut parts = vec![format!("line {}", err.line_no)];
    if let Some(h) = &err.host {
        parts.push(sanitize::shown(h).into_owned());
    }
    if let Some(r) = err.rank {
        parts.push(format!("rank {r}"));
    }
    if let Some(d) = err.device {
        parts.push(format!("CUDA device {d}"));
    }
    if err.count > 1 {
        parts.push(format!("{} lines", err.count));
    }
    parts.join(", ")
}

/// The decisive error: the line, what it proves and suggests, every cause with its node,
/// command and fix.
fn full(s: &mut String, err: &Explained, style: Style, width: usize) {
    let tag = if err.first {
        "the decisive error, and the first"
    } else {
        "the decisive error"
    };
    heading(s, err, Status::Fail, &format!("  [{tag}]"), style, width);
    s.push_str(&wrap(err.suggests, width, "  Suggests: ", "    "));
    if !err.also.is_empty() {
        let also: Vec<String> = err
            .also
            .iter()
            .map(|a| {
                let who = a
                    .host
                    .as_deref()
                    .map(|h| sanitize::shown(h).into_owned())
                    .or(a.rank.map(|r| format!("rank {r}")))
                    .unwrap_or_default();
                format!("line {} {who}", a.line_no).trim_end().to_string()
            })
            .collect();
        s.push_str(&wrap(&also.join("; "), width, "  Also at: ", "    "));
    }
    s.push_str("  Likely causes, in order:\n");
    for (i, c) in err.causes.iter().enumerate() {
        s.push_str(&wrap(
            &format!(
                "{} on {}: {}",
                c.id,
                sanitize::shown(&c.node),
                sanitize::shown(&c.why)
            ),
            width,
            &format!("  {}. ", i + 1),
            "     ",
        ));
        s.push_str(&format!(
            "     confirm on {}:\n       {}\n",
            sanitize::shown(&c.node),
            sanitize::shown(&c.confirm)
        ));
        s.push_str(&wrap(c.fix, width, "     fix: ", "       "));
    }
    s.push_str(&wrap(err.source, width, "  Read from: ", "    "));
}

/// An error's first lines: its mark, signature, place and tag; the line as read; what it proves.
fn heading(s: &mut String, err: &Explained, mark: Status, tag: &str, style: Style, width: usize) {
    s.push_str(&format!(
        "{} {}  ({}){tag}\n",
        paint::mark(mark, style),
        paint::bold(err.signature, style),
        place(err)
    ));
    s.push_str(&format!(
        "    {}\n",
        sanitize::shown(&sanitize::cut(&err.line, width * 2))
    ));
    s.push_str(&wrap(err.proves, width, "  Proves: ", "    "));
}

/// Another error: its line and its causes, one line each with the command.
fn short(s: &mut String, err: &Explained, style: Style, width: usize) {
    let tag = if err.first { "  [the first error]" } else { "" };
    heading(s, err, Status::Warn, tag, style, width);
    for c in &err.causes {
        s.push_str(&wrap(
            &format!(
                "{} on {}: {}",
                c.id,
                sanitize::shown(&c.node),
                sanitize::shown(&c.confirm)
            ),
            width,
            "  - ",
            "    ",
        ));
    }
}

/// One line: where to start.
fn verdict(e: &Explanation) -> String {
    match e.answer.errors.iter().find(|x| x.decisive) {
        Some(d) => match d.causes.first() {
            Some(c) => format!(
                "Verdict: {} ({}); start with {} on {}: {}\n",
                d.signature,
                place(d),
                c.id,
                sanitize::shown(&c.node),
                sanitize::shown(&c.confirm)
            ),
            None => format!("Verdict: {} ({})\n", d.signature, place(d)),
        },
        None => {
            "Verdict: no known error in this log; the lines above are what it read as errors.\n"
                .to_string()
        }
    }
}

/// `preflight explain --coverage`: every source the scanner's messages were read from, its
/// versions, its format strings and where they went, then what was left unmapped and why.
/// `explain --coverage --format json`: the counts by source and version, what is left out,
/// and every format string read with its mapping (the inventory a checkout holds).
pub fn coverage_json() -> String {
    use preflight_checks::explain_log::coverage::{LEFT_OUT, SOURCES, VERSIONS, formats};
    let v = serde_json::json!({
        "sources": SOURCES,
        "versions": VERSIONS,
        "left_out": LEFT_OUT,
        "formats": formats(),
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

pub fn coverage(style: Style) -> String {
    use preflight_checks::explain_log::SIGNATURES;
    use preflight_checks::explain_log::coverage::{LEFT_OUT, PATTERNS, SOURCES, VERSIONS};
    let width = usize::from(style.width).clamp(60, 160);
    let total: u32 = SOURCES.iter().map(|s| s.formats).sum();
    let mut s = format!(
        "{}\n",
        paint::bold(
            &format!(
                "preflight explain --log reads {} error format strings from {} sources; {} \
                 signatures match them ({} patterns made from the formats)",
                total,
                SOURCES.len(),
                SIGNATURES.len(),
                PATTERNS.len()
            ),
            style
        )
    );
    s.push_str(&format!(
        "\n  {:<14} {:>7} {:>9} {:>7} {:>9} {:>9}\n",
        "source", "formats", "finding", "job", "unmapped", "patterns"
    ));
    for c in SOURCES {
        s.push_str(&format!(
            "  {:<14} {:>7} {:>9} {:>7} {:>9} {:>9}\n",
            c.source, c.formats, c.to_finding, c.to_job, c.unmapped, c.patterns
        ));
    }
    s.push('\n');
    for c in SOURCES {
        s.push_str(&wrap(
            &format!("{}: {}", c.source, c.what),
            width,
            "  ",
            "    ",
        ));
        let per_version: Vec<String> = VERSIONS
            .iter()
            .filter(|v| v.source == c.source)
            .map(|v| {
                format!(
                    "{} {} ({}+{}+{})",
                    v.version, v.formats, v.to_finding, v.to_job, v.unmapped
                )
            })
            .collect();
        s.push_str(&wrap(
            &format!(
                "versions read, formats (finding+job+unmapped): {}",
                per_version.join(", ")
            ),
            width,
            "    ",
            "      ",
        ));
        if c.too_short > 0 {
            s.push_str(&wrap(
                &format!(
                    "{} mapped formats have no literal of 10 characters to look for and are matched by the signatures' own words only",
                    c.too_short
                ),
                width,
                "    ",
                "      ",
            ));
        }
    }
    s.push_str("\nLeft unmapped, and why:\n");
    for l in LEFT_OUT {
        s.push_str(&wrap(
            &format!("{} {} ({}): {}", l.source, l.group, l.count, l.why),
            width,
            "  - ",
            "    ",
        ));
    }
    s.push_str(&wrap(
        "\"finding\": the format names a cause a preflight check confirms (through a signature, or by \
         the errno or CUDA error it carries); \"job\": the job itself (its own CUDA error, \
         mismatched collectives, API usage). Every format string with its mapping: \
         `preflight explain --coverage --format json` (its \"formats\"; in a checkout, \
         checks/src/explain/log/sources/inventory.tsv, which scripts/explain-sources/extract.py \
         makes again from the sources); the guide's page \"Explain: coverage of the error texts\" \
         (docs/src/explain-coverage.md) has these counts.",
        width,
        "\n",
        "",
    ));
    s
}

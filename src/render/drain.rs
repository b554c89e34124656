//! The Slurm drain reason preflight sets, `preflight: [node_problem] <action>: <finding id>:
//! <short cause>` (whose problem as Nebius' soperator tags it, so a user problem is not left
//! drained), and how a reason is recognised as preflight's own (the way LBNL NHC marks its
//! reasons).

use preflight_checks::catalog::Entry;
use preflight_checks::model::{Finding, Problem};

/// Every reason preflight sets starts with this; a reason without it belongs to someone else.
pub const PREFIX: &str = "preflight:";

/// Characters of the cause kept in a reason (`sinfo -R` shows the reason in one column).
pub const MAX_CAUSE: usize = 100;

/// `preflight: [user_problem] restart-job: port.in-use: master port 29500 is already in use by
/// pid 4242 (python3 ...)`, with ` (+N more)` when `more` other findings would drain the node
/// too; without the tag and action for a finding that has none (a report of an older release).
pub fn reason(f: &Finding, more: usize) -> String {
    let mut s = format!("{PREFIX} {}", part(f).text);
    if more > 0 {
        s.push_str(&format!(" (+{more} more)"));
    }
    s
}

/// `[node_problem] restart-job: ` (whose problem and the action), or nothing for a finding
/// that has none (a report of an older release).
fn tag(f: &Finding) -> String {
    f.remedy_of()
        .map(|r| format!("{} {}: ", r.problem.tag(), r.action))
        .unwrap_or_default()
}

/// Longest reason preflight sets: the parts that fit, then `(+N more)`.
pub const MAX_REASON: usize = 256;

/// Between the parts of a reason that names several findings.
const SEP: &str = " | ";

/// One finding's part of a reason: its id and `[node_problem] <action>: <id>: <short cause>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub id: String,
    pub text: String,
}

/// `f`'s part of a reason; a lemon's is short (`... history.lemon: repeat port.in-use`), so it
/// fits beside the failure it is said with.
pub fn part(f: &Finding) -> Part {
    let what = if f.is(preflight_checks::history::ids::LEMON) {
        let rule = f
            .evidence
            .get("rule")
            .and_then(|r| r.as_str())
            .unwrap_or("lemon");
        format!("{} {}", clean(rule, 16), clean(&f.subject, 64))
    } else {
        short_cause(&f.summary)
    };
    Part {
        id: f.id.clone(),
        text: format!("{}{}: {what}", tag(f), clean(&f.id, 64)),
    }
}

/// A fresh reason for `parts`: `preflight: ` and as many parts as fit in [`MAX_REASON`]
/// (the first always), then ` (+N more)`.
pub fn reason_of(parts: &[Part]) -> Option<String> {
    let first = parts.first()?;
    let mut s = format!("{PREFIX} {}", first.text);
    let mut shown = 1;
    for p in &parts[1..] {
        if s.chars().count() + SEP.len() + p.text.chars().count() + " (+99 more)".len() > MAX_REASON
        {
            break;
        }
        s.push_str(SEP);
        s.push_str(&p.text);
        shown += 1;
    }
    if shown < parts.len() {
        s.push_str(&format!(" (+{} more)", parts.len() - shown));
    }
    Some(s)
}

/// The finding ids a reason preflight set names, in order (its parts, and the older
/// `preflight: <id>: <cause>` form).
pub fn ids_in(reason: &str) -> Vec<String> {
    let Some(body) = reason.trim_start().strip_prefix(PREFIX) else {
        return Vec::new();
    };
    let is_id = |t: &str| {
        t.contains('.')
            && !t.starts_with('.')
            && !t.ends_with('.')
            && t.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
    };
    body.split(SEP)
        .filter_map(|p| p.split(": ").map(str::trim).find(|t| is_id(t)))
        .map(str::to_string)
        .collect()
}

/// `old` (a reason preflight set) with the parts of findings it does not name yet appended,
/// within [`MAX_REASON`]; None when it names them all or none fits (the reason and the drain's
/// time are then kept as they are).
pub fn appended(old: &str, parts: &[Part]) -> Option<String> {
    let named = ids_in(old);
    let mut s = old.trim().to_string();
    let mut added = false;
    for p in parts.iter().filter(|p| !named.contains(&p.id)) {
        if s.chars().count() + SEP.len() + p.text.chars().count() > MAX_REASON {
            break;
        }
        s.push_str(SEP);
        s.push_str(&p.text);
        added = true;
    }
    added.then_some(s)
}

/// True when preflight set this reason (Slurm may append `[user@time]` in some views).
pub fn is_ours(reason: &str) -> bool {
    reason.trim_start().starts_with(PREFIX)
}

/// The first clause of a summary (up to `; `), on one line, without double quotes, cut at a
/// word boundary to [`MAX_CAUSE`] characters.
pub fn short_cause(summary: &str) -> String {
    let first = summary.split("; ").next().unwrap_or_default();
    clean(first, MAX_CAUSE)
}

/// One line of printable text: control characters become spaces, `"` becomes `'`, runs of
/// spaces collapse, and the text is cut at a word boundary to `max` characters with `...`.
fn clean(s: &str, max: usize) -> String {
    let mapped: String = s
        .chars()
        .map(|c| match c {
            '"' => '\'',
            c if c.is_control() || crate::shell::is_control(c) => ' ',
            c => c,
        })
        .collect();
    let words: Vec<&str> = mapped.split_whitespace().collect();
    let one = words.join(" ");
    if one.chars().count() <= max {
        return one;
    }
    let mut out = String::new();
    for w in &words {
        let add = if out.is_empty() { 0 } else { 1 } + w.chars().count();
        if out.chars().count() + add + 3 > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    if out.is_empty() {
        out = one.chars().take(max.saturating_sub(3)).collect();
    }
    out.push_str("...");
    out
}

/// What `preflight explain ID` says about draining: the reason, or why the id never drains.
pub fn explain(e: &Entry) -> String {
    let tag = e
        .remedy
        .map(|r| format!("{} {}: ", r.problem.tag(), r.action))
        .unwrap_or_default();
    let user = e.remedy.is_some_and(|r| r.problem == Problem::User);
    if user {
        format!(
            "A user problem: `preflight check --slurm-health --drain` never drains a node for it \
             (and resumes a node it drained once nothing else is wrong); --slurm-prolog --drain, \
             whose failing exit Slurm drains anyway, sets Reason=\"{PREFIX} {tag}{}: <the \
             finding's summary up to its first ';'>\" so whoever reads `sinfo -R` knows the node \
             is fine.",
            e.id
        )
    } else if e.fires.contains("fail") {
        format!(
            "`preflight check --slurm-health --drain` (or --slurm-prolog --drain) drains the node with \
             Reason=\"{PREFIX} {tag}{}: <the finding's summary up to its first ';', at most \
             {MAX_CAUSE} characters>\" and resumes it once it passes again; a reason preflight did \
             not set is never replaced.",
            e.id
        )
    } else {
        format!(
            "It fires as {} only, so it drains a node only with --strict: Reason=\"{PREFIX} \
             {tag}{}: <the finding's summary up to its first ';'>\".",
            e.fires, e.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::Status;

    #[test]
    fn reason_names_the_id_and_the_first_clause() {
        let f = Finding::new(
            preflight_checks::core::FindingId::new("port.in-use"),
            Status::Fail,
            "29500",
            "master port 29500 is already in use by pid 4242 (python3 -c \"x\"); torchrun will fail with \"Address already in use\"",
        );
        assert_eq!(
            reason(&f, 0),
            "preflight: port.in-use: master port 29500 is already in use by pid 4242 (python3 -c 'x')"
        );
        assert!(reason(&f, 2).ends_with(" (+2 more)"));
        let tagged = f.clone().remedy(preflight_checks::model::Remedy::user(
            preflight_checks::model::Action::RestartJob,
        ));
        assert_eq!(
            reason(&tagged, 0),
            "preflight: [user_problem] restart-job: port.in-use: master port 29500 is already in use by pid 4242 (python3 -c 'x')"
        );
        assert!(is_ours(&reason(&tagged, 1)));
        assert!(is_ours(&reason(&f, 0)));
        assert!(!is_ours("bad DIMM, ticket 123"));
        assert!(!is_ours("Prolog error"));
    }

    #[test]
    fn long_and_hostile_causes_are_one_bounded_line() {
        let long = format!("{}\n\u{1b}[31mred{}", "word ".repeat(100), "x".repeat(500));
        let c = short_cause(&long);
        assert!(c.chars().count() <= MAX_CAUSE, "{c}");
        assert!(c.ends_with("..."));
        assert!(!c.contains('\n') && !c.contains('\u{1b}'));
        let one_word = short_cause(&"y".repeat(1000));
        assert_eq!(one_word.chars().count(), MAX_CAUSE);
    }
}

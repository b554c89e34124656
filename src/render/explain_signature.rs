//! `preflight explain ID` for an id that `explain --log` prints as a verdict (a signature such
//! as `gloo.peer-closed`, or the job's own fault such as `job.mismatch`): what the message
//! proves, what it only suggests, its likely causes in order and how to confirm each; and the
//! list of them for `explain --list`.

use super::explain::wrap;
use preflight_checks::explain_log::signatures::{Scope, Signature};
use preflight_checks::explain_log::signatures_sources::JobCause;

const WIDTH: usize = 78;

/// Where a cause is confirmed, and the command that confirms it there.
fn confirm(scope: Scope) -> &'static str {
    match scope {
        Scope::Reporter => "on the node that printed the message: `preflight check`",
        Scope::Target => {
            "on the host or address the message names (the master, the peer): `preflight check` there"
        }
        Scope::Cluster => {
            "across every node of the job, run on each at once: `preflight cluster --hosts LIST`"
        }
    }
}

/// One signature: what it proves, suggests, its causes with how to confirm each, its texts.
pub fn render(s: &Signature) -> String {
    let mut out = format!(
        "{}  (an error `preflight explain --log` recognises in a job's output)\n",
        s.id
    );
    for (title, text) in [
        ("What it proves", s.proves),
        ("What it suggests", s.suggests),
    ] {
        out.push('\n');
        out.push_str(title);
        out.push('\n');
        out.push_str(&wrap(text, "  ", WIDTH));
    }
    out.push_str("\nLikely causes, in order, and how to confirm each\n");
    if s.causes.is_empty() {
        out.push_str(&wrap("none a node check confirms", "  ", WIDTH));
    }
    for (i, c) in s.causes.iter().enumerate() {
        out.push_str(&wrap(
            &format!("{}. {}: {}", i + 1, c.id, c.why),
            "  ",
            WIDTH,
        ));
        out.push_str(&wrap(
            &format!(
                "confirm {}; `preflight explain {}` says what it checks",
                confirm(c.scope),
                c.id
            ),
            "     ",
            WIDTH,
        ));
    }
    out.push_str("\nThe text it matches\n");
    for n in s.needles {
        out.push_str(&format!("  {n}\n"));
    }
    out.push_str("\nRead from\n");
    out.push_str(&wrap(s.source, "  ", WIDTH));
    out.push('\n');
    out.push_str(&wrap(
        "Run `preflight explain --log FILE` on the job's output to see which node printed it and the causes that fit its values.",
        "",
        WIDTH,
    ));
    out
}

/// The job's own fault (`job.mismatch`): what it means and its fix.
pub fn render_job(j: &JobCause) -> String {
    let mut out = format!(
        "{}  (a fault of the job itself that `preflight explain --log` names)\n",
        j.id
    );
    for (title, text) in [("What it means", j.meaning), ("How to fix", j.fix)] {
        out.push('\n');
        out.push_str(title);
        out.push('\n');
        out.push_str(&wrap(text, "  ", WIDTH));
    }
    out
}

/// The signatures and the job's faults, one a line, for `explain --list`.
pub fn render_list(sigs: &[&Signature], jobs: &[JobCause]) -> String {
    let w = sigs
        .iter()
        .map(|s| s.id.len())
        .chain(jobs.iter().map(|j| j.id.len()))
        .max()
        .unwrap_or(0);
    let mut out = String::from(
        "\nErrors `preflight explain --log` names (`preflight explain ID` for each):\n",
    );
    let mut sorted: Vec<&&Signature> = sigs.iter().collect();
    sorted.sort_by_key(|s| s.id);
    for s in sorted {
        out.push_str(&format!("{:<w$}  {}\n", s.id, s.proves));
    }
    for j in jobs {
        out.push_str(&format!("{:<w$}  {}\n", j.id, j.meaning));
    }
    out
}

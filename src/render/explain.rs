//! The finding catalog as plain text: one entry (`preflight explain ID`: what, why, the fix,
//! the action and whose problem, the drain reason) or the list.

use preflight_checks::catalog::{self, Entry};
use preflight_checks::model::{Fault, Problem};

/// Width explanations are wrapped to.
const WIDTH: usize = 78;

/// One entry: id and status, then what it means, why it matters, how to fix it.
pub fn render(e: &Entry) -> String {
    let mut s = format!("{}  (fires as: {})\n", e.id, e.fires);
    let drain = super::drain::explain(e);
    let action = action(e);
    for (title, text) in [
        ("What it means", e.meaning),
        ("Why it matters", e.why),
        ("How to fix", e.fix),
        ("Action", action.as_str()),
        ("Slurm drain reason", drain.as_str()),
    ] {
        s.push('\n');
        s.push_str(title);
        s.push('\n');
        s.push_str(&wrap(text, "  ", WIDTH));
    }
    s
}

/// [`render`], then what this host has ("On this host"): its finding's summary and the
/// commands that fix it here.
pub fn render_here(e: &Entry, here: Option<&preflight_checks::model::Finding>) -> String {
    let mut s = render(e);
    if let Some(f) = here {
        s.push_str(&format!("\nOn this host ({})\n", f.status.as_str()));
        s.push_str(&wrap(&f.summary, "  ", WIDTH));
        if let Some(fix) = f
            .fix
            .as_ref()
            .filter(|_| f.status != preflight_checks::model::Status::Pass)
        {
            for c in &fix.commands {
                s.push_str(&format!("    {c}\n"));
            }
        }
    }
    s
}

/// What to do when it fires and whose problem it is, as JSON's `action` and `problem` say.
fn action(e: &Entry) -> String {
    let Some(r) = e.remedy else {
        return "not given".to_string();
    };
    let whose = match r.problem {
        Problem::Node => {
            "a node problem: the node's operators act, and a Slurm health check drains it meanwhile"
        }
        Problem::User => {
            "a user problem: the job's launch or environment, the node is not drained for it"
        }
    };
    let per_xid = if e.id == preflight_checks::gpu::ids::XID {
        " Per XID, NVIDIA's immediate action (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): \
         79 reboot; 48 (the DBE workflow), 74 (the NVLink workflow), 46, 62, 64, 95, 119, 120 \
         reset-gpu; 13, 31, 94 restart-job (the user's); 63, 92 none (the finding warns)."
    } else {
        ""
    };
    let kind = match e.fault() {
        Fault::Hardware => {
            " Its fault is in the node's hardware: when it keeps coming back (a lemon), the action escalates towards a repair and a replacement."
        }
        Fault::Config => {
            " Its fault is in the node's configuration or software: when it keeps coming back, the fix did not hold (find what restores it), never a repair of the part."
        }
        Fault::User => " It is never a node's lemon.",
    };
    format!("{} ({whose}).{per_xid}{kind}", r.action)
}

/// Every id with its one-line meaning, aligned.
pub fn render_list() -> String {
    let all = catalog::all();
    let w = all.iter().map(|e| e.id.as_str().len()).max().unwrap_or(0);
    let mut s = String::new();
    for e in all {
        s.push_str(&format!("{:<w$}  {}\n", e.id, e.meaning));
    }
    s
}

/// Splits text into words, keeping a `backtick span` whole so commands are not broken.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_code = false;
    for w in text.split_whitespace() {
        match out.last_mut() {
            Some(last) if in_code => {
                last.push(' ');
                last.push_str(w);
            }
            _ => out.push(w.to_string()),
        }
        if w.matches('`').count() % 2 == 1 {
            in_code = !in_code;
        }
    }
    out
}

/// Greedy word wrap; a word longer than the line gets a line of its own.
pub(super) fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut s = String::new();
    let mut line = String::new();
    for w in words(text) {
        let len = |x: &str| x.chars().count();
        if !line.is_empty() && len(indent) + len(&line) + 1 + len(&w) > width {
            s.push_str(indent);
            s.push_str(&line);
            s.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&w);
    }
    if !line.is_empty() {
        s.push_str(indent);
        s.push_str(&line);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_without_breaking_commands() {
        let t = wrap(
            "run `ss -ltnp 'sport = :29500'` then `kill <pid>` and rerun preflight on every node",
            "  ",
            30,
        );
        assert!(t.contains("`ss -ltnp 'sport = :29500'`"), "{t}");
        for line in t.lines() {
            assert!(line.starts_with("  "), "{t}");
        }
        assert!(t.lines().count() >= 3, "{t}");
    }

    #[test]
    fn every_entry_renders_with_its_sections() {
        for e in catalog::all() {
            let t = render(e);
            assert!(t.starts_with(e.id.as_str()), "{t}");
            for s in ["What it means", "Why it matters", "How to fix", "Action"] {
                assert!(t.contains(s), "{t}");
            }
        }
        assert_eq!(render_list().lines().count(), catalog::all().len());
        let xid = catalog::all()
            .iter()
            .find(|e| e.id.as_str() == "gpu.xid")
            .unwrap();
        assert!(render(xid).contains("79 reboot;"), "{}", render(xid));
    }
}

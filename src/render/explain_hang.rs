//! `preflight explain --dumps/--ras`: what was read (dumps, files that could not be judged, RAS),
//! each process group's verdict, then each culprit with its evidence, where it stands, and its
//! likely causes in order with the command that confirms each on a line of its own.

use super::Style;
use super::doctor::{paint, wrap::wrap};
use super::sanitize;
use preflight_checks::explain::hang::answer::{Culprit, Hang};
use preflight_checks::explain::hang::verdict::{Group, list};
use preflight_checks::model::Status;

fn sh(s: &str) -> String {
    sanitize::shown(s).into_owned()
}

/// The last `n` characters, "…" before them when cut: a path's end says most.
fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    let rest: String = s.chars().skip(count - n + 1).collect();
    format!("…{rest}")
}

/// The hang's part of the answer.
pub fn render(h: &Hang, style: Style, width: usize) -> String {
    let mut s = String::new();
    read_part(&mut s, h, width);
    if let Some(v) = &h.verdict {
        s.push('\n');
        s.push_str(&paint::bold(
            &format!(
                "Flight Recorder: {} rank{} with a dump of {}{}",
                v.dumped.len(),
                if v.dumped.len() == 1 { "" } else { "s" },
                v.world_size,
                if v.no_dump.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; no dump from rank{} {}",
                        if v.no_dump.len() == 1 { "" } else { "s" },
                        list(&v.no_dump)
                    )
                }
            ),
            style,
        ));
        s.push('\n');
        for g in &v.groups {
            group(&mut s, g, style, width);
        }
    }
    if let Some(w) = &h.watchdog {
        watchdog(&mut s, h, w, width);
    }
    for c in &h.culprits {
        s.push('\n');
        culprit(&mut s, c, style, width);
    }
    if !h.next_run.is_empty() {
        s.push('\n');
        s.push_str("For the next run to leave dumps, set on every rank:\n");
        for v in &h.next_run {
            s.push_str(&wrap(v, width, "  export ", "    "));
        }
    }
    s
}

fn read_part(s: &mut String, h: &Hang, width: usize) {
    if !h.dumps.is_empty() {
        let mut versions: Vec<String> = h
            .dumps
            .iter()
            .map(|d| format!("{} {}", d.backend, d.version))
            .collect();
        versions.sort();
        versions.dedup();
        s.push_str(&wrap(
            &format!(
                "dumps read: {} (Flight Recorder {})",
                h.dumps.len(),
                sh(&versions.join(", "))
            ),
            width,
            "",
            "  ",
        ));
    }
    for u in &h.unread {
        s.push_str(&wrap(
            &format!("{}: {}", sh(&u.file), sh(&u.why)),
            width,
            "  not judged: ",
            "    ",
        ));
    }
    if let Some(r) = &h.ras {
        s.push_str(&wrap(
            &format!(
                "NCCL RAS ({}, {}{}): {} communicator{} with a problem, {} dead and {} unresponsive process{}",
                sh(h.ras_source.as_deref().unwrap_or("-")),
                r.format,
                r.nccl_version.as_deref().map(|v| format!(", NCCL {}", sh(v))).unwrap_or_default(),
                r.comms.len(),
                if r.comms.len() == 1 { "" } else { "s" },
                r.dead.len(),
                r.unresponsive.len(),
                if r.unresponsive.len() == 1 { "" } else { "es" }
            ),
            width,
            "",
            "  ",
        ));
    }
}

fn group(s: &mut String, g: &Group, style: Style, width: usize) {
    let mark = match g.status {
        "healthy" => Status::Pass,
        _ => Status::Fail,
    };
    let desc = if g.desc.is_empty() {
        String::new()
    } else {
        format!(" ({})", sh(&g.desc))
    };
    let mut line = format!(
        "group {}{desc}, ranks {}: {}",
        sh(&g.pg),
        list(&g.ranks),
        g.status
    );
    if let Some((seq, op)) = &g.last_completed_by_all {
        line.push_str(&format!("; every rank completed #{seq} ({})", sh(op)));
    }
    if let Some(f) = &g.front {
        if g.status != "healthy" {
            line.push_str(&format!(
                "; rank{} {} entered #{} ({} {} {})",
                if f.entered_by.len() == 1 { "" } else { "s" },
                list(&f.entered_by),
                f.seq,
                sh(&f.op),
                sh(&f.sizes),
                sh(&f.dtypes)
            ));
        }
    }
    s.push_str(&wrap(
        &line,
        width,
        &format!("  {} ", paint::mark(mark, style)),
        "      ",
    ));
    for b in &g.behind {
        if let Some(p) = &b.blocked_in {
            s.push_str(&wrap(
                &format!(
                    "rank {} is not the cause here: it waits in {} #{} of group {}",
                    b.rank,
                    sh(&p.op),
                    p.seq,
                    sh(&p.pg)
                ),
                width,
                "      ",
                "        ",
            ));
        }
    }
    if let Some(m) = &g.mismatch {
        let sides: Vec<String> = m
            .sides
            .iter()
            .map(|x| {
                format!(
                    "rank{} {}: {}",
                    if x.ranks.len() == 1 { "" } else { "s" },
                    list(&x.ranks),
                    sh(&x.value)
                )
            })
            .collect();
        s.push_str(&wrap(
            &format!("#{} differs in {}: {}", m.seq, m.field, sides.join("; ")),
            width,
            "      ",
            "        ",
        ));
    }
}

fn watchdog(
    s: &mut String,
    h: &Hang,
    w: &preflight_checks::explain::hang::answer::Watchdog,
    width: usize,
) {
    s.push('\n');
    let seq = w.seq.map_or("N".into(), |n| n.to_string());
    let text = format!(
        "The watchdog timed out in collective #{seq}{}{}{}: it proves that one or more ranks did not enter #{seq} \
         of that process group within the timeout. A straggler, a dead rank, a mismatched collective or the \
         network each do that; a second error on some rank (a crash, NCCL WARN, a killed process) or the \
         dumps tell them apart{}.",
        w.op.as_deref()
            .map(|o| format!(" ({})", sh(o)))
            .unwrap_or_default(),
        w.timeout_ms
            .map(|t| format!(" after {} s", t / 1000))
            .unwrap_or_default(),
        if w.ranks.is_empty() {
            String::new()
        } else {
            format!(
                " on rank{} {}",
                if w.ranks.len() == 1 { "" } else { "s" },
                list(&w.ranks)
            )
        },
        if h.verdict.is_some() {
            " (judged below)"
        } else {
            ""
        }
    );
    s.push_str(&wrap(&text, width, "", ""));
}

fn culprit(s: &mut String, c: &Culprit, style: Style, width: usize) {
    let who = match c.rank {
        Some(r) => format!("rank {r}"),
        None if c.kind == "ras-behind" => "ranks".into(),
        None => "a process".into(),
    };
    let mut place = vec![sh(&c.node)];
    if let Some(p) = c.pid {
        place.push(format!("pid {p}"));
    }
    if let Some(g) = &c.gpu {
        place.push(format!("GPU {}", sh(g)));
    }
    s.push_str(&format!(
        "{} {}  ({}, {})\n",
        paint::mark(Status::Fail, style),
        paint::bold(&who, style),
        c.kind,
        place.join(", ")
    ));
    for e in &c.evidence {
        s.push_str(&wrap(&sh(e), width, "  - ", "    "));
    }
    if !c.frames.is_empty() {
        s.push_str("  Where it last called a collective:\n");
        // The user's frames: torch.distributed's own wrappers say nothing about the job.
        let own: Vec<_> = c
            .frames
            .iter()
            .filter(|f| !f.filename.contains("torch/distributed/"))
            .collect();
        let shown = if own.is_empty() {
            c.frames.iter().collect()
        } else {
            own
        };
        for f in shown.iter().take(6) {
            s.push_str(&format!(
                "    {} ({}:{})\n",
                sh(&tail(&f.name, 60)),
                sh(&tail(&f.filename, 60)),
                f.line
            ));
        }
    }
    s.push_str("  Likely causes, in order:\n");
    for (i, k) in c.causes.iter().enumerate() {
        let id = k.id.unwrap_or("the job's code");
        s.push_str(&wrap(
            &format!("{id} on {}: {}", sh(&k.node), sh(&k.why)),
            width,
            &format!("  {}. ", i + 1),
            "     ",
        ));
        s.push_str(&format!(
            "     confirm on {}:\n       {}\n",
            sh(&k.node),
            sh(&k.confirm)
        ));
        if !k.fix.is_empty() {
            s.push_str(&wrap(&sh(&k.fix), width, "     fix: ", "       "));
        }
    }
}

/// One line: where to start.
pub fn verdict(h: &Hang) -> String {
    match h.culprits.first().and_then(|c| c.causes.first()) {
        Some(k) => format!(
            "Verdict: {}; start with {} on {}: {}\n",
            sh(&h.summary),
            k.id.unwrap_or("the job's code"),
            sh(&k.node),
            sh(&k.confirm)
        ),
        None => format!("Verdict: {}\n", sh(&h.summary)),
    }
}

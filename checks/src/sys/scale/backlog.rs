//! `sys.listen-backlog`: min(`net.core.somaxconn`, `net.ipv4.tcp_max_syn_backlog`) against the
//! world size. The master's TCPStore takes a connection from every rank and gloo's full mesh
//! makes every rank's listener take one from every other rank, all at once at init.

use super::job::{Job, NO_WORLD};
use crate::core::{Finding, Fix, NodeFacts, Status};

pub use crate::sys::scale::ids::LISTEN_BACKLOG as ID;

pub fn check(facts: &NodeFacts, job: &Job) -> Finding {
    let s = &facts.scale;
    let (Some(somaxconn), Some(syn)) = (s.somaxconn, s.tcp_max_syn_backlog) else {
        let why = s
            .errors
            .get("somaxconn")
            .or_else(|| s.errors.get("tcp_max_syn_backlog"))
            .cloned();
        let status = if why.is_some() {
            Status::Error
        } else {
            Status::Skip
        };
        return Finding::new(
            ID,
            status,
            "listen backlog",
            format!(
                "cannot read net.core.somaxconn / net.ipv4.tcp_max_syn_backlog: {}",
                why.as_deref().unwrap_or("not present on this system")
            ),
        )
        .with("error", why);
    };
    let backlog = somaxconn.min(syn);
    let abort = s.tcp_abort_on_overflow.unwrap_or(0) == 1;
    let base = |status, summary: String| {
        Finding::new(ID, status, "listen backlog", summary)
            .with("somaxconn", somaxconn)
            .with("tcp_max_syn_backlog", syn)
            .with("tcp_abort_on_overflow", s.tcp_abort_on_overflow)
            .with("backlog", backlog)
            .with("world_size", job.world)
    };
    let Some(world) = job.world else {
        return base(
            Status::Skip,
            format!("listen backlog is {backlog}; {NO_WORLD}"),
        );
    };
    let role = if job.master {
        "the master's TCPStore and this node's gloo listeners take"
    } else {
        "this node's gloo listeners take"
    };
    let need = format!("{role} a connection from every rank at init: need >= world size {world}");
    if backlog >= world {
        return base(
            Status::Pass,
            format!("listen backlog {backlog} holds {}", job.world_words()),
        )
        .with("need", need);
    }
    let effect = if abort {
        "tcp_abort_on_overflow = 1 turns each overflow into a reset ('Connection reset by peer' in TCPStore/gloo; a 36-rank gloo job with backlog 1 measured here retried and completed, so the risk grows with the world size)"
    } else {
        "overflowing SYNs are dropped and retried after a second or more, so init slows and may hit its timeout"
    };
    let want = world.max(4096).to_string();
    let mut settings = vec![
        ("net.core.somaxconn", want.clone()),
        ("net.ipv4.tcp_max_syn_backlog", want),
    ];
    if abort {
        settings.push(("net.ipv4.tcp_abort_on_overflow", "0".into()));
    }
    let mut fix = Fix::new(format!(
        "Raise both to at least the world size ({world}) on every node (the master above all), now and at boot{}",
        if abort {
            "; and set tcp_abort_on_overflow back to 0 so an overflow is retried, not reset"
        } else {
            ""
        }
    ));
    for c in crate::infra::sysctl::sysctl_fix("backlog", &settings) {
        fix = fix.command(c);
    }
    base(
        Status::Warn,
        format!(
            "listen backlog {backlog} (min of somaxconn {somaxconn}, tcp_max_syn_backlog {syn}) is below the world size {world}: {effect}"
        ),
    )
    .with("need", need)
    .with("effect", effect)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::scale::testkit::{ctx, defaults};

    fn judge(f: &NodeFacts, c: &crate::core::CheckContext) -> Finding {
        check(f, &Job::of(f, c))
    }

    #[test]
    fn fires_for_1536_ranks_at_the_old_default_of_128() {
        let mut f = defaults();
        f.scale.somaxconn = Some(128);
        let out = judge(&f, &ctx(0, 192, 8));
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert!(
            out.summary.contains("below the world size 1536"),
            "{}",
            out.summary
        );
        let cmds = &out.fix.as_ref().unwrap().commands;
        assert!(
            cmds.iter()
                .any(|c| c == "sysctl -w net.core.somaxconn=4096"),
            "{cmds:?}"
        );
        assert!(
            cmds.iter().any(|c| c.contains("/etc/sysctl.d/")),
            "{cmds:?}"
        );
    }

    #[test]
    fn abort_on_overflow_is_named_and_undone() {
        let mut f = defaults();
        f.scale.somaxconn = Some(20);
        f.scale.tcp_abort_on_overflow = Some(1);
        let out = judge(&f, &ctx(0, 3, 10));
        assert_eq!(out.status, Status::Warn);
        assert!(out.summary.contains("reset"), "{}", out.summary);
        let cmds = &out.fix.as_ref().unwrap().commands;
        assert!(cmds.contains(&"sysctl -w net.ipv4.tcp_abort_on_overflow=0".to_string()));
        assert!(cmds.last().unwrap().contains("/etc/sysctl.d/"));
    }

    #[test]
    fn passes_when_it_holds_the_world_and_skips_without_one() {
        let f = defaults();
        assert_eq!(judge(&f, &ctx(0, 3, 10)).status, Status::Pass);
        let out = judge(&f, &crate::core::CheckContext::default());
        assert_eq!(out.status, Status::Skip);
        assert!(out.summary.contains("no world size known"));
        let mut none = defaults();
        none.scale.somaxconn = None;
        assert_eq!(judge(&none, &ctx(0, 3, 10)).status, Status::Skip);
    }
}

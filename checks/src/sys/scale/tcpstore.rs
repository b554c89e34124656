//! `launch.tcpstore`: on the master only, a world above 1,024 ranks with the legacy TCPStore
//! (torch < 2.4, or `USE_LIBUV=0`): its one-thread server times out at about that size; the
//! libuv backend (the default from torch 2.4) does not.

use super::job::Job;
use crate::core::{Finding, Fix, NodeFacts, Status};

pub use crate::sys::scale::ids::TCPSTORE as ID;
/// Above this many ranks the legacy store is known to time out at init.
pub const LEGACY_LIMIT: u64 = 1024;

/// (major, minor) of "2.3.1+cu121".
fn major_minor(v: &str) -> Option<(u32, u32)> {
    let mut it = v.trim().split(['.', '+']);
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

pub fn check(facts: &NodeFacts, job: &Job) -> Option<Finding> {
    if !job.master {
        return None;
    }
    let world = job.world?;
    let torch = facts.nccl.torch_version.clone();
    let libuv_env = facts.env.get("USE_LIBUV").map(|v| v.trim().to_string());
    let libuv_off = libuv_env.as_deref() == Some("0");
    let libuv_on = libuv_env.as_deref() == Some("1");
    let old_torch = torch
        .as_deref()
        .and_then(major_minor)
        .is_some_and(|v| v < (2, 4));
    let base = |status, summary: String| {
        Finding::new(ID, status, "TCPStore", summary)
            .with("world_size", world)
            .with("torch_version", &torch)
            .with("USE_LIBUV", &libuv_env)
            .with("legacy_limit", LEGACY_LIMIT)
    };
    let legacy = libuv_off || (old_torch && !libuv_on);
    if world > LEGACY_LIMIT && !legacy && torch.is_none() && !libuv_on {
        return Some(base(
            Status::Skip,
            format!(
                "torch was not found here, so the TCPStore backend is unknown: above {LEGACY_LIMIT} ranks ({world} here) it must be the libuv one (torch >= 2.4, USE_LIBUV not 0)"
            ),
        ));
    }
    if world <= LEGACY_LIMIT || !legacy {
        let backend = if legacy {
            "the legacy TCPStore"
        } else if torch.is_none() && !libuv_on {
            "the TCPStore (whichever backend)"
        } else {
            "the libuv TCPStore"
        };
        return Some(base(
            Status::Pass,
            format!("{backend} serves {world} ranks"),
        ));
    }
    let why = if libuv_off {
        "USE_LIBUV=0 selects the legacy TCPStore".to_string()
    } else {
        format!(
            "torch {} predates the libuv TCPStore default (2.4)",
            torch.as_deref().unwrap_or("?")
        )
    };
    Some(
        base(
            Status::Warn,
            format!(
                "{why}, which times out above about {LEGACY_LIMIT} ranks; this job has {world} (expect 'TCPStore ... timed out' or 'Connection reset by peer' at init)"
            ),
        )
        .fix(
            Fix::new(
                "Use the libuv TCPStore: drop USE_LIBUV=0, or on torch 2.3 export USE_LIBUV=1 in the \
                 master's environment; better, upgrade torch to 2.4 or later where it is the default.",
            )
            .command(if libuv_off { "unset USE_LIBUV" } else { "export USE_LIBUV=1" })
            .command("pip install -U 'torch>=2.4'"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::scale::testkit::{ctx, defaults};

    #[test]
    fn the_legacy_store_above_1024_ranks_warns_on_the_master_only() {
        let mut f = defaults();
        f.nccl.torch_version = Some("2.3.1+cu121".into());
        let big = ctx(0, 256, 8);
        let out = check(&f, &Job::of(&f, &big)).unwrap();
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert!(out.summary.contains("torch 2.3.1+cu121"));
        assert!(check(&f, &Job::of(&f, &ctx(1, 256, 8))).is_none());
        f.nccl.torch_version = Some("2.5.0".into());
        assert_eq!(check(&f, &Job::of(&f, &big)).unwrap().status, Status::Pass);
        f.env.insert("USE_LIBUV".into(), "0".into());
        let out = check(&f, &Job::of(&f, &big)).unwrap();
        assert_eq!(out.status, Status::Warn);
        assert_eq!(out.fix.unwrap().commands[0], "unset USE_LIBUV");
        assert_eq!(
            check(&f, &Job::of(&f, &ctx(0, 128, 8))).unwrap().status,
            Status::Pass
        );
        // No torch found: unknown above the limit, fine below it.
        let f = defaults();
        assert_eq!(check(&f, &Job::of(&f, &big)).unwrap().status, Status::Skip);
        assert_eq!(
            check(&f, &Job::of(&f, &ctx(0, 4, 8))).unwrap().status,
            Status::Pass
        );
    }
}

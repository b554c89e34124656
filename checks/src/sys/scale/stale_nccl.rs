//! `sys.stale-nccl`: NCCL shared-memory segments in /dev/shm whose owning processes are gone
//! (a crashed or killed job). They hold tmpfs memory until removed and can fill a small /dev/shm.

use crate::core::{Finding, Fix, NodeFacts, Status};

pub use crate::sys::scale::ids::STALE_NCCL as ID;

/// Most file names put into the fix command.
const MAX_NAMED: usize = 64;

pub fn check(facts: &NodeFacts) -> Finding {
    let all = &facts.scale.nccl_shm;
    let stale: Vec<_> = all
        .iter()
        .filter(|f| f.holders.is_empty() && !f.unverified)
        .collect();
    let unverified = all
        .iter()
        .filter(|f| f.holders.is_empty() && f.unverified)
        .count();
    let live = all.len() - stale.len() - unverified;
    if stale.is_empty() {
        return Finding::new(
            ID,
            Status::Pass,
            "/dev/shm",
            match (live, unverified) {
                (0, 0) => "no NCCL leftovers in /dev/shm".to_string(),
                (_, 0) => format!("{live} NCCL segment(s) in /dev/shm, all held by running processes"),
                _ => format!(
                    "{live} NCCL segment(s) in /dev/shm held by running processes; {unverified} belong to processes this user cannot read (run as root to tell)"
                ),
            },
        )
        .with("live_segments", live)
        .with("unverified_segments", unverified);
    }
    let bytes: u64 = stale.iter().map(|f| f.bytes).sum();
    let files: Vec<serde_json::Value> = stale
        .iter()
        .map(|f| serde_json::json!({"name": f.name, "bytes": f.bytes}))
        .collect();
    let names: Vec<String> = stale
        .iter()
        .take(MAX_NAMED)
        .filter(|f| {
            f.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
        .map(|f| format!("/dev/shm/{}", f.name))
        .collect();
    let mut fix = Fix::new(
        "Remove the segments no process holds (check first that no job of yours is starting: \
         `fuser -v /dev/shm/nccl-*`).",
    );
    if !names.is_empty() {
        fix = fix.command(format!("rm -f {}", names.join(" ")));
    }
    Finding::new(
        ID,
        Status::Warn,
        "/dev/shm",
        format!(
            "{} NCCL shared-memory segment(s) ({}) in /dev/shm belong to processes that are gone (leftovers of a crashed job): they hold memory a new job's NCCL needs",
            stale.len(),
            crate::infra::format_bytes(bytes)
        ),
    )
    .with("stale_bytes", bytes)
    .with("stale", files)
    .with("live_segments", live)
    .with("unverified_segments", unverified)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::scale::testkit::defaults;

    #[test]
    fn leftovers_in_the_fixture_fire_and_held_ones_do_not() {
        let mut f = defaults();
        f.scale =
            crate::sys::scale_probe::probe(&crate::infra::testutil::fixture_root("scale-small"));
        let out = check(&f);
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert_eq!(out.evidence["stale"].as_array().unwrap().len(), 1);
        assert_eq!(out.evidence["stale_bytes"], 4096);
        assert_eq!(out.evidence["live_segments"], 1);
        assert_eq!(
            out.fix.unwrap().commands,
            vec!["rm -f /dev/shm/nccl-Dd8kPq"]
        );
        f.scale =
            crate::sys::scale_probe::probe(&crate::infra::testutil::fixture_root("scale-raised"));
        assert_eq!(check(&f).status, Status::Pass);
        // One another user's process could not be read for: not called stale.
        f.scale.nccl_shm[0].holders.clear();
        f.scale.nccl_shm[0].unverified = true;
        let out = check(&f);
        assert_eq!(out.status, Status::Pass, "{out:#?}");
        assert_eq!(out.evidence["unverified_segments"], 1);
    }
}

//! `sys.pids`: room left under the cgroup's `pids.max` (and RLIMIT_NPROC, which counts every
//! thread of the user) against the threads this node's workers start. Past it, thread creation
//! fails: 'pthread_create failed: Resource temporarily unavailable', NCCL proxy errors.

use super::job::Job;
use crate::core::{Finding, Fix, NodeFacts, Status};

pub use crate::sys::scale::ids::PIDS as ID;

pub fn check(facts: &NodeFacts, job: &Job) -> Finding {
    let s = &facts.scale;
    let (need, formula) = job.threads_need();
    if let Some(e) = s.errors.get("pids") {
        return Finding::new(
            ID,
            Status::Error,
            "threads",
            format!("cannot read the cgroup pids limit: {e}"),
        )
        .with("error", e);
    }
    let cg_room = s
        .pids
        .as_ref()
        .and_then(|p| p.max.map(|m| m.saturating_sub(p.current.unwrap_or(0))));
    // RLIMIT_NPROC does not bind uid 0.
    let nproc = s.nproc_soft.filter(|_| s.uid != Some(0));
    let base = |status, summary: String| {
        let mut f = Finding::new(ID, status, "threads", summary)
            .with("need", need)
            .with("estimate", &formula)
            .with("nproc_soft", nproc);
        if let Some(p) = &s.pids {
            f = f
                .with("cgroup", &p.cgroup)
                .with("cgroup_version", &p.version)
                .with("pids_max", p.max)
                .with("pids_current", p.current)
                .with("pids_room", cg_room);
        }
        f
    };
    let mut short = Vec::new();
    if let Some(room) = cg_room.filter(|r| *r < need) {
        let p = s.pids.as_ref().expect("room comes from pids");
        short.push(format!(
            "cgroup {} allows {} more tasks (pids.max {} − pids.current {})",
            p.cgroup,
            room,
            p.max.unwrap_or(0),
            p.current.unwrap_or(0)
        ));
    }
    if let Some(n) = nproc.filter(|n| *n < need) {
        short.push(format!("ulimit -u is {n}"));
    }
    if short.is_empty() {
        return base(
            Status::Pass,
            format!(
                "room for about {need} threads of {} processes{}",
                job.local,
                match cg_room {
                    Some(r) => format!(" (cgroup allows {r} more)"),
                    None => String::new(),
                }
            ),
        );
    }
    let want = need.saturating_mul(2).max(32768);
    let mut fix = Fix::new(
        "Give the job's cgroup (container, Slurm job, systemd scope) a larger pids limit and raise ulimit -u: \
         Docker --pids-limit, Kubernetes the kubelet's podPidsLimit, systemd TasksMax=, Slurm's cgroup.conf.",
    );
    if let Some(p) = s
        .pids
        .as_ref()
        .filter(|_| cg_room.is_some_and(|r| r < need))
    {
        let base_dir = if p.version == "v1" {
            "/sys/fs/cgroup/pids"
        } else {
            "/sys/fs/cgroup"
        };
        fix = fix.command(format!("echo {want} > {base_dir}{}/pids.max", p.cgroup));
    }
    fix = fix
        .command(format!("docker run --pids-limit {want} ..."))
        .command(format!("systemctl set-property <unit> TasksMax={want}"));
    if nproc.is_some_and(|n| n < need) {
        fix = fix
            .command(format!("ulimit -u {want}"))
            .command(format!(
                "printf '* soft nproc {want}\\n* hard nproc {want}\\n' > /etc/security/limits.d/90-preflight-nproc.conf"
            ));
    }
    base(
        Status::Warn,
        format!(
            "{} while {} processes start about {need} threads (expect 'Resource temporarily unavailable' from pthread_create)",
            short.join("; "),
            job.local
        ),
    )
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::PidsLimit;
    use crate::sys::scale::testkit::{ctx, defaults};

    #[test]
    fn the_fixture_cgroup_v2_limit_fires_for_8_workers() {
        let mut f = defaults();
        f.scale =
            crate::sys::scale_probe::probe(&crate::infra::testutil::fixture_root("scale-small"));
        let out = check(&f, &Job::of(&f, &ctx(1, 4, 8)));
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert_eq!(out.evidence["pids_max"], 512);
        assert_eq!(out.evidence["cgroup"], "/kubepods/pod1/trainer");
        let cmds = &out.fix.as_ref().unwrap().commands;
        assert_eq!(
            cmds[0],
            "echo 32768 > /sys/fs/cgroup/kubepods/pod1/trainer/pids.max"
        );
    }

    #[test]
    fn ample_room_passes_and_root_ignores_ulimit_u() {
        let mut f = defaults();
        f.scale =
            crate::sys::scale_probe::probe(&crate::infra::testutil::fixture_root("scale-raised"));
        assert_eq!(check(&f, &Job::of(&f, &ctx(1, 4, 8))).status, Status::Pass);
        f.scale.pids = Some(PidsLimit {
            max: None,
            ..Default::default()
        });
        f.scale.nproc_soft = Some(100);
        f.scale.uid = Some(1000);
        let out = check(&f, &Job::of(&f, &ctx(1, 4, 8)));
        assert_eq!(out.status, Status::Warn);
        assert!(out.summary.contains("ulimit -u is 100"));
        f.scale.uid = Some(0);
        assert_eq!(check(&f, &Job::of(&f, &ctx(1, 4, 8))).status, Status::Pass);
    }
}

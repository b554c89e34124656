//! `sys.nofile`: the soft RLIMIT_NOFILE a worker gets against what a job of this size needs
//! (gloo's full mesh, NCCL's sockets, and on the master the TCPStore's clients). Only NCCL's
//! bootstrap root raises its own limit; the workers and the store live with what they get.

use super::job::{Job, NO_WORLD};
use crate::core::{Finding, Fix, NodeFacts, Status};

pub use crate::sys::scale::ids::NOFILE as ID;

fn shown(v: Option<u64>) -> String {
    v.map(|n| n.to_string())
        .unwrap_or_else(|| "unlimited".into())
}

pub fn check(facts: &NodeFacts, job: &Job) -> Finding {
    let s = &facts.scale;
    if let Some(e) = s.errors.get("nofile") {
        return Finding::new(
            ID,
            Status::Error,
            "open files",
            format!("cannot read the open-file limit: {e}"),
        )
        .with("error", e);
    }
    let (soft, hard) = (s.nofile_soft, s.nofile_hard);
    let base = |status, summary: String| {
        Finding::new(ID, status, "open files", summary)
            .with("nofile_soft", shown(soft))
            .with("nofile_hard", shown(hard))
            .with("world_size", job.world)
    };
    let Some(world) = job.world else {
        return base(
            Status::Skip,
            format!(
                "open files: soft {} (hard {}); {NO_WORLD}",
                shown(soft),
                shown(hard)
            ),
        );
    };
    let (need, formula) = job.nofile_need(world);
    let Some(soft_n) = soft.filter(|n| *n < need) else {
        return base(
            Status::Pass,
            format!(
                "open-file limit {} covers about {need} fds a worker of {} needs",
                shown(soft),
                job.world_words()
            ),
        )
        .with("need", need)
        .with("estimate", formula);
    };
    let hard_ok = hard.is_none_or(|h| h >= need);
    let target = hard
        .map(|h| h.min(need.max(65536)))
        .unwrap_or(need.max(65536));
    let status = if hard_ok { Status::Warn } else { Status::Fail };
    let raise = if hard_ok {
        format!(
            "the hard limit ({}) allows raising it: `ulimit -n {target}` in the launching shell",
            shown(hard)
        )
    } else {
        format!(
            "the hard limit {} is below the need too: only root, limits.conf or the service manager can raise it",
            shown(hard)
        )
    };
    let want = need.max(1_048_576);
    base(
        status,
        format!(
            "open-file limit {soft_n} is below about {need} fds a worker of {} needs (expect 'Too many open files' / 'Accept failed' at init); {raise}",
            job.world_words()
        ),
    )
    .with("need", need)
    .with("estimate", formula)
    .fix(
        Fix::new(
            "Raise the soft (and where needed hard) open-file limit for the job's processes: in the shell that \
             starts torchrun, for new logins in limits.conf, for a systemd service with LimitNOFILE=, in a \
             container with --ulimit. Under Slurm, tasks inherit the limits of the shell that ran srun/sbatch \
             (PropagateResourceLimits): raise it there, or set PropagateResourceLimitsExcept=NOFILE in slurm.conf \
             so tasks get slurmd's LimitNOFILE.",
        )
        .command(if hard_ok {
            format!("ulimit -n {target}")
        } else {
            format!("ulimit -Hn {want} && ulimit -n {want}")
        })
        .command(format!(
            "printf '* soft nofile {want}\\n* hard nofile {want}\\n' > /etc/security/limits.d/90-preflight-nofile.conf"
        ))
        .command(format!(
            "mkdir -p /etc/systemd/system/slurmd.service.d && printf '[Service]\\nLimitNOFILE={want}\\n' > /etc/systemd/system/slurmd.service.d/nofile.conf && systemctl daemon-reload && systemctl restart slurmd"
        ))
        .command("echo 'PropagateResourceLimitsExcept=NOFILE' >> /etc/slurm/slurm.conf && scontrol reconfigure")
        .command(format!("docker run --ulimit nofile={want}:{want} ...")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::CheckContext;
    use crate::sys::scale::testkit::{ctx, defaults};

    fn gloo(rank: u32) -> CheckContext {
        CheckContext {
            expect_gpus: Some(0),
            ..ctx(rank, 3, 10)
        }
    }

    #[test]
    fn a_soft_limit_of_24_warns_for_30_ranks_when_the_hard_limit_allows_more() {
        let mut f = defaults();
        f.scale.nofile_soft = Some(24);
        f.scale.nofile_hard = Some(4096);
        let out = check(&f, &Job::of(&f, &gloo(1)));
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        let need = out.evidence["need"].as_u64().unwrap();
        assert!(need > 24, "{need}");
        assert!(
            out.evidence["estimate"]
                .as_str()
                .unwrap()
                .contains("gloo full mesh")
        );
        let cmds = &out.fix.as_ref().unwrap().commands;
        assert_eq!(cmds[0], "ulimit -n 4096");
        assert!(cmds.iter().any(|c| c.contains("LimitNOFILE=")));
        assert!(
            cmds.iter()
                .any(|c| c.contains("PropagateResourceLimitsExcept=NOFILE"))
        );
    }

    #[test]
    fn fails_when_the_hard_limit_is_too_low_as_well() {
        let mut f = defaults();
        f.scale.nofile_soft = Some(1024);
        f.scale.nofile_hard = Some(1024);
        let out = check(&f, &Job::of(&f, &ctx(5, 128, 8)));
        assert_eq!(out.status, Status::Fail, "{out:#?}");
        assert!(out.summary.contains("hard limit 1024"), "{}", out.summary);
    }

    #[test]
    fn passes_at_the_default_for_30_ranks_and_skips_without_a_world() {
        let f = defaults();
        for rank in [0, 1] {
            assert_eq!(
                check(&f, &Job::of(&f, &ctx(rank, 3, 10))).status,
                Status::Pass
            );
        }
        let out = check(&f, &Job::of(&f, &CheckContext::default()));
        assert_eq!(out.status, Status::Skip);
        assert!(out.summary.contains("no world size known"));
    }
}

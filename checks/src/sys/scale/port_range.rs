//! `sys.port-range`: usable ephemeral ports (`ip_local_port_range` minus
//! `ip_local_reserved_ports`) against what NCCL's socket transport takes for an all-to-all.
//! NCCL binds each socket before it connects, so every socket holds a port of its own; gloo's
//! plain connects share ports across destinations, so a gloo-only job is not judged.

use super::job::{Job, NO_WORLD};
use crate::core::{Finding, Fix, NodeFacts, Status};

pub use crate::sys::scale::ids::PORT_RANGE as ID;

/// Ports in [lo, hi] not covered by any reserved range.
pub fn usable_ports(range: [u32; 2], reserved: &[[u32; 2]]) -> u64 {
    let [lo, hi] = range;
    if lo > hi {
        return 0;
    }
    let mut cuts: Vec<[u32; 2]> = reserved
        .iter()
        .filter(|r| r[1] >= lo && r[0] <= hi)
        .map(|r| [r[0].max(lo), r[1].min(hi)])
        .collect();
    cuts.sort_unstable();
    let mut taken = 0u64;
    let mut end: Option<u32> = None;
    for [a, b] in cuts {
        let start = match end {
            Some(e) if a <= e => match e.checked_add(1) {
                Some(s) => s,
                None => continue,
            },
            _ => a,
        };
        if start <= b {
            taken += u64::from(b - start) + 1;
        }
        end = Some(end.map_or(b, |e| e.max(b)));
    }
    (u64::from(hi - lo) + 1).saturating_sub(taken)
}

pub fn check(facts: &NodeFacts, job: &Job) -> Finding {
    let s = &facts.scale;
    let Some(range) = s.port_range else {
        let why = s.errors.get("port_range");
        return Finding::new(
            ID,
            if why.is_some() {
                Status::Error
            } else {
                Status::Skip
            },
            "ephemeral ports",
            format!(
                "cannot read net.ipv4.ip_local_port_range: {}",
                why.map(String::as_str)
                    .unwrap_or("not present on this system")
            ),
        );
    };
    let usable = usable_ports(range, &s.reserved_ports);
    let base = |status, summary: String| {
        Finding::new(ID, status, "ephemeral ports", summary)
            .with("ip_local_port_range", format!("{} {}", range[0], range[1]))
            .with("reserved_ranges", s.reserved_ports.len())
            .with("usable_ports", usable)
    };
    if !job.nccl_sockets {
        return base(
            Status::Skip,
            format!(
                "{usable} usable ephemeral ports; not judged: {}",
                if job.gpus {
                    "NCCL uses InfiniBand/RoCE here, not sockets"
                } else {
                    "no NCCL here (gloo's connects share ports across destinations)"
                }
            ),
        );
    }
    let Some(nnodes) = job.nnodes else {
        return base(
            Status::Skip,
            format!("{usable} usable ephemeral ports; {NO_WORLD}"),
        );
    };
    let (need, formula) = job.ports_need(nnodes);
    if usable >= need {
        return base(
            Status::Pass,
            format!(
                "{usable} usable ephemeral ports cover about {need} NCCL sockets of {}",
                job.world_words()
            ),
        )
        .with("need", need)
        .with("estimate", formula);
    }
    let mut fix = Fix::new(
        "Widen the ephemeral port range (keep it above the ports your services listen on) and drop \
         reserved ranges you do not need, now and at boot; NCCL over sockets binds one port per socket.",
    );
    let mut settings = vec![("net.ipv4.ip_local_port_range", "15000 64999".to_string())];
    if !s.reserved_ports.is_empty() {
        settings.push(("net.ipv4.ip_local_reserved_ports", String::new()));
    }
    for c in crate::infra::sysctl::sysctl_fix("ports", &settings) {
        fix = fix.command(c);
    }
    base(
        Status::Warn,
        format!(
            "{usable} usable ephemeral ports ({}-{} minus reserved) are below about {need} that NCCL's socket transport binds for an all-to-all of {} (expect 'Call to bind failed: Address already in use')",
            range[0],
            range[1],
            job.world_words()
        ),
    )
    .with("need", need)
    .with("estimate", formula)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::CheckContext;
    use crate::sys::scale::testkit::{ctx, defaults};

    #[test]
    fn usable_ports_subtracts_overlapping_reserved_ranges_once() {
        assert_eq!(usable_ports([32768, 60999], &[]), 28232);
        assert_eq!(
            usable_ports([100, 199], &[[150, 159], [155, 164], [10, 100]]),
            100 - 15 - 1
        );
        assert_eq!(usable_ports([100, 109], &[[0, 65535]]), 0);
        // A hand-written facts file may hold anything: no panic.
        assert_eq!(
            usable_ports([60000, 100], &[[9, 1], [u32::MAX, u32::MAX]]),
            0
        );
        assert_eq!(usable_ports([0, u32::MAX], &[[5, 3]]), 1 << 32);
    }

    #[test]
    fn judged_from_the_fixture_trees_of_gpu_nodes_that_run_nccl_over_sockets() {
        let narrow =
            crate::sys::scale_probe::probe(&crate::infra::testutil::fixture_root("scale-small"));
        let wide =
            crate::sys::scale_probe::probe(&crate::infra::testutil::fixture_root("scale-raised"));
        let facts = |scale| NodeFacts {
            scale,
            ..defaults()
        };
        let (narrow, wide) = (facts(narrow), facts(wide));
        let out = check(&narrow, &Job::of(&narrow, &ctx(3, 64, 8)));
        assert_eq!(out.status, Status::Warn, "{out:#?}");
        assert_eq!(out.evidence["usable_ports"], 50);
        assert!(
            out.evidence["estimate"]
                .as_str()
                .unwrap()
                .contains("(64−1)·8²·2·2 = 16128")
        );
        let cmds = &out.fix.as_ref().unwrap().commands;
        assert_eq!(
            cmds[0],
            "sysctl -w net.ipv4.ip_local_port_range=\"15000 64999\""
        );
        let out = check(&wide, &Job::of(&wide, &ctx(3, 4, 8)));
        assert_eq!(out.status, Status::Pass, "{out:#?}");
        assert_eq!(out.evidence["usable_ports"], 28232);
    }

    #[test]
    fn gloo_only_and_infiniband_jobs_are_not_judged() {
        let mut f = defaults();
        f.scale.port_range = Some([60000, 60049]);
        let gloo = CheckContext {
            expect_gpus: Some(0),
            ..ctx(1, 64, 8)
        };
        assert_eq!(check(&f, &Job::of(&f, &gloo)).status, Status::Skip);
        f.ib = crate::rdma::probe::ib::probe(&crate::infra::testutil::fixture_root("ib-node"));
        let out = check(&f, &Job::of(&f, &ctx(1, 64, 8)));
        assert_eq!(out.status, Status::Skip, "{out:#?}");
        assert!(out.summary.contains("InfiniBand"));
    }
}

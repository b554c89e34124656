//! Node settings that break a job only at scale, each judged against the job's world size on the
//! node where it bites: one module per concern, [`job::Job`] the job as they see it.

pub mod backlog;
pub mod catalog;
pub mod ids;
pub mod job;
pub mod neigh;
pub mod nofile;
pub mod pids;
pub mod port_range;
pub mod stale_nccl;
pub mod tcpstore;

use crate::core::CheckContext;
use crate::core::{Finding, NodeFacts};

/// Every scale check of one node. Facts of a release before these checks (not probed) give none.
pub fn check(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    if !facts.scale.probed {
        return Vec::new();
    }
    let job = job::Job::of(facts, ctx);
    let mut out = vec![
        backlog::check(facts, &job),
        nofile::check(facts, &job),
        port_range::check(facts, &job),
        neigh::check(facts, &job),
        pids::check(facts, &job),
        stale_nccl::check(facts),
        crate::net::arp_flux::check(facts),
    ];
    out.extend(crate::rdma::gid_index::check(facts));
    out.extend(tcpstore::check(facts, &job));
    out
}

#[cfg(test)]
pub(crate) mod testkit {
    //! Facts for the scale checks' tests: a Linux node with today's defaults.
    use crate::core::{NodeFacts, ScaleFacts};

    pub fn defaults() -> NodeFacts {
        NodeFacts {
            hostname: "node1".into(),
            scale: ScaleFacts {
                probed: true,
                somaxconn: Some(4096),
                tcp_max_syn_backlog: Some(2048),
                tcp_abort_on_overflow: Some(0),
                port_range: Some([32768, 60999]),
                neigh_gc_thresh3_v4: Some(1024),
                neigh_gc_thresh3_v6: Some(1024),
                nofile_soft: Some(1024),
                nofile_hard: Some(524288),
                nproc_soft: Some(513_000),
                nproc_hard: Some(513_000),
                uid: Some(1000),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    pub fn ctx(rank: u32, nnodes: u32, nproc: u32) -> crate::core::CheckContext {
        crate::core::CheckContext {
            rank: Some(rank),
            master_port: 29500,
            nproc_per_node: Some(nproc),
            expect_gpus: Some(nproc),
            nnodes: Some(nnodes),
            world_size: Some(nnodes * nproc),
            xid_window_s: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infra::sysctl::sysctl_fix;

    #[test]
    fn unprobed_facts_of_an_older_release_give_no_findings() {
        let f = NodeFacts::default();
        assert!(check(&f, &testkit::ctx(0, 64, 8)).is_empty());
    }

    #[test]
    fn sysctl_fix_gives_runtime_and_persistent_commands() {
        let c = sysctl_fix("backlog", &[("net.core.somaxconn", "4096".into())]);
        assert_eq!(c[0], "sysctl -w net.core.somaxconn=4096");
        assert_eq!(
            c[1],
            "printf 'net.core.somaxconn = 4096\\n' > /etc/sysctl.d/90-preflight-backlog.conf"
        );
        let c = sysctl_fix(
            "ports",
            &[("net.ipv4.ip_local_port_range", "15000 65000".into())],
        );
        assert_eq!(
            c[0],
            "sysctl -w net.ipv4.ip_local_port_range=\"15000 65000\""
        );
    }

    #[test]
    fn nothing_fires_for_a_world_of_30_on_default_settings_raised() {
        let mut f = testkit::defaults();
        f.scale.somaxconn = Some(65535);
        f.scale.tcp_max_syn_backlog = Some(65535);
        f.scale.nofile_soft = f.scale.nofile_hard;
        for rank in 0..3 {
            let out = check(&f, &testkit::ctx(rank, 3, 10));
            let bad: Vec<_> = out
                .iter()
                .filter(|x| x.status >= crate::core::Status::Warn)
                .collect();
            assert!(bad.is_empty(), "{bad:#?}");
        }
    }
}

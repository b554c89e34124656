//! One (node, rail) child of the per-rail NCCL pair test (issue 34): a 2-rank NCCL job pinned to
//! the rail's GPU (`CUDA_VISIBLE_DEVICES`) and HCA (`NCCL_IB_HCA`), with `NCCL_NET=IB` so it
//! fails instead of falling back to TCP and `NCCL_CROSS_NIC=0`; the worker writes its
//! `NCCL_DEBUG=INFO` log to a file and runs under the worker's watchdog. Its outcome and log
//! become one [`RailResult`]: passing only when the log proves the NET/IB path.

use super::{NcclError, NcclJob, NcclOutcome};
use preflight_checks::rails::localise::RailResult;
use preflight_checks::rails::nccl_log::{self, RailLog};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Bytes each pair moves per iteration: large enough to reach a rail's bandwidth.
pub const RAIL_BYTES: u64 = 256 << 20;

/// Whether the log proves the rail's path: NET/IB, or `test_net`'s network when a test runs
/// the children over another (a machine without RDMA: two ranks on one GPU over sockets; the
/// runtime's seams carry it, never a real cluster).
fn path_proven(log: &RailLog, test_net: Option<&str>) -> bool {
    log.ib
        || test_net
            .filter(|n| !n.is_empty() && *n != "IB")
            .is_some_and(|n| {
                let want = format!("NET/{n}");
                log.paths.iter().any(|p| p.starts_with(&want))
            })
}

/// The rail a child drives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RailChild {
    /// Rail number (the GPU's index on GPU nodes).
    pub rail: u32,
    /// The GPU, by NVML index (CUDA_VISIBLE_DEVICES takes it as the node's own numbering).
    pub gpu: u32,
    pub hca: String,
    pub port: u32,
}

/// The child's environment: the job's (the bootstrap's socket settings) plus the rail pinning.
pub fn rail_env(base: &BTreeMap<String, String>, child: &RailChild) -> BTreeMap<String, String> {
    let mut env = base.clone();
    for (k, v) in [
        ("CUDA_VISIBLE_DEVICES", child.gpu.to_string()),
        ("NCCL_IB_HCA", format!("={}:{}", child.hca, child.port)),
        ("NCCL_NET", "IB".to_string()),
        ("NCCL_IB_DISABLE", "0".to_string()),
        ("NCCL_CROSS_NIC", "0".to_string()),
    ] {
        env.insert(k.to_string(), v);
    }
    env
}

/// One side of a pair: rank 0 or 1 of a 2-rank job on one GPU.
pub fn rail_job(
    child: &RailChild,
    first_rank: u32,
    base_env: &BTreeMap<String, String>,
    timeout: Duration,
    lib: Option<PathBuf>,
    program: Option<PathBuf>,
) -> NcclJob {
    NcclJob {
        nranks: 2,
        first_rank: first_rank.min(1),
        gpus: 1,
        sizes: vec![RAIL_BYTES],
        warmup: 2,
        iters: 10,
        env: rail_env(base_env, child),
        timeout,
        lib,
        program,
    }
}

/// Gbit/s of a 2-rank all-reduce row (bus bandwidth = algorithm bandwidth at two ranks).
fn gbps(bytes: u64, time_us: f64) -> Option<f64> {
    (time_us > 0.0 && time_us.is_finite()).then(|| bytes as f64 * 8.0 / (time_us * 1000.0))
}

/// What one side's run says about the pair on this rail.
pub fn rail_result(
    a: u32,
    b: u32,
    rail: u32,
    round: u32,
    outcome: &Result<NcclOutcome, NcclError>,
    test_net: Option<&str>,
) -> (RailResult, RailLog) {
    let fail = |error: String, log: RailLog| {
        (
            RailResult {
                a,
                b,
                rail,
                gbps: None,
                error: Some(error),
                round,
            },
            log,
        )
    };
    match outcome {
        Ok(o) => {
            let log = nccl_log::parse(&o.log_excerpt.join("\n"));
            if !path_proven(&log, test_net) {
                let how = if log.paths.is_empty() {
                    "the NCCL log shows no network channel".to_string()
                } else {
                    format!("NCCL used {} instead of NET/IB", log.paths.join(", "))
                };
                return fail(how, log);
            }
            let best = o
                .rows
                .iter()
                .filter(|r| r.wrong == 0)
                .filter_map(|r| gbps(r.bytes, r.time_us))
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            if o.rows.iter().any(|r| r.wrong > 0) {
                return fail("the all-reduce returned wrong values".into(), log);
            }
            (
                RailResult {
                    a,
                    b,
                    rail,
                    gbps: best,
                    error: best.is_none().then(|| "no timing reported".to_string()),
                    round,
                },
                log,
            )
        }
        Err(e) => {
            let warnings = e
                .evidence()
                .map(|ev| ev.nccl_warnings.join("\n"))
                .unwrap_or_default();
            let ib_error = warnings.lines().find_map(nccl_log::parse_ib_error);
            let log = RailLog {
                error: ib_error.clone(),
                ..Default::default()
            };
            let text = match ib_error {
                Some(ie) => ie.summary(),
                None => e.to_string(),
            };
            fail(text, log)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_environment_pins_gpu_hca_and_the_ib_network() {
        let base = BTreeMap::from([
            ("NCCL_SOCKET_IFNAME".to_string(), "bond0".to_string()),
            ("CUDA_VISIBLE_DEVICES".to_string(), "0,1,2,3".to_string()),
        ]);
        let child = RailChild {
            rail: 5,
            gpu: 5,
            hca: "mlx5_7".into(),
            port: 1,
        };
        let env = rail_env(&base, &child);
        let want: BTreeMap<String, String> = [
            ("CUDA_VISIBLE_DEVICES", "5"),
            ("NCCL_CROSS_NIC", "0"),
            ("NCCL_IB_DISABLE", "0"),
            ("NCCL_IB_HCA", "=mlx5_7:1"),
            ("NCCL_NET", "IB"),
            ("NCCL_SOCKET_IFNAME", "bond0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, want);
        let job = rail_job(&child, 1, &base, Duration::from_secs(30), None, None);
        assert_eq!((job.nranks, job.first_rank, job.gpus), (2, 1, 1));
        assert_eq!(job.sizes, vec![RAIL_BYTES]);
        assert_eq!(job.env["NCCL_IB_HCA"], "=mlx5_7:1");
    }

    #[test]
    fn a_run_that_fell_back_to_sockets_fails_the_rail() {
        let o = NcclOutcome {
            rows: vec![crate::transport::wire::RankRow {
                bytes: 1 << 20,
                time_us: 100.0,
                wrong: 0,
            }],
            net: None,
            net_used: None,
            log_excerpt: vec![
                "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0".into(),
            ],
        };
        let (r, _) = rail_result(0, 1, 3, 0, &Ok(o), None);
        assert_eq!(r.gbps, None);
        assert_eq!(
            r.error.as_deref(),
            Some("NCCL used NET/Socket/0 instead of NET/IB")
        );
    }
}

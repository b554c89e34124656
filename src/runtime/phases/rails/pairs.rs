//! Per-rail NCCL pair tests in the throughput schedule's rounds (issue 34): in each round every
//! matched pair of nodes runs one 2-rank NCCL job per rail at once, one child per (node, rail)
//! pinned to the rail's GPU and HCA (`measure::nccl::rail`), each under the worker's watchdog.
//! The results feed `preflight_checks::rails::localise`; its suspects are measured again in the
//! retest's rounds.
//!
//! [`run_round_here`] runs a round's children on this host (the fake-worker test hook and a
//! single-host check); across hosts `rails` (coordinator) and `rails::node` (each node)
//! start the same children on the nodes, and both join the two sides with [`combine`].

use crate::measure::nccl::rail::{RailChild, rail_job, rail_result};
use crate::measure::nccl::{self, NcclError, NcclOutcome};
use crate::runtime::schedule::schedule;
use preflight_checks::rails::localise::RailResult;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How long a rank-0 child may take to print its unique id.
const ID_TIMEOUT: Duration = Duration::from_secs(60);

/// The rounds of (node a, node b, rail): the schedule's pairs, each with every rail both nodes
/// have (rail r of one node meets rail r of the other: NCCL_CROSS_NIC=0).
pub fn rail_rounds(
    rails: &BTreeMap<u32, Vec<RailChild>>,
    k: u32,
    seed: u64,
) -> Vec<Vec<(u32, u32, u32)>> {
    let ranks: Vec<u32> = rails.keys().copied().collect();
    schedule(&ranks, k, seed)
        .into_iter()
        .map(|round| {
            round
                .into_iter()
                .flat_map(|(a, b)| {
                    let theirs = rails.get(&b).cloned().unwrap_or_default();
                    rails
                        .get(&a)
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .filter(move |r| theirs.iter().any(|t| t.rail == r.rail))
                        .map(move |r| (a, b, r.rail))
                })
                .collect()
        })
        .collect()
}

/// What runs a child: the job's environment, the watchdog, the worker program and, per
/// (node, rail), extra variables (the fake worker's hooks).
#[derive(Clone, Debug, Default)]
pub struct RailRun {
    pub base_env: BTreeMap<String, String>,
    pub timeout: Duration,
    pub lib: Option<PathBuf>,
    pub program: Option<PathBuf>,
    pub extra_env: BTreeMap<(u32, u32), BTreeMap<String, String>>,
    /// The network counted as a rail's path beside NET/IB (a test seam, see `runtime::seams`).
    pub test_net: Option<String>,
}

fn side(
    run: &RailRun,
    node: u32,
    child: &RailChild,
    first_rank: u32,
) -> Result<nccl::Worker, NcclError> {
    let mut job = rail_job(
        child,
        first_rank,
        &run.base_env,
        run.timeout,
        run.lib.clone(),
        run.program.clone(),
    );
    if let Some(extra) = run.extra_env.get(&(node, child.rail)) {
        job.env.extend(extra.clone());
    }
    nccl::start(&job)
}

/// Both sides of one pair on one rail; the pair fails when either side does.
fn run_pair(
    run: &RailRun,
    rails: &BTreeMap<u32, Vec<RailChild>>,
    (a, b, rail): (u32, u32, u32),
    round: u32,
) -> RailResult {
    let child = |n: u32| {
        rails
            .get(&n)
            .and_then(|v| v.iter().find(|c| c.rail == rail))
            .cloned()
    };
    let (Some(ca), Some(cb)) = (child(a), child(b)) else {
        return RailResult {
            a,
            b,
            rail,
            gbps: None,
            error: Some(format!("rail {rail} is missing on one side")),
            round,
        };
    };
    let outcomes: [Result<NcclOutcome, NcclError>; 2] = {
        let first = side(run, a, &ca, 0).and_then(|mut w| {
            let id = w.unique_id(ID_TIMEOUT)?;
            Ok((w, id))
        });
        match first {
            Err(e) => [Err(e.clone()), Err(e)],
            Ok((mut w0, id)) => {
                let second = side(run, b, &cb, 1).and_then(|mut w1| {
                    w1.give_id(&id)?;
                    Ok(w1)
                });
                let r0 = w0.give_id(&id).and_then(|_| w0.finish());
                let r1 = second.and_then(|w1| w1.finish());
                [r0, r1]
            }
        }
    };
    let [r0, r1] = outcomes;
    combine([
        rail_result(a, b, rail, round, &r0, run.test_net.as_deref()).0,
        rail_result(a, b, rail, round, &r1, run.test_net.as_deref()).0,
    ])
}

/// One pair's result from its two sides (the same a, b, rail and round): the first failure
/// when a side failed, else the slower side's figure.
pub fn combine(sides: [RailResult; 2]) -> RailResult {
    if let Some(bad) = sides.iter().find(|r| r.gbps.is_none()) {
        return bad.clone();
    }
    let slowest = sides
        .iter()
        .filter_map(|r| r.gbps)
        .fold(f64::INFINITY, f64::min);
    RailResult {
        gbps: slowest.is_finite().then_some(slowest),
        error: None,
        ..sides[0].clone()
    }
}

/// Runs every (pair, rail) of one round at once on this host, one thread per pair.
pub fn run_round_here(
    run: &RailRun,
    rails: &BTreeMap<u32, Vec<RailChild>>,
    round_pairs: &[(u32, u32, u32)],
    round: u32,
) -> Vec<RailResult> {
    std::thread::scope(|s| {
        let handles: Vec<_> = round_pairs
            .iter()
            .map(|p| s.spawn(move || run_pair(run, rails, *p, round)))
            .collect();
        handles
            .into_iter()
            .zip(round_pairs)
            .map(|(h, (a, b, rail))| {
                h.join().unwrap_or_else(|_| RailResult {
                    a: *a,
                    b: *b,
                    rail: *rail,
                    gbps: None,
                    error: Some("the pair's runner panicked".into()),
                    round,
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::cluster::ClusterInput;
    use preflight_checks::model::{
        Finding, GpuPciPath, IbDevice, IbPort, NodeFacts, RdmaPci, Status,
    };
    use preflight_checks::rails::localise::{Blame, localise, retest_plan, rounds};

    /// A node whose GPU r and HCA `child.hca` share a PCIe switch, as the fake rails say.
    fn node_facts(n: u32, children: &[RailChild]) -> NodeFacts {
        let mut f = NodeFacts {
            hostname: format!("gpu{:02}", n + 1),
            ..Default::default()
        };
        for c in children {
            let sw = format!("0000:{:02x}:00.0", 0x10 * (c.rail + 1));
            f.ib.devices.push(IbDevice {
                name: c.hca.clone(),
                ports: vec![IbPort {
                    port: c.port,
                    state: "ACTIVE".into(),
                    link_layer: "InfiniBand".into(),
                    rate: Some("400 Gb/sec (4X NDR)".into()),
                    rate_gbps: Some(400.0),
                    ..Default::default()
                }],
                pci: Some(RdmaPci {
                    bdf: format!("0000:{:02x}:01.0", 0x10 * (c.rail + 1) + 1),
                    path: vec![
                        sw.clone(),
                        format!("0000:{:02x}:01.0", 0x10 * (c.rail + 1) + 1),
                    ],
                    root: Some("pci0000:00".into()),
                    ..Default::default()
                }),
                ..Default::default()
            });
            f.ib.gpu_pci_paths.push(GpuPciPath {
                gpu: c.gpu,
                bdf: format!("0000:{:02x}:00.0", 0x10 * (c.rail + 1) + 1),
                path: vec![sw, format!("0000:{:02x}:00.0", 0x10 * (c.rail + 1) + 1)],
                root: Some("pci0000:00".into()),
                ..Default::default()
            });
        }
        f
    }

    /// A cluster report holding the rail findings, for `preflight render` (the notes' sample).
    fn save_report(path: &str, nodes: &[(u32, &NodeFacts)], findings: &[Finding]) {
        let report = serde_json::json!({
            "schema": preflight_checks::model::SCHEMA,
            "tool": {"name": "preflight", "version": env!("CARGO_PKG_VERSION")},
            "mode": "cluster",
            "status": findings.iter().map(|f| f.status).max(),
            "nodes": nodes.iter().map(|(r, f)| serde_json::json!({"rank": r, "hostname": f.hostname, "facts": f})).collect::<Vec<_>>(),
            "findings": findings,
            "links": [],
            "collectives": [],
            "recommendation": null,
        });
        std::fs::write(
            path,
            serde_json::to_string_pretty(&report).unwrap_or_default(),
        )
        .unwrap_or_default();
    }

    fn fake() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-worker/fake-worker.sh")
    }

    fn rails(nodes: u32, per_node: u32) -> BTreeMap<u32, Vec<RailChild>> {
        (0..nodes)
            .map(|n| {
                let v = (0..per_node)
                    .map(|r| RailChild {
                        rail: r,
                        gpu: r,
                        hca: format!("mlx5_{}", per_node - 1 - r),
                        port: 1,
                    })
                    .collect();
                (n, v)
            })
            .collect()
    }

    #[test]
    fn rounds_pair_rail_r_with_rail_r_of_each_scheduled_pair() {
        let r = rail_rounds(&rails(3, 2), 2, 7);
        let all: Vec<(u32, u32, u32)> = r.concat();
        assert_eq!(all.len(), 3 * 2, "{r:?}");
        for round in &r {
            let mut busy = std::collections::BTreeSet::new();
            for (a, b, rail) in round {
                assert!(busy.insert((*a, *rail)) && busy.insert((*b, *rail)));
            }
        }
    }

    #[test]
    fn the_whole_flow_with_the_fake_worker_names_the_bad_rail() {
        let rails = rails(3, 2);
        let mut run = RailRun {
            base_env: BTreeMap::from([("NCCL_SOCKET_IFNAME".into(), "eth0".into())]),
            timeout: Duration::from_secs(20),
            program: Some(fake()),
            ..Default::default()
        };
        // Node 2's rail 1 (mlx5_0) drops every RDMA packet: its child reports NET/IB errors.
        run.extra_env.insert(
            (2, 1),
            BTreeMap::from([
                ("FAKE_MODE".into(), "ib-error".into()),
                ("FAKE_PEER".into(), "10.200.0.1<43210>".into()),
            ]),
        );
        let mut results = Vec::new();
        for round in rail_rounds(&rails, 2, 7) {
            results.extend(run_round_here(&run, &rails, &round, 0));
        }
        assert_eq!(results.len(), 6);
        let bad: Vec<&RailResult> = results.iter().filter(|r| r.gbps.is_none()).collect();
        assert_eq!(bad.len(), 2, "{results:#?}");
        assert!(bad.iter().all(|r| r.rail == 1 && (r.a == 2 || r.b == 2)));
        assert!(
            bad[0].error.as_deref().unwrap_or("").contains(
                "NET/IB completion error from peer 10.200.0.1<43210>: status 12: transport retry exceeded"
            ),
            "{:?}",
            bad[0].error
        );
        assert!(results.iter().filter_map(|r| r.gbps).all(|g| g > 1.0));
        let first = localise(&results);
        assert!(
            matches!(
                first.blames[..],
                [Blame::NodeRail {
                    node: 2,
                    rail: 1,
                    ..
                }]
            ),
            "{first:?}"
        );
        // The retest against known-good partners confirms it.
        let plan = retest_plan(&results, &first);
        for round in rounds(&plan) {
            results.extend(run_round_here(&run, &rails, &round, 1));
        }
        let v = localise(&results);
        assert!(v.retested);
        assert!(
            matches!(
                v.blames[..],
                [Blame::NodeRail {
                    node: 2,
                    rail: 1,
                    ..
                }]
            ),
            "{v:?}"
        );
        // The finding names the node, the rail's HCA and GPU, and the fix.
        let facts: Vec<NodeFacts> = (0..3).map(|n| node_facts(n, &rails[&n])).collect();
        let nodes: Vec<(u32, &NodeFacts)> = facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let input = ClusterInput::of_nodes(&nodes, 3);
        let findings = preflight_checks::rails::fault::findings(&input, &v);
        assert_eq!(findings.len(), 1);
        let f = &findings[0];
        assert_eq!((f.status, f.node), (Status::Fail, Some(2)));
        assert_eq!(f.subject, "gpu03 rail 1 (mlx5_0/1, GPU 1)");
        assert!(
            f.summary
                .contains("NET/IB completion error from peer 10.200.0.1<43210>"),
            "{}",
            f.summary
        );
        if let Ok(path) = std::env::var("PREFLIGHT_SAVE_RAILS_REPORT") {
            save_report(&path, &nodes, &findings);
        }
        // Without the fault the same flow passes everywhere, proven NET/IB with GPUDirect.
        run.extra_env.clear();
        let healthy: Vec<RailResult> = rail_rounds(&rails, 2, 7)
            .iter()
            .flat_map(|round| run_round_here(&run, &rails, round, 0))
            .collect();
        assert!(localise(&healthy).clean(), "{healthy:#?}");
    }
}

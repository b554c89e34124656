//! `ib.counters-grew`: error counters that grew between two snapshots of one node taken around
//! a measurement (a link that flapped or corrupted packets while preflight measured). Saturated
//! counters are reported as saturated, never differenced.

use super::counters::{Growth, port_growth, spec};
use super::mapping::map_rails;
use super::node::{link_commands, port_label};
use crate::core::ClusterInput;
use crate::core::{Finding, Fix, IbFacts, Status};
use std::collections::BTreeMap;

pub use crate::rdma::ids::COUNTERS_GREW as ID;

/// Counters that flag a failed link when they grow at all.
const FATAL: &[&str] = &[
    "link_downed",
    "excessive_buffer_overrun_errors",
    "local_link_integrity_errors",
    "rnr_nak_retry_err",
    "req_transport_retries_exceeded",
];

fn describe(name: &str, g: &Growth) -> Option<String> {
    Some(match g {
        Growth::Grew { by, before, after } => format!("{name} +{by} ({before} -> {after})"),
        Growth::SaturatedDuring { before, max } => {
            format!(
                "{name} saturated during the run ({before} -> {max}, the true growth is unknown)"
            )
        }
        Growth::SaturatedBefore { max } => {
            format!(
                "{name} saturated at {max} before the run (growth cannot be seen until it is cleared)"
            )
        }
        Growth::Cleared { .. } => return None,
    })
}

pub fn check(before: &IbFacts, after: &IbFacts) -> Vec<Finding> {
    if after.devices.is_empty() {
        return vec![Finding::new(
            ID,
            Status::Skip,
            "infiniband",
            "no InfiniBand/RoCE devices: no counters to compare",
        )];
    }
    let rails = map_rails(after);
    let mut out = Vec::new();
    for d in &after.devices {
        let Some(bd) = before.devices.iter().find(|b| b.name == d.name) else {
            continue;
        };
        for p in &d.ports {
            let Some(bp) = bd.ports.iter().find(|b| b.port == p.port) else {
                continue;
            };
            let grown = port_growth(
                (&bp.counters, &bp.hw_counters),
                (&p.counters, &p.hw_counters),
            );
            let lines: Vec<String> = grown
                .iter()
                .filter(|(_, g)| !matches!(g, Growth::SaturatedBefore { .. }))
                .filter_map(|(n, g)| describe(n, g))
                .collect();
            if lines.is_empty() {
                continue;
            }
            let fatal = grown.iter().any(|(n, g)| {
                FATAL.contains(&n.as_str())
                    && matches!(g, Growth::Grew { .. } | Growth::SaturatedDuring { .. })
            });
            let mut evidence = serde_json::Map::new();
            for (n, g) in &grown {
                let v = match g {
                    Growth::Grew { by, .. } => serde_json::json!({"grew_by": by}),
                    Growth::SaturatedDuring { max, .. } | Growth::SaturatedBefore { max } => {
                        serde_json::json!({"saturated": max, "bits": spec(n).map(|s| s.bits)})
                    }
                    Growth::Cleared { before, after } => {
                        serde_json::json!({"cleared": {"before": before, "after": after}})
                    }
                };
                evidence.insert(n.clone(), v);
            }
            let mut f = Finding::new(
                ID,
                if fatal { Status::Fail } else { Status::Warn },
                format!("{}/{}", d.name, p.port),
                format!(
                    "{} error counters grew while preflight measured: {}{}",
                    port_label(&rails, d, p),
                    lines.join("; "),
                    if fatal {
                        ": the link went down or lost RDMA traffic during the run, and a job on it fails or stalls the same way"
                    } else {
                        ": the link corrupts or retries traffic under load"
                    }
                ),
            )
            .with("device", &d.name)
            .with("port", p.port)
            .fix(Fix {
                hint: format!(
                    "Reseat or replace the cable or transceiver on {}/{}, check the switch port's log, and leave the rail out with NCCL_IB_HCA until it holds.",
                    d.name, p.port
                ),
                commands: link_commands(d, p),
            });
            f.evidence.insert("counters".into(), evidence.into());
            out.push(f);
        }
    }
    if out.is_empty() {
        out.push(Finding::new(
            ID,
            Status::Pass,
            "infiniband",
            "no RDMA error counter grew during the run",
        ));
    }
    out
}

/// Every node's two snapshots (`after` by rank: the counters read after the traffic phases):
/// each grown counter as a finding on its node, the quiet nodes in one pass.
pub fn check_cluster(input: &ClusterInput, after: &BTreeMap<u32, IbFacts>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut quiet = 0;
    for (rank, facts) in input.nodes {
        let Some(after) = after.get(rank) else {
            continue;
        };
        for mut f in check(&facts.ib, after) {
            match f.status {
                Status::Pass => quiet += 1,
                Status::Skip => {}
                _ => {
                    let host = input.host(*rank).unwrap_or_else(|| format!("rank{rank}"));
                    f.subject = format!("{host} {}", f.subject);
                    if let Some(fix) = &mut f.fix {
                        for c in &mut fix.commands {
                            *c = format!("ssh {host} {c}");
                        }
                    }
                    f.summary = format!("{}: {}", input.who(*rank), f.summary);
                    out.push(f.on_node(Some(*rank)));
                }
            }
        }
    }
    if quiet > 0 {
        out.push(Finding::new(
            ID,
            Status::Pass,
            "infiniband",
            format!("no RDMA error counter grew during the run on {quiet} node(s)"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IbDevice, IbPort, NodeFacts};

    fn facts(host: &str, downed: u64) -> NodeFacts {
        let mut f = NodeFacts {
            hostname: host.into(),
            ..Default::default()
        };
        f.ib.devices.push(IbDevice {
            name: "mlx5_0".into(),
            ports: vec![IbPort {
                port: 1,
                state: "ACTIVE".into(),
                counters: BTreeMap::from([("link_downed".to_string(), downed)]),
                ..Default::default()
            }],
            ..Default::default()
        });
        f
    }

    #[test]
    fn each_grown_counter_is_named_on_its_node_and_quiet_nodes_pass_together() {
        let (a, b, c) = (facts("gpu01", 0), facts("gpu02", 0), facts("gpu03", 3));
        let nodes = [(0, &a), (1, &b), (2, &c)];
        let input = ClusterInput::of_nodes(&nodes, 3);
        let after = BTreeMap::from([
            (0, a.ib.clone()),
            (1, b.ib.clone()),
            (2, facts("gpu03", 5).ib),
        ]);
        let out = check_cluster(&input, &after);
        assert_eq!(out.len(), 2, "{out:#?}");
        let f = &out[0];
        assert_eq!((f.status, f.node), (Status::Fail, Some(2)));
        assert_eq!(f.subject, "gpu03 mlx5_0/1");
        assert!(
            f.summary
                .starts_with("rank 2 (gpu03): mlx5_0/1 (rail 0) error counters grew while preflight measured: link_downed +2 (3 -> 5)"),
            "{}",
            f.summary
        );
        let cmds = &f.fix.as_ref().expect("a fix").commands;
        assert!(cmds.iter().all(|c| c.starts_with("ssh gpu03 ")), "{cmds:?}");
        assert_eq!(out[1].status, Status::Pass);
        assert!(
            out[1].summary.ends_with("on 2 node(s)"),
            "{}",
            out[1].summary
        );
        // A node without a second snapshot is not judged; none at all: nothing to say.
        assert!(check_cluster(&input, &BTreeMap::new()).is_empty());
    }
}

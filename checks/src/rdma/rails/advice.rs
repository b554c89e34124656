//! The rail advice (issue 34): `NCCL_IB_HCA` listing the rails that work on every node (exact
//! names), `NCCL_IB_GID_INDEX` where RoCE needs it, `NCCL_IB_QPS_PER_CONNECTION` where the
//! fabric and the size call for it, each with its reason.

use super::across::nccl_gid;
use super::localise::{Blame, RailVerdict};
use super::mapping::{map_rails, port_of};
use crate::core::{GidEntry, IbPort, NodeFacts};
use std::collections::{BTreeMap, BTreeSet};

/// Nodes from which a RoCE fabric is taken to span several switches, where more queue pairs per
/// connection give ECMP more flows to spread.
pub const QPS_MIN_NODES: usize = 16;
/// Queue pairs per connection advised on such RoCE fabrics.
pub const QPS_ON_ROCE: u32 = 4;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct RailAdvice {
    /// `NCCL_IB_HCA`, when every node has RDMA rails.
    pub hca: Option<String>,
    /// `NCCL_IB_GID_INDEX` for every node, when one value serves.
    pub gid_index: Option<String>,
    /// `NCCL_IB_GID_INDEX` per rank, when the index differs across nodes.
    pub gid_index_per_rank: BTreeMap<u32, String>,
    /// `NCCL_IB_QPS_PER_CONNECTION`, when advised.
    pub qps_per_connection: Option<String>,
    pub reasons: Vec<String>,
}

fn port_name(dev: &str, port: u32) -> String {
    format!("{dev}:{port}")
}

/// NCCL picks the RoCE GID itself from 2.21 on (NCCL_IB_GID_INDEX=-1 by default); before, it
/// used index 0 unless told.
fn picks_gid_itself(version: Option<&str>) -> Option<bool> {
    let mut parts = version?.split('.');
    let major: u32 = parts.next()?.trim().parse().ok()?;
    let minor: u32 = parts.next()?.trim().parse().ok()?;
    Some((major, minor) >= (2, 21))
}

/// Ports slower than their node's best rail of the same link layer, with why, into `left_out`.
fn slower_ports(nodes: &[(u32, &NodeFacts)], left_out: &mut BTreeMap<String, String>) {
    for (rank, f) in nodes {
        let ports: Vec<(&str, &IbPort)> =
            f.ib.devices
                .iter()
                .flat_map(|d| d.ports.iter().map(move |p| (d.name.as_str(), p)))
                .filter(|(_, p)| p.is_active())
                .collect();
        for (d, p) in &ports {
            let best = ports
                .iter()
                .filter(|(_, q)| q.link_layer == p.link_layer)
                .filter_map(|(_, q)| q.rate_gbps)
                .fold(0.0, f64::max);
            if let Some(rate) = p.rate_gbps
                && rate < best
            {
                left_out.entry(port_name(d, p.port)).or_insert(format!(
                    "{rate} Gb/s on rank {rank} against {best} (ib.rate)"
                ));
            }
        }
    }
}

/// Rails the pair tests blamed (a node's rail, a rail's switch), with why, into `left_out`.
fn blamed_rails(
    nodes: &[(u32, &NodeFacts)],
    verdict: Option<&RailVerdict>,
    left_out: &mut BTreeMap<String, String>,
) {
    if let Some(v) = verdict {
        for b in &v.blames {
            let (ranks, rail): (Vec<u32>, u32) = match b {
                Blame::NodeRail { node, rail, .. } => (vec![*node], *rail),
                Blame::RailSwitch { rail, nodes } => (nodes.clone(), *rail),
                _ => continue,
            };
            for r in ranks {
                let Some((_, f)) = nodes.iter().find(|(k, _)| *k == r) else {
                    continue;
                };
                if let Some(rl) = map_rails(&f.ib).into_iter().find(|x| x.index == rail) {
                    left_out
                        .entry(port_name(&rl.hca, rl.port))
                        .or_insert(format!("rail {rail} fails on rank {r} (ib.rail-fault)"));
                }
            }
        }
    }
}

pub fn advise(nodes: &[(u32, &NodeFacts)], verdict: Option<&RailVerdict>) -> RailAdvice {
    let mut advice = RailAdvice::default();
    if nodes.is_empty() || nodes.iter().any(|(_, f)| f.ib.active_ports().is_empty()) {
        return advice;
    }
    let active: Vec<BTreeSet<String>> = nodes
        .iter()
        .map(|(_, f)| {
            f.ib.active_ports()
                .into_iter()
                .map(|(d, p)| port_name(d, p))
                .collect()
        })
        .collect();
    let mut common: BTreeSet<String> = active[0].clone();
    common.retain(|p| active.iter().all(|a| a.contains(p)));
    let mut left_out: BTreeMap<String, String> = BTreeMap::new();
    for (i, (rank, _)) in nodes.iter().enumerate() {
        for p in active[0].union(&active[i]) {
            if !active[i].contains(p) && !left_out.contains_key(p) {
                left_out.insert(p.clone(), format!("not ACTIVE on rank {rank}"));
            }
        }
    }
    slower_ports(nodes, &mut left_out);
    blamed_rails(nodes, verdict, &mut left_out);
    let kept: Vec<String> = common
        .iter()
        .filter(|p| !left_out.contains_key(*p))
        .cloned()
        .collect();
    let names: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|(_, f)| f.ib.devices.iter().map(|d| d.name.as_str()))
        .collect();
    let list = if kept.is_empty() {
        common.iter().cloned().collect()
    } else {
        kept.clone()
    };
    let exact = list.iter().any(|p| {
        let dev = p.split(':').next().unwrap_or(p);
        names.iter().any(|d| *d != dev && d.starts_with(dev))
    });
    advice.hca = Some(format!(
        "{}{}",
        if exact { "=" } else { "" },
        list.join(",")
    ));
    let gone: Vec<String> = left_out
        .iter()
        .filter(|(p, _)| common.contains(*p) || !kept.contains(p))
        .map(|(p, why)| format!("{p} ({why})"))
        .collect();
    advice.reasons.push(if kept.is_empty() {
        format!(
            "NCCL_IB_HCA lists the ports ACTIVE on every node, though none works on every node: {}",
            gone.join(", ")
        )
    } else if gone.is_empty() {
        format!(
            "NCCL_IB_HCA lists the {} rails that work on every node{}",
            kept.len(),
            if exact {
                " ('=' for exact names: a prefix would match another HCA)"
            } else {
                ""
            }
        )
    } else {
        format!(
            "NCCL_IB_HCA lists the {} rails that work on every node and leaves out {}{}",
            kept.len(),
            gone.join(", "),
            if exact { "; '=' for exact names" } else { "" }
        )
    });
    roce(nodes, &kept, &mut advice);
    advice
}

/// NCCL_IB_GID_INDEX and NCCL_IB_QPS_PER_CONNECTION for RoCE rails.
fn roce(nodes: &[(u32, &NodeFacts)], kept: &[String], advice: &mut RailAdvice) {
    let mut index_by_rank: BTreeMap<u32, u32> = BTreeMap::new();
    let mut any_roce = false;
    let mut older_nccl = false;
    for (rank, f) in nodes {
        for rail in map_rails(&f.ib) {
            let Some((_, p)) = port_of(&f.ib, &rail) else {
                continue;
            };
            if !p.link_layer.eq_ignore_ascii_case("Ethernet")
                || !kept.contains(&port_name(&rail.hca, rail.port))
            {
                continue;
            }
            any_roce = true;
            let table: Vec<&GidEntry> = f
                .scale
                .gids
                .iter()
                .filter(|g| g.device == rail.hca && g.port == rail.port)
                .collect();
            if let (Some(i), _) = nccl_gid(&table) {
                index_by_rank.entry(*rank).or_insert(i);
            }
        }
        older_nccl |= picks_gid_itself(f.nccl.version.as_deref()) != Some(true);
    }
    if !any_roce {
        return;
    }
    let distinct: BTreeSet<u32> = index_by_rank.values().copied().collect();
    if !older_nccl {
        advice.reasons.push(format!(
            "NCCL_IB_GID_INDEX left unset: NCCL 2.21+ on every node picks the RoCE v2 IPv4-mapped GID itself (index {})",
            distinct.iter().map(|i| i.to_string()).collect::<Vec<_>>().join("/")
        ));
    } else if distinct.len() == 1 {
        let i = distinct.iter().next().copied().unwrap_or(0);
        advice.gid_index = Some(i.to_string());
        advice.reasons.push(format!(
            "NCCL_IB_GID_INDEX={i}: the RoCE v2 IPv4-mapped GID on every node's rails; NCCL older than 2.21 (or of unknown version) would use index 0 (RoCE v1, link-local) and fail with 'Got completion with error 12'"
        ));
    } else if !distinct.is_empty() {
        advice.gid_index_per_rank = index_by_rank
            .iter()
            .map(|(r, i)| (*r, i.to_string()))
            .collect();
        advice.reasons.push(
            "NCCL_IB_GID_INDEX differs per node (node_env): the RoCE v2 IPv4-mapped GID sits at different indices, and NCCL older than 2.21 would otherwise use index 0"
                .to_string(),
        );
    }
    if nodes.len() >= QPS_MIN_NODES {
        advice.qps_per_connection = Some(QPS_ON_ROCE.to_string());
        advice.reasons.push(format!(
            "NCCL_IB_QPS_PER_CONNECTION={QPS_ON_ROCE}: {} nodes on RoCE span several switches, where ECMP hashes each queue pair onto one path; {QPS_ON_ROCE} queue pairs per connection spread a rail's traffic over more uplinks",
            nodes.len()
        ));
    } else {
        advice.reasons.push(format!(
            "NCCL_IB_QPS_PER_CONNECTION left at its default: {} nodes on RoCE (more queue pairs help ECMP from about {QPS_MIN_NODES} nodes, across several switches)",
            nodes.len()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdma::rails::fixtures_test::{eight_rail_node, roce_node};

    const NDR: &str = "400 Gb/sec (4X NDR)";
    const ACTIVE: &str = "4: ACTIVE";

    #[test]
    fn hca_lists_the_rails_that_work_everywhere_with_exact_names() {
        let mut rates = [NDR; 8];
        rates[6] = "200 Gb/sec (4X HDR)";
        let (a, ga, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &[&[]; 8]);
        let (b, gb, _) = eight_rail_node(&rates, &[ACTIVE; 8], &[&[]; 8]);
        let mut states = [ACTIVE; 8];
        states[3] = "1: DOWN";
        let (c, gc, _) = eight_rail_node(&[NDR; 8], &states, &[&[]; 8]);
        let (fa, fb, fc) = (a.facts(&ga), b.facts(&gb), c.facts(&gc));
        let nodes = [(0, &fa), (1, &fb), (2, &fc)];
        let verdict = RailVerdict {
            blames: vec![Blame::NodeRail {
                node: 2,
                rail: 5,
                bad_with: vec![0, 1],
                good_with: vec![],
                median_gbps: None,
                errors: vec![],
            }],
            ..Default::default()
        };
        let adv = advise(&nodes, Some(&verdict));
        assert_eq!(
            adv.hca.as_deref(),
            Some("mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1")
        );
        let r = &adv.reasons[0];
        assert!(r.contains("mlx5_3:1 (not ACTIVE on rank 2)"), "{r}");
        assert!(
            r.contains("mlx5_6:1 (200 Gb/s on rank 1 against 400 (ib.rate))"),
            "{r}"
        );
        assert!(
            r.contains("mlx5_7:1 (rail 5 fails on rank 2 (ib.rail-fault))"),
            "{r}"
        );
        assert_eq!(adv.gid_index, None);
        assert_eq!(adv.qps_per_connection, None);
    }

    #[test]
    fn roce_gets_the_gid_index_on_older_nccl_and_qps_at_scale() {
        let mut n: Vec<NodeFacts> = (0..QPS_MIN_NODES).map(|_| roce_node(true)).collect();
        for f in &mut n {
            f.nccl.version = Some("2.18.3".into());
        }
        let nodes: Vec<(u32, &NodeFacts)> =
            n.iter().enumerate().map(|(i, f)| (i as u32, f)).collect();
        let adv = advise(&nodes, None);
        assert_eq!(adv.hca.as_deref(), Some("mlx5_0:1"));
        assert_eq!(adv.gid_index.as_deref(), Some("3"));
        assert_eq!(adv.qps_per_connection.as_deref(), Some("4"));
        assert!(
            adv.reasons
                .iter()
                .any(|r| r.starts_with("NCCL_IB_GID_INDEX=3: the RoCE v2 IPv4-mapped GID"))
        );
        assert!(
            adv.reasons
                .iter()
                .any(|r| r.starts_with("NCCL_IB_QPS_PER_CONNECTION=4: 16 nodes on RoCE"))
        );
        for f in &mut n {
            f.nccl.version = Some("2.23.4".into());
        }
        let nodes: Vec<(u32, &NodeFacts)> = n
            .iter()
            .take(2)
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let adv = advise(&nodes, None);
        assert_eq!((adv.gid_index, adv.qps_per_connection), (None, None));
        assert!(
            adv.reasons
                .iter()
                .any(|r| r.contains("NCCL 2.21+ on every node picks"))
        );
        assert_eq!(advise(&[], None), RailAdvice::default());
    }
}

//! `ib.gid-index` across the cluster: the GID each node's `NCCL_IB_GID_INDEX` selects must be of
//! one kind everywhere (RoCE v2, IPv4-mapped); an index that is v2 on some nodes and v1 or
//! link-local on others makes the two ends of a queue pair disagree (NVIDIA/nccl #1131).

use super::gid_index::{ID, best_index};
use crate::core::ClusterInput;
use crate::core::{Finding, Fix, GidEntry, NodeFacts, Status};
use std::collections::BTreeMap;

/// What the node's NCCL_IB_GID_INDEX selects on its first RoCE port, in words; None when the
/// node has no RoCE GIDs.
pub fn selected_kind(facts: &NodeFacts) -> Option<String> {
    let first = facts.scale.gids.first()?;
    let port: Vec<&GidEntry> = facts
        .scale
        .gids
        .iter()
        .filter(|g| g.device == first.device && g.port == first.port)
        .collect();
    let raw = facts
        .env
        .get("NCCL_IB_GID_INDEX")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let Some(raw) = raw else {
        return Some("unset (NCCL chooses)".into());
    };
    let Ok(index) = raw.parse::<u32>() else {
        return Some(format!("not a number ({raw:?})"));
    };
    let Some(g) = port.iter().find(|g| g.index == index) else {
        return Some(format!("index {index}: empty"));
    };
    let lower = g.gid.to_ascii_lowercase();
    let kind = g.kind.as_deref().unwrap_or("unknown type");
    let family = if lower.starts_with("fe80:") {
        "link-local"
    } else if lower.starts_with("0000:0000:0000:0000:0000:ffff:") {
        "IPv4-mapped"
    } else {
        "IPv6"
    };
    Some(format!("index {index}: {kind} {family}"))
}

pub fn check_cluster(input: &ClusterInput) -> Option<Finding> {
    let mut kinds: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut best: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut any_set = false;
    for (rank, facts) in input.nodes {
        let Some(kind) = selected_kind(facts) else {
            continue;
        };
        any_set |= !kind.starts_with("unset");
        kinds.entry(kind).or_default().push(*rank);
        let first = facts.scale.gids.first()?;
        let port: Vec<&GidEntry> = facts
            .scale
            .gids
            .iter()
            .filter(|g| g.device == first.device && g.port == first.port)
            .collect();
        if let Some(b) = best_index(&port) {
            best.entry(b).or_default().push(*rank);
        }
    }
    if !any_set || kinds.len() < 2 {
        return None;
    }
    let words: Vec<String> = kinds
        .iter()
        .map(|(k, ranks)| {
            let r: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
            format!("{k} on rank {}", r.join(","))
        })
        .collect();
    let mut fix = Fix::new(
        "Select the same kind of GID on every node: the IPv4-mapped RoCE v2 one. Where its index is \
         the same everywhere, set it on every node; where it differs, unset NCCL_IB_GID_INDEX and let \
         NCCL pick by version and family.",
    );
    if best.len() == 1 {
        let index = best.keys().next().copied().unwrap_or_default();
        fix = fix.command(format!("export NCCL_IB_GID_INDEX={index}"));
    } else {
        fix = fix
            .command("unset NCCL_IB_GID_INDEX")
            .command("export NCCL_IB_ROCE_VERSION_NUM=2 NCCL_IB_ADDR_FAMILY=AF_INET");
    }
    Some(
        Finding::new(
            ID,
            Status::Warn,
            "NCCL_IB_GID_INDEX",
            format!(
                "NCCL_IB_GID_INDEX selects different kinds of GID across nodes ({}): the two ends of a RoCE connection disagree (expect 'NET/IB : Got completion with error 12' or a hang)",
                words.join("; ")
            ),
        )
        .with("kinds", &kinds)
        .with("best_index_by_rank", &best)
        .fix(fix),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::scale::testkit::defaults;

    fn roce(index: &str) -> NodeFacts {
        let mut f = defaults();
        f.scale.gids =
            crate::rdma::probe::gid::probe(&crate::infra::testutil::fixture_root("roce-node"));
        f.env.insert("NCCL_IB_GID_INDEX".into(), index.into());
        f
    }

    fn input<'a>(nodes: &'a [(u32, &'a NodeFacts)]) -> ClusterInput<'a> {
        ClusterInput::of_nodes(nodes, nodes.len() as u32)
    }

    #[test]
    fn an_index_that_is_v2_on_some_nodes_and_v1_on_another_fires_once() {
        let (a, b, c) = (roce("3"), roce("3"), roce("2"));
        let nodes = [(0, &a), (1, &b), (2, &c)];
        let f = check_cluster(&input(&nodes)).expect("fires");
        assert_eq!((f.status, f.node), (Status::Warn, None));
        assert!(
            f.summary
                .contains("index 3: RoCE v2 IPv4-mapped on rank 0,1"),
            "{}",
            f.summary
        );
        assert!(
            f.summary
                .contains("index 2: IB/RoCE v1 IPv4-mapped on rank 2"),
            "{}",
            f.summary
        );
        assert_eq!(f.fix.unwrap().commands, vec!["export NCCL_IB_GID_INDEX=3"]);
    }

    #[test]
    fn one_kind_everywhere_or_no_roce_gives_nothing() {
        let (a, b) = (roce("3"), roce("3"));
        assert!(check_cluster(&input(&[(0, &a), (1, &b)])).is_none());
        let (x, y) = (defaults(), defaults());
        assert!(check_cluster(&input(&[(0, &x), (1, &y)])).is_none());
    }
}

//! Rails compared across nodes: a port slower than the same rail elsewhere (`ib.rate`), a node
//! with fewer working rails than its peers (`ib.rails`), HCA firmware or driver stacks that
//! differ (`ib.firmware`), and RoCE GIDs NCCL would pick that differ in kind (`ib.roce-gid`).

use super::mapping::{Rail, map_rails, port_of};
use super::node::{RATE, link_commands, port_label};
use crate::core::ClusterInput;
use crate::core::{Finding, Fix, GidEntry, NodeFacts, Status};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::rdma::ids::FIRMWARE;
pub use crate::rdma::ids::RAILS;
pub use crate::rdma::ids::ROCE_GID;

pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let with: Vec<(u32, &NodeFacts, Vec<Rail>)> = input
        .nodes
        .iter()
        .filter(|(_, f)| !f.ib.devices.is_empty())
        .map(|(r, f)| (*r, *f, map_rails(&f.ib)))
        .collect();
    if with.is_empty() {
        return [RAILS, FIRMWARE, ROCE_GID]
            .into_iter()
            .map(|id| {
                Finding::new(
                    id,
                    Status::Skip,
                    "infiniband",
                    "no node has InfiniBand/RoCE devices: no rails to compare",
                )
            })
            .collect();
    }
    let mut out = rate_across(input, &with);
    out.extend(rail_count(input, &with));
    out.push(firmware(input, &with));
    out.push(roce_gid(input, &with));
    out
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    crate::infra::stats::median(&mut v)
}

/// ACTIVE ports slower than the same rail's median across three or more nodes, where the node's
/// own rails all run alike (a port slower than its own node's rails is the node check's finding).
fn rate_across(input: &ClusterInput, with: &[(u32, &NodeFacts, Vec<Rail>)]) -> Vec<Finding> {
    let mut by_rail: BTreeMap<u32, Vec<(u32, f64)>> = BTreeMap::new();
    for (rank, f, rails) in with {
        for rail in rails {
            if let Some((_, p)) = port_of(&f.ib, rail)
                && p.is_active()
                && let Some(rate) = p.rate_gbps
            {
                by_rail.entry(rail.index).or_default().push((*rank, rate));
            }
        }
    }
    let mut out = Vec::new();
    for (rank, f, rails) in with {
        let own_best = rails
            .iter()
            .filter_map(|r| port_of(&f.ib, r))
            .filter(|(_, p)| p.is_active())
            .filter_map(|(_, p)| p.rate_gbps)
            .fold(0.0, f64::max);
        for rail in rails {
            let Some((d, p)) = port_of(&f.ib, rail) else {
                continue;
            };
            let Some(rate) = p.rate_gbps.filter(|_| p.is_active()) else {
                continue;
            };
            if rate < own_best {
                continue;
            }
            let others = by_rail.get(&rail.index).cloned().unwrap_or_default();
            // Two nodes that disagree cannot tell which one is slow: three or more can.
            if others.len() < 3 {
                continue;
            }
            let Some(reference) = median(others.iter().map(|(_, r)| *r).collect()) else {
                continue;
            };
            if rate >= reference {
                continue;
            }
            let faster: Vec<u32> = others
                .iter()
                .filter(|(_, r)| *r >= reference)
                .map(|(k, _)| *k)
                .collect();
            out.push(
                Finding::new(
                    RATE,
                    Status::Warn,
                    format!("{}/{}", d.name, p.port),
                    format!(
                        "{} on {} runs at {rate} Gb/s ({}) while rail {} runs at {reference} Gb/s on {}: the slowest rail sets the pace of NCCL's collectives",
                        port_label(rails, d, p),
                        input.who(*rank),
                        p.rate.as_deref().unwrap_or("?"),
                        rail.index,
                        input.hosts_within(&faster, 60)
                    ),
                )
                .on_node(Some(*rank))
                .with("device", &d.name)
                .with("port", p.port)
                .with("rail", rail.index)
                .with("rate_gbps", rate)
                .with("rail_median_gbps", reference)
                .fix(Fix {
                    hint: format!(
                        "The port trained below the same rail on other nodes: reseat or replace the cable or transceiver on {}/{} and check the switch port's speed.",
                        d.name, p.port
                    ),
                    commands: link_commands(d, p),
                }),
            );
        }
    }
    out
}

/// Nodes with fewer ACTIVE rails than the most any node has.
fn rail_count(input: &ClusterInput, with: &[(u32, &NodeFacts, Vec<Rail>)]) -> Vec<Finding> {
    let active = |f: &NodeFacts, rails: &[Rail]| -> BTreeSet<String> {
        rails
            .iter()
            .filter(|r| port_of(&f.ib, r).is_some_and(|(_, p)| p.is_active()))
            .map(|r| r.port_name())
            .collect()
    };
    let counts: BTreeMap<u32, BTreeSet<String>> = with
        .iter()
        .map(|(rank, f, rails)| (*rank, active(f, rails)))
        .collect();
    let most = counts.values().map(|s| s.len()).max().unwrap_or(0);
    let full: Vec<u32> = counts
        .iter()
        .filter(|(_, s)| s.len() == most)
        .map(|(r, _)| *r)
        .collect();
    // Nodes without any RDMA device are ib.partial's business; count them here only when others
    // have rails.
    let without: Vec<u32> = input
        .nodes
        .iter()
        .filter(|(_, f)| f.ib.devices.is_empty())
        .map(|(r, _)| *r)
        .collect();
    let reference: BTreeSet<String> = full
        .first()
        .and_then(|r| counts.get(r))
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for (rank, have) in &counts {
        if have.len() >= most {
            continue;
        }
        let lacking: Vec<String> = reference.difference(have).cloned().collect();
        out.push(
            Finding::new(
                RAILS,
                Status::Warn,
                input.who(*rank),
                format!(
                    "{} has {} working rail(s) while {} have {most}{}: NCCL gives this node fewer channels, and every collective waits for it",
                    input.who(*rank),
                    have.len(),
                    input.hosts_within(&full, 60),
                    if lacking.is_empty() {
                        String::new()
                    } else {
                        format!(" (not ACTIVE or absent here: {})", lacking.join(", "))
                    }
                ),
            )
            .on_node(Some(*rank))
            .with("active_rails", have)
            .with("expected", most)
            .with("lacking", &lacking)
            .fix(
                Fix::new("Bring the missing rails up (cable, switch port, subnet manager) or replace the HCA; until then run with NCCL_IB_HCA listing the rails every node has (see the recommendation).")
                    .command("ibstat")
                    .command("ibv_devinfo -l"),
            ),
        );
    }
    if out.is_empty() {
        out.push(
            Finding::new(
                RAILS,
                Status::Pass,
                "infiniband",
                format!(
                    "every node with RDMA devices has {most} working rail(s){}",
                    if without.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (no RDMA devices on {}: see ib.partial)",
                            input.hosts_within(&without, 60)
                        )
                    }
                ),
            )
            .with("rails", most),
        );
    }
    out
}

/// Firmware per HCA model and the driver stack, grouped by value, when they differ across nodes.
fn firmware(input: &ClusterInput, with: &[(u32, &NodeFacts, Vec<Rail>)]) -> Finding {
    let mut fw: BTreeMap<String, BTreeMap<String, BTreeSet<u32>>> = BTreeMap::new();
    let mut driver: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for (rank, f, _) in with {
        for d in &f.ib.devices {
            let model = d.hca_type.clone().unwrap_or_else(|| "unknown model".into());
            if let Some(v) = &d.fw_ver {
                fw.entry(model)
                    .or_default()
                    .entry(v.clone())
                    .or_default()
                    .insert(*rank);
            }
            if let Some(p) = &d.pci
                && let Some(name) = &p.driver
            {
                let v = format!(
                    "{name} {}",
                    p.driver_version.as_deref().unwrap_or("(inbox, no version)")
                );
                driver.entry(v).or_default().insert(*rank);
            }
        }
    }
    let mut parts = Vec::new();
    let groups = |m: &BTreeMap<String, BTreeSet<u32>>| -> String {
        m.iter()
            .map(|(v, ranks)| {
                let r: Vec<u32> = ranks.iter().copied().collect();
                format!("{v} on {}", input.hosts_within(&r, 40))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (model, versions) in &fw {
        if versions.len() > 1 {
            parts.push(format!("{model} firmware {}", groups(versions)));
        }
    }
    if driver.len() > 1 {
        parts.push(format!("driver {}", groups(&driver)));
    }
    let fw_json: BTreeMap<&String, Vec<&String>> =
        fw.iter().map(|(m, v)| (m, v.keys().collect())).collect();
    let drivers: Vec<&String> = driver.keys().collect();
    if parts.is_empty() {
        return Finding::new(
            FIRMWARE,
            Status::Pass,
            "infiniband",
            "HCA firmware and driver are the same on every node",
        )
        .with("firmware", &fw_json)
        .with("drivers", &drivers);
    }
    Finding::new(
        FIRMWARE,
        Status::Warn,
        "infiniband",
        format!(
            "the RDMA stack differs across nodes: {}: mixed firmware or drivers change link training, adaptive routing and RDMA features between the two ends of a rail",
            parts.join("; ")
        ),
    )
    .with("firmware", &fw_json)
    .with("drivers", &drivers)
    .fix(
        Fix::new("Bring every node to one firmware per HCA model and one driver stack (MLNX_OFED/DOCA or inbox) and reboot them.")
            .command("ibv_devinfo | grep -E 'hca_id|fw_ver'")
            .command("mlxfwmanager --query")
            .command("modinfo mlx5_core | grep -E '^version'"),
    )
}

/// What NCCL picks on a RoCE port by default (RoCE v2, IPv4): the IPv4-mapped v2 GID, else a
/// global v2 one; described with its kind for the comparison.
pub(crate) fn nccl_gid(port: &[&GidEntry]) -> (Option<u32>, &'static str) {
    let v2: Vec<&GidEntry> = port
        .iter()
        .copied()
        .filter(|g| g.kind.as_deref().is_some_and(|k| k.contains("v2")))
        .collect();
    let lower = |g: &GidEntry| g.gid.to_ascii_lowercase();
    if let Some(g) = v2
        .iter()
        .find(|g| lower(g).starts_with("0000:0000:0000:0000:0000:ffff:"))
    {
        return (Some(g.index), "RoCE v2 IPv4-mapped");
    }
    if let Some(g) = v2.iter().find(|g| !lower(g).starts_with("fe80:")) {
        return (Some(g.index), "RoCE v2 IPv6");
    }
    if !v2.is_empty() {
        return (None, "RoCE v2 link-local only");
    }
    (None, "no RoCE v2 GID")
}

/// The GID NCCL would pick on each node's RoCE rails, compared across nodes.
fn roce_gid(input: &ClusterInput, with: &[(u32, &NodeFacts, Vec<Rail>)]) -> Finding {
    let mut kinds: BTreeMap<&'static str, BTreeSet<u32>> = BTreeMap::new();
    let mut indices: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    let mut per_node: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (rank, f, rails) in with {
        for rail in rails {
            let Some((_, p)) = port_of(&f.ib, rail) else {
                continue;
            };
            if !p.link_layer.eq_ignore_ascii_case("Ethernet") || !p.is_active() {
                continue;
            }
            let table: Vec<&GidEntry> = f
                .scale
                .gids
                .iter()
                .filter(|g| g.device == rail.hca && g.port == rail.port)
                .collect();
            let (index, kind) = nccl_gid(&table);
            kinds.entry(kind).or_default().insert(*rank);
            if let Some(i) = index {
                indices.entry(i).or_default().insert(*rank);
            }
            per_node.entry(*rank).or_default().push(format!(
                "{}: {}",
                rail.port_name(),
                index
                    .map(|i| format!("index {i} {kind}"))
                    .unwrap_or(kind.to_string())
            ));
        }
    }
    if kinds.is_empty() {
        return Finding::new(
            ROCE_GID,
            Status::Skip,
            "RoCE GID",
            "no ACTIVE RoCE rail: InfiniBand ports need no GID choice",
        );
    }
    let per_node_json: BTreeMap<String, &Vec<String>> =
        per_node.iter().map(|(r, v)| (r.to_string(), v)).collect();
    let words = |m: &BTreeMap<String, BTreeSet<u32>>| -> Vec<String> {
        m.iter()
            .map(|(k, ranks)| {
                let r: Vec<u32> = ranks.iter().copied().collect();
                format!("{k} on {}", input.hosts_within(&r, 40))
            })
            .collect()
    };
    if kinds.len() > 1 || !kinds.contains_key("RoCE v2 IPv4-mapped") {
        let named: BTreeMap<String, BTreeSet<u32>> = kinds
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        return Finding::new(
            ROCE_GID,
            Status::Warn,
            "RoCE GID",
            format!(
                "the GID NCCL picks (RoCE v2, IPv4) is not of one kind on every RoCE rail: {}: the two ends of a queue pair disagree on version or address family (expect 'NET/IB : Got completion with error 12' or a hang)",
                words(&named).join("; ")
            ),
        )
        .with("gids", &per_node_json)
        .fix(
            Fix::new("Give every RoCE netdev its IPv4 address (the IPv4-mapped RoCE v2 GID appears with it), then rerun preflight; show_gids lists each port's table.")
                .command("show_gids")
                .command("ip -4 addr show   # on the nodes without an IPv4-mapped RoCE v2 GID"),
        );
    }
    let mut f = Finding::new(
        ROCE_GID,
        Status::Pass,
        "RoCE GID",
        format!(
            "NCCL picks an IPv4-mapped RoCE v2 GID on every RoCE rail{}",
            if indices.len() == 1 {
                format!(
                    " (index {} everywhere)",
                    indices.keys().next().copied().unwrap_or(0)
                )
            } else {
                format!(" (its index differs: {})", {
                    let named: BTreeMap<String, BTreeSet<u32>> = indices
                        .iter()
                        .map(|(k, v)| (format!("index {k}"), v.clone()))
                        .collect();
                    words(&named).join("; ")
                })
            }
        ),
    )
    .with("gids", &per_node_json);
    f = f.with("indices", indices.keys().copied().collect::<Vec<u32>>());
    f
}

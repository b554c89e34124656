//! `ib.gid-index`: a forced `NCCL_IB_GID_INDEX` that points, on a RoCE port, at an empty GID, a
//! link-local one, a RoCE v1 one, or one that is not IPv4-mapped while the port has IPv4-mapped
//! RoCE v2 GIDs. NCCL then fails with 'Got completion with error 12' (retry exceeded) or hangs.
//! That the index names different kinds of GID on different nodes shows as this finding on the
//! nodes where it is wrong.

use crate::core::{Finding, Fix, GidEntry, NodeFacts, Status};

pub use crate::rdma::ids::GID_INDEX as ID;

fn is_link_local(gid: &str) -> bool {
    gid.to_ascii_lowercase().starts_with("fe80:")
}

/// `0000:...:ffff:0a03:0015` -> true.
fn is_ipv4_mapped(gid: &str) -> bool {
    gid.to_ascii_lowercase()
        .starts_with("0000:0000:0000:0000:0000:ffff:")
}

fn is_v2(g: &GidEntry) -> bool {
    g.kind.as_deref().is_some_and(|k| k.contains("v2"))
}

/// The index NCCL should be given on this port: an IPv4-mapped RoCE v2 GID, else any global v2.
pub fn best_index(port: &[&GidEntry]) -> Option<u32> {
    port.iter()
        .find(|g| is_v2(g) && is_ipv4_mapped(&g.gid))
        .or_else(|| port.iter().find(|g| is_v2(g) && !is_link_local(&g.gid)))
        .map(|g| g.index)
}

pub fn check(facts: &NodeFacts) -> Vec<Finding> {
    let gids = &facts.scale.gids;
    let mut ports: Vec<(&str, u32)> = gids.iter().map(|g| (g.device.as_str(), g.port)).collect();
    ports.dedup();
    if ports.is_empty() {
        return vec![];
    }
    let raw = facts
        .env
        .get("NCCL_IB_GID_INDEX")
        .map(|s| s.trim().to_string());
    let Some(raw) = raw.filter(|s| !s.is_empty()) else {
        return vec![
            Finding::new(
                ID,
                Status::Pass,
                "NCCL_IB_GID_INDEX",
                "NCCL_IB_GID_INDEX is unset: NCCL picks a RoCE v2 GID itself (NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY)",
            )
            .with("ports", ports.iter().map(|(d, p)| format!("{d}/{p}")).collect::<Vec<_>>()),
        ];
    };
    let Ok(index) = raw.parse::<u32>() else {
        return vec![
            Finding::new(
                ID,
                Status::Warn,
                "NCCL_IB_GID_INDEX",
                format!(
                    "NCCL_IB_GID_INDEX={raw:?} is not a number: NCCL falls back to its default"
                ),
            )
            .with("NCCL_IB_GID_INDEX", &raw),
        ];
    };
    let mut out = Vec::new();
    for (dev, port) in ports {
        let table: Vec<&GidEntry> = gids
            .iter()
            .filter(|g| g.device == dev && g.port == port)
            .collect();
        let subject = format!("{dev}/{port}");
        let chosen = table.iter().find(|g| g.index == index);
        let problem = match chosen {
            None => Some(format!("GID index {index} is empty on {subject}")),
            Some(g) if is_link_local(&g.gid) => Some(format!(
                "GID index {index} on {subject} is link-local ({}): it does not route beyond the subnet",
                g.gid
            )),
            Some(g) if !is_v2(g) => Some(format!(
                "GID index {index} on {subject} is {} ({}): RoCE v1 is not routable and most fabrics are configured for v2",
                g.kind.as_deref().unwrap_or("of unknown type"),
                g.gid
            )),
            Some(g)
                if !is_ipv4_mapped(&g.gid)
                    && table.iter().any(|x| is_v2(x) && is_ipv4_mapped(&x.gid)) =>
            {
                Some(format!(
                    "GID index {index} on {subject} is not IPv4-mapped ({}) while the port has IPv4-mapped RoCE v2 GIDs the other nodes use",
                    g.gid
                ))
            }
            _ => None,
        };
        let listing: Vec<String> = table
            .iter()
            .map(|g| {
                format!(
                    "{}: {} {}",
                    g.index,
                    g.gid,
                    g.kind.as_deref().unwrap_or("?")
                )
            })
            .collect();
        let best = best_index(&table);
        let f = match problem {
            None => Finding::new(
                ID,
                Status::Pass,
                subject.clone(),
                format!("NCCL_IB_GID_INDEX={index} is a routable RoCE v2 GID on {subject}"),
            ),
            Some(p) => {
                let mut fix = Fix::new(
                    "Point NCCL at the port's IPv4-mapped RoCE v2 GID (the same kind on every node), or unset \
                     NCCL_IB_GID_INDEX and let NCCL choose; `show_gids` lists the table.",
                );
                if let Some(b) = best {
                    fix = fix.command(format!("export NCCL_IB_GID_INDEX={b}"));
                }
                fix = fix.command("unset NCCL_IB_GID_INDEX");
                Finding::new(
                    ID,
                    Status::Warn,
                    subject.clone(),
                    format!(
                        "{p}; expect 'NET/IB : Got completion with error 12' or a hang in init"
                    ),
                )
                .with("suggested_index", best)
                .fix(fix)
            }
        };
        out.push(
            f.with("NCCL_IB_GID_INDEX", index)
                .with("gid_table", listing),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::scale::testkit::defaults;

    fn roce(index: Option<&str>) -> NodeFacts {
        let mut f = defaults();
        f.scale.gids =
            crate::rdma::probe::gid::probe(&crate::infra::testutil::fixture_root("roce-node"));
        if let Some(i) = index {
            f.env.insert("NCCL_IB_GID_INDEX".into(), i.into());
        }
        f
    }

    #[test]
    fn link_local_v1_and_empty_indices_fire_on_the_roce_v2_fixture_table() {
        for (i, word) in [
            ("0", "link-local"),
            ("1", "link-local"),
            ("2", "IB/RoCE v1"),
            ("9", "empty"),
        ] {
            let out = check(&roce(Some(i)));
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].status, Status::Warn, "{i}: {:#?}", out[0]);
            assert!(out[0].summary.contains(word), "{i}: {}", out[0].summary);
            assert_eq!(out[0].subject, "mlx5_0/1");
            assert_eq!(out[0].evidence["suggested_index"], 3);
            assert_eq!(
                out[0].fix.as_ref().unwrap().commands[0],
                "export NCCL_IB_GID_INDEX=3"
            );
        }
    }

    #[test]
    fn the_ipv4_mapped_v2_index_or_unset_passes_and_no_roce_gives_nothing() {
        assert_eq!(check(&roce(Some("3")))[0].status, Status::Pass);
        assert_eq!(check(&roce(None))[0].status, Status::Pass);
        assert!(check(&defaults()).is_empty());
    }
}

//! RoCE GID tables: `/sys/class/infiniband/<dev>/ports/<n>/gids/<i>` with its type
//! (`gid_attrs/types/<i>`: "RoCE v2", "IB/RoCE v1") and net device (`gid_attrs/ndevs/<i>`),
//! for the ports whose link layer is Ethernet. Empty (all-zero) entries are left out.

use crate::core::GidEntry;
use crate::infra::root::Root;

/// Most entries read per port (mlx5 exposes 255).
const MAX_PER_PORT: usize = 256;
/// Most devices read.
const MAX_DEVICES: usize = 64;
/// Most entries kept in all (the coordinator takes at most 4096 items per list from a peer).
const MAX_TOTAL: usize = 1024;

pub fn probe(root: &Root) -> Vec<GidEntry> {
    let mut out = Vec::new();
    for dev in root
        .list("/sys/class/infiniband")
        .into_iter()
        .take(MAX_DEVICES)
    {
        let ports_dir = format!("/sys/class/infiniband/{dev}/ports");
        for port in root.list(&ports_dir) {
            let Ok(port_no) = port.parse::<u32>() else {
                continue;
            };
            let at = format!("{ports_dir}/{port}");
            let ethernet = root
                .attr(format!("{at}/link_layer"))
                .is_some_and(|l| l.eq_ignore_ascii_case("Ethernet"));
            if !ethernet {
                continue;
            }
            let mut indices: Vec<u32> = root
                .list(format!("{at}/gids"))
                .into_iter()
                .filter_map(|n| n.parse().ok())
                .collect();
            indices.sort_unstable();
            for index in indices.into_iter().take(MAX_PER_PORT) {
                if out.len() >= MAX_TOTAL {
                    return out;
                }
                let Some(gid) = root.attr(format!("{at}/gids/{index}")) else {
                    continue;
                };
                if is_zero_gid(&gid) {
                    continue;
                }
                out.push(GidEntry {
                    device: dev.clone(),
                    port: port_no,
                    index,
                    gid,
                    kind: root.attr(format!("{at}/gid_attrs/types/{index}")),
                    netdev: root.attr(format!("{at}/gid_attrs/ndevs/{index}")),
                });
            }
        }
    }
    out
}

fn is_zero_gid(gid: &str) -> bool {
    gid.chars().all(|c| c == '0' || c == ':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roce_v2_fixture_port_lists_its_gid_table() {
        let gids = probe(&crate::infra::testutil::fixture_root("roce-node"));
        let rows: Vec<(u32, &str, Option<&str>)> = gids
            .iter()
            .map(|g| (g.index, g.gid.as_str(), g.kind.as_deref()))
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    0,
                    "fe80:0000:0000:0000:0e42:a1ff:fe65:8c2e",
                    Some("IB/RoCE v1")
                ),
                (
                    1,
                    "fe80:0000:0000:0000:0e42:a1ff:fe65:8c2e",
                    Some("RoCE v2")
                ),
                (
                    2,
                    "0000:0000:0000:0000:0000:ffff:0a03:0015",
                    Some("IB/RoCE v1")
                ),
                (
                    3,
                    "0000:0000:0000:0000:0000:ffff:0a03:0015",
                    Some("RoCE v2")
                ),
            ]
        );
        assert!(gids.iter().all(|g| g.device == "mlx5_0" && g.port == 1));
        assert!(
            gids.iter()
                .all(|g| g.netdev.as_deref() == Some("ens1f0np0"))
        );
        // InfiniBand ports have no RoCE GIDs to judge.
        assert!(probe(&crate::infra::testutil::fixture_root("ib-node")).is_empty());
    }
}

//! Cluster parts of the table: one row per node, and the connectivity matrix per network.

use super::Style;
use super::sanitize::{cut, shown};
use comfy_table::{ContentArrangement, Table, presets};
use preflight_checks::model::{LinkOutcome, Report};
use std::collections::BTreeMap;
use std::fmt::Write;

fn table(style: Style) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(style.width);
    if !style.color {
        t.force_no_tty();
    }
    t
}

/// Host, address on the chosen network, GPUs, versions and interfaces per node.
pub fn nodes_table(report: &Report, style: Style) -> String {
    let mut t = table(style);
    t.set_header(vec![
        "rank",
        "host",
        "address",
        "GPUs",
        "driver / CUDA / NCCL / torch",
        "interfaces",
    ]);
    let master = report
        .recommendation
        .as_ref()
        .and_then(|r| r.master_addr.clone());
    for n in &report.nodes {
        let f = &n.facts;
        let gpus = if f.gpu.gpus.is_empty() {
            "0".to_string()
        } else {
            format!("{} x {}", f.gpu.gpus.len(), shown(&f.gpu.gpus[0].name))
        };
        let versions = [
            f.gpu.driver_version.as_deref(),
            f.gpu.cuda_driver_version.as_deref(),
            f.nccl.version.as_deref(),
            f.nccl.torch_version.as_deref(),
        ]
        .iter()
        .map(|v| shown(v.unwrap_or("-")))
        .collect::<Vec<_>>()
        .join(" / ");
        let ifaces = f
            .net
            .interfaces
            .iter()
            .filter(|i| i.kind != preflight_checks::model::IfKind::Loopback)
            .map(|i| {
                let addr = i
                    .ipv4
                    .first()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "-".into());
                format!(
                    "{} {} {}",
                    shown(&i.name),
                    addr,
                    if i.up { "up" } else { "down" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let addr = report
            .links
            .iter()
            .find(|l| {
                l.to == n.rank
                    && l.result == LinkOutcome::Ok
                    && (n.rank != 0 || Some(&l.address) == master.as_ref())
            })
            .map(|l| shown(&l.address).into_owned())
            .unwrap_or_else(|| "-".into());
        t.add_row(vec![
            n.rank.to_string(),
            shown(&n.hostname).into_owned(),
            addr,
            gpus,
            versions,
            cut(&ifaces, 4 * super::sanitize::MAX_SHOWN).into_owned(),
        ]);
    }
    format!("{t}\n")
}

/// For each network (by the target's interface and subnet), a from x to matrix of result, RTT and throughput.
pub fn connectivity(report: &Report, style: Style) -> String {
    if report.links.is_empty() {
        return String::new();
    }
    let ranks: Vec<u32> = report.nodes.iter().map(|n| n.rank).collect();
    // Group links by the target address's /24-ish network label: interface name of the target + subnet.
    let mut groups: BTreeMap<String, Vec<&preflight_checks::model::LinkResult>> = BTreeMap::new();
    for l in &report.links {
        groups.entry(network_label(report, l)).or_default().push(l);
    }
    let mut out = String::new();
    for (label, links) in groups {
        let _ = writeln!(
            out,
            "Connectivity on {label} (row: from, column: to; result, RTT p50, throughput):"
        );
        let mut t = table(style);
        let mut header = vec!["from \\ to".to_string()];
        header.extend(ranks.iter().map(|r| r.to_string()));
        t.set_header(header);
        for from in &ranks {
            let mut row = vec![from.to_string()];
            for to in &ranks {
                let cell = if from == to {
                    "·".to_string()
                } else {
                    match links.iter().find(|l| l.from == *from && l.to == *to) {
                        None => "-".to_string(),
                        Some(l) => {
                            let mut c = format!("{:?}", l.result).to_lowercase();
                            if let Some(r) = l.rtt_us {
                                let _ = write!(c, " {r:.0}µs");
                            }
                            if let Some(g) = l.throughput_gbit_s {
                                let _ = write!(c, " {g:.2}Gb/s");
                            }
                            if let Some(m) = l.mtu {
                                let _ = write!(c, " mtu {m}");
                            }
                            c
                        }
                    }
                };
                row.push(cell);
            }
            t.add_row(row);
        }
        let _ = writeln!(out, "{t}");
    }
    out
}

fn network_label(report: &Report, l: &preflight_checks::model::LinkResult) -> String {
    let prefix = report
        .nodes
        .iter()
        .find(|n| n.rank == l.to)
        .and_then(|n| {
            n.facts
                .net
                .interfaces
                .iter()
                .flat_map(|i| i.ipv4.iter())
                .find(|a| a.addr.to_string() == l.address)
        })
        .map(|a| a.prefix)
        .unwrap_or(32);
    match l.address.parse::<std::net::Ipv4Addr>() {
        Ok(ip) => {
            let mask: u32 = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix.min(32))
            };
            format!(
                "{}/{prefix}",
                std::net::Ipv4Addr::from(u32::from(ip) & mask)
            )
        }
        Err(_) => shown(&l.address).into_owned(),
    }
}

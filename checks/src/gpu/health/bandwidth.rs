//! `gpu.bandwidth`: host-to-device and device-to-host copy bandwidth (pinned memory) per GPU
//! against what its PCIe link can carry; peer-to-peer is reported and compared across nodes
//! (`cluster.gpu-health`).

use super::{Probed, about};
use crate::core::{Finding, Fix, GpuNodeHealth, Status};

/// Measured below this share of the link's theoretical rate is a warning.
pub const MIN_SHARE: f64 = 0.5;

/// PCIe payload rate per lane and direction, GB/s, by generation (after line coding).
pub fn per_lane_gb_s(gen_: u32) -> Option<f64> {
    Some(match gen_ {
        1 => 0.25,
        2 => 0.5,
        3 => 0.985,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => return None,
    })
}

/// What the link can carry at its maximum width and generation, GB/s.
pub fn theoretical_gb_s(h: &crate::core::GpuHealth) -> Option<f64> {
    let p = h.pcie?;
    Some(per_lane_gb_s(p.max_gen)? * f64::from(p.max_width))
}

pub fn check(gpus: &[Probed], node: &GpuNodeHealth) -> Vec<Finding> {
    let id = crate::gpu::ids::BANDWIDTH;
    if node.bandwidth.is_empty() {
        let why = node
            .bandwidth_skipped
            .clone()
            .unwrap_or_else(|| "not measured (facts from `preflight facts` or --facts)".into());
        return vec![Finding::new(
            id,
            Status::Skip,
            "gpus",
            format!("GPU copy bandwidth {why}"),
        )];
    }
    let mut out = Vec::new();
    for (g, h) in gpus {
        let Some(top) = theoretical_gb_s(h) else {
            continue;
        };
        for m in node
            .bandwidth
            .iter()
            .filter(|m| m.gpu == g.index && m.kind != "p2p")
        {
            if m.gb_s >= top * MIN_SHARE {
                continue;
            }
            out.push(
                about(
                    id,
                    Status::Warn,
                    g,
                    format!(
                        "GPU {} copies {} at {:.1} GB/s, {:.0}% of its PCIe link's {:.1} GB/s \
                         (under {:.0}%)",
                        g.index,
                        direction(&m.kind),
                        m.gb_s,
                        100.0 * m.gb_s / top,
                        top,
                        100.0 * MIN_SHARE
                    ),
                )
                .with("kind", &m.kind)
                .with("gb_s", m.gb_s)
                .with("theoretical_gb_s", top)
                .with("bytes", m.bytes)
                .fix(
                    Fix::new(
                        "Look for a degraded PCIe link (gpu.pcie-link), a GPU on the far CPU \
                         socket, or IOMMU/ACS settings; rerun after fixing",
                    )
                    .command(format!("nvidia-smi -q -i {} -d PCIE", g.index))
                    .command("nvidia-smi topo -m"),
                ),
            );
        }
    }
    // Peer-to-peer: a pair under half the node's median (three pairs or more) has a degraded
    // path (an NVLink down, a PCIe switch at low width, P2P routed through the CPU).
    let p2p: Vec<&crate::core::GpuBandwidth> =
        node.bandwidth.iter().filter(|m| m.kind == "p2p").collect();
    let mut rates: Vec<f64> = p2p.iter().map(|m| m.gb_s).collect();
    if let Some(mid) = crate::infra::stats::median(&mut rates).filter(|_| p2p.len() >= 3) {
        for m in p2p.iter().filter(|m| m.gb_s < mid * MIN_SHARE) {
            let peer = m.peer.map_or("?".to_string(), |p| p.to_string());
            let summary = format!(
                "GPU {} copies peer-to-peer to GPU {peer} at {:.1} GB/s, under {:.0}% of this \
                 node's median {mid:.1} GB/s: their path is degraded (an NVLink down, a PCIe \
                 switch at a lower width, or P2P through the CPU)",
                m.gpu,
                m.gb_s,
                100.0 * MIN_SHARE
            );
            // The GPU named as every GPU finding names it (index, bus id, UUID, model).
            let finding = match gpus.iter().find(|(g, _)| g.index == m.gpu) {
                Some((g, _)) => about(id, Status::Warn, g, summary),
                None => Finding::new(id, Status::Warn, format!("GPU {}", m.gpu), summary),
            };
            let fix = Fix::new(
                "Compare the pair's link with the others and look for an inactive NVLink or a \
                 degraded PCIe path",
            )
            .command("nvidia-smi topo -m")
            .command("nvidia-smi nvlink --status");
            out.push(
                finding
                    .with("kind", "p2p")
                    .with("gpu", m.gpu)
                    .with("peer", m.peer)
                    .with("gb_s", m.gb_s)
                    .with("node_median_gb_s", mid)
                    .fix(fix),
            );
        }
    }
    if out.is_empty() {
        let list: Vec<String> = node
            .bandwidth
            .iter()
            .map(|m| match m.peer {
                Some(p) => format!("GPU {}->{} p2p {:.1} GB/s", m.gpu, p, m.gb_s),
                None => format!("GPU {} {} {:.1} GB/s", m.gpu, m.kind, m.gb_s),
            })
            .collect();
        out.push(
            Finding::new(
                id,
                Status::Pass,
                "gpus",
                format!("copy bandwidth as the links allow: {}", list.join(", ")),
            )
            .with("measurements", &node.bandwidth),
        );
    }
    out
}

pub(crate) fn direction(kind: &str) -> &'static str {
    match kind {
        "h2d" => "host-to-device",
        "d2h" => "device-to-host",
        _ => "peer-to-peer",
    }
}

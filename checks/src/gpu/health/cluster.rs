//! `cluster.gpu-health`: the node whose GPU health differs from the other nodes with the same
//! GPU model (a GPU at x8 where the others train x16, fewer NVLinks, no nvidia_peermem where
//! the others have it, copies far below the model's median). Models are judged apart, so an
//! A100 beside a V100 beside a T4 is never an outlier for being a different GPU.

use crate::core::ClusterInput;
use crate::core::{Finding, Fix, NodeFacts, Status};
use crate::infra::stats::median;
use std::collections::BTreeMap;

/// Copy bandwidth under this share of the model's median across the cluster is odd.
pub const BANDWIDTH_SHARE: f64 = 0.7;

/// One GPU of one node, with what is compared.
struct Sample<'a> {
    rank: u32,
    host: &'a str,
    gpu: u32,
    width: Option<u32>,
    nvlinks: Option<usize>,
    /// Copy rates measured from this GPU: host-to-device, device-to-host, peer-to-peer.
    h2d: Option<f64>,
    d2h: Option<f64>,
    p2p: Option<f64>,
}

/// One kind of copy rate of a sample.
type Rate = fn(&Sample) -> Option<f64>;

/// One odd thing about one node.
#[derive(serde::Serialize)]
struct Odd {
    rank: u32,
    host: String,
    what: String,
}

pub fn gpu_health(input: &ClusterInput) -> Vec<Finding> {
    let id = crate::gpu::ids::GPU_HEALTH;
    let probed: Vec<(u32, &NodeFacts)> = input
        .nodes
        .iter()
        .filter(|(_, f)| f.gpu.gpus.iter().any(|g| g.health.is_some()))
        .map(|(r, f)| (*r, *f))
        .collect();
    if probed.is_empty() {
        return Vec::new();
    }
    if probed.len() < 2 {
        return vec![Finding::new(
            id,
            Status::Skip,
            "gpus",
            "fewer than two nodes report GPU health: nothing to compare",
        )];
    }
    let by_model = samples_by_model(&probed);
    let mut odd: Vec<Odd> = Vec::new();
    for (model, samples) in &by_model {
        if samples
            .iter()
            .map(|s| s.rank)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            < 2
        {
            continue;
        }
        odd_links(model, samples, &mut odd);
        odd_copies(model, samples, &mut odd);
    }
    odd_peermem(&probed, &mut odd);
    let models: Vec<&str> = by_model.keys().copied().collect();
    verdict(probed.len(), &models, odd)
}

/// Every GPU that reports health, by model, with its link widths, NVLinks and copy rates.
fn samples_by_model<'a>(probed: &[(u32, &'a NodeFacts)]) -> BTreeMap<&'a str, Vec<Sample<'a>>> {
    let mut by_model: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
    for (rank, f) in probed {
        for g in &f.gpu.gpus {
            let Some(h) = &g.health else { continue };
            let rate = |kind: &str| {
                f.gpu.node_health.as_ref().and_then(|n| {
                    n.bandwidth
                        .iter()
                        .find(|m| m.gpu == g.index && m.kind == kind)
                        .map(|m| m.gb_s)
                })
            };
            let (h2d, d2h, p2p) = (rate("h2d"), rate("d2h"), rate("p2p"));
            by_model.entry(g.name.as_str()).or_default().push(Sample {
                rank: *rank,
                host: f.hostname.as_str(),
                gpu: g.index,
                width: h.pcie.map(|p| p.current_width),
                nvlinks: (!h.nvlinks.is_empty())
                    .then(|| h.nvlinks.iter().filter(|l| l.active).count()),
                h2d,
                d2h,
                p2p,
            });
        }
    }
    by_model
}

/// GPUs of one model at a narrower PCIe link or with fewer active NVLinks than most.
fn odd_links(model: &str, samples: &[Sample], odd: &mut Vec<Odd>) {
    if let Some(usual) = most_common(samples.iter().filter_map(|s| s.width)) {
        for s in samples
            .iter()
            .filter(|s| s.width.is_some_and(|w| w < usual))
        {
            odd.push(Odd {
                rank: s.rank,
                host: s.host.into(),
                what: format!(
                    "GPU {} at PCIe x{} where the other {model} train x{usual}",
                    s.gpu,
                    s.width.unwrap_or_default()
                ),
            });
        }
    }
    if let Some(usual) = most_common(samples.iter().filter_map(|s| s.nvlinks)) {
        for s in samples
            .iter()
            .filter(|s| s.nvlinks.is_some_and(|n| n < usual))
        {
            odd.push(Odd {
                rank: s.rank,
                host: s.host.into(),
                what: format!(
                    "GPU {} has {} active NVLinks where the other {model} have {usual}",
                    s.gpu,
                    s.nvlinks.unwrap_or_default()
                ),
            });
        }
    }
}

/// Each kind of copy against the median of the same model's GPUs across the nodes.
fn odd_copies(model: &str, samples: &[Sample], odd: &mut Vec<Odd>) {
    let kinds: [(&str, Rate); 3] = [("h2d", |s| s.h2d), ("d2h", |s| s.d2h), ("p2p", |s| s.p2p)];
    for (kind, rate) in kinds {
        let kind = crate::gpu::health::bandwidth::direction(kind);
        let mut rates: Vec<f64> = samples.iter().filter_map(rate).collect();
        let enough = rates.len() >= 2;
        let Some(mid) = median(&mut rates).filter(|_| enough) else {
            continue;
        };
        for s in samples
            .iter()
            .filter(|s| rate(s).is_some_and(|r| r < mid * BANDWIDTH_SHARE))
        {
            odd.push(Odd {
                rank: s.rank,
                host: s.host.into(),
                what: format!(
                    "GPU {} copies {kind} at {:.1} GB/s, under {:.0}% of the {model} \
                     median {mid:.1} GB/s",
                    s.gpu,
                    rate(s).unwrap_or_default(),
                    100.0 * BANDWIDTH_SHARE
                ),
            });
        }
    }
}

/// GPUDirect RDMA: nodes with RDMA NICs but no peermem, where other such nodes have it.
fn odd_peermem(probed: &[(u32, &NodeFacts)], odd: &mut Vec<Odd>) {
    let rdma: Vec<&(u32, &NodeFacts)> = probed
        .iter()
        .filter(|(_, f)| !f.ib.devices.is_empty())
        .collect();
    let has = |f: &NodeFacts| {
        f.gpu
            .node_health
            .as_ref()
            .is_some_and(|n| n.peermem_module.is_some())
    };
    if rdma.iter().any(|(_, f)| has(f)) {
        for (rank, f) in rdma.iter().filter(|(_, f)| !has(f)) {
            odd.push(Odd {
                rank: *rank,
                host: f.hostname.clone(),
                what: "nvidia_peermem not loaded where the other InfiniBand nodes have it: no \
                       GPUDirect RDMA"
                    .into(),
            });
        }
    }
}

/// The pass over `nodes` nodes, or the warning naming each odd node and what is odd about it.
fn verdict(nodes: usize, models: &[&str], mut odd: Vec<Odd>) -> Vec<Finding> {
    let id = crate::gpu::ids::GPU_HEALTH;
    if odd.is_empty() {
        return vec![
            Finding::new(
                id,
                Status::Pass,
                "gpus",
                format!(
                    "GPU health agrees across {} nodes, judged per model ({})",
                    nodes,
                    models.join(", ")
                ),
            )
            .with("nodes", nodes)
            .with("models", models),
        ];
    }
    odd.sort_by_key(|o| o.rank);
    let lines: Vec<String> = odd
        .iter()
        .map(|o| format!("{} (rank {}): {}", o.host, o.rank, o.what))
        .collect();
    let mut hosts: Vec<&str> = odd.iter().map(|o| o.host.as_str()).collect();
    hosts.dedup();
    vec![
        Finding::new(
            id,
            Status::Warn,
            "gpus",
            format!(
                "{} node(s) differ from the others with the same GPUs: {}; the job runs at the \
                 slowest node's pace",
                hosts.len(),
                lines.join("; ")
            ),
        )
        .with("odd", &odd)
        .with("models", models)
        .fix(
            Fix::new(
                "Fix the named node (its own gpu.* findings say how), or leave it out of the job",
            )
            .command(format!("srun --exclude={} ...", hosts.join(",")))
            .command("preflight check -v   # on the named node"),
        ),
    ]
}

/// The value most samples have (the larger one on a tie).
fn most_common<T: Ord + Copy>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(v, _)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{GpuBandwidth, GpuHealth, GpuNodeHealth, IbDevice, NvLinkState, PcieLink};
    use crate::testkit::*;

    fn health(width: u32, links: usize) -> GpuHealth {
        GpuHealth {
            pcie: Some(PcieLink {
                current_width: width,
                max_width: 16,
                current_gen: 5,
                max_gen: 5,
            }),
            nvlinks: (0..18)
                .map(|l| NvLinkState {
                    link: l,
                    active: (l as usize) < links,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn probed(c: &mut Cluster, model: &str, links: usize) {
        for f in &mut c.facts {
            for g in &mut f.gpu.gpus {
                g.name = model.into();
                g.health = Some(health(16, links));
            }
            f.ib.devices = vec![IbDevice {
                name: "mlx5_0".into(),
                ..Default::default()
            }];
            f.gpu.node_health = Some(GpuNodeHealth {
                peermem_module: Some("nvidia_peermem".into()),
                bandwidth: (0..8)
                    .map(|i| GpuBandwidth {
                        kind: "h2d".into(),
                        gpu: i,
                        gb_s: 52.0,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            });
        }
    }

    #[test]
    fn healthy_probed_cluster_passes_and_unprobed_one_has_no_finding() {
        assert!(with_id(&Cluster::healthy(3).findings(), crate::gpu::ids::GPU_HEALTH).is_empty());
        let mut c = Cluster::healthy(3);
        probed(&mut c, "NVIDIA H100 80GB HBM3", 18);
        let f = only(&c.findings(), crate::gpu::ids::GPU_HEALTH).clone();
        assert_eq!(f.status, Status::Pass, "{f:#?}");
    }

    #[test]
    fn a_node_whose_peer_to_peer_copies_are_slow_is_named() {
        let mut c = Cluster::healthy(4);
        probed(&mut c, "NVIDIA H100 80GB HBM3", 18);
        for (r, f) in c.facts.iter_mut().enumerate() {
            let n = f.gpu.node_health.as_mut().unwrap();
            n.bandwidth.push(GpuBandwidth {
                kind: "p2p".into(),
                gpu: 0,
                peer: Some(1),
                gb_s: if r == 2 { 9.0 } else { 250.0 },
                ..Default::default()
            });
        }
        let f = only(&c.findings(), crate::gpu::ids::GPU_HEALTH).clone();
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert!(
            f.summary.contains("peer-to-peer at 9.0 GB/s"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn names_the_node_with_a_gpu_at_x8_and_the_one_without_peermem() {
        let mut c = Cluster::healthy(4);
        probed(&mut c, "NVIDIA H100 80GB HBM3", 18);
        c.facts[2].gpu.gpus[3].health = Some(health(8, 18));
        if let Some(n) = c.facts[3].gpu.node_health.as_mut() {
            n.peermem_module = None;
        }
        let f = only(&c.findings(), crate::gpu::ids::GPU_HEALTH).clone();
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary.contains("node03 (rank 2): GPU 3 at PCIe x8"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("node04 (rank 3): nvidia_peermem"),
            "{}",
            f.summary
        );
        assert_eq!(commands(&f)[0], "srun --exclude=node03,node04 ...");
    }

    #[test]
    fn slow_copies_and_a_missing_nvlink_are_named() {
        let mut c = Cluster::healthy(3);
        probed(&mut c, "NVIDIA H100 80GB HBM3", 18);
        c.facts[1].gpu.gpus[5].health = Some(health(16, 17));
        if let Some(n) = c.facts[0].gpu.node_health.as_mut() {
            n.bandwidth[2].gb_s = 20.0;
        }
        let f = only(&c.findings(), crate::gpu::ids::GPU_HEALTH).clone();
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary.contains("GPU 5 has 17 active NVLinks"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("GPU 2 copies host-to-device at 20.0"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn mixed_models_are_judged_per_model() {
        let mut c = Cluster::healthy(3);
        probed(&mut c, "NVIDIA A100-SXM4-80GB", 12);
        // A V100 node (6 NVLinks, gen3) and a T4 node (no NVLink, x16) beside the A100 one.
        for g in &mut c.facts[1].gpu.gpus {
            g.name = "Tesla V100-SXM2-32GB".into();
            g.health = Some(health(16, 6));
        }
        for g in &mut c.facts[2].gpu.gpus {
            g.name = "Tesla T4".into();
            g.health = Some(GpuHealth {
                nvlinks: Vec::new(),
                ..health(8, 0)
            });
        }
        if let Some(n) = c.facts[2].gpu.node_health.as_mut() {
            for m in &mut n.bandwidth {
                m.gb_s = 12.0;
            }
        }
        let f = only(&c.findings(), crate::gpu::ids::GPU_HEALTH).clone();
        assert_eq!(f.status, Status::Pass, "{f:#?}");
    }
}

//! `gpu.nvlink`: an NVLink that should be up and is not. A link counts as expected when the
//! same model's other GPUs on the node have more active links (a PCIe card with no bridge has
//! none anywhere, and that is fine). Across nodes, `cluster.gpu-health` compares the counts.

use super::{Probed, about};
use crate::core::{Finding, Fix, Status};
use std::collections::BTreeMap;

pub fn check(gpus: &[Probed]) -> Vec<Finding> {
    let id = crate::gpu::ids::NVLINK;
    let with_links: Vec<&Probed> = gpus.iter().filter(|(_, h)| !h.nvlinks.is_empty()).collect();
    if with_links.is_empty() {
        let why: Vec<String> = gpus
            .iter()
            .filter_map(|(g, h)| {
                h.unsupported
                    .get("nvlink")
                    .map(|r| format!("GPU {}: {r}", g.index))
            })
            .collect();
        return vec![
            Finding::new(id, Status::Skip, "gpus", "no GPU here reports NVLink")
                .with("not_reported", why),
        ];
    }
    // Most active links per model on this node.
    let mut best: BTreeMap<&str, usize> = BTreeMap::new();
    for (g, h) in &with_links {
        let n = active(h);
        let e = best.entry(g.name.as_str()).or_default();
        *e = (*e).max(n);
    }
    let mut out = Vec::new();
    for (g, h) in &with_links {
        let expected = best.get(g.name.as_str()).copied().unwrap_or(0);
        let n = active(h);
        if n >= expected {
            continue;
        }
        let down: Vec<u32> = h
            .nvlinks
            .iter()
            .filter(|l| !l.active)
            .map(|l| l.link)
            .collect();
        out.push(
            about(
                id,
                Status::Fail,
                g,
                format!(
                    "GPU {} has {n} of {expected} NVLinks active (link(s) {} down) while the \
                     node's other {} GPUs have {expected}: NCCL routes around it through PCIe \
                     or fails to build its rings",
                    g.index,
                    join(&down),
                    g.name
                ),
            )
            .with("active", n)
            .with("expected", expected)
            .with("inactive_links", &down)
            .fix(
                Fix::new(
                    "Check the NVLink state and error counters; reset the GPU or reboot, and \
                     have the baseboard serviced if the link stays down",
                )
                .command(format!("nvidia-smi nvlink --status -i {}", g.index))
                .command(format!("nvidia-smi nvlink --errorcounters -i {}", g.index))
                .command(format!("sudo nvidia-smi -r -i {}", g.index)),
            ),
        );
    }
    if out.is_empty() {
        let counts: Vec<String> = best
            .iter()
            .map(|(m, n)| format!("{n} active per {m}"))
            .collect();
        out.push(
            Finding::new(
                id,
                Status::Pass,
                "gpus",
                format!(
                    "every GPU has all its NVLinks active ({})",
                    counts.join(", ")
                ),
            )
            .with("active_per_model", &best),
        );
    }
    out
}

pub fn active(h: &crate::core::GpuHealth) -> usize {
    h.nvlinks.iter().filter(|l| l.active).count()
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

//! GPU node health as deep as DCGM diag level 1 (issue 22): one module per concern, each a
//! pure function of the facts. Nodes whose facts carry no health data (no GPU, NVML failed,
//! facts of an older release) get no findings here: `gpu.nvml` already says why.

pub mod cluster;

mod acs;
pub(crate) mod bandwidth;
mod clocks;
mod fabric;
mod memory;
mod nvlink;
mod pcie;
mod peermem;
mod xid;
pub mod xid_actions;

#[cfg(test)]
mod fixtures_test;

pub use bandwidth::theoretical_gb_s;
pub use xid::{CRITICAL_XIDS, xid_meaning};

use crate::core::CheckContext;
use crate::core::{Finding, Gpu, GpuHealth, GpuNodeHealth, NodeFacts, Status};

/// Default window for XIDs in the kernel log (`--xid-window`).
pub const DEFAULT_XID_WINDOW_S: u64 = 2 * 3600;

/// A GPU with its health data.
pub(crate) type Probed<'a> = (&'a Gpu, &'a GpuHealth);

pub fn check(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    if facts.gpu.nvml_error.is_some() {
        return Vec::new();
    }
    let gpus: Vec<Probed> = facts
        .gpu
        .gpus
        .iter()
        .filter_map(|g| g.health.as_ref().map(|h| (g, h)))
        .collect();
    if gpus.is_empty() {
        return Vec::new();
    }
    let empty = GpuNodeHealth::default();
    let node = facts.gpu.node_health.as_ref().unwrap_or(&empty);
    let mut out = Vec::new();
    out.extend(pcie::link(&gpus));
    out.extend(pcie::replay(&gpus));
    out.extend(xid::check(
        &facts.gpu.gpus,
        node,
        ctx.xid_window_s.unwrap_or(DEFAULT_XID_WINDOW_S),
    ));
    out.extend(memory::ecc(&gpus));
    out.extend(memory::row_remap(&gpus));
    out.extend(memory::retired_pages(&gpus));
    out.extend(nvlink::check(&gpus));
    out.push(fabric::check(&gpus, node));
    out.push(peermem::check(facts, node));
    out.push(acs::check(node));
    out.extend(clocks::events(&gpus));
    out.extend(clocks::persistence(&gpus));
    out.extend(bandwidth::check(&gpus, node));
    out
}

/// Whether NCCL will use GPUDirect RDMA over InfiniBand, for the advice's reasons: None when
/// no node reports GPU health (no GPU, facts of an older release).
pub fn gpudirect_reason(nodes: &[&NodeFacts]) -> Option<String> {
    let probed: Vec<&NodeFacts> = nodes
        .iter()
        .copied()
        .filter(|f| f.gpu.node_health.is_some())
        .collect();
    if probed.is_empty() {
        return None;
    }
    let without: Vec<&str> = probed
        .iter()
        .filter(|f| {
            f.gpu
                .node_health
                .as_ref()
                .is_some_and(|n| n.peermem_module.is_none())
        })
        .map(|f| f.hostname.as_str())
        .collect();
    Some(if without.is_empty() {
        "GPUDirect RDMA: nvidia_peermem is loaded, so NCCL will move GPU memory over \
         InfiniBand directly (GDR)"
            .to_string()
    } else {
        format!(
            "GPUDirect RDMA: nvidia_peermem is not loaded on {}, so NCCL will stage inter-node \
             traffic through host memory there (see gpu.peermem: sudo modprobe nvidia_peermem)",
            without.join(", ")
        )
    })
}

/// "GPU 3 (0000:3b:00.0)".
pub(crate) fn gpu_subject(g: &Gpu) -> String {
    match crate::gpu::probe::node::sysfs_bdf(&g.pci_bus_id) {
        Some(bdf) => format!("GPU {} ({bdf})", g.index),
        None => format!("GPU {}", g.index),
    }
}

/// A finding about one GPU, with the GPU's index, bus id, UUID and model as evidence.
pub(crate) fn about(
    id: crate::core::FindingId,
    status: Status,
    g: &Gpu,
    summary: String,
) -> Finding {
    Finding::new(id, status, gpu_subject(g), summary)
        .with("gpu", g.index)
        .with("pci_bus_id", &g.pci_bus_id)
        .with("uuid", &g.uuid)
        .with("model", &g.name)
}

/// What one judgment made of one GPU.
pub(crate) enum Judged {
    Fine,
    /// Could not judge: NVML's reason.
    Unknown(String),
    Problem(Finding),
}

/// The problems, else one pass over the GPUs judged, else one skip with NVML's reasons.
pub(crate) fn per_gpu(
    id: crate::core::FindingId,
    what: &str,
    gpus: &[Probed],
    judge: impl Fn(&Gpu, &GpuHealth) -> Judged,
) -> Vec<Finding> {
    let mut problems = Vec::new();
    let mut unknown = Vec::new();
    let mut fine = 0usize;
    for (g, h) in gpus {
        match judge(g, h) {
            Judged::Fine => fine += 1,
            Judged::Unknown(why) => unknown.push(format!("GPU {}: {why}", g.index)),
            Judged::Problem(f) => problems.push(f),
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    if fine == 0 {
        return vec![
            Finding::new(
                id,
                Status::Skip,
                "gpus",
                format!("{what}: not reported ({})", unknown.join("; ")),
            )
            .with("not_judged", &unknown),
        ];
    }
    let mut summary = format!("{what}: fine on {fine} GPU(s)");
    if !unknown.is_empty() {
        summary.push_str(&format!("; not reported on {}", unknown.join("; ")));
    }
    vec![
        Finding::new(id, Status::Pass, "gpus", summary)
            .with("gpus_judged", fine)
            .with("not_judged", &unknown),
    ]
}

/// NVML's reason a query was not answered, or a plain "not reported".
pub(crate) fn why_missing(h: &GpuHealth, query: &str) -> String {
    h.unsupported
        .get(query)
        .cloned()
        .unwrap_or_else(|| "not reported".into())
}

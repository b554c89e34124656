//! `gpu.peermem`: InfiniBand/RoCE and GPUs on the node but no GPUDirect RDMA module
//! (`nvidia_peermem`, or the older `nv_peer_mem`): NCCL stages every transfer through host
//! memory.

use crate::model::{Finding, Fix, GpuNodeHealth, NodeFacts, Status};

pub fn check(facts: &NodeFacts, node: &GpuNodeHealth) -> Finding {
    let id = "gpu.peermem";
    let ports = facts.ib.active_ports();
    if facts.ib.devices.is_empty() {
        return Finding::new(
            id,
            Status::Skip,
            "nvidia_peermem",
            "no InfiniBand/RoCE device: GPUDirect RDMA does not apply",
        );
    }
    let hcas: Vec<String> = facts.ib.devices.iter().map(|d| d.name.clone()).collect();
    match &node.peermem_module {
        Some(m) => Finding::new(
            id,
            Status::Pass,
            "nvidia_peermem",
            format!(
                "{m} is loaded: NCCL can use GPUDirect RDMA over {}",
                hcas.join(", ")
            ),
        )
        .with("module", m)
        .with("hcas", &hcas),
        None => Finding::new(
            id,
            Status::Warn,
            "nvidia_peermem",
            format!(
                "InfiniBand/RoCE ({}, {} active port(s)) and GPUs here, but nvidia_peermem is \
                 not loaded: NCCL will not use GPUDirect RDMA (its log shows `GDR 0`) unless \
                 the kernel and NCCL use DMA-BUF instead, and stages every transfer through \
                 host memory, often costing a third or more of the inter-node bandwidth",
                hcas.join(", "),
                ports.len()
            ),
        )
        .with("module", None::<String>)
        .with("hcas", &hcas)
        .with("active_ports", ports.len())
        .fix(
            Fix::new("Load the module that ships with the NVIDIA driver, and load it at boot")
                .command("sudo modprobe nvidia_peermem")
                .command("echo nvidia_peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf")
                .command("NCCL_DEBUG=INFO torchrun ... 2>&1 | grep -i 'GDR'"),
        ),
    }
}

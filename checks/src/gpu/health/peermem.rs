//! `gpu.peermem`: InfiniBand/RoCE and GPUs on the node but no GPUDirect RDMA path: neither the
//! module (`nvidia_peermem`, or the older `nv_peer_mem`) nor DMA-BUF (the open NVIDIA kernel
//! module on Linux 5.12+, `NCCL_DMABUF_ENABLE` not 0): NCCL stages every transfer through host
//! memory.

use crate::core::{Finding, Fix, GpuNodeHealth, NodeFacts, Status};

pub fn check(facts: &NodeFacts, node: &GpuNodeHealth) -> Finding {
    let id = crate::gpu::ids::PEERMEM;
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
    if node.peermem_module.is_none()
        && let Some(why) = dmabuf(facts, node)
    {
        return Finding::new(id, Status::Pass, "nvidia_peermem", why)
            .with("module", None::<String>)
            .with("dmabuf", true)
            .with("hcas", &hcas);
    }
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

/// Linux version as (major, minor) from `uname -r` text ("5.15.0-91-generic").
fn kernel_version(kernel: &str) -> Option<(u32, u32)> {
    let mut parts = kernel.trim().split(['.', '-']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Why GPUDirect RDMA works through DMA-BUF here, when it does: the open NVIDIA kernel module,
/// Linux 5.12 or newer, and NCCL_DMABUF_ENABLE not 0 (NCCL 2.19+ then registers GPU memory with
/// the HCA through DMA-BUF, no nvidia_peermem needed).
pub fn dmabuf(facts: &NodeFacts, node: &GpuNodeHealth) -> Option<String> {
    if node.nvidia_open_module != Some(true) {
        return None;
    }
    let kernel = facts.kernel.as_deref()?;
    if kernel_version(kernel)? < (5, 12) {
        return None;
    }
    if facts
        .env
        .get("NCCL_DMABUF_ENABLE")
        .is_some_and(|v| v.trim() == "0")
    {
        return None;
    }
    Some(format!(
        "nvidia_peermem is not loaded, but GPUDirect RDMA works through DMA-BUF: the open NVIDIA \
         kernel module on Linux {kernel} (NCCL 2.19+ uses it unless NCCL_DMABUF_ENABLE=0)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IbDevice, IbFacts};

    fn facts(kernel: &str, dmabuf_env: Option<&str>) -> NodeFacts {
        let mut f = NodeFacts {
            kernel: Some(kernel.into()),
            ib: IbFacts {
                devices: vec![IbDevice {
                    name: "mlx5_0".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            ..Default::default()
        };
        if let Some(v) = dmabuf_env {
            f.env.insert("NCCL_DMABUF_ENABLE".into(), v.into());
        }
        f
    }

    #[test]
    fn dma_buf_stands_in_for_peermem_on_the_open_module_and_a_recent_kernel() {
        let open = GpuNodeHealth {
            nvidia_open_module: Some(true),
            ..Default::default()
        };
        let f = check(&facts("6.8.0-45-generic", None), &open);
        assert_eq!(f.status, Status::Pass);
        assert!(f.summary.contains("DMA-BUF"), "{}", f.summary);
        assert_eq!(
            check(&facts("6.8.0", Some("0")), &open).status,
            Status::Warn
        );
        assert_eq!(
            check(&facts("5.4.0-150-generic", None), &open).status,
            Status::Warn
        );
        let proprietary = GpuNodeHealth {
            nvidia_open_module: Some(false),
            ..Default::default()
        };
        assert_eq!(
            check(&facts("6.8.0", None), &proprietary).status,
            Status::Warn
        );
        assert_eq!(kernel_version("garbage"), None);
    }
}

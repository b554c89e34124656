//! Collects every fact about this node: each concern's probe (the only code that touches the OS;
//! each returns plain facts and never panics), put together into [`NodeFacts`].

use crate::core::NodeFacts;
use crate::infra::root::Root;
use std::collections::BTreeMap;

/// What the probes need from the caller.
#[derive(Clone, Debug, Default)]
pub struct ProbeOptions {
    /// The master port to test for binding.
    pub master_port: u16,
    /// The process environment (all variables), for the probes that read it.
    pub env: BTreeMap<String, String>,
    /// Skip NVML entirely (tests, `--no-gpu`).
    pub skip_gpu: bool,
}

/// Collects every fact about this node.
pub fn collect(root: &Root, opts: &ProbeOptions) -> NodeFacts {
    let (hostname, boot_id, kernel) = crate::env::probe::identity(root);
    let host_id = crate::env::probe::host_id(&opts.env, &hostname, boot_id.as_deref());
    let gpu = if opts.skip_gpu {
        crate::core::GpuFacts {
            nvml_error: Some("GPU probe skipped (--no-gpu)".into()),
            ..Default::default()
        }
    } else {
        crate::gpu::probe::probe_at(root)
    };
    let mut ib = crate::rdma::probe::ib::probe(root);
    if !ib.devices.is_empty() {
        ib.gpu_pci_paths = crate::rdma::probe::paths::gpu_paths(root, &gpu.gpus);
    }
    let mut gpu = gpu;
    if gpu.nvml_error.is_none() && gpu.gpus.iter().any(|g| g.health.is_some()) {
        gpu.node_health = Some(crate::gpu::probe::node::probe(root, &gpu.gpus, &ib));
    }
    NodeFacts {
        sys: crate::sys::probe::probe(root, &hostname),
        scale: crate::sys::scale_probe::probe(root),
        hostname,
        host_id,
        boot_id,
        kernel,
        net: crate::net::probe::probe(root),
        ib,
        gpu,
        nccl: crate::nccl::probe::probe(root, &opts.env),
        ports: crate::ports::probe::probe(root, opts.master_port),
        firewall: crate::firewall::probe::probe(root),
        env: crate::env::probe::relevant(&opts.env),
        master_resolution: None,
        joined_from: None,
        idle_test: None,
        history: None,
    }
}

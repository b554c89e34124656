//! Probes: the only code that touches the OS. Each returns plain facts and never panics.

pub mod env;
pub mod firewall;
pub mod gid;
pub mod gpu;
pub mod gpu_load;
pub mod gpu_node;
mod gpu_nvml_health;
pub mod gpu_snapshot;
pub mod ib;
pub mod kmsg;
pub mod name_origin;
pub mod nccl;
pub mod nccl_shm;
pub mod net;
pub mod ports;
pub mod rdma;
pub mod scale;
pub mod sys;

use crate::model::NodeFacts;
use crate::root::Root;
use std::collections::BTreeMap;

/// Parses a sysfs hex attribute such as `0x1003` or `1003`; None on garbage.
pub fn parse_hex_u32(s: &str) -> Option<u32> {
    let t = s.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}

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
    let (hostname, boot_id, kernel) = env::identity(root);
    let host_id = env::host_id(&opts.env, &hostname, boot_id.as_deref());
    let gpu = if opts.skip_gpu {
        crate::model::GpuFacts {
            nvml_error: Some("GPU probe skipped (--no-gpu)".into()),
            ..Default::default()
        }
    } else {
        gpu::probe_at(root)
    };
    let mut ib = ib::probe(root);
    if !ib.devices.is_empty() {
        ib.gpu_pci_paths = rdma::gpu_paths(root, &gpu.gpus);
    }
    let mut gpu = gpu;
    if gpu.nvml_error.is_none() && gpu.gpus.iter().any(|g| g.health.is_some()) {
        gpu.node_health = Some(gpu_node::probe(root, &gpu.gpus, &ib));
    }
    NodeFacts {
        sys: sys::probe(root, &hostname),
        scale: scale::probe(root),
        hostname,
        host_id,
        boot_id,
        kernel,
        net: net::probe(root),
        ib,
        gpu,
        nccl: nccl::probe(root, &opts.env),
        ports: ports::probe(root, opts.master_port),
        firewall: firewall::probe(root),
        env: env::relevant(&opts.env),
        master_resolution: None,
        joined_from: None,
        idle_test: None,
    }
}

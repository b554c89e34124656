//! `gpu.fabric-manager`: NVSwitch systems (HGX/DGX A100/H100) need the fabric manager running,
//! or CUDA init fails or hangs; GB200-class GPUs report their fabric registration through NVML.

use super::Probed;
use crate::core::{Finding, Fix, GpuNodeHealth, Status};

pub fn check(gpus: &[Probed], node: &GpuNodeHealth) -> Finding {
    let id = crate::gpu::ids::FABRIC_MANAGER;
    let bad_fabric: Vec<String> = gpus
        .iter()
        .filter_map(|(g, h)| {
            let f = h.fabric.as_ref()?;
            (f.state != "completed" || f.status != "Success")
                .then(|| format!("GPU {}: state {}, status {}", g.index, f.state, f.status))
        })
        .collect();
    let degraded: Vec<u32> = gpus
        .iter()
        .filter(|(_, h)| h.fabric.as_ref().and_then(|f| f.degraded_bandwidth) == Some(true))
        .map(|(g, _)| g.index)
        .collect();
    let fm_fix = || {
        Fix::new(
            "Start the fabric manager (its version must equal the driver's) and enable it at \
             boot; then confirm every GPU's fabric state is Completed",
        )
        .command("sudo systemctl enable --now nvidia-fabricmanager")
        .command("systemctl status nvidia-fabricmanager")
        .command("nvidia-smi -q | grep -A3 -i fabric")
    };
    if node.nvswitches > 0 && node.fabric_manager_running == Some(false) {
        return Finding::new(
            id,
            Status::Fail,
            "nvidia-fabricmanager",
            format!(
                "this node has {} NVSwitch(es) but the fabric manager (nv-fabricmanager) is \
                 not running: CUDA init fails (cudaErrorSystemNotReady) or hangs, and NCCL \
                 cannot use NVLink",
                node.nvswitches
            ),
        )
        .with("nvswitches", node.nvswitches)
        .with("fabric_manager_running", false)
        .with("gpu_fabric", &bad_fabric)
        .fix(fm_fix());
    }
    if !bad_fabric.is_empty() {
        return Finding::new(
            id,
            Status::Fail,
            "gpu fabric",
            format!(
                "GPU fabric registration is not complete ({}): CUDA init fails or waits for \
                 the fabric",
                bad_fabric.join("; ")
            ),
        )
        .with("gpu_fabric", &bad_fabric)
        .with("nvswitches", node.nvswitches)
        .fix(fm_fix());
    }
    if !degraded.is_empty() {
        return Finding::new(
            id,
            Status::Warn,
            "gpu fabric",
            format!("the NVLink fabric reports degraded bandwidth on GPU(s) {degraded:?}"),
        )
        .with("degraded_gpus", &degraded)
        .fix(
            Fix::new("Check the NVLink switch trays and cables of this rack")
                .command("nvidia-smi -q | grep -A6 -i fabric"),
        );
    }
    let has_fabric = gpus.iter().any(|(_, h)| h.fabric.is_some());
    if node.nvswitches == 0 && !has_fabric {
        return Finding::new(
            id,
            Status::Skip,
            "nvidia-fabricmanager",
            "no NVSwitch here: no fabric manager needed",
        );
    }
    Finding::new(
        id,
        Status::Pass,
        "nvidia-fabricmanager",
        if node.nvswitches > 0 {
            format!(
                "{} NVSwitch(es) and the fabric manager is running",
                node.nvswitches
            )
        } else {
            "every GPU's fabric registration is complete".to_string()
        },
    )
    .with("nvswitches", node.nvswitches)
    .with("fabric_manager_running", node.fabric_manager_running)
}

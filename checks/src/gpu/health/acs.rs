//! `pcie.acs`: ACS Source Validation on the PCIe bridges above the GPUs or RDMA NICs of a bare
//! metal node routes peer-to-peer traffic through the root complex: slow, or hanging. Inside a
//! VM, ACS is the hypervisor's business and the check skips.

use crate::core::{Finding, Fix, GpuNodeHealth, Status};

pub fn check(node: &GpuNodeHealth) -> Finding {
    let id = crate::gpu::ids::PCIE_ACS;
    if node.virtualized == Some(true) {
        return Finding::new(
            id,
            Status::Skip,
            "pcie bridges",
            "running in a VM: ACS on the host's bridges is the hypervisor's choice",
        )
        .with("virtualized", true);
    }
    if let Some(err) = &node.acs.error {
        return Finding::new(
            id,
            Status::Skip,
            "pcie bridges",
            format!("cannot judge ACS: {err}"),
        )
        .with("error", err)
        .fix(Fix::new("Run preflight as root").command("sudo lspci -vvv | grep -i acsctl"));
    }
    let on: Vec<&crate::core::AcsBridge> =
        node.acs.bridges.iter().filter(|b| b.src_valid).collect();
    if on.is_empty() {
        return Finding::new(
            id,
            Status::Pass,
            "pcie bridges",
            format!(
                "ACS is off on the {} bridge(s) with ACS above the GPUs and NICs",
                node.acs.bridges.len()
            ),
        )
        .with("bridges", node.acs.bridges.len());
    }
    let mut names: Vec<&str> = on.iter().map(|b| b.bridge.as_str()).collect();
    names.dedup();
    let mut fix = Fix::new(
        "Disable ACS on these bridges (lost at reboot: add it to a boot script, or turn ACS off \
         in the BIOS), then rerun",
    );
    for b in &names {
        fix = fix.command(format!("sudo setpci -s {b} ECAP_ACS+0x6.w=0000"));
    }
    Finding::new(
        id,
        Status::Warn,
        "pcie bridges",
        format!(
            "ACS Source Validation is on at {} PCIe bridge(s) above the GPUs/NICs ({}): \
             GPU peer-to-peer and GPUDirect RDMA go through the root complex, slow or hanging",
            names.len(),
            names.join(", ")
        ),
    )
    .with(
        "bridges",
        on.iter()
            .map(|b| {
                serde_json::json!({"bridge": b.bridge, "below": b.below, "ctl": format!("{:#06x}", b.ctl)})
            })
            .collect::<Vec<_>>(),
    )
    .fix(fix)
}

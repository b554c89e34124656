//! Node-level GPU health: the kernel log's XIDs, NVSwitches and the fabric manager, the
//! GPUDirect RDMA module, the hypervisor flag, and ACS on the PCIe bridges above the GPUs and
//! RDMA NICs. Everything through `Root`; run only on nodes whose GPUs NVML listed.

use super::kmsg;
use crate::core::{AcsBridge, AcsFacts, Gpu, GpuNodeHealth, IbFacts};
use crate::infra::root::Root;
use std::path::{Path, PathBuf};

/// The fabric manager daemon's process name (`/proc/<pid>/comm`).
const FABRIC_MANAGER_COMM: &str = "nv-fabricmanager";

pub fn probe(root: &Root, gpus: &[Gpu], ib: &IbFacts) -> GpuNodeHealth {
    let nvswitches = nvswitch_count(root);
    GpuNodeHealth {
        kernel_log: kmsg::probe(root),
        nvswitches,
        fabric_manager_running: (nvswitches > 0).then(|| fabric_manager_running(root)),
        peermem_module: peermem_module(root),
        nvidia_open_module: root
            .read("/proc/driver/nvidia/version")
            .ok()
            .map(|v| v.contains("Open Kernel Module")),
        virtualized: virtualized(root),
        acs: acs(root, &targets(root, gpus, ib)),
        bandwidth: Vec::new(),
        bandwidth_skipped: None,
    }
}

/// NVSwitches: NVIDIA PCI devices of class 0x0680 (bridge, other), else `/dev/nvidia-nvswitchN`.
fn nvswitch_count(root: &Root) -> u32 {
    let pci = root
        .list("/sys/bus/pci/devices")
        .into_iter()
        .filter(|d| {
            let base = format!("/sys/bus/pci/devices/{d}");
            root.attr(format!("{base}/vendor")).as_deref() == Some("0x10de")
                && root
                    .attr(format!("{base}/class"))
                    .is_some_and(|c| c.starts_with("0x0680"))
        })
        .count() as u32;
    if pci > 0 {
        return pci;
    }
    root.list("/dev")
        .iter()
        .filter(|n| {
            n.strip_prefix("nvidia-nvswitch")
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        })
        .count() as u32
}

fn fabric_manager_running(root: &Root) -> bool {
    root.list("/proc")
        .iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .any(|p| root.attr(format!("/proc/{p}/comm")).as_deref() == Some(FABRIC_MANAGER_COMM))
}

fn peermem_module(root: &Root) -> Option<String> {
    ["nvidia_peermem", "nv_peer_mem"]
        .into_iter()
        .find(|m| root.exists(format!("/sys/module/{m}")))
        .map(String::from)
}

/// The `hypervisor` CPU flag; None when /proc/cpuinfo cannot be read.
fn virtualized(root: &Root) -> Option<bool> {
    let info = root.read("/proc/cpuinfo").ok()?;
    let flags = info.lines().find(|l| l.starts_with("flags"))?;
    Some(flags.split_whitespace().any(|f| f == "hypervisor"))
}

/// sysfs names of the GPUs (NVML's "00000000:3B:00.0" -> "0000:3b:00.0") and RDMA NICs.
fn targets(root: &Root, gpus: &[Gpu], ib: &IbFacts) -> Vec<String> {
    let mut out: Vec<String> = gpus
        .iter()
        .filter_map(|g| sysfs_bdf(&g.pci_bus_id))
        .collect();
    for d in &ib.devices {
        if let Some(bdf) = root.link_name(format!("/sys/class/infiniband/{}/device", d.name)) {
            out.push(bdf);
        }
    }
    out.dedup();
    out
}

/// "00000000:3B:00.0" -> "0000:3b:00.0"; None when it is not a PCI address.
pub fn sysfs_bdf(nvml_bus_id: &str) -> Option<String> {
    let parts: Vec<&str> = nvml_bus_id.trim().split(':').collect();
    let [domain, bus, devfn] = parts.as_slice() else {
        return None;
    };
    let domain = u32::from_str_radix(domain, 16).ok()?;
    Some(format!(
        "{domain:04x}:{}:{}",
        bus.to_ascii_lowercase(),
        devfn.to_ascii_lowercase()
    ))
}

/// ACS control of every bridge above each target.
fn acs(root: &Root, targets: &[String]) -> AcsFacts {
    let mut facts = AcsFacts::default();
    let Ok(base) = std::fs::canonicalize(root.path("/")) else {
        facts.error = Some("cannot resolve the root directory".into());
        return facts;
    };
    let mut short_config = None;
    for t in targets {
        let Ok(real) = std::fs::canonicalize(root.path(format!("/sys/bus/pci/devices/{t}"))) else {
            continue;
        };
        for bridge in bridges_above(&real) {
            if facts
                .bridges
                .iter()
                .any(|b| b.bridge == bridge_name(&bridge) && b.below == *t)
            {
                continue;
            }
            let Some(in_root) = bridge
                .strip_prefix(&base)
                .ok()
                .map(|p| Path::new("/").join(p))
            else {
                continue;
            };
            let Ok(config) = root.read_bytes(in_root.join("config")) else {
                continue;
            };
            match acs_control(&config) {
                AcsRead::Control(ctl) => facts.bridges.push(AcsBridge {
                    bridge: bridge_name(&bridge),
                    below: t.clone(),
                    src_valid: ctl & 1 != 0,
                    ctl,
                }),
                AcsRead::NoCapability => {}
                AcsRead::Short(n) => short_config = Some(n),
            }
        }
    }
    if facts.bridges.is_empty()
        && let Some(n) = short_config
    {
        facts.error = Some(format!(
            "PCIe extended config space not readable ({n} bytes of the bridges' config): \
             run preflight as root to read ACS"
        ));
    }
    facts
}

fn bridge_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The PCI devices above `dev` in its sysfs path (root port first is not needed: any order).
fn bridges_above(dev: &Path) -> Vec<PathBuf> {
    dev.ancestors()
        .skip(1)
        .filter(|a| a.file_name().is_some_and(|n| is_bdf(&n.to_string_lossy())))
        .map(Path::to_path_buf)
        .collect()
}

/// "0000:00:01.0"
fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

#[derive(Debug, PartialEq, Eq)]
pub enum AcsRead {
    Control(u16),
    NoCapability,
    /// Only this many bytes: the extended space (0x100+) needs root.
    Short(usize),
}

/// PCIe extended capability id of Access Control Services.
const ACS_CAP_ID: u32 = 0x000d;

/// Walks the extended capability list of a config space for ACS; its control register.
pub fn acs_control(config: &[u8]) -> AcsRead {
    if config.len() < 0x104 {
        return AcsRead::Short(config.len());
    }
    let word = |off: usize| -> Option<u32> {
        config
            .get(off..off + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut off = 0x100usize;
    for _ in 0..64 {
        let Some(h) = word(off) else {
            return AcsRead::NoCapability;
        };
        if h == 0 || h == u32::MAX {
            return AcsRead::NoCapability;
        }
        if h & 0xffff == ACS_CAP_ID {
            return match config.get(off + 6..off + 8) {
                Some(b) => AcsRead::Control(u16::from_le_bytes([b[0], b[1]])),
                None => AcsRead::NoCapability,
            };
        }
        let next = ((h >> 20) & 0xffc) as usize;
        if next < 0x100 || next <= off {
            return AcsRead::NoCapability;
        }
        off = next;
    }
    AcsRead::NoCapability
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4 KiB config space with an AER capability at 0x100 and ACS at 0x148.
    pub fn config_with_acs(ctl: u16) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (1 << 16) | (0x148 << 20)).to_le_bytes());
        c[0x148..0x14c].copy_from_slice(&(ACS_CAP_ID | (1 << 16)).to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&ctl.to_le_bytes());
        c
    }

    #[test]
    fn finds_acs_control_in_the_capability_list() {
        assert_eq!(
            acs_control(&config_with_acs(0x001d)),
            AcsRead::Control(0x1d)
        );
        assert_eq!(acs_control(&config_with_acs(0)), AcsRead::Control(0));
        assert_eq!(acs_control(&[0u8; 64]), AcsRead::Short(64));
        assert_eq!(acs_control(&[0u8; 4096]), AcsRead::NoCapability);
        // A list that points at itself ends.
        let mut c = vec![0u8; 4096];
        c[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x100 << 20)).to_le_bytes());
        assert_eq!(acs_control(&c), AcsRead::NoCapability);
    }

    #[test]
    fn nvml_bus_ids_map_to_sysfs_names() {
        assert_eq!(
            sysfs_bdf("00000000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(sysfs_bdf("0000:3b:00.0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(sysfs_bdf("garbage"), None);
        assert!(is_bdf("0000:00:01.0"));
        assert!(!is_bdf("pci0000:00"));
    }
}

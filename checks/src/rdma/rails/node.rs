//! One node's rails judged alone: a port slower than the node's other rails (`ib.rate`), error
//! counters over the health checkers' thresholds or saturated (`ib.counters`), HCAs whose verbs
//! device the container lacks (`ib.container`), and an IOMMU that translates the GPUDirect path
//! (`ib.iommu`). Nodes without RDMA devices skip with the reason.

use super::counters::{ERROR_COUNTERS, Level, level};
use super::mapping::{Rail, map_rails};
use crate::core::{Finding, Fix, IbDevice, IbFacts, IbPort, NodeFacts, Status};

pub use crate::rdma::ids::CONTAINER;
pub use crate::rdma::ids::COUNTERS;
pub use crate::rdma::ids::IOMMU;
pub use crate::rdma::ids::RATE;

pub fn check(facts: &NodeFacts) -> Vec<Finding> {
    let ib = &facts.ib;
    if ib.devices.is_empty() {
        return [RATE, COUNTERS, CONTAINER, IOMMU]
            .into_iter()
            .map(|id| {
                Finding::new(
                    id,
                    Status::Skip,
                    "infiniband",
                    "no InfiniBand/RoCE devices in /sys/class/infiniband: no rails to judge",
                )
            })
            .collect();
    }
    let rails = map_rails(ib);
    let mut out = rate_within(ib, &rails);
    out.extend(counters(ib, &rails));
    out.push(container(ib));
    out.push(iommu(ib));
    out
}

/// "(4X HDR)" of "200 Gb/sec (4X HDR)" -> ("4X", "HDR").
pub fn width_and_speed(rate: &str) -> (Option<String>, Option<String>) {
    let inner = rate
        .split_once('(')
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(i, _)| i.trim());
    let mut words = inner.unwrap_or("").split_whitespace();
    (
        words.next().map(String::from),
        words.next().map(String::from),
    )
}

fn rail_of<'a>(rails: &'a [Rail], dev: &IbDevice, port: &IbPort) -> Option<&'a Rail> {
    rails
        .iter()
        .find(|r| r.hca == dev.name && r.port == port.port)
}

/// "mlx5_3/1 (rail 3, GPU 3)" or "mlx5_3/1".
pub fn port_label(rails: &[Rail], dev: &IbDevice, port: &IbPort) -> String {
    let name = format!("{}/{}", dev.name, port.port);
    match rail_of(rails, dev, port) {
        Some(r) => match r.gpu {
            Some(g) => format!("{name} (rail {}, GPU {g})", r.index),
            None => format!("{name} (rail {})", r.index),
        },
        None => name,
    }
}

/// The commands that look at one port's link: `ibstat`, `mlxlink` (cable, speed, BER), and
/// `ethtool` for RoCE.
pub fn link_commands(dev: &IbDevice, port: &IbPort) -> Vec<String> {
    let mut cmds = vec![format!("ibstat {} {}", dev.name, port.port)];
    let target = dev
        .pci
        .as_ref()
        .map(|p| p.bdf.clone())
        .unwrap_or_else(|| dev.name.clone());
    cmds.push(format!("mlxlink -d {target} -p {} -m -c -e", port.port));
    if port.link_layer.eq_ignore_ascii_case("Ethernet")
        && let Some(n) = &port.netdev
    {
        cmds.push(format!("ethtool {n}"));
    }
    cmds
}

/// ACTIVE ports slower than the fastest ACTIVE port of the same link layer on this node.
fn rate_within(ib: &IbFacts, rails: &[Rail]) -> Vec<Finding> {
    let active: Vec<(&IbDevice, &IbPort, f64)> = ib
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(_, p)| p.is_active())
        .filter_map(|(d, p)| Some((d, p, p.rate_gbps?)))
        .collect();
    let mut out = Vec::new();
    for (d, p, rate) in &active {
        let best = active
            .iter()
            .filter(|(_, q, _)| q.link_layer == p.link_layer)
            .map(|(_, _, r)| *r)
            .fold(0.0, f64::max);
        if *rate >= best {
            continue;
        }
        let peers: Vec<String> = active
            .iter()
            .filter(|(_, q, r)| q.link_layer == p.link_layer && *r >= best)
            .map(|(e, q, _)| format!("{}/{}", e.name, q.port))
            .collect();
        let label = port_label(rails, d, p);
        let (width, speed) = width_and_speed(p.rate.as_deref().unwrap_or(""));
        out.push(
            Finding::new(
                RATE,
                Status::Warn,
                format!("{}/{}", d.name, p.port),
                format!(
                    "{label} runs at {rate} Gb/s ({}) while the node's other rails run at {best} Gb/s ({}): NCCL's ring and tree run at the pace of their slowest rail, so every collective loses up to {:.0}% here",
                    p.rate.as_deref().unwrap_or("?"),
                    peers.join(", "),
                    (1.0 - rate / best) * 100.0
                ),
            )
            .with("device", &d.name)
            .with("port", p.port)
            .with("rate", &p.rate)
            .with("rate_gbps", rate)
            .with("width", width)
            .with("speed", speed)
            .with("expected_gbps", best)
            .with("faster_ports", &peers)
            .with("rail", rail_of(rails, d, p).map(|r| r.index))
            .with("gpu", rail_of(rails, d, p).and_then(|r| r.gpu))
            .fix(Fix {
                hint: format!(
                    "The port trained below its peers (fewer lanes or a lower speed): reseat or replace the cable or transceiver on {}/{} and check the switch port's speed; until then leave it out with NCCL_IB_HCA.",
                    d.name, p.port
                ),
                commands: link_commands(d, p),
            }),
        );
    }
    if out.is_empty() {
        let rates: Vec<String> = active
            .iter()
            .map(|(d, p, r)| format!("{}/{} {r} Gb/s", d.name, p.port))
            .collect();
        out.push(
            Finding::new(
                RATE,
                if active.is_empty() {
                    Status::Skip
                } else {
                    Status::Pass
                },
                "infiniband",
                if active.is_empty() {
                    "no ACTIVE RDMA port with a known rate (see ib.port-down)".to_string()
                } else {
                    format!(
                        "every ACTIVE RDMA port runs at its node's best rate: {}",
                        rates.join(", ")
                    )
                },
            )
            .with("ports", &rates),
        );
    }
    out
}

/// Error counters at or over the thresholds, or saturated.
fn counters(ib: &IbFacts, rails: &[Rail]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut read_any = false;
    for d in &ib.devices {
        for p in &d.ports {
            read_any |= !p.counters.is_empty();
            let mut over = Vec::new();
            let mut saturated = Vec::new();
            let mut evidence = serde_json::Map::new();
            for spec in ERROR_COUNTERS {
                let Some(v) = p.counters.get(spec.name) else {
                    continue;
                };
                match level(spec, *v) {
                    Level::Below => {}
                    Level::Over { value, threshold } => {
                        over.push(format!(
                            "{} {value} (threshold {threshold}: {})",
                            spec.name, spec.meaning
                        ));
                        evidence.insert(spec.name.into(), (*v).into());
                    }
                    Level::Saturated { max } => {
                        saturated.push(format!(
                            "{} saturated at {max} ({}-bit: the true count is unknown, {})",
                            spec.name, spec.bits, spec.meaning
                        ));
                        evidence.insert(spec.name.into(), serde_json::json!({"saturated": max}));
                    }
                }
            }
            if over.is_empty() && saturated.is_empty() {
                continue;
            }
            let label = port_label(rails, d, p);
            let mut parts = over.clone();
            parts.extend(saturated.iter().cloned());
            let mut cmds = link_commands(d, p);
            cmds.push(format!("perfquery -x -C {} -P {}", d.name, p.port));
            cmds.push(format!(
                "perfquery -x -R -C {} -P {}   # clear after the fix, then rerun preflight",
                d.name, p.port
            ));
            let mut f = Finding::new(
                COUNTERS,
                Status::Warn,
                format!("{}/{}", d.name, p.port),
                format!(
                    "{label} error counters since they were last cleared: {} (thresholds of NVIDIA NVSentinel's NIC health monitor and the IBTA 120-per-hour bit-error budget): a link like this drops or retries RDMA traffic and stalls NCCL",
                    parts.join("; ")
                ),
            )
            .with("device", &d.name)
            .with("port", p.port)
            .with("rail", rail_of(rails, d, p).map(|r| r.index))
            .with("saturated", saturated.len())
            .fix(Fix {
                hint: format!(
                    "Check the cable and transceiver of {}/{} (mlxlink shows the bit-error rate and the cable), reseat or replace it, clear the counters and watch whether they grow again.",
                    d.name, p.port
                ),
                commands: cmds,
            });
            f.evidence.insert("counters".into(), evidence.into());
            out.push(f);
        }
    }
    if out.is_empty() {
        out.push(if read_any {
            Finding::new(
                COUNTERS,
                Status::Pass,
                "infiniband",
                "no RDMA port has error counters over the thresholds (NVSentinel's, IBTA's 120 bit errors per hour) or saturated",
            )
        } else {
            Finding::new(
                COUNTERS,
                Status::Skip,
                "infiniband",
                "the RDMA ports expose no counters/ in sysfs",
            )
        });
    }
    out
}

/// HCAs sysfs lists whose verbs device is missing from /dev/infiniband: inside a container
/// started without them, NCCL finds no usable HCA and silently falls back to TCP sockets.
fn container(ib: &IbFacts) -> Finding {
    let Some(dev) = &ib.dev_infiniband else {
        return Finding::new(
            CONTAINER,
            Status::Skip,
            "/dev/infiniband",
            "/dev/infiniband was not looked at",
        );
    };
    let missing: Vec<(String, String)> = ib
        .devices
        .iter()
        .filter_map(|d| {
            let u = d.uverbs.as_ref()?;
            (!dev.contains(u)).then(|| (d.name.clone(), u.clone()))
        })
        .collect();
    let known = ib.devices.iter().filter(|d| d.uverbs.is_some()).count();
    if known == 0 {
        return Finding::new(
            CONTAINER,
            Status::Skip,
            "/dev/infiniband",
            "sysfs names no verbs device (infiniband_verbs/uverbsN) for the HCAs",
        )
        .with("dev_infiniband", dev);
    }
    if missing.is_empty() {
        return Finding::new(
            CONTAINER,
            Status::Pass,
            "/dev/infiniband",
            format!(
                "every HCA's verbs device is in /dev/infiniband ({} of {})",
                known,
                ib.devices.len()
            ),
        )
        .with("dev_infiniband", dev);
    }
    let names: Vec<String> = missing
        .iter()
        .map(|(h, u)| format!("{h} (/dev/infiniband/{u})"))
        .collect();
    Finding::new(
        CONTAINER,
        Status::Warn,
        "/dev/infiniband",
        format!(
            "{} of {} HCAs are visible in sysfs but their verbs devices are missing here: {}{}: NCCL cannot open them and silently falls back to TCP sockets (NET/Socket) or leaves those rails out",
            missing.len(),
            known,
            names.join(", "),
            if dev.is_empty() { " (/dev/infiniband is absent or empty)" } else { "" }
        ),
    )
    .with("missing", missing.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>())
    .with("dev_infiniband", dev)
    .fix(
        Fix::new("Start the container with the RDMA devices (docker: --device=/dev/infiniband --cap-add=IPC_LOCK; Kubernetes: the RDMA shared device plugin's resource, e.g. rdma/rdma_shared_device_a: 1) and check that they appear.")
            .command("ls -l /dev/infiniband")
            .command("ibv_devices"),
    )
}

fn translated(t: &Option<String>) -> bool {
    t.as_deref().is_some_and(|t| t.starts_with("DMA"))
}

/// HCAs or GPUs whose IOMMU group translates DMA ("DMA", "DMA-FQ"): GPUDirect RDMA's
/// peer-to-peer transfers then fail or crawl; NVIDIA asks for passthrough (`iommu=pt`).
fn iommu(ib: &IbFacts) -> Finding {
    let mut translated_devs: Vec<String> = ib
        .devices
        .iter()
        .filter_map(|d| {
            let p = d.pci.as_ref()?;
            translated(&p.iommu)
                .then(|| format!("{} ({})", d.name, p.iommu.as_deref().unwrap_or("")))
        })
        .collect();
    translated_devs.extend(
        ib.gpu_pci_paths
            .iter()
            .filter(|g| translated(&g.iommu))
            .map(|g| format!("GPU {} ({})", g.gpu, g.iommu.as_deref().unwrap_or(""))),
    );
    let known = ib
        .devices
        .iter()
        .filter_map(|d| d.pci.as_ref()?.iommu.as_ref())
        .count()
        + ib.gpu_pci_paths
            .iter()
            .filter(|g| g.iommu.is_some())
            .count();
    if translated_devs.is_empty() {
        return Finding::new(
            IOMMU,
            if known == 0 {
                Status::Skip
            } else {
                Status::Pass
            },
            "iommu",
            if known == 0 {
                "no IOMMU groups for the HCAs or GPUs: DMA is not translated".to_string()
            } else {
                format!(
                    "the IOMMU passes the HCAs' and GPUs' DMA through ({known} groups in identity mode)"
                )
            },
        );
    }
    Finding::new(
        IOMMU,
        Status::Warn,
        "iommu",
        format!(
            "the IOMMU translates DMA for {}: GPUDirect RDMA between the HCAs and GPU memory fails or runs far below the link rate unless the IOMMU is in passthrough",
            translated_devs.join(", ")
        ),
    )
    .with("translated", &translated_devs)
    .fix(
        Fix::new("Boot with the IOMMU in passthrough: add iommu=pt (with intel_iommu=on or amd_iommu=on) to the kernel command line, update the boot loader and reboot.")
            .command("cat /proc/cmdline")
            .command("grubby --update-kernel=ALL --args=iommu=pt   # or edit GRUB_CMDLINE_LINUX and run update-grub")
            .command("cat /sys/bus/pci/devices/*/iommu_group/type | sort | uniq -c"),
    )
}

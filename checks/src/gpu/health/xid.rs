//! `gpu.xid`: NVIDIA XID errors in the kernel log within a window. The critical set is the one
//! Azure's health checks (aznhc) fail a node on; the rest are application faults (13, 31, 43,
//! 45 ...) and are reported as information only.

use crate::core::{Finding, Fix, Gpu, GpuNodeHealth, Status, XidEvent};
use std::collections::BTreeMap;

/// XIDs that fail a node (aznhc's list).
pub const CRITICAL_XIDS: &[u32] = &[
    48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120,
];

/// What an XID means (NVIDIA's XID catalog), for the ones people meet.
pub fn xid_meaning(xid: u32) -> &'static str {
    match xid {
        13 => "graphics engine exception (usually an application fault)",
        31 => "GPU memory page fault (usually an application fault)",
        43 => "GPU stopped processing (an application fault)",
        45 => "preemptive cleanup after earlier errors",
        48 => "double-bit (uncorrectable) ECC error",
        56 => "display engine error",
        57 => "error programming video memory interface",
        58 => "unstable video memory interface detected",
        62 => "internal micro-controller halt",
        63 => "ECC page retirement or row remapping recorded",
        64 => "ECC page retirement or row remapping recording failed",
        65 => "video processor exception",
        68 => "NVDEC0 exception",
        69 => "graphics engine class error",
        73 => "NVENC2 error",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        80 => "corrupted data sent to the GPU",
        81 => "VGA subsystem error",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error",
        95 => "uncontained ECC error",
        119 => "GSP RPC timeout",
        120 => "GSP error",
        _ => "see NVIDIA's XID catalog",
    }
}

pub fn check(gpus: &[Gpu], node: &GpuNodeHealth, window_s: u64) -> Vec<Finding> {
    let id = crate::gpu::ids::XID;
    let log = &node.kernel_log;
    if let Some(err) = &log.error {
        return vec![
            Finding::new(
                id,
                Status::Skip,
                "kernel log",
                format!("cannot read the kernel log for XID errors: {err}"),
            )
            .with("error", err)
            .fix(
                Fix::new(
                    "Run preflight as root (or as a member of the adm / systemd-journal group) \
                     so it can read the kernel log",
                )
                .command("sudo dmesg | grep -i xid"),
            ),
        ];
    }
    let within: Vec<&XidEvent> = log
        .xids
        .iter()
        .filter(|x| x.age_s.is_none_or(|a| a <= window_s))
        .collect();
    let older = log.xids.len() - within.len();
    let window = human_window(window_s);
    let mut critical: BTreeMap<String, Vec<&XidEvent>> = BTreeMap::new();
    let mut info: Vec<&XidEvent> = Vec::new();
    for x in within {
        if CRITICAL_XIDS.contains(&x.xid) {
            critical.entry(x.pci.clone()).or_default().push(x);
        } else {
            info.push(x);
        }
    }
    let source = log.source.clone().unwrap_or_default();
    let mut out: Vec<Finding> = critical
        .iter()
        .map(|(pci, events)| critical_finding(gpus, pci, events, &window, window_s, &source))
        .collect();
    if out.is_empty() {
        let mut summary = format!("no critical XID in the kernel log within {window}");
        if !info.is_empty() {
            let list: Vec<String> = distinct(&info)
                .iter()
                .map(|(xid, n)| format!("XID {xid} x{n} ({})", xid_meaning(*xid)))
                .collect();
            summary.push_str(&format!(
                "; for information (application faults, not the node's): {}",
                list.join(", ")
            ));
        }
        if older > 0 {
            summary.push_str(&format!("; {older} older XID record(s) outside the window"));
        }
        out.push(
            Finding::new(id, Status::Pass, "kernel log", summary)
                .with("source", &source)
                .with("window_s", window_s)
                .with(
                    "informational",
                    info.iter().map(|x| x.xid).collect::<Vec<_>>(),
                )
                .with("older", older)
                .with("log_covers_s", log.covers_s)
                .with("truncated", log.truncated),
        );
    }
    out
}

fn critical_finding(
    gpus: &[Gpu],
    pci: &str,
    events: &[&XidEvent],
    window: &str,
    window_s: u64,
    source: &str,
) -> Finding {
    let gpu = gpus.iter().find(|g| {
        crate::gpu::probe::node::sysfs_bdf(&g.pci_bus_id).is_some_and(|b| b.starts_with(pci))
    });
    let list: Vec<String> = distinct(events)
        .iter()
        .map(|(xid, n)| format!("XID {xid} x{n} ({})", xid_meaning(*xid)))
        .collect();
    let newest = events.iter().filter_map(|x| x.age_s).min();
    let name = match gpu {
        Some(g) => format!("GPU {} ({pci})", g.index),
        None => format!("the GPU at {pci}"),
    };
    let summary = format!(
        "{name} logged {} within {window}{}: the GPU needs a reset or the node a reboot before \
         it runs a job",
        list.join(", "),
        newest.map_or(String::new(), |a| format!(
            ", the newest {} ago",
            human_window(a)
        ))
    );
    let mut fix = Fix::new(
        "Drain the node, reset the GPU (or reboot the node), and run the GPU diagnostics; a \
         GPU that logs XID 79/48/64 again after a reboot needs replacing",
    )
    .command("sudo dmesg -T | grep -i xid");
    let mut f = match gpu {
        Some(g) => {
            fix = fix
                .command(format!("sudo nvidia-smi -r -i {}", g.index))
                .command(format!("dcgmi diag -r 1 -i {}", g.index));
            super::about(crate::gpu::ids::XID, Status::Fail, g, summary)
        }
        None => Finding::new(
            crate::gpu::ids::XID,
            Status::Fail,
            format!("PCI {pci}"),
            summary,
        )
        .with("pci_bus_id", pci),
    };
    f = f
        .with("xids", events.iter().map(|x| x.xid).collect::<Vec<_>>())
        .with("newest_age_s", newest)
        .with("window_s", window_s)
        .with("source", source)
        .with(
            "lines",
            events
                .iter()
                .rev()
                .take(3)
                .map(|x| &x.message)
                .collect::<Vec<_>>(),
        );
    f.fix(fix)
}

/// (xid, count), in xid order.
fn distinct(events: &[&XidEvent]) -> Vec<(u32, usize)> {
    let mut m: BTreeMap<u32, usize> = BTreeMap::new();
    for x in events {
        *m.entry(x.xid).or_default() += 1;
    }
    m.into_iter().collect()
}

/// "2 h", "45 min", "30 s".
fn human_window(s: u64) -> String {
    if s >= 3600 && s % 3600 == 0 {
        format!("{} h", s / 3600)
    } else if s >= 3600 {
        format!("{:.1} h", s as f64 / 3600.0)
    } else if s >= 60 {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

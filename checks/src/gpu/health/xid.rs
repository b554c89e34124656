//! `gpu.xid`: NVIDIA XID errors in the kernel log within a window. The critical set is the one
//! Azure's health checks (aznhc) fail a node on; the rest are application faults (13, 31, 43,
//! 45 ...) and are reported as information only. Each finding's action is NVIDIA's immediate
//! action for its XIDs ([`super::xid_actions`]); a GPU whose XIDs all need none (63, 92) warns.

use super::xid_actions::{nvidia_bucket, worst};
use crate::core::{Action, Finding, Fix, Gpu, GpuNodeHealth, Status, XidEvent};
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
                .map(|(xid, n)| {
                    format!(
                        "XID {xid} x{n} ({}; NVIDIA: {})",
                        xid_meaning(*xid),
                        nvidia_bucket(*xid)
                    )
                })
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
    let remedy = worst(events.iter().map(|x| x.xid));
    let summary = format!(
        "{name} logged {} within {window}{}: {}",
        list.join(", "),
        newest.map_or(String::new(), |a| format!(
            ", the newest {} ago",
            human_window(a)
        )),
        what_to_do(remedy.action)
    );
    let status = if remedy.action == Action::None {
        Status::Warn
    } else {
        Status::Fail
    };
    let mut fix = Fix::new(fix_hint(remedy.action)).command("sudo dmesg -T | grep -i xid");
    let mut f = match gpu {
        Some(g) => {
            if remedy.action == Action::Reboot {
                fix = fix.command("sudo reboot");
            } else if remedy.action != Action::None {
                fix = fix.command(format!("sudo nvidia-smi -r -i {}", g.index));
            }
            fix = fix.command(format!("dcgmi diag -r 1 -i {}", g.index));
            super::about(crate::gpu::ids::XID, status, g, summary)
        }
        None => Finding::new(crate::gpu::ids::XID, status, format!("PCI {pci}"), summary)
            .with("pci_bus_id", pci),
    };
    let mut buckets: Vec<String> = distinct(events)
        .iter()
        .map(|(x, _)| format!("{x}: {}", nvidia_bucket(*x)))
        .collect();
    buckets.dedup();
    f = f.with("nvidia_action", buckets).remedy(remedy);
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

/// The summary's last clause: what NVIDIA's catalog says to do now.
fn what_to_do(action: Action) -> &'static str {
    match action {
        Action::Reboot => "the node needs a reboot before it runs a job (NVIDIA: RESTART_BM)",
        Action::ResetGpu => {
            "the GPU needs a reset before it runs a job (NVIDIA: reset the GPU, or the \
             DBE/NVLink workflow)"
        }
        Action::None => {
            "NVIDIA's catalog asks for no immediate action; an XID 48 or 64 after it needs a reset"
        }
        _ => "drain the node and look the XID up in NVIDIA's catalog before it runs a job",
    }
}

fn fix_hint(action: Action) -> &'static str {
    match action {
        Action::Reboot => {
            "Drain the node and reboot it, then run the GPU diagnostics; a GPU that falls off the \
             bus again after a reboot needs replacing"
        }
        Action::None => {
            "Nothing to do now: watch the GPU's ECC counters; an uncorrectable error (XID 48) or a \
             failed remap (XID 64) needs a reset"
        }
        _ => {
            "Drain the node, reset the GPU (or reboot the node), and run the GPU diagnostics; a \
             GPU that logs XID 79/48/64 again after a reboot needs replacing"
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{KernelLog, Problem};

    fn node(xids: &[(u32, &str)]) -> GpuNodeHealth {
        GpuNodeHealth {
            kernel_log: KernelLog {
                source: Some("kmsg".into()),
                xids: xids
                    .iter()
                    .map(|(xid, pci)| XidEvent {
                        xid: *xid,
                        pci: pci.to_string(),
                        age_s: Some(60),
                        message: format!("NVRM: Xid (PCI:{pci}): {xid}"),
                    })
                    .collect(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn each_gpu_takes_nvidias_action_for_its_worst_xid() {
        let fs = check(
            &[],
            &node(&[
                (48, "0000:19:00"),
                (63, "0000:19:00"),
                (79, "0000:3b:00"),
                (92, "0000:5d:00"),
                (94, "0000:5d:00"),
            ]),
            7200,
        );
        let by_pci = |pci: &str| fs.iter().find(|f| f.subject.contains(pci)).unwrap();
        let dbe = by_pci("0000:19:00");
        assert_eq!(
            (dbe.status, dbe.action),
            (Status::Fail, Some(Action::ResetGpu))
        );
        assert_eq!(dbe.problem, Some(Problem::Node));
        assert_eq!(
            dbe.evidence["nvidia_action"],
            serde_json::json!(["48: WORKFLOW_XID_48", "63: IGNORE"])
        );
        let bus = by_pci("0000:3b:00");
        assert_eq!(bus.action, Some(Action::Reboot));
        assert!(bus.summary.contains("needs a reboot"), "{}", bus.summary);
        // 92 alone is NVIDIA's IGNORE: a warning with nothing to do now (94 is not critical).
        let sbe = by_pci("0000:5d:00");
        assert_eq!((sbe.status, sbe.action), (Status::Warn, Some(Action::None)));
        assert_eq!(fs.len(), 3, "{fs:#?}");
    }

    #[test]
    fn informational_xids_name_nvidias_action() {
        let fs = check(&[], &node(&[(94, "0000:19:00")]), 7200);
        assert_eq!(fs[0].status, Status::Pass);
        assert!(
            fs[0]
                .summary
                .contains("XID 94 x1 (contained ECC error; NVIDIA: RESTART_APP)"),
            "{}",
            fs[0].summary
        );
    }
}

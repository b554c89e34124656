//! `gpu.pcie-link` (width below the maximum; generation below it while the GPU works at P0) and
//! `gpu.pcie-replay` (link-level retransmissions above DCGM's threshold).

use super::{Judged, Probed, about, per_gpu, why_missing};
use crate::core::{Finding, Fix, Status};

/// DCGM's `nvvs` PCIe replay threshold.
pub const REPLAY_THRESHOLD: u64 = 80;

pub fn link(gpus: &[Probed]) -> Vec<Finding> {
    per_gpu(
        crate::gpu::ids::PCIE_LINK,
        "PCIe link width and generation",
        gpus,
        |g, h| {
            let Some(p) = h.pcie else {
                return Judged::Unknown(why_missing(h, "pcie_link"));
            };
            let at_p0 = h.performance_state == Some(0);
            let narrow = p.current_width < p.max_width;
            let slow = p.current_gen < p.max_gen && at_p0;
            if !narrow && !slow {
                return Judged::Fine;
            }
            let mut what = Vec::new();
            if narrow {
                what.push(format!(
                    "trained at x{} of x{} lanes",
                    p.current_width, p.max_width
                ));
            }
            if slow {
                what.push(format!(
                    "runs at PCIe gen {} of gen {} while busy (P0)",
                    p.current_gen, p.max_gen
                ));
            }
            let bdf = crate::gpu::probe::node::sysfs_bdf(&g.pci_bus_id).unwrap_or_default();
            Judged::Problem(
                about(
                    crate::gpu::ids::PCIE_LINK,
                    Status::Warn,
                    g,
                    format!(
                        "GPU {}'s PCIe link {}: host-device copies (and NCCL through the host) \
                     get {:.0}% of the bandwidth",
                        g.index,
                        what.join(" and "),
                        100.0 * share(p.current_width, p.max_width, p.current_gen, p.max_gen, slow)
                    ),
                )
                .with("current_width", p.current_width)
                .with("max_width", p.max_width)
                .with("current_gen", p.current_gen)
                .with("max_gen", p.max_gen)
                .with("performance_state", h.performance_state)
                .fix(
                    Fix::new(
                        "A link trained below its width is a seating, riser or slot problem: \
                     reseat the GPU (or its riser/cable) and check the slot's BIOS setting; \
                     confirm with lspci's LnkSta against LnkCap",
                    )
                    .command(format!("nvidia-smi -q -i {} -d PCIE", g.index))
                    .command(format!("sudo lspci -vv -s {bdf} | grep -E 'LnkCap|LnkSta'")),
                ),
            )
        },
    )
}

/// The share of the link's top bandwidth it has now.
fn share(w: u32, max_w: u32, gen_: u32, max_gen: u32, gen_counts: bool) -> f64 {
    let width = f64::from(w) / f64::from(max_w.max(1));
    if !gen_counts {
        return width;
    }
    let rate = |g| super::bandwidth::per_lane_gb_s(g).unwrap_or(1.0);
    width * rate(gen_) / rate(max_gen)
}

pub fn replay(gpus: &[Probed]) -> Vec<Finding> {
    per_gpu(
        crate::gpu::ids::PCIE_REPLAY,
        "PCIe replay counter",
        gpus,
        |g, h| {
            let Some(n) = h.pcie_replay_counter else {
                return Judged::Unknown(why_missing(h, "pcie_replay_counter"));
            };
            if n <= REPLAY_THRESHOLD {
                return Judged::Fine;
            }
            Judged::Problem(
                about(
                    crate::gpu::ids::PCIE_REPLAY,
                    Status::Warn,
                    g,
                    format!(
                        "GPU {}'s PCIe link replayed {n} transfers since the driver loaded (over \
                     DCGM's {REPLAY_THRESHOLD}): a marginal link that retransmits, slows copies \
                     and can end in XID 79",
                        g.index
                    ),
                )
                .with("replay_counter", n)
                .with("threshold", REPLAY_THRESHOLD)
                .fix(
                    Fix::new(
                        "Reseat the GPU and its riser or cable; if the counter keeps rising after \
                     a reboot, have the slot or GPU replaced",
                    )
                    .command(format!("nvidia-smi -q -i {} -d PCIE", g.index)),
                ),
            )
        },
    )
}

//! Memory health: `gpu.ecc` (volatile uncorrectable errors fail, correctable above a threshold
//! warn), `gpu.row-remap` (a pending or failed row remap, Ampere and newer) and
//! `gpu.retired-pages` (pages waiting for retirement, pre-Ampere: V100, T4).

use super::{Judged, Probed, about, per_gpu, why_missing};
use crate::core::{Finding, Fix, Gpu, Status};

/// Volatile correctable ECC errors (since the driver loaded) above which a GPU is flagged.
pub const CORRECTED_WARN: u64 = 1000;

fn reset_fix(g: &Gpu, hint: &str) -> Fix {
    Fix::new(hint)
        .command(format!("sudo nvidia-smi -r -i {}", g.index))
        .command("sudo reboot")
        .command(format!(
            "nvidia-smi -q -i {} -d ECC,ROW_REMAPPER,PAGE_RETIREMENT",
            g.index
        ))
}

pub fn ecc(gpus: &[Probed]) -> Vec<Finding> {
    per_gpu(crate::gpu::ids::ECC, "ECC errors", gpus, |g, h| {
        if h.ecc_enabled == Some(false) {
            return Judged::Unknown("ECC is disabled".into());
        }
        let (Some(unc), Some(cor)) = (h.ecc_volatile_uncorrected, h.ecc_volatile_corrected) else {
            return Judged::Unknown(why_missing(h, "ecc_mode"));
        };
        if unc > 0 {
            return Judged::Problem(
                about(
                    crate::gpu::ids::ECC,
                    Status::Fail,
                    g,
                    format!(
                        "GPU {} has {unc} uncorrectable ECC error(s) since the driver loaded: \
                         data in GPU memory was corrupted and a job on it can crash (XID 48) \
                         or return wrong results",
                        g.index
                    ),
                )
                .with("volatile_uncorrected", unc)
                .with("volatile_corrected", cor)
                .fix(reset_fix(
                    g,
                    "Drain the node and reset the GPU (or reboot) so the bad rows are remapped; \
                     if errors return, replace the GPU",
                )),
            );
        }
        if cor > CORRECTED_WARN {
            return Judged::Problem(
                about(
                    crate::gpu::ids::ECC,
                    Status::Warn,
                    g,
                    format!(
                        "GPU {} corrected {cor} ECC errors since the driver loaded (over \
                         {CORRECTED_WARN}): its memory is degrading",
                        g.index
                    ),
                )
                .with("volatile_uncorrected", unc)
                .with("volatile_corrected", cor)
                .with("threshold", CORRECTED_WARN)
                .fix(reset_fix(
                    g,
                    "Watch the count; reset the GPU at the next drain, and replace it if the \
                     rate stays high",
                )),
            );
        }
        Judged::Fine
    })
}

pub fn row_remap(gpus: &[Probed]) -> Vec<Finding> {
    per_gpu(crate::gpu::ids::ROW_REMAP, "row remapping", gpus, |g, h| {
        let Some(r) = h.remapped_rows else {
            return Judged::Unknown(why_missing(h, "remapped_rows"));
        };
        if !r.pending && !r.failed {
            return Judged::Fine;
        }
        let what = if r.failed {
            "a row remap failed (no spare rows left): the GPU cannot repair its memory"
        } else {
            "a row remap is pending: until the GPU is reset, the bad row is still in use"
        };
        Judged::Problem(
            about(
                crate::gpu::ids::ROW_REMAP,
                Status::Fail,
                g,
                format!("GPU {}: {what}", g.index),
            )
            .with("pending", r.pending)
            .with("failed", r.failed)
            .with("correctable_rows", r.correctable)
            .with("uncorrectable_rows", r.uncorrectable)
            .fix(reset_fix(
                g,
                if r.failed {
                    "The GPU ran out of spare rows: drain the node and have the GPU replaced"
                } else {
                    "Reset the GPU (no process may hold it) or reboot the node to apply the \
                     remap"
                },
            )),
        )
    })
}

pub fn retired_pages(gpus: &[Probed]) -> Vec<Finding> {
    per_gpu(
        crate::gpu::ids::RETIRED_PAGES,
        "page retirement",
        gpus,
        |g, h| {
            let Some(r) = h.retired_pages else {
                if h.remapped_rows.is_some() {
                    return Judged::Unknown("uses row remapping instead".into());
                }
                return Judged::Unknown(why_missing(h, "retired_pages"));
            };
            if !r.pending {
                return Judged::Fine;
            }
            Judged::Problem(
                about(
                    crate::gpu::ids::RETIRED_PAGES,
                    Status::Fail,
                    g,
                    format!(
                        "GPU {} has pages waiting to be retired ({} from double-bit, {} from \
                     single-bit errors so far): the bad pages stay in use until a reboot",
                        g.index, r.double_bit, r.single_bit
                    ),
                )
                .with("pending", r.pending)
                .with("double_bit", r.double_bit)
                .with("single_bit", r.single_bit)
                .fix(reset_fix(
                    g,
                    "Reboot the node (or reset the GPU) so the driver retires the pages",
                )),
            )
        },
    )
}

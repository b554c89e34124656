//! `gpu.compute-throttle`: under the sustained load (`--burn`), a GPU that slows down or is
//! held back by heat or a power brake, named with its timeline.
//!
//! Each GPU is judged against its own first windows (a GPU that starts fast and sags is
//! heating up) and against its peers' last windows (the reference is the upper quartile, so a
//! throttling minority cannot move it). Reaching the power limit (`sw_power_cap`) is what a
//! GPU under full load does and is shown, not judged; hardware slowdown, thermal slowdown and
//! the power brake are judged.

use super::{SLOW_SHARE, reference};
use crate::core::{BurnSample, BurnTimeline, Finding, Fix, GpuCompute, Status};
use crate::infra::stats::median;

/// Clock event reasons that mean the GPU is held back by something wrong.
pub const BAD_REASONS: &[&str] = &[
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
];
/// Points of a timeline shown in a finding at most.
const TIMELINE_POINTS: usize = 6;

/// The median rate of the windows in the first and the last third of a timeline.
pub fn start_and_end(samples: &[BurnSample]) -> Option<(f64, f64)> {
    if samples.len() < 3 {
        return None;
    }
    let third = samples.len() / 3;
    let mut first: Vec<f64> = samples[..third].iter().map(|s| s.tflops).collect();
    let mut last: Vec<f64> = samples[samples.len() - third..]
        .iter()
        .map(|s| s.tflops)
        .collect();
    Some((median(&mut first)?, median(&mut last)?))
}

/// "t=1s 712 TFLOP/s 1980 MHz 61 C 690 W; t=10s ...", at most [`TIMELINE_POINTS`] points.
pub fn timeline_text(samples: &[BurnSample]) -> String {
    let step = samples.len().div_ceil(TIMELINE_POINTS).max(1);
    let mut picked: Vec<&BurnSample> = samples.iter().step_by(step).collect();
    if let Some(last) = samples.last() {
        if picked.last().is_some_and(|p| !std::ptr::eq(*p, last)) {
            picked.push(last);
        }
    }
    picked
        .iter()
        .map(|s| {
            let mut t = format!("t={:.0}s {:.0} TFLOP/s", s.t_s, s.tflops);
            if let Some(c) = s.state.sm_clock_mhz {
                t.push_str(&format!(" {c} MHz"));
            }
            if let Some(c) = s.state.temperature_c {
                t.push_str(&format!(" {c} C"));
            }
            if let Some(p) = s.state.power_w {
                t.push_str(&format!(" {p:.0} W"));
            }
            let bad: Vec<&String> = s
                .state
                .clock_event_reasons
                .iter()
                .filter(|r| BAD_REASONS.contains(&r.as_str()))
                .collect();
            if !bad.is_empty() {
                t.push_str(&format!(
                    " [{}]",
                    bad.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(",")
                ));
            }
            t
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What is wrong with one GPU's timeline, if anything.
fn judge(t: &BurnTimeline, peers_end: Option<f64>) -> Option<(Status, String)> {
    let (start, end) = start_and_end(&t.samples)?;
    let mut reasons: Vec<&str> = Vec::new();
    for s in &t.samples {
        for r in &s.state.clock_event_reasons {
            if BAD_REASONS.contains(&r.as_str()) && !reasons.contains(&r.as_str()) {
                reasons.push(r.as_str());
            }
        }
    }
    let sagged = end < SLOW_SHARE * start;
    let behind = peers_end.is_some_and(|p| end < SLOW_SHARE * p);
    if !sagged && !behind && reasons.is_empty() {
        return None;
    }
    let mut what = Vec::new();
    if sagged {
        what.push(format!(
            "slowed from {start:.0} to {end:.0} TFLOP/s ({:.0}%) under sustained load",
            100.0 * end / start
        ));
    }
    if behind {
        what.push(format!(
            "ends at {end:.0} TFLOP/s against the peers' {:.0}",
            peers_end.unwrap_or_default()
        ));
    }
    if !reasons.is_empty() {
        what.push(format!("clock events {}", reasons.join(", ")));
    }
    let status = if sagged || behind {
        Status::Fail
    } else {
        Status::Warn
    };
    Some((status, what.join("; ")))
}

pub fn check(compute: &GpuCompute) -> Vec<Finding> {
    let id = crate::gpu::ids::COMPUTE_THROTTLE;
    let Some(burn) = &compute.burn else {
        return Vec::new();
    };
    if burn.gpus.is_empty() {
        return vec![Finding::new(
            id,
            Status::Skip,
            "gpus",
            format!(
                "the sustained load did not run: {}",
                burn.error.as_deref().unwrap_or("no GPU reported a window")
            ),
        )];
    }
    let mut ends: Vec<f64> = burn
        .gpus
        .iter()
        .filter_map(|t| start_and_end(&t.samples).map(|(_, e)| e))
        .collect();
    let peers = ends.len();
    let peers_end = reference(&mut ends).filter(|_| peers >= 2);
    let mut out = Vec::new();
    for t in &burn.gpus {
        let Some((status, what)) = judge(t, peers_end) else {
            continue;
        };
        let g = compute.gpus.iter().find(|g| g.gpu == t.gpu);
        let model = g.map(|g| g.model.as_str()).unwrap_or("GPU");
        let mut f = Finding::new(
            id,
            status,
            format!("GPU {}", t.gpu),
            format!(
                "GPU {} ({model}) {what} during {} s of {}: {}",
                t.gpu,
                burn.seconds,
                burn.dtype,
                timeline_text(&t.samples)
            ),
        )
        .with("gpu", t.gpu)
        .with("timeline", &t.samples)
        .fix(
            Fix::new(
                "Thermal events: check the GPU's cooling (fans, airflow, the liquid loop, a blocked inlet); a power brake: the node's power supply or the rack's power; then rerun `preflight check --burn 60`.",
            )
            .command(format!(
                "nvidia-smi -q -i {} -d PERFORMANCE,TEMPERATURE,POWER",
                t.gpu
            )),
        );
        if let Some(g) = g {
            f = super::with_identity(f, g);
        }
        out.push(f);
    }
    if out.is_empty() {
        out.push(
            Finding::new(
                id,
                Status::Pass,
                "gpus",
                format!(
                    "{} GPUs held their pace through {} s of sustained {} load, without thermal or power-brake events",
                    burn.gpus.len(),
                    burn.seconds,
                    burn.dtype
                ),
            )
            .with("seconds", burn.seconds),
        );
    }
    if let Some(e) = &burn.error {
        out.push(Finding::new(
            id,
            Status::Warn,
            "gpus",
            format!("the sustained load stopped early: {e}"),
        ));
    }
    out
}

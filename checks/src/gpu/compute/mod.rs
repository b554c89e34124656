//! `gpu.compute-slow`, `gpu.compute-wrong`, `gpu.compute-throttle` (issue 35): the GEMM test's
//! results judged, as pure functions of the facts.
//!
//! - **Slow**: per data type, each GPU against the same model's reference, the upper quartile
//!   (nearest rank) of that model's rates, the reference the fail-slow judgment of links uses: a
//!   slow minority cannot move it. On one node the peers are the node's own GPUs; across the
//!   cluster, every GPU of the model. Below [`SLOW_SHARE`] of it is slow; below [`SPEC_SHARE`]
//!   of the published dense figure ([`expected`]) is slow even with no peer.
//! - **Wrong**: the checked multiply's product is exact (see the worker), so any wrong element
//!   is a fault, and every correct GPU returns the same checksum whatever its model or cuBLAS.
//! - **Throttle**: the sustained load's timeline ([`burn`]).

pub mod cluster;

pub mod burn;
pub mod expected;
#[cfg(test)]
mod tests;

use crate::core::{Finding, Fix, GpuCompute, GpuGemm, NodeFacts, Status};
use std::collections::{BTreeMap, BTreeSet};

/// A GPU below this share of its model's reference rate is slow (20% slower holds a
/// data-parallel job to its pace; healthy GPUs of one model measure within a few percent).
pub const SLOW_SHARE: f64 = 0.85;
/// Below this share of the published dense rate is slow whatever the peers do (cuBLAS reaches
/// 60 to 80% of it on large square multiplies).
pub const SPEC_SHARE: f64 = 0.5;
/// GPUs named one by one in a finding at most; the rest are counted.
const MAX_LISTED: usize = 8;

/// One GPU of one node.
#[derive(Clone, Copy)]
pub struct Sample<'a> {
    pub rank: u32,
    pub host: &'a str,
    pub gpu: &'a GpuGemm,
}

/// One slow GPU: its rate of one type, the reference, the published figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Slow {
    pub rank: u32,
    pub gpu: u32,
    pub dtype: String,
    pub tflops: f64,
    /// The model's reference among the peers judged with, when there were peers.
    pub reference: Option<f64>,
    pub peers: usize,
    pub expected: Option<f64>,
}

/// The upper quartile (nearest rank) of `values`.
pub fn reference(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = (0.75 * values.len() as f64).ceil() as usize;
    values.get(rank.saturating_sub(1)).copied()
}

/// The slow GPUs among `samples`, each type and model judged apart.
pub fn slow_gpus(samples: &[Sample]) -> Vec<Slow> {
    let mut groups: BTreeMap<(&str, &str), Vec<(Sample, f64)>> = BTreeMap::new();
    for s in samples {
        for r in &s.gpu.rates {
            groups
                .entry((s.gpu.model.as_str(), r.dtype.as_str()))
                .or_default()
                .push((*s, r.tflops));
        }
    }
    let mut out = Vec::new();
    for ((model, dtype), members) in &groups {
        let mut rates: Vec<f64> = members.iter().map(|(_, t)| *t).collect();
        let peers = rates.len();
        let reference = reference(&mut rates).filter(|_| peers >= 2);
        let expected = expected::dense_tflops(model, dtype);
        for (s, t) in members {
            let below_peers = reference.is_some_and(|r| *t < SLOW_SHARE * r);
            let below_spec = expected.is_some_and(|e| *t < SPEC_SHARE * e);
            if below_peers || below_spec {
                out.push(Slow {
                    rank: s.rank,
                    gpu: s.gpu.gpu,
                    dtype: (*dtype).to_string(),
                    tflops: *t,
                    reference: reference.filter(|_| below_peers),
                    peers,
                    expected,
                });
            }
        }
    }
    out.sort_by_key(|s| (s.rank, s.gpu));
    out
}

/// One GPU whose checked product is wrong: counted against the exact product, or (when its
/// count is zero) a checksum that differs from the other GPUs'.
#[derive(Clone, Debug, PartialEq)]
pub struct Wrong {
    pub rank: u32,
    pub gpu: u32,
    pub dtype: String,
    pub wrong_elements: u64,
    pub exact: bool,
    pub checksum: String,
    /// The checksum most GPUs returned for this type, when others were compared.
    pub usual: Option<String>,
    pub first_wrong: Option<crate::core::WrongElement>,
}

/// The wrong GPUs among `samples`.
pub fn wrong_gpus(samples: &[Sample]) -> Vec<Wrong> {
    let mut by_type: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for s in samples {
        for c in &s.gpu.checks {
            *by_type
                .entry(c.dtype.as_str())
                .or_default()
                .entry(c.checksum.as_str())
                .or_default() += 1;
        }
    }
    let usual = |dtype: &str| -> Option<&str> {
        let counts = by_type.get(dtype)?;
        let total: usize = counts.values().sum();
        let (sum, n) = counts.iter().max_by_key(|(_, n)| **n)?;
        // A majority only: two GPUs that disagree say nothing about which one is right.
        (*n * 2 > total && total >= 2).then_some(*sum)
    };
    let mut out = Vec::new();
    for s in samples {
        for c in &s.gpu.checks {
            let majority = usual(&c.dtype);
            let odd = majority.is_some_and(|m| m != c.checksum);
            if c.wrong_elements > 0 || odd {
                out.push(Wrong {
                    rank: s.rank,
                    gpu: s.gpu.gpu,
                    dtype: c.dtype.clone(),
                    wrong_elements: c.wrong_elements,
                    exact: c.exact,
                    checksum: c.checksum.clone(),
                    usual: majority.map(String::from),
                    first_wrong: c.first_wrong,
                });
            }
        }
    }
    out
}

/// The samples of one node's facts.
pub fn node_samples<'a>(rank: u32, facts: &'a NodeFacts) -> Vec<Sample<'a>> {
    facts
        .gpu
        .compute
        .iter()
        .flat_map(|c| c.gpus.iter())
        .map(|gpu| Sample {
            rank,
            host: facts.hostname.as_str(),
            gpu,
        })
        .collect()
}

/// The node's own judgment: its GPUs against each other and the published figures.
pub fn check(rank: u32, facts: &NodeFacts) -> Vec<Finding> {
    let Some(compute) = &facts.gpu.compute else {
        return Vec::new();
    };
    if let Some(why) = &compute.skipped {
        return [
            crate::gpu::ids::COMPUTE_SLOW,
            crate::gpu::ids::COMPUTE_WRONG,
        ]
        .iter()
        .map(|id| {
            Finding::new(
                *id,
                Status::Skip,
                "gpus",
                format!("GPU matrix-multiply test {why}"),
            )
        })
        .collect();
    }
    let samples = node_samples(rank, facts);
    let mut out = slow_findings(&samples, compute, &facts.hostname);
    out.extend(wrong_findings(&samples, compute, &facts.hostname));
    out.extend(burn::check(compute));
    if let Some(e) = &compute.error {
        out.push(
            Finding::new(
                crate::gpu::ids::COMPUTE_SLOW,
                Status::Warn,
                "gpus",
                format!("the GPU matrix-multiply test stopped early on {}: {e}", facts.hostname),
            )
            .fix(Fix::new(
                "Look at the GPUs with `nvidia-smi` (a hung GPU, an XID in `dmesg`), then rerun `preflight check --gemm`.",
            )),
        );
    }
    for g in compute.gpus.iter().filter(|g| g.error.is_some()) {
        out.push(
            gpu_finding(crate::gpu::ids::COMPUTE_SLOW, Status::Fail, g, &facts.hostname, format!(
                "GPU {} on {} could not run the matrix-multiply test: {}",
                g.gpu,
                facts.hostname,
                g.error.as_deref().unwrap_or_default()
            ))
            .fix(Fix::new("Look at this GPU with `nvidia-smi -q -i <gpu>` and the kernel log (`dmesg | grep -i xid`); reset or replace it.")),
        );
    }
    out
}

/// A finding about one GPU, with what names it.
pub fn gpu_finding(
    id: crate::core::FindingId,
    status: Status,
    g: &GpuGemm,
    host: &str,
    summary: String,
) -> Finding {
    let subject = match &g.pci_bus_id {
        Some(b) => format!("GPU {} ({b})", g.gpu),
        None => format!("GPU {}", g.gpu),
    };
    with_identity(
        Finding::new(id, status, subject, summary)
            .with("host", host)
            .with("gpu", g.gpu),
        g,
    )
}

/// The GPU's bus id, UUID and model added to a finding's evidence.
pub(crate) fn with_identity(f: Finding, g: &GpuGemm) -> Finding {
    f.with("pci_bus_id", &g.pci_bus_id)
        .with("uuid", &g.uuid)
        .with("model", &g.model)
}

/// "at 612 MHz of 1980, 88 C, 700 W of 700 W (limit lowered from 700 W), reasons: sw_power_cap".
pub fn state_text(g: &GpuGemm) -> String {
    let Some(s) = &g.state else {
        return "clocks not read (NVML)".into();
    };
    let mut parts = Vec::new();
    match (s.sm_clock_mhz, s.max_sm_clock_mhz) {
        (Some(c), Some(m)) => parts.push(format!("SM clock {c} of {m} MHz")),
        (Some(c), None) => parts.push(format!("SM clock {c} MHz")),
        _ => {}
    }
    if let Some(t) = s.temperature_c {
        parts.push(format!("{t} C"));
    }
    match (s.power_w, s.power_limit_w) {
        (Some(p), Some(l)) => parts.push(format!("{p:.0} W of a {l:.0} W limit")),
        (Some(p), None) => parts.push(format!("{p:.0} W")),
        _ => {}
    }
    if let (Some(l), Some(d)) = (s.power_limit_w, s.power_default_limit_w) {
        if l + 1.0 < d {
            parts.push(format!("power limit lowered from the default {d:.0} W"));
        }
    }
    if !s.clock_event_reasons.is_empty() {
        parts.push(format!(
            "clock events: {}",
            s.clock_event_reasons.join(", ")
        ));
    }
    parts.join(", ")
}

fn find<'a>(samples: &[Sample<'a>], rank: u32, gpu: u32) -> Option<&'a GpuGemm> {
    samples
        .iter()
        .find(|s| s.rank == rank && s.gpu.gpu == gpu)
        .map(|s| s.gpu)
}

/// The fix for a slow GPU, from what its state shows.
pub fn slow_fix(g: &GpuGemm) -> Fix {
    let s = g.state.clone().unwrap_or_default();
    let capped =
        matches!((s.power_limit_w, s.power_default_limit_w), (Some(l), Some(d)) if l + 1.0 < d);
    let hot = s.clock_event_reasons.iter().any(|r| r.contains("thermal"));
    let hint = if capped {
        "Its power limit was lowered: restore the default, then rerun `preflight check --gemm`."
    } else if hot {
        "It is held back by heat: check its cooling (fans, airflow, liquid loop), then rerun `preflight check --gemm`."
    } else {
        "Compare its clocks and throttle reasons with a healthy GPU (`nvidia-smi -q -d PERFORMANCE,CLOCK,POWER`); if nothing explains it, drain the node and have the GPU replaced."
    };
    let mut fix = Fix::new(hint).command(format!(
        "nvidia-smi -q -i {} -d PERFORMANCE,CLOCK,POWER,TEMPERATURE",
        g.gpu
    ));
    if capped {
        if let Some(d) = s.power_default_limit_w {
            fix = fix.command(format!("sudo nvidia-smi -i {} -pl {d:.0}", g.gpu));
        }
    }
    fix
}

fn slow_findings(samples: &[Sample], compute: &GpuCompute, host: &str) -> Vec<Finding> {
    let id = crate::gpu::ids::COMPUTE_SLOW;
    let slow = slow_gpus(samples);
    if slow.is_empty() {
        let rates: Vec<String> = rate_summary(samples);
        return vec![
            Finding::new(
                id,
                Status::Pass,
                "gpus",
                format!(
                    "{} GPUs multiply at their model's pace ({})",
                    samples.len(),
                    rates.join("; ")
                ),
            )
            .with("size", compute.size)
            .with("cublas_version", compute.cublas_version),
        ];
    }
    let mut out = Vec::new();
    let mut by_gpu: BTreeMap<u32, Vec<&Slow>> = BTreeMap::new();
    for s in &slow {
        by_gpu.entry(s.gpu).or_default().push(s);
    }
    for (gpu, list) in by_gpu {
        let Some(g) = find(samples, list[0].rank, gpu) else {
            continue;
        };
        let rates: Vec<String> = list.iter().map(|s| slow_text(s)).collect();
        let peers_slow = list.iter().any(|s| s.reference.is_some());
        out.push(
            gpu_finding(
                id,
                if peers_slow {
                    Status::Fail
                } else {
                    Status::Warn
                },
                g,
                host,
                format!(
                    "GPU {gpu} ({}) on {host} multiplies slowly: {}; {}",
                    g.model,
                    rates.join("; "),
                    state_text(g)
                ),
            )
            .with("rates", &g.rates)
            .with("state", &g.state)
            .fix(slow_fix(g)),
        );
    }
    out
}

/// "bf16 412 TFLOP/s, 58% of the H100 reference 712 (8 GPUs), 42% of the published 989".
pub fn slow_text(s: &Slow) -> String {
    let mut t = format!("{} {:.0} TFLOP/s", s.dtype, s.tflops);
    if let Some(r) = s.reference {
        t.push_str(&format!(
            ", {:.0}% of the model's reference {r:.0} (upper quartile of {} GPUs)",
            100.0 * s.tflops / r,
            s.peers
        ));
    }
    if let Some(e) = s.expected {
        t.push_str(&format!(
            ", {:.0}% of the published dense {e:.0}",
            100.0 * s.tflops / e
        ));
    }
    t
}

/// "NVIDIA H200: bf16 712, fp16 705, tf32 371 TFLOP/s (median of 8)".
pub fn rate_summary(samples: &[Sample]) -> Vec<String> {
    let mut by_model: BTreeMap<&str, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    let mut order: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for s in samples {
        for r in &s.gpu.rates {
            let types = order.entry(s.gpu.model.as_str()).or_default();
            if !types.contains(&r.dtype.as_str()) {
                types.push(r.dtype.as_str());
            }
            by_model
                .entry(s.gpu.model.as_str())
                .or_default()
                .entry(r.dtype.as_str())
                .or_default()
                .push(r.tflops);
        }
    }
    by_model
        .iter()
        .map(|(model, types)| {
            let n = samples.iter().filter(|s| s.gpu.model == *model).count();
            let list: Vec<String> = order[model]
                .iter()
                .filter_map(|t| {
                    let mut v = types.get(t)?.clone();
                    crate::infra::stats::median(&mut v).map(|m| format!("{t} {m:.0}"))
                })
                .collect();
            format!("{model}: {} TFLOP/s, median of {n}", list.join(", "))
        })
        .collect()
}

fn wrong_findings(samples: &[Sample], compute: &GpuCompute, host: &str) -> Vec<Finding> {
    let id = crate::gpu::ids::COMPUTE_WRONG;
    let wrong = wrong_gpus(samples);
    if wrong.is_empty() {
        let types: BTreeSet<&str> = samples
            .iter()
            .flat_map(|s| s.gpu.checks.iter().map(|c| c.dtype.as_str()))
            .collect();
        if types.is_empty() {
            return Vec::new();
        }
        return vec![
            Finding::new(
                id,
                Status::Pass,
                "gpus",
                format!(
                    "{} GPUs return the exact product of a {n}x{n} multiply in {} (every element checked; checksums agree)",
                    samples.len(),
                    types.into_iter().collect::<Vec<_>>().join(", "),
                    n = compute.check_size
                ),
            )
            .with("check_size", compute.check_size),
        ];
    }
    let mut out = Vec::new();
    for w in &wrong {
        let Some(g) = find(samples, w.rank, w.gpu) else {
            continue;
        };
        out.push(
            gpu_finding(id, Status::Fail, g, host, wrong_text(w, &g.model, host))
                .with("dtype", &w.dtype)
                .with("wrong_elements", w.wrong_elements)
                .with("checksum", &w.checksum)
                .with("usual_checksum", &w.usual)
                .with("first_wrong", w.first_wrong)
                .fix(wrong_fix(g)),
        );
    }
    out
}

/// What is wrong about one GPU's product, in words.
pub fn wrong_text(w: &Wrong, model: &str, host: &str) -> String {
    let count = if w.wrong_elements > 0 {
        format!(
            "{}{} elements of its {} product differ from the exact result",
            if w.exact { "" } else { "at least " },
            w.wrong_elements,
            w.dtype
        )
    } else {
        format!(
            "its {} product's checksum differs from the other GPUs' though no element was found wrong",
            w.dtype
        )
    };
    let first = w
        .first_wrong
        .map(|e| {
            format!(
                " (first at row {}, column {}: {} instead of {})",
                e.row, e.col, e.got, e.want
            )
        })
        .unwrap_or_default();
    let sums = match &w.usual {
        Some(u) if *u != w.checksum => {
            format!("; checksum {} where the others return {u}", w.checksum)
        }
        _ => String::new(),
    };
    format!(
        "GPU {} ({model}) on {host} computes wrong results: {count}{first}{sums}: silent data corruption",
        w.gpu
    )
}

/// The fix for a GPU that computes wrong results.
pub fn wrong_fix(g: &GpuGemm) -> Fix {
    Fix::new(
        "Take the node out of the job now (its results spoil the training without an error); run the vendor diagnostics and have the GPU replaced if they confirm it.",
    )
    .command(format!("nvidia-smi -q -i {} -d ECC,ROW_REMAPPER", g.gpu))
    .command("dcgmi diag -r 3")
}

/// The slow and wrong GPUs listed compactly: "gpu03 GPU 2, gpu07 GPU 0 and 3 more".
pub fn listed(names: &[String]) -> String {
    if names.len() <= MAX_LISTED {
        return names.join(", ");
    }
    format!(
        "{} and {} more",
        names[..MAX_LISTED].join(", "),
        names.len() - MAX_LISTED
    )
}

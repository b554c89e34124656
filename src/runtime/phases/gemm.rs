//! The GPUs' matrix-multiply test on this node (issue 35): runs the GEMM worker over every
//! visible GPU, samples NVML while it loads them, and puts what it measured into the facts
//! (`facts.gpu.compute`), where `check` and the cluster's coordinator judge it.

use crate::measure::gemm::protocol::Line;
use crate::measure::gemm::{self, GemmJob, libs};
use crate::runtime::job::GemmPlan;
use preflight_checks::model::{
    BurnSample, BurnTimeline, GemmBurn, GemmCheck, GemmRate, GpuCompute, GpuGemm, GpuLoadState,
    NodeFacts, WrongElement,
};
use preflight_checks::probe::gpu_load::LoadSampler;
use preflight_checks::root::Root;
use std::collections::BTreeMap;

/// m = n = k of the timed multiplies: large enough to be compute-bound on every GPU since Volta.
pub const SIZE: u32 = 8192;
/// m = n = k of the checked multiply (its result is verified exactly on the CPU).
pub const CHECK_SIZE: u32 = 4096;
/// Seed of the checked inputs: the same on every node, so results compare bit for bit.
pub const SEED: u64 = 35;

/// Runs the test when `plan` asks for it and records the result (or why it did not run);
/// `cap` bounds the worker's watchdog further (a cluster node must join in time).
pub fn measure_gpu_compute(
    root: &Root,
    facts: &mut NodeFacts,
    plan: GemmPlan,
    cap: Option<std::time::Duration>,
) {
    if !plan.run {
        return;
    }
    facts.gpu.compute = Some(measure(root, facts, plan, cap));
}

fn skipped(why: impl Into<String>) -> GpuCompute {
    GpuCompute {
        skipped: Some(why.into()),
        ..Default::default()
    }
}

fn measure(
    root: &Root,
    facts: &NodeFacts,
    plan: GemmPlan,
    cap: Option<std::time::Duration>,
) -> GpuCompute {
    let gpus = preflight_checks::visible_devices::visible_gpu_count(facts);
    if gpus == 0 {
        return skipped(match &facts.gpu.nvml_error {
            Some(e) => format!("no GPU to multiply on ({e})"),
            None => "no GPU to multiply on".to_string(),
        });
    }
    let fake = std::env::var_os(gemm::WORKER_ENV).is_some_and(|v| !v.is_empty());
    if !root.is_system() && !fake {
        return skipped("the GPUs are a fixture tree's (--root)");
    }
    let ld = std::env::var("LD_LIBRARY_PATH").ok();
    let found = libs::find(facts.nccl.library.as_deref(), ld.as_deref());
    if found.is_none() && !fake {
        return skipped(
            "no libcublas found (looked beside libnccl, in LD_LIBRARY_PATH and /usr/local/cuda/lib64): install PyTorch's CUDA wheels or nvidia-cublas-cu12",
        );
    }
    // A libcublas.so.13 is reached through a `libcublas.so` link (cudarc does not try .so.13);
    // the links live until the worker is done.
    let link = match &found {
        Some((_, file)) if libs::needs_link(file) => match libs::link_unversioned(file) {
            Ok(made) => Some(made),
            Err(e) => {
                return skipped(format!(
                    "cannot link {} as libcublas.so for the worker: {e}",
                    file.display()
                ));
            }
        },
        _ => None,
    };
    let lib_dirs: Vec<std::path::PathBuf> = link
        .iter()
        .map(|(_, d)| d.clone())
        .chain(found.iter().map(|(d, _)| d.clone()))
        .collect();
    let job = GemmJob {
        gpus,
        size: SIZE,
        check_size: CHECK_SIZE,
        burn_s: plan.burn_s,
        seed: SEED,
        timeout: cap.map_or_else(
            || gemm::timeout_for(gpus, plan.burn_s),
            |c| c.min(gemm::timeout_for(gpus, plan.burn_s)),
        ),
        lib_dirs,
        program: None,
    };
    let sampler = LoadSampler::open().ok();
    let mut buses: BTreeMap<u32, String> = BTreeMap::new();
    let mut states: BTreeMap<u32, GpuLoadState> = BTreeMap::new();
    let mut burns: BTreeMap<u32, Vec<BurnSample>> = BTreeMap::new();
    let sample = |buses: &BTreeMap<u32, String>, gpu: u32| {
        let bus = buses.get(&gpu)?;
        sampler.as_ref()?.read(bus)
    };
    let run = gemm::run(&job, &mut |line| match line {
        Line::Gpu(g) => {
            if let Some(b) = &g.pci_bus_id {
                buses.insert(g.gpu, b.clone());
            }
        }
        // Read while the GPU is still loaded (it goes on with the next type).
        Line::Rate(r) if !states.contains_key(&r.gpu) => {
            if let Some(s) = sample(&buses, r.gpu) {
                states.insert(r.gpu, s);
            }
        }
        Line::Burn(b) => burns.entry(b.gpu).or_default().push(BurnSample {
            t_s: b.t_s,
            tflops: b.tflops,
            state: sample(&buses, b.gpu).unwrap_or_default(),
        }),
        _ => {}
    });
    let mut out = assemble(facts, &run.lines, gpus, states);
    out.cublas_library = found.map(|(_, f)| f.display().to_string());
    if plan.burn_s > 0 {
        out.burn = Some(GemmBurn {
            seconds: plan.burn_s,
            dtype: out
                .gpus
                .iter()
                .find_map(|g| g.rates.first().map(|r| r.dtype.clone()))
                .unwrap_or_default(),
            gpus: burns
                .into_iter()
                .map(|(ordinal, samples)| BurnTimeline {
                    gpu: nvml_index(facts, buses.get(&ordinal), ordinal),
                    samples,
                })
                .collect(),
            error: run.error.clone(),
        });
    }
    if out.gpus.iter().all(|g| g.rates.is_empty()) {
        out.skipped = Some(
            run.error
                .clone()
                .unwrap_or_else(|| "the GEMM worker reported no GPU".into()),
        );
    } else {
        out.error = run.error;
    }
    out
}

/// NVML's index of the GPU at `bus` (CUDA numbers GPUs its own way), else the CUDA ordinal.
fn nvml_index(facts: &NodeFacts, bus: Option<&String>, ordinal: u32) -> u32 {
    bus.and_then(|b| crate::runtime::node::nvml_index_by_bus(&facts.gpu.gpus, b))
        .unwrap_or(ordinal)
}

/// The facts from the worker's lines: one entry per GPU it opened or failed on.
fn assemble(
    facts: &NodeFacts,
    lines: &[Line],
    gpus: u32,
    mut states: BTreeMap<u32, GpuLoadState>,
) -> GpuCompute {
    let mut by_ordinal: BTreeMap<u32, GpuGemm> = BTreeMap::new();
    let mut out = GpuCompute {
        size: SIZE,
        check_size: CHECK_SIZE,
        ..Default::default()
    };
    for line in lines {
        // A worker that names a GPU it was not asked for is not believed.
        if line.gpu().is_some_and(|g| g >= gpus) {
            continue;
        }
        match line {
            Line::Gpu(info) => {
                let index = nvml_index(facts, info.pci_bus_id.as_ref(), info.gpu);
                let known = facts.gpu.gpus.iter().find(|g| g.index == index);
                out.cublas_version = out.cublas_version.or(info.cublas_version);
                by_ordinal.insert(
                    info.gpu,
                    GpuGemm {
                        gpu: index,
                        pci_bus_id: info.pci_bus_id.clone(),
                        // CUDA's name of the device cuBLAS ran on (NVML's, where CUDA gives none).
                        model: if info.name.is_empty() {
                            known.map(|g| g.name.clone()).unwrap_or_default()
                        } else {
                            info.name.clone()
                        },
                        uuid: known.map(|g| g.uuid.clone()).filter(|u| !u.is_empty()),
                        compute_capability: Some(info.compute_capability.clone()),
                        ..Default::default()
                    },
                );
            }
            Line::Rate(r) => {
                if let Some(g) = by_ordinal.get_mut(&r.gpu) {
                    g.rates.push(GemmRate {
                        dtype: r.dtype.clone(),
                        tflops: r.tflops,
                        iters: r.iters,
                    });
                }
            }
            Line::Check(c) => {
                if let Some(g) = by_ordinal.get_mut(&c.gpu) {
                    g.checks.push(GemmCheck {
                        dtype: c.dtype.clone(),
                        checksum: c.checksum.clone(),
                        wrong_elements: c.wrong_elements,
                        wrong_rows: c.wrong_rows,
                        wrong_cols: c.wrong_cols,
                        exact: c.exact,
                        first_wrong: c.first_wrong.map(|(row, col, got, want)| WrongElement {
                            row,
                            col,
                            got,
                            want,
                        }),
                    });
                }
            }
            Line::GpuError { gpu, error } => {
                let g = by_ordinal.entry(*gpu).or_insert_with(|| GpuGemm {
                    gpu: *gpu,
                    ..Default::default()
                });
                g.error = Some(error.clone());
            }
            Line::TypeSkipped { gpu, dtype, reason } => {
                if let Some(g) = by_ordinal.get_mut(gpu) {
                    g.types_skipped.push(format!("{dtype}: {reason}"));
                }
            }
            Line::Burn(_) | Line::Done(_) | Line::Error(_) => {}
        }
    }
    for (ordinal, g) in &mut by_ordinal {
        g.state = states.remove(ordinal);
    }
    out.gpus = by_ordinal.into_values().collect();
    out.gpus.sort_by_key(|g| g.gpu);
    out
}

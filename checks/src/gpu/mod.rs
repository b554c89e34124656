//! Checks for the gpu concern (pure functions of facts): NVML, GPU count,
//! CUDA_VISIBLE_DEVICES, GPUs busy with other processes, MIG; and, across the
//! cluster, GPU counts or models that differ between nodes (`cluster.gpus`).

pub mod catalog;
pub mod compute;
pub mod health;
pub mod ids;
pub mod probe;
pub mod visible_devices;

use crate::core::CheckContext;
use crate::core::ClusterInput;
use crate::core::cluster_common::{rank_map, ranks_phrase};
use crate::core::{Finding, Fix, Gpu, NodeFacts, Status};
use crate::gpu::visible_devices::Visible;
use std::collections::{BTreeMap, BTreeSet};

/// GPU memory used by others above this share of the total counts as "in use".
const IN_USE_SHARE: f64 = 0.05;

pub fn check(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    let mut out = vec![check_nvml(facts, ctx)];
    out.push(check_count(facts, ctx));
    out.push(check_visible_devices(facts));
    out.extend(check_in_use(facts));
    out.push(check_mig(facts));
    out.extend(crate::gpu::health::check(facts, ctx));
    out
}

fn cuda_visible_devices(facts: &NodeFacts) -> Option<&str> {
    facts.env.get("CUDA_VISIBLE_DEVICES").map(String::as_str)
}

fn nvml_ok(facts: &NodeFacts) -> bool {
    facts.gpu.nvml_error.is_none()
}

fn nvml_fix() -> Fix {
    Fix::new(
        "Install the NVIDIA driver and confirm it with nvidia-smi; in a container, start it \
         with GPU access (docker --gpus all, with the NVIDIA container toolkit installed)",
    )
    .command("nvidia-smi")
    .command("docker run --gpus all ...")
    .command("sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker")
}

/// `gpu.nvml`: could NVML load, and which driver is this.
pub fn check_nvml(facts: &NodeFacts, ctx: &CheckContext) -> Finding {
    let g = &facts.gpu;
    match (&g.nvml_error, ctx.gpus_expected()) {
        (Some(reason), None) => Finding::new(
            crate::gpu::ids::NVML,
            Status::Skip,
            "nvml",
            format!("NVML unavailable and no GPUs expected: {reason}"),
        )
        .with("error", reason),
        (Some(reason), Some(n)) => Finding::new(
            crate::gpu::ids::NVML,
            Status::Fail,
            "nvml",
            format!("the job expects {n} GPU(s) but NVML could not load: {reason}"),
        )
        .with("error", reason)
        .with("expected", n)
        .fix(nvml_fix()),
        (None, _) => nvml_loaded(facts),
    }
}

/// NVML loaded: pass with the versions, or warn about GPUs NVML could not read fully.
fn nvml_loaded(facts: &NodeFacts) -> Finding {
    let g = &facts.gpu;
    let versions = format!(
        "NVIDIA driver {}, CUDA {} supported, {} GPU(s)",
        g.driver_version.as_deref().unwrap_or("(unknown)"),
        g.cuda_driver_version.as_deref().unwrap_or("(unknown)"),
        g.gpus.len()
    );
    let broken: Vec<&Gpu> = g.gpus.iter().filter(|x| x.error.is_some()).collect();
    let base = |status, summary: String| {
        Finding::new(crate::gpu::ids::NVML, status, "nvml", summary)
            .with("driver_version", &g.driver_version)
            .with("cuda_driver_version", &g.cuda_driver_version)
            .with("gpus", g.gpus.len())
    };
    if broken.is_empty() {
        return base(Status::Pass, versions);
    }
    let errors: Vec<String> = broken
        .iter()
        .map(|x| {
            format!(
                "GPU {}: {}",
                x.index,
                x.error.as_deref().unwrap_or_default()
            )
        })
        .collect();
    let mut fix = Fix::new(
        "Inspect the GPUs NVML could not read; a GPU that fell off the bus needs a reset or a \
         reboot",
    );
    for x in &broken {
        fix = fix.command(format!("nvidia-smi -q -i {}", x.index));
    }
    base(
        Status::Warn,
        format!("{versions}; NVML could not read: {}", errors.join("; ")),
    )
    .with("gpu_errors", &errors)
    .fix(fix)
}

fn visible(facts: &NodeFacts) -> Visible {
    visible_devices::resolve(cuda_visible_devices(facts), &facts.gpu.gpus)
}

/// `gpu.count`: enough visible GPUs for `--nproc-per-node` / `--expect-gpus`.
pub fn check_count(facts: &NodeFacts, ctx: &CheckContext) -> Finding {
    let expected = ctx.gpus_expected();
    let found = facts.gpu.gpus.len();
    if let Some(reason) = &facts.gpu.nvml_error {
        return match expected {
            None => Finding::new(
                crate::gpu::ids::COUNT,
                Status::Skip,
                "gpus",
                "no GPUs expected and NVML is unavailable",
            ),
            Some(n) => Finding::new(
                crate::gpu::ids::COUNT,
                Status::Error,
                "gpus",
                format!("cannot count GPUs (NVML unavailable: {reason}); the job expects {n}"),
            )
            .with("expected", n)
            .with("error", reason)
            .fix(nvml_fix()),
        };
    }
    let vis = visible(facts);
    let count = vis.count();
    let base = |status, summary: String| {
        Finding::new(crate::gpu::ids::COUNT, status, "gpus", summary)
            .with("found", found)
            .with("visible", count)
            .with("expected", expected)
            .with("cuda_visible_devices", cuda_visible_devices(facts))
    };
    match expected {
        None if found == 0 => base(Status::Skip, "no GPUs found and none expected".into()),
        None => base(Status::Pass, format!("{count} of {found} GPU(s) visible")),
        Some(n) if count >= n as usize => base(
            Status::Pass,
            format!("{count} GPU(s) visible, the job needs {n}"),
        ),
        Some(n) => base(
            Status::Fail,
            format!(
                "only {count} GPU(s) visible ({found} found{}) but the job needs {n}",
                match cuda_visible_devices(facts) {
                    Some(v) => format!(
                        ", CUDA_VISIBLE_DEVICES={}",
                        crate::infra::shellword::quoted(v)
                    ),
                    None => String::new(),
                }
            ),
        )
        .fix(count_fix(count, found, n, vis.set)),
    }
}

fn count_fix(visible: usize, found: usize, needed: u32, cvd_set: bool) -> Fix {
    let enough_here = found >= needed as usize;
    let mut fix = Fix::new(match (enough_here, cvd_set) {
        (true, true) => format!(
            "This node has {found} GPUs but CUDA_VISIBLE_DEVICES hides some: list {needed} of \
             them, or start one process per visible GPU"
        ),
        _ => format!(
            "This node has only {found} GPU(s): start one process per visible GPU, or run on a \
             node with {needed}"
        ),
    });
    if enough_here && cvd_set {
        let list: Vec<String> = (0..needed).map(|i| i.to_string()).collect();
        fix = fix.command(format!("export CUDA_VISIBLE_DEVICES={}", list.join(",")));
    }
    if visible > 0 {
        fix = fix.command(format!("torchrun --nproc-per-node={visible} ..."));
    }
    fix
}

/// `gpu.visible-devices`: CUDA_VISIBLE_DEVICES parses and names GPUs that exist, once each.
pub fn check_visible_devices(facts: &NodeFacts) -> Finding {
    let id = crate::gpu::ids::VISIBLE_DEVICES;
    let Some(value) = cuda_visible_devices(facts) else {
        return Finding::new(
            id,
            Status::Skip,
            "CUDA_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES is not set",
        );
    };
    // Without NVML, index ranges and UUIDs cannot be judged: check the form only.
    if !nvml_ok(facts) {
        return syntax_only(facts, value);
    }
    let shown_value = crate::infra::shellword::quoted(value);
    let found = facts.gpu.gpus.len();
    let vis = visible(facts);
    let base = |status, summary: String| {
        Finding::new(id, status, "CUDA_VISIBLE_DEVICES", summary)
            .with("value", value)
            .with("found", found)
            .with("visible", vis.count())
            .with(
                "visible_gpus",
                vis.gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
            )
    };
    if !vis.problems.is_empty() {
        let described: Vec<String> = vis.problems.iter().map(|p| p.describe()).collect();
        return base(
            Status::Fail,
            format!(
                "CUDA_VISIBLE_DEVICES={shown_value}: {}; CUDA will see {} GPU(s)",
                described.join("; "),
                vis.count()
            ),
        )
        .with("problems", &vis.problems)
        .fix(visible_fix(&facts.gpu.gpus));
    }
    if vis.count() == 0 && found > 0 {
        return base(
            Status::Warn,
            format!("CUDA_VISIBLE_DEVICES={shown_value} hides all {found} GPU(s) on this node"),
        )
        .fix(visible_fix(&facts.gpu.gpus));
    }
    base(
        Status::Pass,
        format!(
            "CUDA_VISIBLE_DEVICES={shown_value} shows {} of {found} GPU(s)",
            vis.count()
        ),
    )
}

/// Without NVML: judge only what needs no GPU list (garbage, stops, repeated indices).
fn syntax_only(facts: &NodeFacts, value: &str) -> Finding {
    let id = crate::gpu::ids::VISIBLE_DEVICES;
    let shown_value = crate::infra::shellword::quoted(value);
    // Pretend every index exists so only form problems remain.
    let many: Vec<Gpu> = (0..1024)
        .map(|i| Gpu {
            index: i,
            ..Default::default()
        })
        .collect();
    let vis = visible_devices::resolve(Some(value), &many);
    let form_problems: Vec<_> = vis
        .problems
        .iter()
        .filter(|p| {
            !matches!(
                p.kind,
                visible_devices::ProblemKind::UnknownUuid
                    | visible_devices::ProblemKind::AmbiguousUuid { .. }
                    | visible_devices::ProblemKind::IndexOutOfRange { .. }
            )
        })
        .collect();
    let reason = facts.gpu.nvml_error.clone().unwrap_or_default();
    if form_problems.is_empty() {
        return Finding::new(
            id,
            Status::Skip,
            "CUDA_VISIBLE_DEVICES",
            format!("CUDA_VISIBLE_DEVICES={shown_value} looks well formed; cannot match it against GPUs (NVML unavailable)"),
        )
        .with("value", value)
        .with("nvml_error", reason);
    }
    let described: Vec<String> = form_problems.iter().map(|p| p.describe()).collect();
    Finding::new(
        id,
        Status::Fail,
        "CUDA_VISIBLE_DEVICES",
        format!(
            "CUDA_VISIBLE_DEVICES={shown_value}: {}",
            described.join("; ")
        ),
    )
    .with("value", value)
    .with("problems", form_problems)
    .with("nvml_error", reason)
    .fix(
        Fix::new("Set CUDA_VISIBLE_DEVICES to a comma list of distinct GPU indices, or unset it")
            .command("unset CUDA_VISIBLE_DEVICES"),
    )
}

fn visible_fix(gpus: &[Gpu]) -> Fix {
    let all: Vec<String> = gpus.iter().map(|g| g.index.to_string()).collect();
    let mut fix = Fix::new(
        "List each GPU once, by an index below the GPU count or by a UUID from nvidia-smi -L; \
         or unset the variable to use every GPU",
    )
    .command("nvidia-smi -L")
    .command("unset CUDA_VISIBLE_DEVICES");
    if !all.is_empty() {
        fix = fix.command(format!("export CUDA_VISIBLE_DEVICES={}", all.join(",")));
    }
    fix
}

/// `gpu.in-use`: one warning per GPU that other processes hold.
pub fn check_in_use(facts: &NodeFacts) -> Vec<Finding> {
    let gpus = &facts.gpu.gpus;
    if gpus.is_empty() {
        return vec![Finding::new(
            crate::gpu::ids::IN_USE,
            Status::Skip,
            "gpus",
            "no GPUs to inspect",
        )];
    }
    let busy: Vec<Finding> = gpus.iter().filter_map(busy_gpu_finding).collect();
    if !busy.is_empty() {
        return busy;
    }
    vec![
        Finding::new(
            crate::gpu::ids::IN_USE,
            Status::Pass,
            "gpus",
            format!("no other process holds any of the {} GPU(s)", gpus.len()),
        )
        .with(
            "memory_used_bytes",
            gpus.iter().map(|g| g.memory_used_bytes).collect::<Vec<_>>(),
        ),
    ]
}

fn used_share(g: &Gpu) -> Option<f64> {
    match (g.memory_used_bytes, g.memory_total_bytes) {
        (Some(used), Some(total)) if total > 0 => Some(used as f64 / total as f64),
        _ => None,
    }
}

fn busy_gpu_finding(g: &Gpu) -> Option<Finding> {
    let share = used_share(g);
    let heavy = share.is_some_and(|s| s > IN_USE_SHARE);
    if g.processes.is_empty() && !heavy {
        return None;
    }
    let procs: Vec<String> = g
        .processes
        .iter()
        .map(|p| {
            let used = p
                .used_bytes
                .map(|b| format!(", {} MiB", b >> 20))
                .unwrap_or_default();
            format!("{} ({}{used})", p.pid, p.command.as_deref().unwrap_or("?"))
        })
        .collect();
    let used_text = match (g.memory_used_bytes, share) {
        (Some(u), Some(s)) => format!("{} MiB used ({:.0}%)", u >> 20, s * 100.0),
        _ => "memory use unknown".into(),
    };
    let who = if procs.is_empty() {
        "no compute process listed (another container or a graphics process?)".to_string()
    } else {
        format!("processes {}", procs.join(", "))
    };
    let mut fix = Fix::new(
        "Stop the processes holding this GPU before the job starts (they may be left over from a \
         crashed run), or pick other GPUs",
    )
    .command("nvidia-smi --query-compute-apps=pid,used_memory --format=csv");
    for p in &g.processes {
        fix = fix.command(format!("kill {}", p.pid));
    }
    Some(
        Finding::new(
            crate::gpu::ids::IN_USE,
            Status::Warn,
            format!("gpu{}", g.index),
            format!("GPU {} ({}) is in use: {used_text}; {who}", g.index, g.uuid),
        )
        .with("gpu", g.index)
        .with("uuid", &g.uuid)
        .with("memory_used_bytes", g.memory_used_bytes)
        .with("memory_total_bytes", g.memory_total_bytes)
        .with("processes", &g.processes)
        .fix(fix),
    )
}

/// `gpu.mig`: MIG slices a GPU into instances NCCL cannot use across processes well.
pub fn check_mig(facts: &NodeFacts) -> Finding {
    let gpus = &facts.gpu.gpus;
    if gpus.is_empty() {
        return Finding::new(
            crate::gpu::ids::MIG,
            Status::Skip,
            "gpus",
            "no GPUs to inspect",
        );
    }
    let mig: Vec<u32> = gpus
        .iter()
        .filter(|g| g.mig_enabled == Some(true))
        .map(|g| g.index)
        .collect();
    if mig.is_empty() {
        return Finding::new(
            crate::gpu::ids::MIG,
            Status::Pass,
            "gpus",
            "MIG is off on every GPU",
        );
    }
    let list: Vec<String> = mig.iter().map(|i| i.to_string()).collect();
    Finding::new(
        crate::gpu::ids::MIG,
        Status::Warn,
        format!("gpu{}", list.join(",gpu")),
        format!(
            "MIG is enabled on GPU(s) {}: NCCL does not support communication between MIG \
             instances, so multi-process jobs on them fail or fall back",
            list.join(", ")
        ),
    )
    .with("mig_gpus", &mig)
    .fix(
        Fix::new(
            "Disable MIG on the GPUs the job uses (needs root and an idle GPU; may need a reset)",
        )
        .command(format!("sudo nvidia-smi -i {} -mig 0", list.join(","))),
    )
}

/// `cluster.gpus`: GPU counts or models that differ between the nodes.
pub(crate) fn check_cluster_gpus(input: &ClusterInput) -> Finding {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    let mut models: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut unknown: Vec<u32> = Vec::new();
    for (rank, facts) in input.nodes {
        if facts.gpu.nvml_error.is_some() && facts.gpu.gpus.is_empty() {
            unknown.push(*rank);
            continue;
        }
        counts.insert(*rank, facts.gpu.gpus.len());
        let names: BTreeSet<String> = facts
            .gpu
            .gpus
            .iter()
            .map(|g| g.name.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect();
        models.insert(*rank, names.into_iter().collect());
    }
    unknown.sort_unstable();
    if counts.is_empty() {
        return Finding::new(
            crate::gpu::ids::GPUS,
            Status::Skip,
            "gpus",
            "no node could list its GPUs (NVML not loaded anywhere)",
        )
        .with("unknown", &unknown);
    }
    let distinct_counts: BTreeSet<usize> = counts.values().copied().collect();
    let distinct_models: BTreeSet<&Vec<String>> =
        models.values().filter(|m| !m.is_empty()).collect();
    let count_differs = distinct_counts.len() > 1;
    let model_differs = distinct_models.len() > 1;
    let base = |status, summary: String| {
        Finding::new(crate::gpu::ids::GPUS, status, "gpus", summary)
            .with("count", rank_map(&counts))
            .with("models", rank_map(&models))
            .with("unknown", &unknown)
    };
    if !count_differs && !model_differs {
        let n = distinct_counts.into_iter().next().unwrap_or(0);
        let model = distinct_models
            .into_iter()
            .next()
            .map(|m| m.join(" + "))
            .unwrap_or_else(|| "GPU".into());
        return base(
            Status::Pass,
            format!("{n} x {model} on each of {} nodes", counts.len()),
        );
    }
    let mut parts = Vec::new();
    let min = counts.values().copied().min().unwrap_or(0);
    if count_differs {
        let mut by_count: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for (r, c) in &counts {
            by_count.entry(*c).or_default().push(*r);
        }
        let t: Vec<String> = by_count
            .iter()
            .map(|(c, rs)| format!("{c} on {}", ranks_phrase(rs)))
            .collect();
        parts.push(format!("GPU count differs ({})", t.join("; ")));
    }
    if model_differs {
        let mut by_model: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for (r, m) in &models {
            if !m.is_empty() {
                by_model.entry(m.join(" + ")).or_default().push(*r);
            }
        }
        let t: Vec<String> = by_model
            .iter()
            .map(|(m, rs)| format!("{m} on {}", ranks_phrase(rs)))
            .collect();
        parts.push(format!(
            "GPU models differ ({}): the job runs at the pace of the slowest",
            t.join("; ")
        ));
    }
    let mut hint = String::new();
    if count_differs {
        hint.push_str(&format!(
            "torchrun starts --nproc-per-node processes on every node: use at most {min}, or fix the nodes with fewer GPUs. "
        ));
    }
    if model_differs {
        hint.push_str("Prefer nodes with one GPU model for one job. ");
    }
    hint.push_str("List each node's GPUs to compare");
    base(Status::Warn, parts.join("; "))
        .with("min_count", min)
        .fix(Fix::new(hint).command("nvidia-smi -L"))
}

/// The GPU node checks: NVML, count, visibility, use and health, then the GEMM test's results.
pub fn check_node(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    let mut out = check(facts, ctx);
    out.extend(compute::check(ctx.rank.unwrap_or(0), facts));
    out
}

/// The GPU cluster checks: count and model across nodes, health, and compute speed against the
/// model's peers.
pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let mut out = vec![check_cluster_gpus(input)];
    out.extend(health::cluster::gpu_health(input));
    out.extend(compute::cluster::gpu_compute(input));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::GpuProcess;

    fn node(n: u32) -> NodeFacts {
        let mut f = NodeFacts::default();
        f.gpu.driver_version = Some("570.124.06".into());
        f.gpu.cuda_driver_version = Some("12.8".into());
        f.gpu.gpus = (0..n)
            .map(|i| Gpu {
                index: i,
                name: "NVIDIA H200".into(),
                uuid: format!("GPU-{i}f00d000-0000-0000-0000-000000000000"),
                memory_used_bytes: Some(600 << 20),
                memory_total_bytes: Some(143_771 << 20),
                mig_enabled: Some(false),
                ..Default::default()
            })
            .collect();
        f
    }

    fn no_driver() -> NodeFacts {
        let mut f = NodeFacts::default();
        f.gpu.nvml_error = Some("NVIDIA driver library libnvidia-ml.so.1 not found".into());
        f
    }

    fn ctx(expect: Option<u32>) -> CheckContext {
        CheckContext {
            nproc_per_node: expect,
            ..Default::default()
        }
    }

    fn with_cvd(mut f: NodeFacts, v: &str) -> NodeFacts {
        f.env.insert("CUDA_VISIBLE_DEVICES".into(), v.into());
        f
    }

    fn one(fs: &[Finding], id: crate::core::FindingId) -> &Finding {
        let hits: Vec<&Finding> = fs.iter().filter(|f| f.id == id).collect();
        assert_eq!(hits.len(), 1, "{id}: {fs:#?}");
        hits[0]
    }

    #[test]
    fn nvml_skip_fail_pass() {
        let skip = check(&no_driver(), &ctx(None));
        assert_eq!(one(&skip, crate::gpu::ids::NVML).status, Status::Skip);
        assert!(one(&skip, crate::gpu::ids::NVML).fix.is_none());
        let fail = check(&no_driver(), &ctx(Some(8)));
        let f = one(&fail, crate::gpu::ids::NVML);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("libnvidia-ml.so.1"));
        let fix = f
            .fix
            .as_ref()
            .map(|x| x.commands.join(" "))
            .unwrap_or_default();
        assert!(
            fix.contains("nvidia-smi") && fix.contains("--gpus all"),
            "{fix}"
        );
        let pass = check(&node(8), &ctx(Some(8)));
        let p = one(&pass, crate::gpu::ids::NVML);
        assert_eq!(p.status, Status::Pass);
        assert_eq!(p.evidence["driver_version"], "570.124.06");
        assert!(p.summary.contains("CUDA 12.8"));
    }

    #[test]
    fn nvml_warns_about_gpus_it_could_not_read() {
        let mut f = node(2);
        f.gpu.gpus[1].error = Some("memory: GPU is lost".into());
        let w = check_nvml(&f, &ctx(None));
        assert_eq!(w.status, Status::Warn);
        assert!(
            w.summary.contains("GPU 1: memory: GPU is lost"),
            "{}",
            w.summary
        );
        assert_eq!(
            w.fix.map(|x| x.commands).unwrap_or_default(),
            vec!["nvidia-smi -q -i 1".to_string()]
        );
    }

    #[test]
    fn count_fails_when_fewer_visible_than_needed() {
        let f = with_cvd(node(8), "0,1,2,3");
        let out = check(&f, &ctx(Some(8)));
        let c = one(&out, crate::gpu::ids::COUNT);
        assert_eq!(c.status, Status::Fail);
        assert_eq!(c.evidence["visible"], 4);
        assert_eq!(c.evidence["found"], 8);
        assert_eq!(c.evidence["expected"], 8);
        let cmds = c
            .fix
            .as_ref()
            .map(|x| x.commands.clone())
            .unwrap_or_default();
        assert!(
            cmds.contains(&"torchrun --nproc-per-node=4 ...".to_string()),
            "{cmds:?}"
        );
        assert!(cmds.contains(&"export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7".to_string()));
        let few = check(&node(2), &ctx(Some(8)));
        let c = one(&few, crate::gpu::ids::COUNT);
        assert_eq!(c.status, Status::Fail);
        let fix = c.fix.clone().unwrap_or_default();
        assert!(fix.hint.contains("only 2 GPU(s)"), "{}", fix.hint);
        assert_eq!(
            fix.commands,
            vec!["torchrun --nproc-per-node=2 ...".to_string()]
        );
        // Every GPU hidden: no "--nproc-per-node=0" advice.
        let hidden = check(&with_cvd(node(8), "-1"), &ctx(Some(8)));
        let cmds = one(&hidden, crate::gpu::ids::COUNT)
            .fix
            .clone()
            .unwrap_or_default()
            .commands;
        assert!(cmds.iter().all(|c| !c.contains("=0 ")), "{cmds:?}");
    }

    #[test]
    fn count_passes_skips_and_errors() {
        assert_eq!(
            one(&check(&node(8), &ctx(Some(8))), crate::gpu::ids::COUNT).status,
            Status::Pass
        );
        assert_eq!(
            one(&check(&node(8), &ctx(None)), crate::gpu::ids::COUNT).status,
            Status::Pass
        );
        assert_eq!(
            one(&check(&node(0), &ctx(None)), crate::gpu::ids::COUNT).status,
            Status::Skip
        );
        assert_eq!(
            one(&check(&no_driver(), &ctx(None)), crate::gpu::ids::COUNT).status,
            Status::Skip
        );
        assert_eq!(
            one(&check(&no_driver(), &ctx(Some(1))), crate::gpu::ids::COUNT).status,
            Status::Error
        );
        let both = CheckContext {
            expect_gpus: Some(4),
            nproc_per_node: Some(2),
            ..Default::default()
        };
        assert_eq!(
            one(&check(&node(3), &both), crate::gpu::ids::COUNT).status,
            Status::Fail
        );
    }

    #[test]
    fn visible_devices_fail_with_exact_evidence() {
        let dup = check(&with_cvd(node(4), "0,1,1"), &ctx(None));
        let d = one(&dup, crate::gpu::ids::VISIBLE_DEVICES);
        assert_eq!(d.status, Status::Fail);
        assert_eq!(d.evidence["value"], "0,1,1");
        assert_eq!(d.evidence["visible"], 0);
        assert_eq!(d.evidence["problems"][0]["kind"], "duplicate");
        assert!(d.summary.contains("names GPU 1 again"), "{}", d.summary);
        assert!(d.fix.is_some());

        let missing = check(&with_cvd(node(2), "0,1,2,3"), &ctx(None));
        let m = one(&missing, crate::gpu::ids::VISIBLE_DEVICES);
        assert_eq!(m.status, Status::Fail);
        assert_eq!(m.evidence["problems"][0]["index"], 2);
        assert_eq!(m.evidence["problems"][0]["ignored"][0], "3");

        let uuid = check(&with_cvd(node(2), "GPU-deadbeef"), &ctx(None));
        assert_eq!(
            one(&uuid, crate::gpu::ids::VISIBLE_DEVICES).status,
            Status::Fail
        );
    }

    #[test]
    fn visible_devices_pass_skip_warn() {
        let unset = check(&node(4), &ctx(None));
        assert_eq!(
            one(&unset, crate::gpu::ids::VISIBLE_DEVICES).status,
            Status::Skip
        );
        let ok = check(&with_cvd(node(4), "3,2"), &ctx(None));
        let p = one(&ok, crate::gpu::ids::VISIBLE_DEVICES);
        assert_eq!(p.status, Status::Pass);
        assert_eq!(p.evidence["visible_gpus"], serde_json::json!([3, 2]));
        assert!(p.fix.is_none());
        let hidden = check(&with_cvd(node(4), "-1"), &ctx(None));
        assert_eq!(
            one(&hidden, crate::gpu::ids::VISIBLE_DEVICES).status,
            Status::Warn
        );
    }

    #[test]
    fn visible_devices_without_nvml_judges_form_only() {
        let fine = check(&with_cvd(no_driver(), "0,5,7"), &ctx(None));
        assert_eq!(
            one(&fine, crate::gpu::ids::VISIBLE_DEVICES).status,
            Status::Skip
        );
        let bad = check(&with_cvd(no_driver(), "0,0"), &ctx(None));
        assert_eq!(
            one(&bad, crate::gpu::ids::VISIBLE_DEVICES).status,
            Status::Fail
        );
        let garbage = check(&with_cvd(no_driver(), "cuda:0"), &ctx(None));
        assert_eq!(
            one(&garbage, crate::gpu::ids::VISIBLE_DEVICES).status,
            Status::Fail
        );
    }

    #[test]
    fn in_use_warns_per_busy_gpu_with_pids() {
        let mut f = node(3);
        f.gpu.gpus[1].processes = vec![GpuProcess {
            pid: 31337,
            used_bytes: Some(20 << 30),
            command: Some("python".into()),
        }];
        f.gpu.gpus[1].memory_used_bytes = Some(21 << 30);
        f.gpu.gpus[2].memory_used_bytes = Some(40 << 30);
        let out = check_in_use(&f);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|x| x.status == Status::Warn));
        assert_eq!(out[0].subject, "gpu1");
        assert!(
            out[0].summary.contains("31337 (python, 20480 MiB)"),
            "{}",
            out[0].summary
        );
        let cmds = out[0]
            .fix
            .as_ref()
            .map(|x| x.commands.clone())
            .unwrap_or_default();
        assert!(cmds.contains(&"kill 31337".to_string()));
        assert!(cmds[0].starts_with("nvidia-smi --query-compute-apps"));
        assert_eq!(out[1].subject, "gpu2");
    }

    #[test]
    fn in_use_passes_on_idle_gpus_and_skips_without_gpus() {
        let idle = check_in_use(&node(8));
        assert_eq!(idle.len(), 1);
        assert_eq!(idle[0].status, Status::Pass);
        assert_eq!(check_in_use(&no_driver())[0].status, Status::Skip);
    }

    #[test]
    fn mig_warns_when_enabled() {
        let mut f = node(2);
        assert_eq!(check_mig(&f).status, Status::Pass);
        f.gpu.gpus[1].mig_enabled = Some(true);
        let w = check_mig(&f);
        assert_eq!(w.status, Status::Warn);
        assert!(
            w.fix
                .as_ref()
                .is_some_and(|x| x.commands[0] == "sudo nvidia-smi -i 1 -mig 0")
        );
        assert_eq!(check_mig(&no_driver()).status, Status::Skip);
    }

    #[test]
    fn every_gpu_id_appears_once_when_all_is_well() {
        let out = check(&node(8), &ctx(Some(8)));
        for id in [
            crate::gpu::ids::NVML,
            crate::gpu::ids::COUNT,
            crate::gpu::ids::VISIBLE_DEVICES,
            crate::gpu::ids::IN_USE,
            crate::gpu::ids::MIG,
        ] {
            assert!(one(&out, id).status <= Status::Pass);
        }
    }
}

#[cfg(test)]
mod cluster_tests {
    use crate::core::Status;
    use crate::testkit::*;
    use serde_json::json;

    #[test]
    fn gpu_count_and_model_differences_warn() {
        let mut c = Cluster::healthy(3);
        c.facts[1].gpu.gpus.truncate(4);
        let fs = c.findings();
        let f = only(&fs, crate::gpu::ids::GPUS);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["count"]["1"], json!(4));
        assert_eq!(f.evidence["min_count"], json!(4));
        assert!(f.summary.contains("4 on rank 1"), "{}", f.summary);

        let mut c = Cluster::healthy(2);
        c.facts[1].gpu.gpus = (0..8).map(|i| gpu("NVIDIA A100-SXM4-80GB", i)).collect();
        let fs = c.findings();
        let f = only(&fs, crate::gpu::ids::GPUS);
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("models differ"), "{}", f.summary);
    }

    #[test]
    fn gpus_skip_without_nvml_anywhere() {
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            f.gpu.gpus.clear();
            f.gpu.nvml_error = Some("libnvidia-ml.so not found".into());
        }
        assert_eq!(
            only(&c.findings(), crate::gpu::ids::GPUS).status,
            Status::Skip
        );
    }
}

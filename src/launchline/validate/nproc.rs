//! `launch.nproc`: the workers per node against the GPUs this node can see.

use super::{CommandShape, Correction, finding, flag};
use crate::launchline::args::{Launcher, Parsed};
use preflight_checks::model::{Finding, Fix, NodeFacts, Status};

/// The workers per node the line asks for, as (flag shown, value, shown value, given on the line).
fn asked(p: &Parsed, plan: &CommandShape) -> (String, String, String, bool) {
    match p.launcher {
        Launcher::Accelerate => {
            let name = flag(p, "num-processes");
            match p.value("num-processes").map(|v| v.trim().parse::<u32>()) {
                Some(Ok(total)) => {
                    let nodes = plan.max_nodes().max(1);
                    let per = (total / nodes).max(1);
                    (
                        name,
                        per.to_string(),
                        format!("{per} ({total} over {nodes} node(s))"),
                        true,
                    )
                }
                Some(Err(_)) => (
                    name,
                    p.value("num-processes").unwrap_or_default().to_string(),
                    p.value("num-processes").unwrap_or_default().to_string(),
                    true,
                ),
                // accelerate's default: every visible GPU (or its config file).
                None => (
                    name,
                    "gpu".into(),
                    "every GPU (accelerate's default)".into(),
                    true,
                ),
            }
        }
        Launcher::Deepspeed if !p.has("nproc-per-node") => (
            flag(p, "nproc-per-node"),
            "gpu".into(),
            "every GPU (deepspeed's default)".into(),
            true,
        ),
        _ => {
            let value = p.value("nproc-per-node").unwrap_or("1").to_string();
            let shown = if p.has("nproc-per-node") {
                value.clone()
            } else {
                "1 (default)".to_string()
            };
            (
                flag(p, "nproc-per-node"),
                value,
                shown,
                p.has("nproc-per-node"),
            )
        }
    }
}

/// The worker count the line runs with, when it is a number (for the advice's reasons).
pub fn per_node(p: &Parsed, plan: &CommandShape) -> Option<u32> {
    asked(p, plan).1.trim().parse().ok()
}

pub(super) fn nproc(
    p: &Parsed,
    plan: &CommandShape,
    facts: &NodeFacts,
    cpu_only: bool,
) -> (Finding, Option<Correction>) {
    let (name, value, shown, given) = asked(p, plan);
    let value = value.as_str();
    let torch = p.launcher.is_torch() || p.launcher == Launcher::Deepspeed;
    let rank = plan.rank;
    let counted = facts.gpu.nvml_error.is_none();
    let visible = preflight_checks::visible_devices::visible_gpu_count(facts);
    let base = |status, summary: String| {
        finding(
            preflight_checks::launch::ids::NPROC,
            status,
            rank,
            shown.clone(),
            summary,
        )
        .with("nproc_per_node", value)
        .with("cpu_only", cpu_only)
        .with("visible_gpus", counted.then_some(visible))
        .with(
            "cuda_visible_devices",
            facts.env.get("CUDA_VISIBLE_DEVICES"),
        )
    };
    let no_driver = |n: String| {
        let why = facts.gpu.nvml_error.clone().unwrap_or_default();
        base(
            Status::Fail,
            format!("{name}={n} on rank {rank} asks for GPU workers, but no GPU can be used here: {why}; the workers stop at the first CUDA call (\"no CUDA GPUs are available\" / \"Found no NVIDIA driver\")"),
        )
        .with("nvml_error", &why)
        .fix(Fix::new(format!(
            "run on a node with the NVIDIA driver and GPUs (nvidia-smi must list them; in a container start it with --gpus all), or, for a CPU-only job, say so: preflight torchrun --no-gpu ... (and {name}=cpu or a count for gloo)"
        )))
    };
    if cpu_only {
        return (
            base(
                Status::Pass,
                format!(
                    "{name}={shown}: a CPU-only job (--no-gpu / --expect-gpus 0), so GPUs are not counted"
                ),
            ),
            None,
        );
    }
    match value.trim() {
        "cpu" => (base(Status::Pass, "one CPU worker per core (--nproc-per-node=cpu)".into()), None),
        "gpu" if !counted => (no_driver("gpu".into()), None),
        v @ ("gpu" | "auto" | "xpu") => {
            if !counted {
                let why = facts.gpu.nvml_error.clone().unwrap_or_default();
                return (base(Status::Skip, format!("{name}={v}: GPUs could not be counted here ({why})")), None);
            }
            if visible == 0 && v == "gpu" {
                let f = base(Status::Fail, format!("{name}=gpu on rank {rank}, but no GPU is visible: torchrun stops with \"Cuda is not available\""))
                    .fix(Fix::new(format!("check the driver and CUDA_VISIBLE_DEVICES, or use {name}=cpu")));
                return (f, None);
            }
            (base(Status::Pass, format!("{name}={v} starts {visible} worker(s): the visible GPUs")), None)
        }
        v => match v.parse::<u32>() {
            Ok(0) | Err(_) => {
                let f = base(Status::Fail, format!("{name}={v} on rank {rank} is not a worker count; torchrun accepts a number, gpu, cpu, xpu or auto"))
                    .fix(Fix::new(format!("use {name}={}", if counted && visible > 0 { visible.to_string() } else { "gpu".into() })));
                (f, None)
            }
            Ok(n) if !counted => (no_driver(n.to_string()), None),
            Ok(n) if n > visible && visible > 0 => {
                let f = base(
                    Status::Fail,
                    format!("{name}={n} but rank {rank} has only {visible} visible GPU(s): workers {visible}..{} fail with \"invalid device ordinal\" or share a GPU", n - 1),
                )
                .fix(Fix::new(format!("use {name}={visible}, or make more GPUs visible (CUDA_VISIBLE_DEVICES)")));
                let fix = torch.then(|| Correction::SetValue { name: "nproc-per-node", value: visible.to_string() });
                (f, fix)
            }
            Ok(n) if n > visible => {
                let f = base(Status::Fail, format!("{name}={n} but rank {rank} has no visible GPU"))
                    .fix(Fix::new(format!("check the driver and CUDA_VISIBLE_DEVICES, or use {name}=cpu for a CPU job")));
                (f, None)
            }
            Ok(n) if n < visible && !given => (
                base(Status::Warn, format!("--nproc-per-node is not given: torchrun starts 1 worker and {} of the {visible} GPUs stay idle", visible - 1))
                    .fix(Fix::new(format!("add --nproc-per-node={visible} (or gpu) to use every GPU"))),
                None,
            ),
            Ok(n) => (base(Status::Pass, format!("{n} worker(s) on {visible} visible GPU(s)")), None),
        },
    }
}

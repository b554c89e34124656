//! `launch.nproc`: the workers per node against the GPUs this node can see.

use super::{CommandShape, Correction, finding, flag};
use crate::launchline::args::Parsed;
use preflight_checks::model::{Finding, Fix, NodeFacts, Status};

pub(super) fn nproc(
    p: &Parsed,
    plan: &CommandShape,
    facts: &NodeFacts,
) -> (Finding, Option<Correction>) {
    let name = flag(p, "nproc-per-node");
    let value = p.value("nproc-per-node").unwrap_or("1");
    let shown = if p.has("nproc-per-node") {
        value.to_string()
    } else {
        "1 (default)".to_string()
    };
    let rank = plan.rank;
    let counted = facts.gpu.nvml_error.is_none();
    let visible = preflight_checks::visible_devices::visible_gpu_count(facts);
    let base = |status, summary: String| {
        finding("launch.nproc", status, rank, shown.clone(), summary)
            .with("nproc_per_node", value)
            .with("visible_gpus", counted.then_some(visible))
            .with(
                "cuda_visible_devices",
                facts.env.get("CUDA_VISIBLE_DEVICES"),
            )
    };
    match value.trim() {
        "cpu" => (base(Status::Pass, "one CPU worker per core (--nproc-per-node=cpu)".into()), None),
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
            Ok(n) if !counted => (
                base(Status::Skip, format!("{n} worker(s); GPUs could not be counted here ({})", facts.gpu.nvml_error.clone().unwrap_or_default())),
                None,
            ),
            Ok(n) if n > visible && visible > 0 => {
                let f = base(
                    Status::Fail,
                    format!("{name}={n} but rank {rank} has only {visible} visible GPU(s): workers {visible}..{} fail with \"invalid device ordinal\" or share a GPU", n - 1),
                )
                .fix(Fix::new(format!("use {name}={visible}, or make more GPUs visible (CUDA_VISIBLE_DEVICES)")));
                (f, Some(Correction::SetValue { name: "nproc-per-node", value: visible.to_string() }))
            }
            Ok(n) if n > visible => {
                let f = base(Status::Fail, format!("{name}={n} but rank {rank} has no visible GPU"))
                    .fix(Fix::new(format!("check the driver and CUDA_VISIBLE_DEVICES, or use {name}=cpu for a CPU job")));
                (f, None)
            }
            Ok(n) if n < visible && !p.has("nproc-per-node") => (
                base(Status::Warn, format!("--nproc-per-node is not given: torchrun starts 1 worker and {} of the {visible} GPUs stay idle", visible - 1))
                    .fix(Fix::new(format!("add --nproc-per-node={visible} (or gpu) to use every GPU"))),
                None,
            ),
            Ok(n) => (base(Status::Pass, format!("{n} worker(s) on {visible} visible GPU(s)")), None),
        },
    }
}

//! One node on its own: probe (through `Root`), judge its facts, advise, and build its report.

use crate::advise::{AdviceInput, advise_node};
use crate::report::ReportBuilder;
use crate::runtime::job::JobShape;
use preflight_checks::CheckContext;
use preflight_checks::model::{Finding, Mode, NodeFacts, Report};
use preflight_checks::probe::{self, ProbeOptions};
use preflight_checks::root::Root;

/// Probes this node (through `root`).
pub fn probe_facts(root: &Root, master_port: u16, no_gpu: bool) -> NodeFacts {
    let opts = ProbeOptions {
        master_port,
        env: probe::env::all(),
        skip_gpu: no_gpu,
    };
    let mut facts = probe::collect(root, &opts);
    fake_gpus_for_tests(&mut facts);
    facts
}

/// Test hook for machines without GPUs: `PREFLIGHT_TEST_FAKE_GPUS=N` adds N GPUs named as fakes
/// and takes `PREFLIGHT_NCCL_WORKER` (the fake NCCL worker) as the libnccl, so the NCCL
/// all-reduce path can run end to end with a fake worker in CI.
pub const FAKE_GPUS_HOOK: &str = "PREFLIGHT_TEST_FAKE_GPUS";

fn fake_gpus_for_tests(facts: &mut NodeFacts) {
    let Some(n) = std::env::var(FAKE_GPUS_HOOK)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
    else {
        return;
    };
    facts.gpu.nvml_error = None;
    facts.gpu.gpus = (0..n.min(16))
        .map(|i| preflight_checks::model::Gpu {
            index: i,
            name: format!("fake GPU {i} ({FAKE_GPUS_HOOK})"),
            uuid: format!("GPU-fake-{i}"),
            ..Default::default()
        })
        .collect();
    if let Ok(worker) = std::env::var(crate::measure::nccl::WORKER_ENV) {
        facts.nccl.library = Some(worker);
        facts.nccl.error = None;
    }
}

/// One node's own findings as `rank`. Only rank 0 binds the master port, so `port.in-use` is
/// judged there alone.
pub fn node_findings(
    rank: u32,
    facts: &NodeFacts,
    master_port: u16,
    shape: JobShape,
) -> Vec<Finding> {
    let ctx = CheckContext {
        rank: Some(rank),
        master_port,
        nproc_per_node: shape.nproc_per_node,
        expect_gpus: shape.expect_gpus,
        nnodes: shape.nnodes,
        world_size: world_size(facts, shape),
        xid_window_s: shape.xid_window_s,
    };
    preflight_checks::check_node(facts, &ctx)
        .into_iter()
        .filter(|f| rank == 0 || f.id != "port.in-use")
        .collect()
}

/// Ranks in the job: nodes × processes per node (`--nproc-per-node`, else the launch line's,
/// else this node's visible GPUs, else 1), when the number of nodes is known.
pub fn world_size(facts: &NodeFacts, shape: JobShape) -> Option<u32> {
    let per_node = shape
        .nproc_per_node
        .or(shape.line_nproc)
        .unwrap_or_else(|| preflight_checks::visible_devices::visible_gpu_count(facts).max(1));
    shape.nnodes.map(|n| n.saturating_mul(per_node))
}

/// Judges one node's facts (`preflight check`) and builds its report, with the advice.
pub fn judge(facts: NodeFacts, master_port: u16, shape: JobShape, script: &[String]) -> Report {
    judge_as(0, facts, master_port, shape, script)
}

/// [`judge`] for a node whose rank is known (from the launcher's environment).
pub fn judge_as(
    rank: u32,
    facts: NodeFacts,
    master_port: u16,
    shape: JobShape,
    script: &[String],
) -> Report {
    let findings = node_findings(rank, &facts, master_port, shape);
    let recommendation = advise_node(
        &facts,
        &AdviceInput {
            master_port,
            nproc_per_node: shape.nproc_per_node,
            script: script.to_vec(),
        },
    );
    ReportBuilder::single(Mode::Node, rank, facts)
        .findings(findings)
        .recommendation(Some(recommendation))
        .build()
}

//! One node on its own: probe (through `Root`), judge its facts, advise, and build its report.

use crate::advise::{AdviceInput, advise_node};
use crate::report::ReportBuilder;
use crate::runtime::job::JobShape;
use crate::runtime::seams::Seams;
use preflight_checks::CheckContext;
use preflight_checks::model::{Finding, Mode, NodeFacts, Report};
use preflight_checks::probe::{self, ProbeOptions};
use preflight_checks::root::Root;

/// Probes this node (through `root`); `seams` may stand in for parts of it (tests).
pub fn probe_facts(root: &Root, master_port: u16, no_gpu: bool, seams: &dyn Seams) -> NodeFacts {
    let opts = ProbeOptions {
        master_port,
        env: probe::env::all(),
        skip_gpu: no_gpu,
    };
    let mut facts = probe::collect(root, &opts);
    if root.is_system() {
        // Which running Slurm jobs hold the master port, as slurmd says (only when one may).
        crate::slurmd::confirm_port_holders(&mut facts.ports);
    }
    seams.probed(&mut facts);
    facts
}

/// NVML's index of the GPU at PCI address `bus` (CUDA's or NVML's form): CUDA numbers the
/// GPUs it sees its own way (CUDA_VISIBLE_DEVICES, its own order), the facts by NVML's index.
pub fn nvml_index_by_bus(gpus: &[preflight_checks::model::Gpu], bus: &str) -> Option<u32> {
    let bdf = preflight_checks::probe::gpu_node::sysfs_bdf(bus)?;
    gpus.iter()
        .find(|g| {
            preflight_checks::probe::gpu_node::sysfs_bdf(&g.pci_bus_id).as_deref() == Some(&bdf)
        })
        .map(|g| g.index)
}

/// The GPUs' copy bandwidth (issue 22), measured by `check` and by every node of `cluster`
/// (which compares the nodes), on this machine's own GPUs only (a fixture tree's GPUs
/// are not this machine's). Bounded by `gpu_bw::BUDGET_PER_GPU` per GPU.
pub fn measure_gpu_bandwidth(root: &Root, facts: &mut NodeFacts) {
    // CUDA numbers the GPUs it sees (CUDA_VISIBLE_DEVICES, its own order): measure that many,
    // then name each by NVML's index through its PCI address.
    let visible = preflight_checks::visible_devices::visible_gpu_count(facts);
    let gpus: Vec<u32> = (0..visible).collect();
    let known = facts.gpu.gpus.clone();
    let Some(node) = facts.gpu.node_health.as_mut() else {
        return;
    };
    if !root.is_system() {
        node.bandwidth_skipped =
            Some("not measured: the GPUs are a fixture tree's (--root)".into());
        return;
    }
    let nvml_index = |bus: &Option<String>| nvml_index_by_bus(&known, bus.as_deref()?);
    match crate::measure::gpu_bw::measure(&gpus) {
        Ok(mut rows) => {
            let buses: Vec<(u32, Option<String>)> = rows
                .iter()
                .filter(|r| r.kind != "p2p")
                .map(|r| (r.gpu, r.pci_bus_id.clone()))
                .collect();
            let to_nvml = |ordinal: u32| {
                buses
                    .iter()
                    .find(|(o, _)| *o == ordinal)
                    .and_then(|(_, b)| nvml_index(b))
                    .unwrap_or(ordinal)
            };
            for r in &mut rows {
                r.gpu = to_nvml(r.gpu);
                r.peer = r.peer.map(to_nvml);
            }
            node.bandwidth = rows;
        }
        Err(why) => node.bandwidth_skipped = Some(why),
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
        .filter(|f| rank == 0 || f.id != preflight_checks::ports::ids::IN_USE)
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
            nnodes: shape.nnodes,
        },
    );
    ReportBuilder::single(Mode::Node, rank, facts)
        .findings(findings)
        .recommendation(Some(recommendation))
        .build()
}

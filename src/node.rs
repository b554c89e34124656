//! Node mode: probe (or load) this node's facts, run the checks, advise, and build the report.

use crate::advise::{AdviceInput, advise_node};
use preflight_checks::CheckContext;
use preflight_checks::model::{self, Mode, NodeEntry, NodeFacts, Report, SCHEMA, Tool};
use preflight_checks::probe::{self, ProbeOptions};
use preflight_checks::root::Root;
use std::path::Path;

/// Everything a node check needs.
#[derive(Clone, Debug, Default)]
pub struct NodeRun {
    pub master_port: u16,
    pub nproc_per_node: Option<u32>,
    pub expect_gpus: Option<u32>,
    pub script: Vec<String>,
}

/// This tool's name and version, as written in every report.
pub fn tool() -> Tool {
    Tool {
        name: "preflight".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

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

/// Reads a facts file written by `preflight facts`.
pub fn load_facts(path: &Path) -> anyhow::Result<NodeFacts> {
    let bytes = std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("cannot read facts file {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a preflight facts file: {e}", path.display()))
}

/// Judges one node's facts and builds its report.
pub fn judge(facts: NodeFacts, run: &NodeRun) -> Report {
    let ctx = CheckContext {
        rank: Some(0),
        master_port: run.master_port,
        nproc_per_node: run.nproc_per_node,
        expect_gpus: run.expect_gpus,
    };
    let findings = preflight_checks::check_node(&facts, &ctx);
    let recommendation = advise_node(
        &facts,
        &AdviceInput {
            master_port: run.master_port,
            nproc_per_node: run.nproc_per_node,
            script: run.script.clone(),
        },
    );
    Report {
        schema: SCHEMA.to_string(),
        tool: tool(),
        mode: Mode::Node,
        status: model::overall_status(&findings),
        nodes: vec![NodeEntry {
            rank: 0,
            hostname: facts.hostname.clone(),
            facts,
        }],
        findings,
        links: Vec::new(),
        collectives: Vec::new(),
        recommendation: Some(recommendation),
    }
}

//! `preflight check`: this node's facts (probed, or from `--facts`), judged and advised. Under a
//! launcher (`MASTER_ADDR`, `RANK`/`NODE_RANK`, `WORLD_SIZE`, Slurm, a Kubernetes Indexed Job) the
//! placement is read as `preflight cluster` reads it, so the port checked is the job's and the
//! launch command printed is this node's, with the master it was given.

use super::{Outcome, Shown, load_facts};
use crate::advise::torchrun_command;
use crate::config::CheckJob;
use crate::placement::{self, LocalIdentity, Placement, PlacementFlags};
use crate::runtime::node::{judge_as, probe_facts};
use preflight_checks::model::{LaunchCommand, NodeFacts};
use preflight_checks::root::Root;

pub fn check(job: CheckJob) -> anyhow::Result<Outcome> {
    let facts = match &job.facts_file {
        Some(path) => load_facts(path)?,
        None => {
            let root = Root::at(&job.probe.root);
            let mut facts = probe_facts(&root, job.master_port, job.probe.no_gpu);
            match hook_without_copies(&job) {
                None => measure_gpu_bandwidth(&root, &mut facts),
                Some(hook) => {
                    if let Some(node) = facts.gpu.node_health.as_mut() {
                        node.bandwidth_skipped = Some(format!(
                            "not measured in the {hook} (it must finish within its host's time limit, and the copies take up to {} s per GPU): run `preflight check` to measure them",
                            crate::measure::gpu_bw::BUDGET_PER_GPU.as_secs()
                        ));
                    }
                }
            }
            facts
        }
    };
    let resolved = resolve(&job, &facts);
    // The job's size: --nnodes, else the launcher's (WORLD_SIZE, Slurm, torchrun variables).
    let launcher_nnodes = resolved.as_ref().map(|p| p.nnodes);
    let placed = resolved.filter(|p| p.nnodes > 1 && !p.rank_pending());
    let rank = placed.as_ref().map_or(0, |p| p.rank);
    let shape = match job.shape.nnodes.or(launcher_nnodes) {
        Some(n) => job.shape.with_nnodes(n),
        None => job.shape,
    };
    let mut report = judge_as(rank, facts, job.master_port, shape, &job.script);
    if let (Some(p), Some(rec)) = (&placed, report.recommendation.as_mut()) {
        let nproc = job.shape.nproc_per_node.unwrap_or_else(|| {
            report
                .nodes
                .first()
                .map(|n| preflight_checks::visible_devices::visible_gpu_count(&n.facts).max(1))
                .unwrap_or(1)
        });
        rec.reasons.push(format!(
            "placement from the launcher's environment ({}): this node is rank {} of {}, master {} (the launch line below is this node's, with that master)",
            p.source,
            p.rank,
            p.nnodes,
            preflight_checks::net::host_port(&p.master_addr, p.master_port)
        ));
        rec.master_addr = Some(p.master_addr.clone());
        rec.launch = vec![LaunchCommand {
            node_rank: p.rank,
            command: torchrun_command(
                &rec.env,
                &p.nnodes.to_string(),
                nproc,
                &p.rank.to_string(),
                &p.master_addr,
                p.master_port,
                &job.script,
            ),
        }];
        rec.standalone = None;
    }
    let shown = Shown {
        report,
        view: job.view,
        rank: 0,
        your_command: None,
    };
    if let Some(hook) = &job.slurm {
        let result = super::hooks::run(hook, &shown.report, &super::hooks::scontrol::Clients);
        return Ok(Outcome::Hook(Box::new(super::Hooked { shown, result })));
    }
    Ok(Outcome::Report(Box::new(shown)))
}

/// The hook this check runs as, when it is one that must stay fast (a Slurm HealthCheckProgram
/// or Prolog, a TaskProlog run for every task, a node-problem-detector plugin with a 5 s
/// timeout): those leave the copy bandwidth out, and say so.
fn hook_without_copies(job: &CheckJob) -> Option<&'static str> {
    use crate::cli::Format;
    use crate::config::SlurmMode;
    match (&job.slurm, job.view.format) {
        (Some(h), _) if h.mode == SlurmMode::Health => Some("Slurm health check"),
        (Some(_), _) => Some("Slurm prolog"),
        (None, Format::TaskProlog) => Some("TaskProlog"),
        (None, Format::Npd) => Some("node-problem-detector plugin"),
        _ => None,
    }
}

/// The GPUs' copy bandwidth (issue 22), on this machine's own GPUs only (a fixture tree's GPUs
/// are not this machine's). Bounded by `gpu_bw::BUDGET_PER_GPU` per GPU.
fn measure_gpu_bandwidth(root: &Root, facts: &mut NodeFacts) {
    // CUDA numbers the GPUs it sees (CUDA_VISIBLE_DEVICES, its own order): measure that many,
    // then name each by NVML's index through its PCI address.
    let visible = preflight_checks::visible_devices::visible_gpu_count(facts);
    let gpus: Vec<u32> = (0..visible).collect();
    let by_bus: Vec<(String, u32)> = facts
        .gpu
        .gpus
        .iter()
        .filter_map(|g| {
            preflight_checks::probe::gpu_node::sysfs_bdf(&g.pci_bus_id).map(|b| (b, g.index))
        })
        .collect();
    let Some(node) = facts.gpu.node_health.as_mut() else {
        return;
    };
    if !root.is_system() {
        node.bandwidth_skipped =
            Some("not measured: the GPUs are a fixture tree's (--root)".into());
        return;
    }
    let nvml_index = |bus: &Option<String>| {
        let bus = bus.as_deref()?;
        by_bus.iter().find(|(b, _)| b == bus).map(|(_, i)| *i)
    };
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

/// The placement the launcher's environment gives (as `preflight cluster` resolves it); the
/// caller keeps it as this node's place only when it names a multi-node job with a rank (no
/// launcher: the generic advice stands), and its node count for the world size either way.
fn resolve(job: &CheckJob, facts: &NodeFacts) -> Option<Placement> {
    let me = LocalIdentity::of(facts.hostname.clone(), &facts.net);
    let flags = PlacementFlags {
        master_port: job.master_port_flag,
        ..Default::default()
    };
    placement::resolve(&flags, &job.env, &me).ok()
}

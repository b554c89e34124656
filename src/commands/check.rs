//! `preflight check`: this node's facts (probed, or from `--facts`), judged and advised. Under a
//! launcher (`MASTER_ADDR`, `RANK`/`NODE_RANK`, `WORLD_SIZE`, Slurm, a Kubernetes Indexed Job) the
//! placement is read as `preflight cluster` reads it, so the port checked is the job's and the
//! launch command printed is this node's, with the master it was given.

use super::{Outcome, Shown, load_facts};
use crate::advise::torchrun_command;
use crate::config::CheckJob;
use crate::placement::{self, LocalIdentity, Placement, PlacementFlags};
use crate::runtime::node::{judge_as, measure_gpu_bandwidth, probe_facts};
use preflight_checks::model::{LaunchCommand, NodeFacts};
use preflight_checks::root::Root;

pub fn check(job: CheckJob) -> anyhow::Result<Outcome> {
    let facts = match &job.facts_file {
        Some(path) => load_facts(path)?,
        None => {
            let root = Root::at(&job.probe.root);
            let mut facts = probe_facts(
                &root,
                job.master_port,
                job.probe.no_gpu,
                job.probe.seams.as_ref(),
            );
            crate::runtime::phases::gemm::measure_gpu_compute(&root, &mut facts, job.gemm, None);
            facts.history = crate::history::summary(&job.probe.history, &facts.hostname);
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
    // --thorough: the NCCL all-reduce over this node's GPUs, judged as the cluster's is.
    let intra = (job.thorough && job.facts_file.is_none())
        .then(|| crate::runtime::phases::allreduce::intra::intra_node(&facts));
    let mut report = judge_as(rank, facts, job.master_port, shape, &job.script);
    if let Some(measured) = intra {
        let (results, not_run) = match measured {
            Ok(r) => (vec![r], None),
            Err(why) => (
                Vec::new(),
                Some(format!("the one-node NCCL all-reduce did not run: {why}")),
            ),
        };
        crate::report::add_findings(
            &mut report,
            preflight_checks::collective::check_collectives(
                &preflight_checks::collective::CollectiveInput {
                    results: &results,
                    links: &preflight_checks::model::Links::none(),
                    min_busbw_gb_s: None,
                    not_run,
                    one_node: true,
                    slow_parts: Vec::new(),
                    link_reference_gbit: None,
                },
            ),
        );
        report.collectives = results;
    }
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
    // The lemons: this node's past runs (facts.history) and this one; a live run is recorded.
    let host = report
        .nodes
        .first()
        .map(|n| n.hostname.clone())
        .unwrap_or_default();
    let info = crate::history::run_info(run_mode(&job), &job.env, None, &host);
    crate::history::judge_lemons(&mut report, &info);
    if job.facts_file.is_none() {
        // A store that cannot keep the run already warned (history.store) when it was read.
        let _ = crate::history::record(&job.probe.history, &report, &info, &host);
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

/// What the history calls this run: the hook it runs as, else `check`.
fn run_mode(job: &CheckJob) -> &'static str {
    use crate::cli::Format;
    use crate::config::SlurmMode;
    match (&job.slurm, job.view.format) {
        (Some(h), _) if h.mode == SlurmMode::Health => "slurm-health",
        (Some(_), _) => "slurm-prolog",
        (None, Format::TaskProlog) => "taskprolog",
        (None, Format::Npd) => "npd",
        _ => "check",
    }
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

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
        None => probe_facts(
            &Root::at(&job.probe.root),
            job.master_port,
            job.probe.no_gpu,
        ),
    };
    let placed = placed(&job, &facts);
    let rank = placed.as_ref().map_or(0, |p| p.rank);
    let mut report = judge_as(rank, facts, job.master_port, job.shape, &job.script);
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

/// The placement the launcher's environment gives (as `preflight cluster` resolves it), when it
/// names a multi-node job with a rank; None otherwise (no launcher: the generic advice stands).
fn placed(job: &CheckJob, facts: &NodeFacts) -> Option<Placement> {
    let me = LocalIdentity::of(facts.hostname.clone(), &facts.net);
    let flags = PlacementFlags {
        master_port: job.master_port_flag,
        ..Default::default()
    };
    placement::resolve(&flags, &job.env, &me)
        .ok()
        .filter(|p| p.nnodes > 1 && !p.rank_pending())
}

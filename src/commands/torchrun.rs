//! `preflight torchrun [OPTIONS] COMMAND`: check the user's own torchrun command on this node,
//! run the cluster preflight with exactly its endpoint and ranks, and give it back fixed.

use super::{Outcome, Shown, YourCommand, load_facts};
use crate::advise::{AdviceInput, advise_node};
use crate::config::{self, ClusterJob, JobShape, ProbeJob, TorchrunJob};
use crate::launchline::validate::LineJob;
use crate::launchline::{
    self, Judged, args, blocking_failures, command_finding, free_local_port, port_free, probe_port,
    validate,
};
use crate::placement::{self, LocalIdentity, PlacementFlags};
use crate::report::{ReportBuilder, add_findings};
use crate::runtime::agent;
use crate::runtime::node::{node_findings, probe_facts};
use crate::transport::events::Events;
use preflight_checks::model::{LaunchCommand, Mode, NodeFacts};
use preflight_checks::root::Root;

pub fn torchrun(job: TorchrunJob, events: &Events) -> anyhow::Result<Outcome> {
    let parsed = args::parse(job.words.clone());
    let shape = validate::shape_of(&parsed);
    let resolved = shape
        .endpoint
        .as_ref()
        .filter(|_| parsed.launcher != args::Launcher::Other)
        .map(|(host, _)| launchline::resolve_host(host));
    let probe = ProbeJob {
        root: job.probe.root.clone(),
        no_gpu: job.probe.no_gpu,
        job_env: parsed.line_env(),
        job_unset: parsed.head.unset.clone(),
        seams: job.probe.seams.clone(),
        history: job.probe.history.clone(),
    };
    let mut facts = match &job.facts_file {
        Some(path) => load_facts(path)?,
        None => probe_facts(
            &Root::at(&probe.root),
            probe_port(&shape),
            probe.no_gpu,
            probe.seams.as_ref(),
        ),
    };
    // The line's own `VAR=value` words are the job's environment: the node checks judge them.
    probe.overlay(&mut facts.env);
    let cluster = cluster_job(&job, &probe, &parsed, &shape, &facts)?;
    let line_job = LineJob {
        cpu_only: job.probe.no_gpu || job.expect_gpus == Some(0),
        script_file: job
            .facts_file
            .is_none()
            .then(|| launchline::script_file(&parsed))
            .flatten(),
        ..one_reading(&cluster, &job, &facts, &shape)
    };
    let judged = launchline::judge(parsed, &facts, resolved, line_job);
    let etcd = judged.shape.backend.starts_with("etcd");
    let blocking = blocking_failures(&judged);
    let other = judged.parsed.launcher == args::Launcher::Other;
    let asked = job.no_run || job.facts_file.is_some();
    if asked || etcd || other || !blocking.is_empty() {
        if !asked && other {
            events.log(format!(
                "not starting the rendezvous: {} is not a launcher preflight reads (see launch.args)",
                judged.parsed.head.program
            ));
        } else if !asked && etcd {
            events.log(
                "the etcd backend's endpoint is an etcd server, not a node: validating only (run `preflight cluster --hosts LIST` for the network checks)",
            );
        } else if !asked {
            events.log(format!(
                "not starting the rendezvous: it would wait for the timeout because of {}; fix those first",
                blocking.join(", ")
            ));
        }
        return Ok(node_only(job, judged, facts));
    }
    let mut done = agent::run_node(&cluster, events)?;
    let mut judged = judged;
    if !judged.shape.rank_given {
        // c10d: the rank this node was assigned at join picks its own environment (node_env).
        judged.shape.rank = done.rank;
    }
    add_findings(&mut done.report, judged.findings.iter().cloned());
    let (f, command, env_replaced) = command_finding(&judged, done.report.recommendation.as_ref());
    add_findings(&mut done.report, [f]);
    if let Some(why) = crate::history::record_node(
        &cluster.probe.history,
        &done.report,
        "torchrun",
        &cluster.env,
        done.rank,
    ) {
        events.log(format!("history: this run was not recorded: {why}"));
    }
    Ok(Outcome::Report(Box::new(Shown {
        report: done.report,
        view: job.view,
        rank: done.rank,
        your_command: Some(YourCommand {
            rank: judged.shape.rank,
            command,
            corrections: judged.fixes.len(),
            env_replaced,
        }),
    })))
}

/// The rank exactly as the real run resolves it (the same placement flags, environment and
/// identity `agent::run_node` uses), so `--no-run` and the run agree. None when the rank is
/// only known at join (c10d, not the endpoint's owner) or the placement cannot be resolved.
fn one_reading(
    cluster: &ClusterJob,
    job: &TorchrunJob,
    facts: &NodeFacts,
    shape: &validate::CommandShape,
) -> LineJob {
    if !shape.is_multi_node() || shape.rank_given {
        return LineJob::default();
    }
    let me = LocalIdentity::of(facts.hostname.clone(), &facts.net);
    match placement::resolve(&cluster.placement, &job.env, &me) {
        Ok(p) if !p.rank_pending() && p.source != placement::C10D_JOIN => LineJob {
            rank: Some(p.rank),
            rank_from: Some(p.source.to_string()),
            ..LineJob::default()
        },
        _ => LineJob::default(),
    }
}

/// `--no-run`: this node's checks, the `launch.*` findings and the fixed command.
fn node_only(job: TorchrunJob, judged: Judged, facts: NodeFacts) -> Outcome {
    let rank = judged.shape.rank;
    let port = probe_port(&judged.shape);
    // The line's own world: its nodes × its processes per node.
    let shape = JobShape {
        nnodes: judged.shape.nnodes.map(|(_, max)| max),
        line_nproc: validate::per_node(&judged.parsed, &judged.shape),
        ..JobShape::default()
    };
    let findings = node_findings(rank, &facts, port, shape);
    // The reasons speak of the line's own worker count, so "Why" and "Your command" agree.
    let mut rec = advise_node(
        &facts,
        &AdviceInput {
            master_port: port,
            nproc_per_node: validate::per_node(&judged.parsed, &judged.shape),
            script: judged.parsed.script_and_args(),
            nnodes: shape.nnodes,
        },
    );
    if rec_nproc_unknown(&judged) {
        rec.reasons.retain(|r| !r.starts_with("--nproc-per-node="));
    }
    let (f, command, env_replaced) = command_finding(&judged, Some(&rec));
    // One command for this node: the user's own, fixed (not a generic torchrun line beside it).
    rec.launch = vec![LaunchCommand {
        node_rank: rank,
        command: command.clone(),
    }];
    rec.standalone = None;
    let report = ReportBuilder::single(Mode::Node, rank, facts)
        .findings(findings)
        .findings(judged.findings.iter().cloned())
        .findings([f])
        .recommendation(Some(rec))
        .build();
    Outcome::Report(Box::new(Shown {
        report,
        view: job.view,
        rank,
        your_command: Some(YourCommand {
            rank,
            command,
            corrections: judged.fixes.len(),
            env_replaced,
        }),
    }))
}

/// The line's worker count is not a number (gpu, auto, a launcher's default): the advice's own
/// count would contradict it, so its reason is left out and `launch.nproc` judges the line's.
fn rec_nproc_unknown(j: &Judged) -> bool {
    validate::per_node(&j.parsed, &j.shape).is_none()
}

/// The cluster run with exactly the command's endpoint and ranks; a 1-node job runs on loopback.
pub fn cluster_job(
    job: &TorchrunJob,
    probe: &ProbeJob,
    parsed: &args::Parsed,
    shape: &validate::CommandShape,
    facts: &NodeFacts,
) -> anyhow::Result<ClusterJob> {
    let single = shape.standalone || shape.max_nodes() <= 1;
    let (nnodes, node_rank, master_addr, master_port) = if single {
        let port = match (&shape.endpoint, shape.standalone) {
            (Some((_, p)), false) if port_free(facts, *p) => Some(*p),
            _ => free_local_port(),
        };
        (1, Some(0), Some("127.0.0.1".to_string()), port)
    } else {
        let rank = if shape.rank_given {
            Some(shape.rank)
        } else if shape.backend == "static" {
            // torchrun's default rank 0 (launch.node-rank says why that is wrong).
            Some(0)
        } else {
            // c10d: ranks are assigned at join, the node owning the endpoint being rank 0.
            None
        };
        let (host, port) = shape.endpoint.clone().unzip();
        (shape.max_nodes(), rank, host, port)
    };
    Ok(ClusterJob {
        probe: probe.clone(),
        placement: PlacementFlags {
            nnodes: Some(nnodes),
            node_rank,
            master_addr,
            master_port,
            rdzv_id: parsed.value("rdzv-id").map(str::to_string),
            rdzv_backend: (!single && !shape.rank_given).then(|| shape.backend.clone()),
            ..Default::default()
        },
        env: job.env.clone(),
        token: job.token.clone(),
        timeout: job.timeout,
        timing: config::timing(job.quick, false),
        idle_test: config::idle_test(None, job.quick, false),
        allreduce: config::allreduce_plan(
            crate::cli::Allreduce::Auto,
            None,
            None,
            job.quick,
            false,
            job.timeout,
        )?,
        min_busbw: None,
        min_link_gbit: None,
        // The line's processes per node make the world size the scale checks judge (the
        // cluster run adds its nodes).
        shape: JobShape {
            line_nproc: validate::per_node(parsed, shape),
            ..JobShape::default()
        },
        script: parsed.script_and_args(),
        // An elastic `--nnodes=MIN:MAX`: the healthy set needs at least MIN nodes.
        healthy: preflight_checks::cluster::healthy_set::HealthyOptions {
            min_nodes: elastic_min_nodes(shape),
            ..Default::default()
        },
        whole_report: false,
        // As `cluster` without --quick: the GPUs multiply on every node.
        gemm: crate::runtime::job::GemmPlan::from_flags(false, false, None, !job.quick, false),
    })
}

/// The fewest nodes the line can train on: the MIN of an elastic `--nnodes=MIN:MAX`, else 1.
/// The healthy set must have at least that many.
fn elastic_min_nodes(shape: &validate::CommandShape) -> u32 {
    shape
        .nnodes
        .filter(|(min, max)| min != max)
        .map_or(1, |(min, _)| min.max(1))
}

#[cfg(test)]
mod healthy_tests {
    use super::*;

    fn shape(line: &str) -> validate::CommandShape {
        let words = crate::launchline::words_of(&[line.to_string()], &Default::default()).unwrap();
        validate::shape_of(&args::parse(words))
    }

    #[test]
    fn the_healthy_set_needs_the_min_of_an_elastic_nnodes() {
        assert_eq!(
            elastic_min_nodes(&shape("torchrun --nnodes=6:8 --nproc-per-node=8 t.py")),
            6
        );
        assert_eq!(elastic_min_nodes(&shape("torchrun --nnodes=4 t.py")), 1);
        assert_eq!(elastic_min_nodes(&shape("torchrun --standalone t.py")), 1);
    }
}

//! clap's structs plus the environment become validated jobs: every check of a flag lives here,
//! and nothing below `commands` ever sees a clap type.

use crate::cli::{self, Cli, Command, Format};
use crate::launchline::args::Word;
use crate::measure::nccl::worker::WorkerSpec;
use crate::measure::sizes::{parse_size, parse_sizes};
use crate::placement::{self, PlacementFlags};
use crate::runtime::job::Timing;
use crate::runtime::job::{AllreduceMode, AllreducePlan};
pub use crate::runtime::job::{ClusterJob, JobShape, ProbeJob, Token};
use crate::runtime::seams::{Fakes, vars};
use anyhow::anyhow;
use preflight_checks::cluster::healthy_set::HealthyOptions;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How a report is shown and kept: the format on stdout, the JSON copy, and `--strict`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub format: Format,
    pub output: Option<PathBuf>,
    pub strict: bool,
    /// `-v`: the terminal report also shows passes and skips.
    pub verbose: bool,
    /// `--full-report`: every rank prints the whole cluster report, not only rank 0.
    pub full_report: bool,
    /// `--prom-file`: Prometheus metrics for node_exporter's textfile collector.
    pub prom_file: Option<PathBuf>,
    /// `cluster --nodes-failed` / `--nodes-passed`: hostlist files of the verdict per node.
    pub nodes_failed: Option<PathBuf>,
    pub nodes_passed: Option<PathBuf>,
    /// `--proceed-with-healthy-set`: a failing cluster whose healthy set meets the constraints exits 0.
    pub proceed_with_healthy_set: bool,
}

/// `preflight check`.
#[derive(Clone, Debug)]
pub struct CheckJob {
    pub probe: ProbeJob,
    /// `--master-port`, else the launcher's `MASTER_PORT` (`PET_MASTER_PORT`), else 29500.
    pub master_port: u16,
    /// `--master-port` as given (the placement reads the environment only for what it leaves open).
    pub master_port_flag: Option<u16>,
    /// The launcher's environment (MASTER_ADDR, RANK, WORLD_SIZE, Slurm ...), read as `cluster` reads it.
    pub env: BTreeMap<String, String>,
    pub shape: JobShape,
    /// Judge this facts file instead of probing.
    pub facts_file: Option<PathBuf>,
    pub script: Vec<String>,
    pub view: View,
    /// `--slurm-health` / `--slurm-prolog`: run as a Slurm hook on this node.
    pub slurm: Option<SlurmHook>,
    /// `--thorough`: an NCCL all-reduce over this node's GPUs too.
    pub thorough: bool,
    /// The GPUs' matrix-multiply test (`--gemm`, `--burn`, `--thorough`; a Slurm hook only when asked).
    pub gemm: crate::runtime::job::GemmPlan,
}

/// Which Slurm hook `preflight check` runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlurmMode {
    /// HealthCheckProgram: the exit status is only logged; preflight drains and resumes itself.
    Health,
    /// Prolog: a non-zero exit drains the node and requeues the job.
    Prolog,
}

/// `--slurm-health` / `--slurm-prolog` with `--drain`, `--dry-run`, `--slurm-node`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmHook {
    pub mode: SlurmMode,
    pub drain: bool,
    pub dry_run: bool,
    /// The node's Slurm name: `--slurm-node`, else SLURMD_NODENAME; None: the short hostname.
    pub node: Option<String>,
    /// `--strict`: a warn finding drains too.
    pub strict: bool,
    /// `--drain-lemons`: a lemon drains (and keeps drained) a node that passes now.
    pub drain_lemons: bool,
}

/// `preflight facts`.
#[derive(Clone, Debug)]
pub struct FactsJob {
    pub probe: ProbeJob,
    pub master_port: u16,
    pub output: Option<PathBuf>,
}

/// `preflight torchrun`.
#[derive(Clone, Debug)]
pub struct TorchrunJob {
    pub probe: ProbeJob,
    pub no_run: bool,
    pub facts_file: Option<PathBuf>,
    pub token: Option<Token>,
    pub timeout: Duration,
    pub quick: bool,
    /// The user's command, as argv or one pasted line split as a shell would.
    pub words: Vec<Word>,
    pub env: BTreeMap<String, String>,
    /// `--expect-gpus`: 0 marks a CPU-only job.
    pub expect_gpus: Option<u32>,
    pub view: View,
}

/// `preflight launch`.
#[derive(Clone, Debug)]
pub struct LaunchJob {
    pub report: PathBuf,
    pub format: cli::LaunchFormat,
    pub nproc_per_node: Option<u32>,
    /// `--script S -- args` or `-- S args`: the script and its arguments.
    pub script: Vec<String>,
    /// `--healthy-set`: launch on the healthy set; with constraints, the set is computed again.
    pub healthy_set: bool,
    /// `--min-nodes` / `--nodes-multiple-of` / `--exclude-slow` given with `--healthy-set`.
    pub recompute: Option<HealthyOptions>,
}

/// `preflight render`: a saved report, shown as `view` says (never written again).
#[derive(Clone, Debug)]
pub struct RenderJob {
    pub report: PathBuf,
    pub view: View,
}

/// `preflight explain`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExplainJob {
    /// An id, and the root this host's files are read under (`PREFLIGHT_ROOT`, else /): an
    /// entry about this host's own setup says what this host has.
    One {
        id: String,
        root: PathBuf,
    },
    List,
    /// `--coverage`: the error texts `--log` recognises, by source; with `json`, each of them.
    Coverage {
        json: bool,
    },
    /// `--log FILE` (`-`: standard input).
    Log {
        path: std::path::PathBuf,
        format: crate::cli::ExplainFormat,
    },
    /// `--dumps` and/or `--ras`, with an optional `--log`: a hang, judged across ranks.
    Hang(HangJob),
}

/// `preflight explain --dumps ... --ras ... [--log ...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HangJob {
    pub log: Option<std::path::PathBuf>,
    /// Folders, files or globs.
    pub dumps: Vec<String>,
    pub prefix: Option<String>,
    pub ras: Option<RasSource>,
    pub format: crate::cli::ExplainFormat,
}

/// Where NCCL RAS's status comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RasSource {
    File(std::path::PathBuf),
    Stdin,
    /// A live job's RAS port.
    Query {
        host: String,
        port: u16,
    },
}

/// `--ras`: `-`, an existing file, or `[HOST:]PORT`.
pub fn ras_source(arg: &str) -> anyhow::Result<RasSource> {
    if arg == "-" {
        return Ok(RasSource::Stdin);
    }
    if std::path::Path::new(arg).exists() {
        return Ok(RasSource::File(arg.into()));
    }
    let (host, port) = match arg.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => (h.trim_start_matches('[').trim_end_matches(']'), p),
        _ => ("localhost", arg),
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(RasSource::Query {
            host: host.to_string(),
            port: p,
        }),
        _ => anyhow::bail!(
            "--ras {}: no such file, and not [HOST:]PORT (NCCL's RAS listens on localhost:28028 by default)",
            preflight_checks::shellword::quoted(arg)
        ),
    }
}

/// A command, validated.
#[derive(Clone, Debug)]
pub enum Job {
    Check(Box<CheckJob>),
    Facts(FactsJob),
    Cluster(Box<ClusterJob>, View),
    Torchrun(Box<TorchrunJob>),
    Launch(LaunchJob),
    Render(RenderJob),
    Explain(ExplainJob),
    Schema,
    NcclWorker(WorkerSpec),
    GemmWorker(crate::measure::gemm::worker::GemmSpec),
    Simulate(SimulateJob),
    History(HistoryJob),
}

/// `preflight history`: where to read, and what to do.
#[derive(Clone, Debug)]
pub struct HistoryJob {
    pub store: crate::history::HistoryOpt,
    pub reports: Option<std::path::PathBuf>,
    pub json: bool,
    pub export: bool,
    pub import: Option<(std::path::PathBuf, u32)>,
}

/// `preflight simulate`: the modelled fabric and the timing to predict with.
#[derive(Clone, Debug)]
pub struct SimulateJob {
    pub fabric: crate::runtime::sim::Fabric,
    pub timing: crate::runtime::job::Timing,
    pub report: Option<std::path::PathBuf>,
    /// `--facts FILE`: every node's facts beside its network.
    pub facts: Option<std::path::PathBuf>,
}

/// Validates the parsed command line against `env` (the process environment).
pub fn job(cli: Cli, env: &BTreeMap<String, String>) -> anyhow::Result<Job> {
    Ok(match cli.command {
        Command::Check(a) => Job::Check(Box::new(check(a, env)?)),
        Command::Facts(a) => Job::Facts(FactsJob {
            probe: probe(&a.probe, env),
            master_port: a.master_port,
            output: a.output,
        }),
        Command::Cluster(a) => {
            let mut v = view(&a.job);
            v.nodes_failed = a.nodes_failed.clone();
            v.nodes_passed = a.nodes_passed.clone();
            v.proceed_with_healthy_set = a.proceed_with_healthy_set;
            Job::Cluster(Box::new(cluster(&a, env)?), v)
        }
        Command::Torchrun(a) => Job::Torchrun(Box::new(torchrun(a, env)?)),
        Command::Launch(a) if a.format == cli::LaunchFormat::Exclude && !a.healthy_set => {
            return Err(anyhow!(
                "--format exclude prints the nodes the healthy set leaves out: give --healthy-set too (preflight launch --report FILE --healthy-set --format exclude)"
            ));
        }
        Command::Launch(a) => Job::Launch(LaunchJob {
            report: a.report,
            format: a.format,
            nproc_per_node: a.nproc_per_node,
            script: a.script.into_iter().chain(a.script_args).collect(),
            healthy_set: a.healthy_set,
            recompute: (a.min_nodes.is_some() || a.nodes_multiple_of.is_some() || a.exclude_slow)
                .then(|| HealthyOptions {
                    min_nodes: a.min_nodes.unwrap_or(1),
                    multiple_of: a.nodes_multiple_of.unwrap_or(1),
                    exclude_slow: a.exclude_slow,
                    nnodes: None,
                }),
        }),
        Command::Render(a) => Job::Render(RenderJob {
            report: a.report,
            view: View {
                format: a.format,
                output: None,
                strict: a.strict,
                verbose: a.verbose,
                full_report: false,
                prom_file: None,
                nodes_failed: None,
                nodes_passed: None,
                proceed_with_healthy_set: false,
            },
        }),
        Command::Explain(a) if !a.dumps.is_empty() || a.ras.is_some() => {
            let ras = a.ras.as_deref().map(ras_source).transpose()?;
            let log_stdin = a.log.as_deref().is_some_and(|p| p.as_os_str() == "-");
            anyhow::ensure!(
                !(log_stdin && ras == Some(RasSource::Stdin)),
                "--log - and --ras - both read standard input: give one of them a file"
            );
            Job::Explain(ExplainJob::Hang(HangJob {
                log: a.log,
                dumps: a.dumps,
                prefix: a.prefix,
                ras,
                format: a.format,
            }))
        }
        Command::Explain(a) => Job::Explain(if let Some(path) = a.log {
            ExplainJob::Log {
                path,
                format: a.format,
            }
        } else if a.coverage {
            ExplainJob::Coverage {
                json: a.format == cli::ExplainFormat::Json,
            }
        } else if a.list {
            ExplainJob::List
        } else {
            let Some(id) = a.id else {
                anyhow::bail!(
                    "explain needs what to explain: an id as a report or `explain --log` shows it (`preflight explain port.in-use`), `--list` for every id, or `--log FILE` for a failed job's output (`--dumps DIR` or `--ras FILE` for a hang)"
                );
            };
            ExplainJob::One {
                id: id.trim().to_string(),
                root: env
                    .get("PREFLIGHT_ROOT")
                    .map_or_else(|| PathBuf::from("/"), PathBuf::from),
            }
        }),
        Command::History(a) => Job::History(HistoryJob {
            store: crate::history::HistoryOpt::resolve(a.history.as_deref(), env),
            reports: a.reports,
            json: a.format == cli::ExplainFormat::Json,
            export: a.export,
            import: a.import.map(|p| (p, a.times)),
        }),
        Command::Schema => Job::Schema,
        Command::Simulate(a) => Job::Simulate(simulate(a)?),
        Command::NcclWorker(a) => Job::NcclWorker(nccl_worker(&a)?),
        Command::GemmWorker(a) => Job::GemmWorker(crate::measure::gemm::worker::GemmSpec {
            gpus: a.gpus,
            size: a.size,
            check_size: a.check_size,
            burn_s: a.burn,
            seed: a.seed,
        }),
    })
}

/// `preflight check`, validated.
fn check(a: cli::CheckArgs, env: &BTreeMap<String, String>) -> anyhow::Result<CheckJob> {
    Ok(CheckJob {
        probe: probe(&a.probe, env),
        master_port: match a.master_port {
            Some(p) => p,
            // A garbage MASTER_PORT is env.master's finding, not a refusal to check.
            None => placement::env_master_port(env)
                .ok()
                .flatten()
                .unwrap_or(placement::DEFAULT_MASTER_PORT),
        },
        master_port_flag: a.master_port,
        env: env.clone(),
        shape: JobShape {
            nnodes: a.nnodes,
            ..shape(&a.job)
        },
        facts_file: a.facts,
        script: a.script,
        view: view(&a.job),
        slurm: slurm_hook(&a.slurm, a.job.strict, env)?,
        thorough: a.thorough,
        gemm: crate::runtime::job::GemmPlan::from_flags(
            a.gemm.gemm,
            a.gemm.no_gemm,
            a.gemm.burn,
            a.thorough && !(a.slurm.slurm_health || a.slurm.slurm_prolog),
            a.thorough,
        ),
    })
}

/// `preflight simulate`, its figures checked.
fn simulate(a: cli::SimulateArgs) -> anyhow::Result<SimulateJob> {
    anyhow::ensure!(
        a.gbit.is_finite() && a.gbit > 0.0 && a.latency_us.is_finite() && a.latency_us >= 0.0,
        "--gbit must be above 0 and --latency-us at least 0"
    );
    anyhow::ensure!(
        a.dead.saturating_add(a.slow) < a.nodes,
        "--dead and --slow leave no node of the {} to simulate",
        a.nodes
    );
    anyhow::ensure!(
        a.slow_cut == 0 || (a.slow_cut >= 2 && a.slow_cut.saturating_add(2) <= a.nodes),
        "--slow-cut {} must leave two nodes on each side of the cut (0 for none)",
        a.slow_cut
    );
    Ok(SimulateJob {
        fabric: crate::runtime::sim::Fabric {
            nodes: a.nodes,
            latency_us: a.latency_us,
            gbit: a.gbit,
            dead: a.dead,
            slow: a.slow,
            slow_pairs: a.slow_pairs,
            slow_cut: a.slow_cut,
            bad_links: a.bad_links,
            lossy_links: a.lossy_links,
            seed: a.seed,
            node_template: None,
        },
        timing: timing(a.quick, a.thorough),
        report: a.report,
        facts: a.facts,
    })
}

fn probe(a: &cli::ProbeArgs, env: &BTreeMap<String, String>) -> ProbeJob {
    ProbeJob {
        root: a.root.clone(),
        no_gpu: a.no_gpu,
        job_env: BTreeMap::new(),
        job_unset: Vec::new(),
        seams: seams(env).into_ref(),
        history: crate::history::HistoryOpt::resolve(a.history.as_deref(), env),
    }
}

/// The test seams from the `PREFLIGHT_TEST_*` variables (`runtime::seams::vars`): the one
/// place they are read. The integration tests set them on the real binary, node by node.
pub fn seams(env: &BTreeMap<String, String>) -> Fakes {
    let get = |name: &str| env.get(name).map(String::as_str);
    let non_empty = |name: &str| get(name).filter(|v| !v.is_empty()).map(str::to_string);
    let gpus = get(vars::FAKE_GPUS).and_then(|v| v.trim().parse::<u32>().ok());
    Fakes {
        gpus,
        // A node with fake GPUs takes the fake NCCL worker as its libnccl.
        nccl_worker: gpus
            .and(get(crate::measure::nccl::WORKER_ENV))
            .map(str::to_string),
        gpu_buses: get(vars::FAKE_GPU_BUSES).map(|v| v.split(',').map(str::to_string).collect()),
        rdma_root: non_empty(vars::RDMA_ROOT).map(PathBuf::from),
        corrupt_ring: get(vars::CORRUPT_ALLREDUCE).is_some(),
        rail_net: non_empty(vars::RAIL_NCCL_NET),
    }
}

fn shape(a: &cli::JobArgs) -> JobShape {
    JobShape {
        nproc_per_node: a.nproc_per_node,
        expect_gpus: a.expect_gpus,
        nnodes: None,
        line_nproc: None,
        xid_window_s: a.xid_window,
    }
}

fn view(a: &cli::JobArgs) -> View {
    View {
        format: a.format,
        output: a.output.clone(),
        strict: a.strict,
        verbose: a.verbose,
        full_report: a.full_report,
        prom_file: a.prom_file.clone(),
        nodes_failed: None,
        nodes_passed: None,
        proceed_with_healthy_set: false,
    }
}

/// The Slurm hook flags of `preflight check`; `--drain` needs a hook mode.
fn slurm_hook(
    a: &cli::SlurmHookArgs,
    strict: bool,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<Option<SlurmHook>> {
    let mode = match (a.slurm_health, a.slurm_prolog) {
        (true, _) => SlurmMode::Health,
        (_, true) => SlurmMode::Prolog,
        _ if a.drain || a.slurm_node.is_some() => {
            return Err(anyhow!(
                "--drain and --slurm-node act as a Slurm hook: add --slurm-health (HealthCheckProgram) or --slurm-prolog (Prolog)"
            ));
        }
        _ => return Ok(None),
    };
    let node = a
        .slurm_node
        .clone()
        .or_else(|| env.get("SLURMD_NODENAME").cloned())
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty());
    if let Some(n) = &node {
        let ok = n.len() <= 255
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !ok {
            return Err(anyhow!(
                "Slurm node name {n:?} (--slurm-node or SLURMD_NODENAME) is not a host name: give the NodeName slurm.conf uses, e.g. --slurm-node node017"
            ));
        }
    }
    Ok(Some(SlurmHook {
        mode,
        drain: a.drain,
        dry_run: a.dry_run,
        node,
        strict,
        drain_lemons: a.drain_lemons,
    }))
}

/// The placement flags of `preflight cluster`, as `placement::resolve` takes them.
pub fn placement_flags(a: &cli::ClusterArgs) -> PlacementFlags {
    PlacementFlags {
        nnodes: a.nnodes,
        node_rank: a.node_rank,
        master_addr: a.master_addr.clone(),
        master_port: a.master_port,
        rdzv_endpoint: a.rdzv_endpoint.clone(),
        rdzv_id: a.rdzv_id.clone(),
        rdzv_backend: a.rdzv_backend.clone(),
        hosts: a.hosts.clone(),
        coordinator_port: a.coordinator_port,
    }
}

/// How long each measurement runs: `--quick`, the default, `--thorough`.
pub fn timing(quick: bool, thorough: bool) -> Timing {
    if quick {
        Timing {
            connect_timeout: Duration::from_secs(1),
            pings: 20,
            bulk: Duration::from_millis(200),
            matchings: 1,
        }
    } else if thorough {
        Timing {
            connect_timeout: Duration::from_secs(3),
            pings: 200,
            bulk: Duration::from_secs(3),
            matchings: 4,
        }
    } else {
        Timing {
            connect_timeout: Duration::from_secs(2),
            pings: 50,
            bulk: Duration::from_secs(1),
            matchings: 2,
        }
    }
}

/// The all-reduce plan from `--allreduce`, `--sizes`, `--compare-env` and the timing flags.
pub fn allreduce_plan(
    mode: cli::Allreduce,
    sizes: Option<&str>,
    compare_env: Option<&cli::EnvList>,
    quick: bool,
    thorough: bool,
    timeout: Duration,
) -> anyhow::Result<AllreducePlan> {
    let (default_sizes, warmup, iters) = if quick {
        ("1M:16M:4", 1, 1)
    } else if thorough {
        ("1M:1G", 2, 20)
    } else {
        ("1M:256M", 1, 5)
    };
    let spec = sizes.unwrap_or(default_sizes);
    let sizes = parse_sizes(spec).map_err(|e| anyhow!("--sizes {spec}: {e}"))?;
    Ok(AllreducePlan {
        mode: match mode {
            cli::Allreduce::Off => AllreduceMode::Off,
            cli::Allreduce::Tcp => AllreduceMode::Tcp,
            cli::Allreduce::Nccl => AllreduceMode::Nccl,
            cli::Allreduce::Auto => AllreduceMode::Auto,
        },
        sizes,
        compare_env: compare_env.cloned().unwrap_or_default().0,
        streams: 4,
        warmup,
        iters,
        // --timeout bounds every wait: one step, and a node's silence.
        step_timeout: timeout.min(Duration::from_secs(30)),
        silence: timeout + Duration::from_secs(5),
    })
}

/// Under torchrun, `--nproc-per-node` defaults to LOCAL_WORLD_SIZE.
fn default_nproc(given: Option<u32>, env: &BTreeMap<String, String>) -> Option<u32> {
    if given.is_some() || !placement::under_torchrun(env) {
        return given;
    }
    env.get("LOCAL_WORLD_SIZE")
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|n| *n >= 1)
}

/// `--rdzv-backend`: `c10d` (ranks assigned at join when no node rank is given) or `static`.
fn rdzv_backend(backend: Option<&str>) -> anyhow::Result<()> {
    match backend.map(str::trim) {
        None => Ok(()),
        Some(b) if crate::placement::is_c10d(b) || b.eq_ignore_ascii_case("static") => Ok(()),
        Some(b) => Err(anyhow!(
            "--rdzv-backend={b:?} is not one preflight's rendezvous can stand in for: give c10d (ranks assigned at join, rank 0 owns --rdzv-endpoint) or static (give --node-rank); an etcd backend's endpoint is an etcd server, not a node, so use --hosts LIST there"
        )),
    }
}

fn cluster(a: &cli::ClusterArgs, env: &BTreeMap<String, String>) -> anyhow::Result<ClusterJob> {
    let mut shape = shape(&a.job);
    shape.nproc_per_node = default_nproc(shape.nproc_per_node, env);
    rdzv_backend(a.rdzv_backend.as_deref())?;
    Ok(ClusterJob {
        probe: probe(&a.probe, env),
        placement: placement_flags(a),
        env: env.clone(),
        token: token(a.token.as_deref(), a.token_file.as_deref())?,
        timeout: Duration::from_secs(a.timeout),
        timing: timing(a.quick, a.thorough),
        allreduce: allreduce_plan(
            a.allreduce,
            a.sizes.as_deref(),
            a.compare_env.as_ref(),
            a.quick,
            a.thorough,
            Duration::from_secs(a.timeout),
        )?,
        min_busbw: a.min_busbw,
        min_link_gbit: a.min_link_gbit,
        shape,
        script: a.script.clone(),
        healthy: HealthyOptions {
            min_nodes: a.min_nodes.unwrap_or(1),
            multiple_of: a.nodes_multiple_of.unwrap_or(1),
            exclude_slow: a.exclude_slow,
            nnodes: None,
        },
        whole_report: a.job.full_report,
        idle_test: idle_test(a.idle_test, a.quick, a.thorough),
        gemm: crate::runtime::job::GemmPlan::from_flags(
            a.gemm.gemm,
            a.gemm.no_gemm,
            a.gemm.burn,
            !a.quick,
            a.thorough,
        ),
    })
}

/// `--idle-test SECONDS`, else its default: off under `--quick` (a run of seconds), 30 s (a
/// firewall or NAT that expires idle connections within half a minute, at little cost: the
/// silence overlaps the throughput, MTU and all-reduce phases), 360 s under `--thorough`
/// (past the idle timeouts of common cloud NAT gateways and load balancers, 350 s and 4 min).
pub fn idle_test(seconds: Option<u64>, quick: bool, thorough: bool) -> Duration {
    let default = if quick {
        0
    } else if thorough {
        360
    } else {
        30
    };
    Duration::from_secs(seconds.unwrap_or(default).min(3600))
}

fn torchrun(a: cli::TorchrunArgs, env: &BTreeMap<String, String>) -> anyhow::Result<TorchrunJob> {
    Ok(TorchrunJob {
        probe: probe(&a.probe, env),
        no_run: a.no_run,
        facts_file: a.facts,
        token: token(a.token.as_deref(), a.token_file.as_deref())?,
        timeout: Duration::from_secs(a.timeout),
        quick: a.quick,
        words: crate::launchline::words_of(&a.args, env)?,
        env: env.clone(),
        expect_gpus: a.expect_gpus,
        view: View {
            format: a.format,
            output: a.output,
            strict: a.strict,
            verbose: false,
            full_report: false,
            prom_file: None,
            nodes_failed: None,
            nodes_passed: None,
            proceed_with_healthy_set: false,
        },
    })
}

/// Largest token file read.
const TOKEN_FILE_CAP: u64 = 64 << 10;

/// The token from `--token`/`PREFLIGHT_TOKEN`, else `--token-file`; an empty one is an error.
fn token(flag: Option<&str>, file: Option<&std::path::Path>) -> anyhow::Result<Option<Token>> {
    if let Some(t) = flag {
        if t.trim().is_empty() {
            return Err(anyhow!(
                "--token (or PREFLIGHT_TOKEN) is empty: an empty secret protects nothing; give every node the same non-empty value, e.g. `export PREFLIGHT_TOKEN=$(openssl rand -hex 16)` in the job script, or unset it to use the job id"
            ));
        }
        return Ok(Some(Token {
            value: t.to_string(),
            from: "--token / PREFLIGHT_TOKEN".into(),
        }));
    }
    let Some(path) = file else {
        return Ok(None);
    };
    let shown = path.display();
    // Read with the cap, not after a size check: a file that grows between the two is cut.
    let bytes = preflight_checks::root::read_regular(path, TOKEN_FILE_CAP).map_err(|e| match e {
        preflight_checks::root::FileError::Io(e) => anyhow!("cannot read --token-file {shown}: {e}"),
        preflight_checks::root::FileError::TooBig { size, .. } => anyhow!(
            "--token-file {shown} has {size} bytes; a token file holds one token (at most {TOKEN_FILE_CAP} bytes)"
        ),
        long @ preflight_checks::root::FileError::TooLong { .. } => anyhow!(
            "--token-file {shown}: {long}; a token file holds one token"
        ),
        refused => anyhow!(
            "--token-file {shown} is not a regular file ({refused}); give the file that holds the token (a mounted Kubernetes Secret key, a file the job script wrote)"
        ),
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("cannot read --token-file {shown}: it is not UTF-8 text"))?;
    let value = text.trim();
    if value.is_empty() {
        return Err(anyhow!(
            "--token-file {shown} is empty: an empty secret protects nothing; write the token into it (e.g. `openssl rand -hex 16 > {shown}`)"
        ));
    }
    Ok(Some(Token {
        value: value.to_string(),
        from: format!("--token-file {shown}"),
    }))
}

fn nccl_worker(a: &cli::NcclWorkerArgs) -> anyhow::Result<WorkerSpec> {
    let sizes = a
        .sizes
        .split(',')
        .map(|s| parse_size(s.trim()))
        .collect::<Result<Vec<u64>, String>>()
        .map_err(|e| anyhow!("--sizes {}: {e}", a.sizes))?;
    Ok(WorkerSpec {
        nranks: a.nranks,
        first_rank: a.first_rank,
        gpus: a.gpus,
        sizes,
        warmup: a.warmup,
        iters: a.iters,
        id_out: a.id_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(argv: &[&str]) -> anyhow::Result<Job> {
        let cli = Cli::try_parse_from(["preflight"].iter().chain(argv)).expect("clap parses");
        job(cli, &BTreeMap::new())
    }

    #[test]
    fn bad_sizes_are_refused_before_anything_runs() {
        let e = parse(&["cluster", "--sizes", "1M:xx"]).unwrap_err();
        assert!(e.to_string().contains("--sizes 1M:xx"), "{e}");
        let Job::Cluster(c, _) = parse(&["cluster", "--quick"]).unwrap() else {
            panic!("not a cluster job")
        };
        assert_eq!(c.timing.pings, 20);
        assert_eq!(c.allreduce.sizes.first(), Some(&(1 << 20)));
    }

    #[test]
    fn the_idle_test_is_off_under_quick_and_longer_under_thorough_unless_given() {
        let idle = |argv: &[&str]| match parse(argv).unwrap() {
            Job::Cluster(c, _) => c.idle_test.as_secs(),
            _ => panic!("not a cluster job"),
        };
        assert_eq!(idle(&["cluster", "--quick"]), 0);
        assert_eq!(idle(&["cluster"]), 30);
        assert_eq!(idle(&["cluster", "--thorough"]), 360);
        assert_eq!(idle(&["cluster", "--quick", "--idle-test", "12"]), 12);
        assert_eq!(idle(&["cluster", "--thorough", "--idle-test=0"]), 0);
        let over = Cli::try_parse_from(["preflight", "cluster", "--idle-test", "3601"]);
        assert!(over.is_err());
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_test_variables_become_the_seams_and_nothing_else_does() {
        assert!(!seams(&env(&[("PATH", "/bin"), (vars::RDMA_ROOT, "")])).any());
        // The worker is the libnccl only of a node with fake GPUs.
        let worker = (crate::measure::nccl::WORKER_ENV, "/w");
        assert_eq!(seams(&env(&[worker])).nccl_worker, None);
        let f = seams(&env(&[
            worker,
            (vars::FAKE_GPUS, " 2 "),
            (vars::FAKE_GPU_BUSES, "0000:11:00.1,0000:21:00.1"),
            (vars::RDMA_ROOT, "/tree"),
            (vars::CORRUPT_ALLREDUCE, ""),
            (vars::RAIL_NCCL_NET, "Socket"),
        ]));
        assert_eq!(
            f,
            Fakes {
                gpus: Some(2),
                nccl_worker: Some("/w".into()),
                gpu_buses: Some(vec!["0000:11:00.1".into(), "0000:21:00.1".into()]),
                rdma_root: Some("/tree".into()),
                corrupt_ring: true,
                rail_net: Some("Socket".into()),
            }
        );
    }

    #[test]
    fn nproc_defaults_to_local_world_size_under_torchrun() {
        let nproc = |flags: &[&str], env: &BTreeMap<String, String>| {
            let cli =
                Cli::try_parse_from(["preflight", "cluster"].iter().chain(flags.iter())).unwrap();
            match job(cli, env).unwrap() {
                Job::Cluster(c, _) => c.shape.nproc_per_node,
                _ => unreachable!(),
            }
        };
        let torch = env(&[("TORCHELASTIC_RUN_ID", "r"), ("LOCAL_WORLD_SIZE", "8")]);
        assert_eq!(nproc(&[], &torch), Some(8));
        assert_eq!(nproc(&["--nproc-per-node=4"], &torch), Some(4));
        // LOCAL_WORLD_SIZE alone marks torchrun too.
        assert_eq!(
            nproc(&[], &env(&[("LOCAL_WORLD_SIZE", "8"), ("FOO", "1")])),
            Some(8)
        );
        assert_eq!(nproc(&[], &env(&[("WORLD_SIZE", "8")])), None);
    }

    #[test]
    fn the_gemm_test_runs_where_it_is_asked_for_and_not_in_a_slurm_hook() {
        use crate::runtime::job::GemmPlan;
        let check = |flags: &[&str]| {
            let cli =
                Cli::try_parse_from(["preflight", "check"].iter().chain(flags.iter())).unwrap();
            match job(cli, &BTreeMap::new()).unwrap() {
                Job::Check(c) => c.gemm,
                _ => unreachable!(),
            }
        };
        let cluster = |flags: &[&str]| {
            let cli =
                Cli::try_parse_from(["preflight", "cluster"].iter().chain(flags.iter())).unwrap();
            match job(cli, &BTreeMap::new()).unwrap() {
                Job::Cluster(c, _) => c.gemm,
                _ => unreachable!(),
            }
        };
        let off = GemmPlan::default();
        let quick = GemmPlan {
            run: true,
            burn_s: 0,
        };
        assert_eq!(check(&[]), off, "the default check stays at its speed");
        assert_eq!(check(&["--gemm"]), quick);
        assert_eq!(
            check(&["--thorough"]),
            GemmPlan {
                run: true,
                burn_s: 30
            }
        );
        assert_eq!(
            check(&["--burn", "5"]),
            GemmPlan {
                run: true,
                burn_s: 5
            }
        );
        assert_eq!(
            check(&["--slurm-prolog", "--thorough"]),
            off,
            "too slow for a prolog"
        );
        assert_eq!(check(&["--slurm-health", "--thorough"]), off);
        assert_eq!(check(&["--slurm-health", "--gemm"]), quick, "unless asked");
        assert_eq!(cluster(&[]), quick);
        assert_eq!(cluster(&["--quick"]), off);
        assert_eq!(cluster(&["--quick", "--gemm"]), quick);
        assert_eq!(cluster(&["--no-gemm"]), off);
        assert_eq!(
            cluster(&["--thorough"]),
            GemmPlan {
                run: true,
                burn_s: 30
            }
        );
        assert!(Cli::try_parse_from(["preflight", "check", "--gemm", "--no-gemm"]).is_err());
        assert!(Cli::try_parse_from(["preflight", "check", "--burn", "0"]).is_err());
    }

    #[test]
    fn nccl_worker_sizes_take_suffixes_and_refuse_garbage() {
        let Job::NcclWorker(w) = parse(&[
            "nccl-worker",
            "--nranks=2",
            "--first-rank=0",
            "--gpus=1",
            "--sizes=1K,2M",
        ])
        .unwrap() else {
            panic!("not a worker job")
        };
        assert_eq!(w.sizes, vec![1024, 2 << 20]);
        assert!(
            parse(&[
                "nccl-worker",
                "--nranks=2",
                "--first-rank=0",
                "--gpus=1",
                "--sizes=x"
            ])
            .is_err()
        );
    }
}

//! Command-line interface: the clap structs and nothing else. `config` turns them, with the
//! environment, into validated jobs.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Exit codes, as documented in `--help` and the guide (docs/src/reading-a-report.md).
pub mod exit {
    /// Nothing failed (with `--strict`: nothing warned either).
    pub const OK: u8 = 0;
    /// At least one finding is `fail` or `error` (or `warn` with `--strict`).
    pub const FINDINGS: u8 = 1;
    /// The tool could not run: bad arguments, unreadable `--facts`, cannot bind or reach anything.
    pub const CANNOT_RUN: u8 = 2;
    /// Interrupted by SIGINT (Ctrl-C), after stopping children and removing temp files (128 + 2).
    pub const INTERRUPTED: u8 = 130;
    /// Stopped by SIGTERM, after the same cleanup (128 + 15).
    pub const TERMINATED: u8 = 143;
}

const AFTER_HELP: &str = "\
Exit codes:
  0  nothing is fail or error (with --strict: nothing is warn either)
  1  at least one finding is fail or error (or warn with --strict); with
     --proceed-with-healthy-set, 0 when the failing cluster's healthy set meets its constraints
  2  the tool could not run (bad arguments, unreadable --facts file, ...)
  130, 143  interrupted by SIGINT (Ctrl-C) or SIGTERM; children stopped, temp files removed

The terminal report shows problems with their fixes; -v also shows what passed or was skipped.
--format junit prints one JUnit testcase per finding (fail/error: failure, skip: skipped,
warn: passed with the summary in system-out); --format ctrf the same as Common Test Report
Format JSON (warn: other). --format html prints one self-contained page
(`preflight render --format html REPORT.json` from a saved report). `preflight explain ID`
explains a finding id; `preflight explain --log FILE` explains the errors of a failed job;
`--dumps DIR` and `--ras` name the rank that hung it.

Flags take torchrun's spellings; --master-port and --master_port are the same flag.";

const FACTS_HELP: &str = "\
Exit codes:
  0  the facts were printed or written
  2  the tool could not run (bad arguments, cannot write the -o file)
  130, 143  interrupted by SIGINT (Ctrl-C) or SIGTERM

Flags take torchrun's spellings; --master-port and --master_port are the same flag.";

const EXPLAIN_HELP: &str = "\
Exit codes:
  0  the entry, the list, or the log's explanation was printed (found or not)
  2  unknown finding id, or the --log file cannot be read";

const LAUNCH_HELP: &str = "\
Exit codes:
  0  the report has no fail or error finding; with --healthy-set, the set's launch was printed
  1  the report has a fail or error finding (the launch is printed, but fix those first)
  2  the tool could not run (bad arguments, unreadable or invalid report; with --healthy-set:
     no healthy set in the report, or the set misses --min-nodes/--nodes-multiple-of)";

#[derive(Parser, Debug)]
#[command(
    name = "preflight",
    version,
    about = "Find what would make a multi-node PyTorch (torchrun + NCCL) job hang or crawl, before you launch it",
    after_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check this node: interfaces, InfiniBand, firewall and ports, GPUs, NCCL, limits; print findings and the NCCL environment to use.
    #[command(after_help = AFTER_HELP)]
    Check(CheckArgs),
    /// Print this node's facts as JSON (judge them later with `preflight check --facts FILE`).
    #[command(after_help = FACTS_HELP)]
    Facts(FactsArgs),
    /// Run on every node at once: rendezvous on the master port, measure every pair, print one verdict and the launch command per node.
    #[command(after_help = AFTER_HELP)]
    Cluster(Box<ClusterArgs>),
    /// Internal: the NCCL all-reduce child process `preflight cluster` starts on GPU nodes.
    #[command(hide = true)]
    NcclWorker(NcclWorkerArgs),
    /// Internal: the GPU matrix-multiply child process (`check --gemm`, `cluster`).
    #[command(hide = true)]
    GemmWorker(GemmWorkerArgs),
    /// Print the recommended launch (torchrun commands, an sbatch script, or a Kubernetes env list) from a saved cluster report.
    #[command(after_help = LAUNCH_HELP)]
    Launch(LaunchArgs),
    /// Check your own torchrun command (or `python -m torch.distributed.launch ...`) on this node, run the cluster preflight with its endpoint and ranks, and print it back fixed.
    #[command(after_help = TORCHRUN_HELP)]
    Torchrun(TorchrunArgs),
    /// Render a saved JSON report (from `preflight cluster` or `preflight check`) as a table, JSON, JUnit or one HTML page; exits as `check` would.
    #[command(after_help = AFTER_HELP)]
    Render(RenderArgs),
    /// Explain a finding id: when it fires, what it means, why it matters, how to fix it (`--list`: every id);
    /// or, with `--log FILE`, the errors in a failed job's output and the commands that confirm their causes.
    #[command(after_help = EXPLAIN_HELP)]
    Explain(ExplainArgs),
    /// What this node's history store remembers (or, with --reports DIR, the reports of many
    /// nodes): runs, failures per finding, first and last seen, pass/fail flapping, and the
    /// lemons with the rule that named each. Exits 1 when a lemon is named.
    History(HistoryArgs),
    /// Print the JSON Schema of the report (preflight.report.v1).
    Schema,
    /// Run the real schedule and judgment over a modelled cluster of thousands of nodes and
    /// print the phase times predicted on that fabric (the scale benchmark's simulation).
    #[command(hide = true)]
    Simulate(SimulateArgs),
}

/// Arguments of `preflight history`.
#[derive(Args, Debug, Clone)]
pub struct HistoryArgs {
    /// The history store to read (default: this node's, as `check` writes it).
    #[arg(long, env = "PREFLIGHT_HISTORY", value_name = "PATH")]
    pub history: Option<String>,
    /// Read the JSON reports (`-o FILE` of check, cluster and the hooks) and `--export` files
    /// (`*.jsonl`) in this folder instead of a store: many nodes' histories at once.
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
    /// `table` for people, `json` for scripts.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Table)]
    pub format: ExplainFormat,
    /// Print the store's runs as JSON lines (one record per run) to ship them elsewhere; read
    /// them back with --reports DIR.
    #[arg(long)]
    pub export: bool,
    /// Record every node of this saved JSON report into the store (`--times N` times, each a
    /// run of its own): to seed a store from reports, and the tests' concurrent writer.
    #[arg(long, value_name = "REPORT", hide = true)]
    pub import: Option<PathBuf>,
    #[arg(long, hide = true, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub times: u32,
}

/// Arguments of the hidden `simulate` subcommand.
#[derive(Args, Debug, Clone)]
pub struct SimulateArgs {
    /// Nodes in the modelled cluster.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(2..=8192))]
    pub nodes: u32,
    /// Nodes that never start.
    #[arg(long, default_value_t = 0)]
    pub dead: u32,
    /// Nodes whose NIC runs at a fifth of the rate.
    #[arg(long, default_value_t = 0)]
    pub slow: u32,
    /// Pairs of ring neighbours (pairs the throughput schedule always measures) whose path runs at a fifth of the rate both ways.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub slow_pairs: u32,
    /// The last N ranks sit behind a slow uplink: their pairs with the other nodes run at a fifth of the rate (a rack uplink; 0: none).
    #[arg(long, default_value_t = 0)]
    pub slow_cut: u32,
    /// Ordered pairs whose connects time out.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub bad_links: u32,
    /// Ordered pairs whose first connect is reset (they work on the retry).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub lossy_links: u32,
    /// Link bandwidth, Gbit/s.
    #[arg(long, default_value_t = 100.0)]
    pub gbit: f64,
    /// One-way link latency, microseconds.
    #[arg(long, default_value_t = 10.0)]
    pub latency_us: f64,
    /// Seed of the faults drawn.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The measurement timing modelled (as `preflight cluster`).
    #[arg(long, conflicts_with = "thorough")]
    pub quick: bool,
    #[arg(long)]
    pub thorough: bool,
    /// Also write the simulated cluster report (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<std::path::PathBuf>,
    /// Give every modelled node these facts beside its network (`preflight facts -o FILE` on a
    /// real node: GPUs, InfiniBand, system), so the memory printed is rank 0's with facts of a
    /// real size.
    #[arg(long, value_name = "FILE")]
    pub facts: Option<std::path::PathBuf>,
}

/// What `preflight launch` prints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum LaunchFormat {
    /// One torchrun command per node, with the recommended environment in front.
    Torchrun,
    /// An sbatch script running torchrun on every node through srun.
    Sbatch,
    /// A Kubernetes container `env:` list (YAML); with --healthy-set, `kubectl cordon` lines for the excluded nodes too.
    K8sEnv,
    /// One `srun ... torchrun` line that runs inside the existing allocation (with --healthy-set: `--exclude=` the left-out nodes).
    Srun,
    /// One host per line, in node-rank order (pdsh, clush, mpirun, DeepSpeed).
    Hostfile,
    /// The excluded hosts as one hostlist, for `sbatch --exclude=` / `srun --exclude=` (needs --healthy-set).
    Exclude,
}

/// `preflight launch`: the recommended launch from a saved `preflight cluster` report.
#[derive(Args, Debug, Clone)]
pub struct LaunchArgs {
    /// The JSON report written by `preflight cluster --format json` or `-o FILE`.
    #[arg(long)]
    pub report: PathBuf,
    /// What to print.
    #[arg(long, value_enum, default_value_t = LaunchFormat::Torchrun)]
    pub format: LaunchFormat,
    /// Processes per node (default: the number the report's launch commands use).
    #[arg(long, alias = "nproc_per_node", value_parser = clap::value_parser!(u32).range(1..))]
    pub nproc_per_node: Option<u32>,
    /// Launch on the report's healthy set only: the nodes that work together when the cluster fails, with their new node ranks and master.
    #[arg(long, alias = "healthy_set")]
    pub healthy_set: bool,
    /// With --healthy-set: compute the set again from the report's measurements with at least this many nodes.
    #[arg(long, alias = "min_nodes", requires = "healthy_set", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub min_nodes: Option<u32>,
    /// With --healthy-set: compute the set again, its node count a multiple of K (the slowest nodes left idle).
    #[arg(long, alias = "nodes_multiple_of", value_name = "K", requires = "healthy_set", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nodes_multiple_of: Option<u32>,
    /// With --healthy-set: compute the set again, leaving out stragglers (the nodes link.slow names as slow nodes, slow with every healthy partner); on a passing report, the faster set (every node but those).
    #[arg(long, alias = "exclude_slow", requires = "healthy_set")]
    pub exclude_slow: bool,
    /// Your training script (its arguments go after `--`).
    #[arg(long)]
    pub script: Option<String>,
    /// The training script and its arguments (`-- train.py --epochs 5`), or the script's arguments when --script is given.
    #[arg(last = true, value_name = "SCRIPT_AND_ARGS")]
    pub script_args: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct ExplainArgs {
    /// The finding id, as a report shows it (`port.in-use`), or an error id that `--log`
    /// prints (`gloo.peer-closed`); `--list` lists them all.
    #[arg(conflicts_with_all = ["list", "log", "coverage", "dumps", "ras"])]
    pub id: Option<String>,
    /// List every finding id with its one-line meaning.
    #[arg(long, conflicts_with_all = ["log", "coverage", "dumps", "ras"])]
    pub list: bool,
    /// What --log recognises: the sources and versions read (NCCL, gloo, CUDA, c10d, torch's
    /// rendezvous, errno), their error format strings, how many map to a finding or to the job
    /// itself, and what is left unmapped and why.
    #[arg(long, conflicts_with = "log")]
    pub coverage: bool,
    /// Explain the errors in a failed job's output (`-` reads standard input): NCCL, torchrun,
    /// gloo and srun lines, several ranks interleaved, any size.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// PyTorch Flight Recorder dumps of a hung job: a folder, files or a glob (`'/fr/trace_*'`),
    /// pickle or JSON, named `<prefix><rank>` or `<prefix><host>_<rank>`; names the rank(s)
    /// that stopped the others. With --log and --ras they are judged together.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub dumps: Vec<String>,
    /// The dump files' common prefix (`trace_`), when the names do not show it.
    #[arg(long, value_name = "PREFIX", requires = "dumps")]
    pub prefix: Option<String>,
    /// NCCL RAS status: a file of `ncclras` output (text or JSON), `-` for standard input, or
    /// `[HOST:]PORT` of a live job's RAS port (28028) to query it (bounded connect and read).
    #[arg(long, value_name = "FILE|[HOST:]PORT")]
    pub ras: Option<String>,
    /// With --log, --dumps or --ras: `table` for people, `json` (preflight.explain.v1) for
    /// scripts; with --coverage, `json` prints every format string read with its mapping.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Table)]
    pub format: ExplainFormat,
}

/// How `explain --log` prints its answer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    Table,
    Json,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    /// JUnit XML: one testcase per finding, for CI test reports.
    Junit,
    /// CTRF JSON (Common Test Report Format 1.0.0): one test per finding (passed, failed, skipped, other for warn), with its node, message, action and fix.
    Ctrf,
    /// One self-contained HTML page (verdict, findings with fixes, connectivity heatmap, all-reduce chart, environment and launch commands, nodes); nothing is fetched.
    Html,
    /// Slurm TaskProlog: `export NAME=value` lines of the recommended environment (nothing a check could not decide); always exits 0.
    TaskProlog,
    /// node-problem-detector custom plugin: one line of at most 80 characters naming the worst finding; exit 0 OK, 1 problem, 2 unknown.
    Npd,
}

/// `preflight render`: a saved report shown again in another format.
#[derive(Args, Debug, Clone)]
pub struct RenderArgs {
    /// The JSON report written by `preflight cluster --format json` (or `-o FILE`) or `preflight check --format json`.
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Count warnings as failures in the exit code.
    #[arg(long)]
    pub strict: bool,
    /// Also show what passed or was skipped, with details (the terminal report).
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// The job's shape and how to report on it: shared by `check` and `cluster`.
#[derive(Args, Debug, Clone)]
pub struct JobArgs {
    /// Processes per node the job will start (default: the number of visible GPUs).
    #[arg(long, alias = "nproc_per_node", value_parser = clap::value_parser!(u32).range(1..))]
    pub nproc_per_node: Option<u32>,
    /// GPUs each node must have; fewer is a failure.
    #[arg(long, alias = "expect_gpus", value_parser = clap::value_parser!(u32).range(0..))]
    pub expect_gpus: Option<u32>,
    /// How far back a GPU XID error in the kernel log counts: 2h (default), 90m, 3600s, 1d.
    #[arg(long, alias = "xid_window", value_name = "DURATION", value_parser = parse_window)]
    pub xid_window: Option<u64>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the JSON report to this file.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Count warnings as failures in the exit code.
    #[arg(long)]
    pub strict: bool,
    /// Also show what passed or was skipped, with details (the terminal report).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Print the whole cluster report on every rank (the terminal report); by default only
    /// rank 0 prints it and the other ranks print their verdict and their own launch line.
    #[arg(long)]
    pub full_report: bool,
    /// Also write Prometheus metrics to this file for node_exporter's textfile collector (written atomically: a temp file, then rename; name it *.prom).
    #[arg(long, alias = "prom_file", value_name = "PATH")]
    pub prom_file: Option<PathBuf>,
}

/// Flags shared by the commands that probe this node.
#[derive(Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Do not load NVML (the GPU checks then report what they can).
    #[arg(long, alias = "no_gpu")]
    pub no_gpu: bool,
    /// Read /sys, /proc and /etc under this directory instead of / (fixture trees).
    #[arg(long, hide = true, env = "PREFLIGHT_ROOT", default_value = "/")]
    pub root: PathBuf,
    /// This node's history store (every run is remembered there; lemons are named from it):
    /// a file, or `off`. Default: /var/lib/preflight/history.db as root, else
    /// $XDG_STATE_HOME/preflight/history.db (~/.local/state/preflight/history.db).
    #[arg(long, env = "PREFLIGHT_HISTORY", value_name = "PATH|off")]
    pub history: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    #[command(flatten)]
    pub probe: ProbeArgs,
    /// The port torchrun's rendezvous (the master) will listen on (default: MASTER_PORT, else 29500).
    #[arg(long, alias = "master_port", value_parser = clap::value_parser!(u16).range(1..))]
    pub master_port: Option<u16>,
    /// Nodes in the job this node is about to join (default: the launcher's WORLD_SIZE, Slurm or
    /// torchrun variables): the node settings that bite at scale are judged for that size.
    #[arg(long, alias = "nnodes", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub nnodes: Option<u32>,
    #[command(flatten)]
    pub job: JobArgs,
    /// Judge a saved facts file (from `preflight facts`) instead of probing this node.
    #[arg(long)]
    pub facts: Option<PathBuf>,
    /// Also run an NCCL all-reduce over every GPU of this node (what a single-node health
    /// check measures; 1M:256M, bounded at 120 s), judged as `collective.*`, and the GPUs'
    /// matrix-multiply test with 30 s of sustained load (`--gemm --burn 30`).
    #[arg(long, conflicts_with = "facts")]
    pub thorough: bool,
    #[command(flatten)]
    pub gemm: GemmArgs,
    #[command(flatten)]
    pub slurm: SlurmHookArgs,
    /// Your training script and its arguments, placed into the suggested torchrun commands.
    #[arg(last = true, value_name = "SCRIPT_AND_ARGS")]
    pub script: Vec<String>,
}

/// The GPUs' matrix-multiply test (speed and exactness per GPU, and the sustained load).
#[derive(Args, Debug, Clone, Default)]
pub struct GemmArgs {
    /// Make every GPU multiply (BF16/FP16/TF32 through cuBLAS, a few seconds): its speed against
    /// the same model here and across the cluster, and its result against the exact product
    /// (`gpu.compute-slow`, `gpu.compute-wrong`). On by default in `cluster` (not with --quick)
    /// and with `check --thorough`; a Slurm hook runs it only when asked.
    #[arg(long, conflicts_with = "no_gemm")]
    pub gemm: bool,
    /// Leave the matrix-multiply test out.
    #[arg(long, alias = "no_gemm")]
    pub no_gemm: bool,
    /// Then hold the multiply on every GPU at once for SECONDS, sampling clocks, temperature,
    /// power and throttle reasons (`gpu.compute-throttle`; `--thorough`: 30 s).
    #[arg(long, value_name = "SECONDS", conflicts_with = "no_gemm", value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub burn: Option<u32>,
}

/// `preflight check` as a Slurm hook on one node (the guide: docs/src/schedulers.md).
#[derive(Args, Debug, Clone, Default)]
pub struct SlurmHookArgs {
    /// Run as Slurm's HealthCheckProgram: exit 0 healthy, 1 a fail finding (Slurm only logs it, so --drain drains the node itself and resumes a node preflight drained once it passes again).
    #[arg(long, alias = "slurm_health", conflicts_with = "slurm_prolog")]
    pub slurm_health: bool,
    /// Run as Slurm's Prolog: exit 0 the job may start, non-zero Slurm drains the node and requeues the job (--drain first sets preflight's reason in place of "Prolog error").
    #[arg(long, alias = "slurm_prolog")]
    pub slurm_prolog: bool,
    /// With --slurm-health or --slurm-prolog: drain this node on a fail finding with Reason="preflight: <finding id>: <short cause>" (never over a reason preflight did not set; down and maintenance nodes are left alone).
    #[arg(long)]
    pub drain: bool,
    /// With --drain: print the scontrol line instead of running it.
    #[arg(long, alias = "dry_run", requires = "drain")]
    pub dry_run: bool,
    /// This node's Slurm NodeName (default: SLURMD_NODENAME, else the short hostname).
    #[arg(long, alias = "slurm_node", value_name = "NAME")]
    pub slurm_node: Option<String>,
    /// With --drain: also drain a lemon (a fault that comes and goes, history.lemon) while it
    /// passes now, and keep it drained; by default a lemon is said in the reason and in
    /// Prometheus and the operator decides.
    #[arg(long, alias = "drain_lemons", requires = "drain")]
    pub drain_lemons: bool,
}

/// `preflight cluster`: torchrun's own flags, or --hosts, or Slurm/torchrun/Kubernetes environment.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub probe: ProbeArgs,
    /// Number of nodes (torchrun's --nnodes).
    #[arg(long, alias = "nnodes", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nnodes: Option<u32>,
    /// This node's rank, 0..nnodes-1 (torchrun's --node-rank).
    #[arg(long, alias = "node_rank")]
    pub node_rank: Option<u32>,
    /// Port of rank 0's rendezvous; preflight's coordinator listens on it (default: MASTER_PORT, else 29500).
    #[arg(long, alias = "master_port", value_parser = clap::value_parser!(u16).range(1..))]
    pub master_port: Option<u16>,
    /// Address of rank 0 (torchrun's --master-addr).
    #[arg(long, alias = "master_addr")]
    pub master_addr: Option<String>,
    /// HOST:PORT of rank 0, in place of --master-addr/--master-port (torchrun's --rdzv-endpoint).
    #[arg(long, alias = "rdzv_endpoint")]
    pub rdzv_endpoint: Option<String>,
    /// Job id; the shared secret is derived from it unless --token is given (torchrun's --rdzv-id).
    #[arg(long, alias = "rdzv_id")]
    pub rdzv_id: Option<String>,
    /// torchrun's --rdzv-backend: with c10d and no node rank, ranks are assigned at join (the node owning the endpoint is rank 0), as torchrun does.
    #[arg(long, alias = "rdzv_backend")]
    pub rdzv_backend: Option<String>,
    /// Every node, in rank order (Slurm hostlist syntax: node[1-3],gpu07). Each node finds its own rank.
    #[arg(long)]
    pub hosts: Option<String>,
    /// Port preflight's coordinator listens on, when not the master port (or PREFLIGHT_COORDINATOR_PORT; default: the master port, MASTER_PORT + 1 under torchrun).
    #[arg(long, alias = "coordinator_port", value_parser = clap::value_parser!(u16).range(1..))]
    pub coordinator_port: Option<u16>,
    /// Shared secret every node must know (or PREFLIGHT_TOKEN); default: derived from the job id (--rdzv-id, SLURM_JOB_ID, TORCHELASTIC_RUN_ID) and the endpoint.
    #[arg(long, env = "PREFLIGHT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the shared secret from this file (a Kubernetes Secret, a file the job script writes); used when --token is not given.
    #[arg(long, alias = "token_file")]
    pub token_file: Option<PathBuf>,
    /// Seconds to wait for every node to join (the coordinator waits as long again, plus any
    /// --burn, while a node may still be testing its GPUs; --no-gemm leaves that out); also
    /// bounds each phase: a run with a missing node ends after that wait and the measurements.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Shorter measurements (about 0.2 s per link).
    #[arg(long, conflicts_with = "thorough")]
    pub quick: bool,
    /// Longer measurements (about 3 s per link).
    #[arg(long)]
    pub thorough: bool,
    #[command(flatten)]
    pub gemm: GemmArgs,
    /// All-reduce to measure: a TCP ring over the chosen network, NCCL on the GPUs, auto (NCCL when every node has GPUs and libnccl, else TCP), or off.
    #[arg(long, value_enum, default_value_t = Allreduce::Auto)]
    pub allreduce: Allreduce,
    /// All-reduce message sizes as nccl-tests' -b/-e/-f: BEGIN:END[:FACTOR] or one SIZE (K/M/G) [default: 1M:256M; --quick 1M:16M:4; --thorough 1M:1G].
    #[arg(long)]
    pub sizes: Option<String>,
    /// Hold connections between ring neighbours silent this many seconds, then use them again: a firewall or NAT that drops idle connections shows (0 turns it off) [default: 30; --quick 0; --thorough 360].
    #[arg(long, alias = "idle_test", value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub idle_test: Option<u64>,
    /// Fail when the all-reduce bus bandwidth of the largest message is under this many GB/s (as nccl-tests' NCCL_TESTS_MIN_BW).
    #[arg(long, alias = "min_busbw", value_parser = parse_positive_f64)]
    pub min_busbw: Option<f64>,
    /// Call a pair slow when its measured throughput is under this many Gbit/s, whatever the other pairs measure (an absolute floor beside the cluster's own reference).
    #[arg(long, alias = "min_link_gbit", value_parser = parse_positive_f64)]
    pub min_link_gbit: Option<f64>,
    /// Also measure the all-reduce with these variables changed (KEY=VALUE[,KEY=VALUE]), e.g. NCCL_IB_DISABLE=1; the advice then prefers the faster setting.
    #[arg(long, alias = "compare_env", value_parser = parse_env_list)]
    pub compare_env: Option<EnvList>,
    /// Write the nodes that failed (a fail or error finding of their own, or never joined) to this file in Slurm hostlist syntax (node[1-3]), for `srun --exclude` or `scontrol update`.
    #[arg(long, alias = "nodes_failed", value_name = "FILE")]
    pub nodes_failed: Option<PathBuf>,
    /// Write the other nodes to this file in Slurm hostlist syntax (for `srun --nodelist`).
    #[arg(long, alias = "nodes_passed", value_name = "FILE")]
    pub nodes_passed: Option<PathBuf>,
    /// When the cluster fails, the healthy set must have at least this many nodes (default 1).
    #[arg(long, alias = "min_nodes", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub min_nodes: Option<u32>,
    /// The healthy set's node count must be a multiple of K (data/pipeline parallel degree): it is rounded down, the nodes with the slowest links left idle.
    #[arg(long, alias = "nodes_multiple_of", value_name = "K", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub nodes_multiple_of: Option<u32>,
    /// Also leave stragglers out of the healthy set: the nodes link.slow names as slow nodes (slow with every healthy partner, against a reference they cannot move).
    #[arg(long, alias = "exclude_slow")]
    pub exclude_slow: bool,
    /// Exit 0 when the cluster fails but its healthy set meets --min-nodes and --nodes-multiple-of (for job scripts that go on with the set).
    #[arg(long, alias = "proceed_with_healthy_set")]
    pub proceed_with_healthy_set: bool,
    #[command(flatten)]
    pub job: JobArgs,
    /// Your training script and its arguments, placed into the launch commands.
    #[arg(last = true, value_name = "SCRIPT_AND_ARGS")]
    pub script: Vec<String>,
}

/// `--allreduce`: which all-reduce `preflight cluster` measures.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Allreduce {
    Off,
    Tcp,
    Nccl,
    Auto,
}

/// `KEY=VALUE` pairs from `--compare-env`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EnvList(pub std::collections::BTreeMap<String, String>);

fn parse_env_list(s: &str) -> Result<EnvList, String> {
    let mut out = std::collections::BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}' is not KEY=VALUE (example: NCCL_IB_DISABLE=1)"))?;
        let valid = !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(format!(
                "'{k}' is not an environment variable name (example: NCCL_IB_DISABLE=1)"
            ));
        }
        out.insert(k.to_string(), v.to_string());
    }
    if out.is_empty() {
        return Err("give at least one KEY=VALUE (example: NCCL_IB_DISABLE=1)".into());
    }
    Ok(EnvList(out))
}

/// "2h", "90m", "3600s", "3600", "1d" -> seconds (at least 1 s, at most 30 days).
fn parse_window(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => 0,
    };
    match num.parse::<u64>() {
        Ok(n) if scale > 0 && n > 0 && n.saturating_mul(scale) <= 30 * 86400 => Ok(n * scale),
        _ => Err(format!(
            "'{s}' is not a window between 1s and 30d (examples: 2h, 90m, 3600s, 1d)"
        )),
    }
}

fn parse_positive_f64(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a positive number of GB/s (example: 10.5)"
        )),
    }
}

const TORCHRUN_HELP: &str = "\
Examples:
  preflight torchrun --nnodes=2 --nproc-per-node=8 --node-rank=0 --master-addr=10.0.0.1 train.py --lr 3
  preflight torchrun --no-run python -m torch.distributed.launch --nproc_per_node=4 main.py
  preflight torchrun --no-run 'torchrun --standalone --nproc-per-node=gpu train.py'   (one pasted line)

preflight's own options come first; from the first torchrun word on, everything is the command.

Exit codes:
  0  nothing is fail or error (with --strict: nothing is warn either)
  1  at least one finding is fail or error (or warn with --strict)
  2  the tool could not run (bad arguments, unreadable --facts file, ...)";

/// `preflight torchrun [OPTIONS] TORCHRUN_ARGS...`: preflight's options, then the user's command.
#[derive(Args, Debug, Clone)]
pub struct TorchrunArgs {
    #[command(flatten)]
    pub probe: ProbeArgs,
    /// Validate and print the fixed command only; no rendezvous with the other nodes.
    #[arg(long, alias = "no_run")]
    pub no_run: bool,
    /// Judge a saved facts file (from `preflight facts`) instead of probing this node; implies --no-run.
    #[arg(long)]
    pub facts: Option<PathBuf>,
    /// Shared secret every node must know (or PREFLIGHT_TOKEN); default: derived from the job id (--rdzv-id, SLURM_JOB_ID, TORCHELASTIC_RUN_ID) and the endpoint.
    #[arg(long, env = "PREFLIGHT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the shared secret from this file (a Kubernetes Secret, a file the job script writes); used when --token is not given.
    #[arg(long, alias = "token_file")]
    pub token_file: Option<PathBuf>,
    /// Seconds to wait for every node to join (the coordinator waits as long again, plus any
    /// --burn, while a node may still be testing its GPUs; --no-gemm leaves that out); also
    /// bounds each phase: a run with a missing node ends after that wait and the measurements.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// Shorter measurements (about 0.2 s per link).
    #[arg(long)]
    pub quick: bool,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the JSON report to this file.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Count warnings as failures in the exit code.
    #[arg(long)]
    pub strict: bool,
    /// GPUs this node must have; 0 says the job is CPU-only (as --no-gpu does).
    #[arg(long, alias = "expect_gpus", value_parser = clap::value_parser!(u32).range(0..))]
    pub expect_gpus: Option<u32>,
    /// The torchrun command as you would run it: `torchrun ARGS`, `python -m torch.distributed.run ARGS`, the bare ARGS, or one quoted line.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "TORCHRUN_COMMAND"
    )]
    pub args: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct FactsArgs {
    #[command(flatten)]
    pub probe: ProbeArgs,
    /// The port torchrun's rendezvous (the master) will listen on.
    #[arg(long, alias = "master_port", default_value_t = crate::placement::DEFAULT_MASTER_PORT, value_parser = clap::value_parser!(u16).range(1..))]
    pub master_port: u16,
    /// Write the facts to this file instead of stdout.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

/// Arguments of the hidden `nccl-worker` subcommand (the parent builds them).
#[derive(Args, Debug, Clone)]
pub struct NcclWorkerArgs {
    /// Total NCCL ranks over all nodes.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub nranks: u32,
    /// Global rank of this process's first GPU; its GPUs get first-rank .. first-rank+gpus-1.
    #[arg(long)]
    pub first_rank: u32,
    /// Local GPUs to drive (devices 0..gpus-1 of CUDA_VISIBLE_DEVICES).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub gpus: u32,
    /// Message sizes in bytes, comma separated; K/M/G suffixes are powers of 1024.
    #[arg(long, required = true)]
    pub sizes: String,
    /// Untimed all-reduces per size.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub warmup: u32,
    /// Timed all-reduces per size.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub iters: u32,
    /// Create and print the unique id even when --first-rank is not 0.
    #[arg(long)]
    pub id_out: bool,
}

/// Arguments of the hidden `gemm-worker` subcommand (the parent builds them).
#[derive(Args, Debug, Clone)]
pub struct GemmWorkerArgs {
    /// GPUs to drive (CUDA ordinals 0..gpus-1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub gpus: u32,
    /// m = n = k of the timed multiplies.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(64..=32768))]
    pub size: u32,
    /// m = n = k of the checked multiply.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(16..=16384))]
    pub check_size: u32,
    /// Seconds of sustained load (0: none).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub burn: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn underscore_and_dash_spellings_are_the_same_flag() {
        let a = Cli::try_parse_from([
            "preflight",
            "check",
            "--master_port",
            "29600",
            "--nproc_per_node=4",
        ])
        .unwrap();
        let Command::Check(c) = a.command else {
            panic!("not check")
        };
        assert_eq!(c.master_port, Some(29600));
        assert_eq!(c.job.nproc_per_node, Some(4));
    }

    #[test]
    fn rejects_port_zero_and_out_of_range() {
        assert!(Cli::try_parse_from(["preflight", "check", "--master-port=0"]).is_err());
        assert!(Cli::try_parse_from(["preflight", "check", "--master-port=70000"]).is_err());
        assert!(Cli::try_parse_from(["preflight", "check", "--nproc-per-node=0"]).is_err());
    }

    #[test]
    fn script_after_double_dash() {
        let a =
            Cli::try_parse_from(["preflight", "check", "--", "train.py", "--epochs", "5"]).unwrap();
        let Command::Check(c) = a.command else {
            panic!("not check")
        };
        assert_eq!(c.script, vec!["train.py", "--epochs", "5"]);
    }
}

//! The option tables of the launchers preflight reads (torchrun's `get_args_parser`, launch.py's
//! `--use-env`, accelerate's, deepspeed's) and how a word names one of them: its exact
//! spelling, else, for torch's launchers, the one long spelling it is a prefix of, as argparse's
//! `allow_abbrev` reads it.

use super::head::Launcher;

/// One option torchrun knows.
#[derive(Debug)]
pub struct OptSpec {
    /// The canonical (dash) long name without `--`: "nproc-per-node".
    pub name: &'static str,
    /// Every accepted spelling, with dashes: "--nproc-per-node", "--nproc_per_node", "-m".
    pub spellings: &'static [&'static str],
    /// Takes a value (`--flag v` / `--flag=v`); false for store-true flags.
    pub takes_value: bool,
    /// Only `torch.distributed.launch` accepts it.
    pub launch_only: bool,
}

const fn opt(name: &'static str, spellings: &'static [&'static str], takes_value: bool) -> OptSpec {
    OptSpec {
        name,
        spellings,
        takes_value,
        launch_only: false,
    }
}

/// Every option of torch/distributed/run.py (torch 2.11, plus launch.py's `--use-env`), in its
/// order: argparse names the candidates of an ambiguous prefix in this order.
pub const OPTIONS: &[OptSpec] = &[
    opt("nnodes", &["--nnodes"], true),
    opt(
        "nproc-per-node",
        &["--nproc-per-node", "--nproc_per_node"],
        true,
    ),
    opt("rdzv-backend", &["--rdzv-backend", "--rdzv_backend"], true),
    opt(
        "rdzv-endpoint",
        &["--rdzv-endpoint", "--rdzv_endpoint"],
        true,
    ),
    opt("rdzv-id", &["--rdzv-id", "--rdzv_id"], true),
    opt("rdzv-conf", &["--rdzv-conf", "--rdzv_conf"], true),
    opt("standalone", &["--standalone"], false),
    opt("max-restarts", &["--max-restarts", "--max_restarts"], true),
    opt(
        "monitor-interval",
        &["--monitor-interval", "--monitor_interval"],
        true,
    ),
    opt("start-method", &["--start-method", "--start_method"], true),
    opt(
        "event-log-handler",
        &["--event-log-handler", "--event_log_handler"],
        true,
    ),
    opt("role", &["--role"], true),
    opt("module", &["-m", "--module"], false),
    opt("no-python", &["--no-python", "--no_python"], false),
    opt("run-path", &["--run-path", "--run_path"], false),
    opt("log-dir", &["--log-dir", "--log_dir"], true),
    opt("redirects", &["-r", "--redirects"], true),
    opt("tee", &["-t", "--tee"], true),
    opt(
        "local-ranks-filter",
        &["--local-ranks-filter", "--local_ranks_filter"],
        true,
    ),
    opt(
        "duplicate-stdout-filters",
        &["--duplicate-stdout-filters", "--duplicate_stdout_filters"],
        true,
    ),
    opt(
        "duplicate-stderr-filters",
        &["--duplicate-stderr-filters", "--duplicate_stderr_filters"],
        true,
    ),
    opt("node-rank", &["--node-rank", "--node_rank"], true),
    opt("master-addr", &["--master-addr", "--master_addr"], true),
    opt("master-port", &["--master-port", "--master_port"], true),
    opt("local-addr", &["--local-addr", "--local_addr"], true),
    opt("logs-specs", &["--logs-specs", "--logs_specs"], true),
    opt("numa-binding", &["--numa-binding", "--numa_binding"], true),
    opt(
        "signals-to-handle",
        &["--signals-to-handle", "--signals_to_handle"],
        true,
    ),
    opt(
        "virtual-local-rank",
        &["--virtual-local-rank", "--virtual_local_rank"],
        false,
    ),
    OptSpec {
        name: "use-env",
        spellings: &["--use-env", "--use_env"],
        takes_value: false,
        launch_only: true,
    },
];

/// `accelerate launch` (accelerate/commands/launch.py): what maps onto torchrun's names.
/// `--num_processes` counts processes on all machines together.
pub const ACCELERATE: &[OptSpec] = &[
    opt("nnodes", &["--num_machines", "--num-machines"], true),
    opt("node-rank", &["--machine_rank", "--machine-rank"], true),
    opt(
        "master-addr",
        &["--main_process_ip", "--main-process-ip"],
        true,
    ),
    opt(
        "master-port",
        &["--main_process_port", "--main-process-port"],
        true,
    ),
    opt(
        "num-processes",
        &["--num_processes", "--num-processes"],
        true,
    ),
    opt("rdzv-backend", &["--rdzv_backend", "--rdzv-backend"], true),
    opt("rdzv-conf", &["--rdzv_conf", "--rdzv-conf"], true),
    opt("max-restarts", &["--max_restarts", "--max-restarts"], true),
    opt("config-file", &["--config_file", "--config-file"], true),
    opt("module", &["-m", "--module"], false),
    opt("no-python", &["--no_python", "--no-python"], false),
    opt("cpu", &["--cpu"], false),
];

pub(super) const ACCELERATE_FLAGS: &[&str] = &[
    "--multi_gpu",
    "--multi-gpu",
    "--tpu",
    "--ipex",
    "--use_deepspeed",
    "--use-deepspeed",
    "--use_fsdp",
    "--use-fsdp",
    "--use_megatron_lm",
    "--use_xpu",
    "--same_network",
    "--same-network",
    "-q",
    "--quiet",
    "--debug",
    "--enable_cpu_affinity",
    "--downcast_bf16",
    "--tpu_use_sudo",
    "--dynamo_use_fullgraph",
    "--dynamo_use_dynamic",
    "--no_tpu_cluster",
    "--tpu_cluster",
];

/// `deepspeed` (deepspeed/launcher/runner.py): what maps onto torchrun's names.
pub const DEEPSPEED: &[OptSpec] = &[
    opt("nnodes", &["--num_nodes", "--num-nodes"], true),
    opt("nproc-per-node", &["--num_gpus", "--num-gpus"], true),
    opt("node-rank", &["--node_rank", "--node-rank"], true),
    opt("master-addr", &["--master_addr", "--master-addr"], true),
    opt("master-port", &["--master_port", "--master-port"], true),
    opt("hostfile", &["-H", "--hostfile"], true),
    opt("include", &["-i", "--include"], true),
    opt("exclude", &["-e", "--exclude"], true),
    opt("launcher", &["--launcher"], true),
    opt("module", &["--module"], false),
    opt("no-python", &["--no_python"], false),
    opt("no-ssh", &["--no_ssh"], false),
];

pub(super) const DEEPSPEED_FLAGS: &[&str] = &[
    "--force_multi",
    "--no_ssh_check",
    "--no_local_rank",
    "--save_pid",
    "--elastic_training",
    "--bind_cores_to_rank",
    "--enable_each_rank_log",
];

/// The spec of a canonical name (torchrun's table).
pub fn spec(name: &str) -> Option<&'static OptSpec> {
    OPTIONS.iter().find(|o| o.name == name)
}

fn spec_of_spelling(table: &'static [OptSpec], spelling: &str) -> Option<&'static OptSpec> {
    table.iter().find(|o| o.spellings.contains(&spelling))
}

/// What an option word names, read as torch's argparse reads it (`allow_abbrev`, the default).
pub(super) enum Named {
    One(&'static OptSpec),
    /// A prefix of several long spellings, in argparse's order.
    Ambiguous(Vec<&'static str>),
    Unknown,
}

/// The exact spelling first; else, for torch's launchers, the one long spelling that starts
/// with it (`--nproc-per` is `--nproc-per-node`, `--max_restart` is `--max_restarts`). Several
/// matching spellings make it ambiguous, even two of one option, as argparse says
/// ("ambiguous option: --nproc could match --nproc-per-node, --nproc_per_node").
pub(super) fn resolve(table: &'static [OptSpec], launcher: Launcher, spelling: &str) -> Named {
    if let Some(spec) = spec_of_spelling(table, spelling) {
        return Named::One(spec);
    }
    if !launcher.is_torch() || !spelling.starts_with("--") || spelling.len() < 3 {
        return Named::Unknown;
    }
    let matches: Vec<(&'static OptSpec, &'static str)> = table
        .iter()
        .filter(|o| !o.launch_only || launcher == Launcher::Launch)
        .flat_map(|o| {
            o.spellings
                .iter()
                .filter(|s| s.starts_with("--") && s.starts_with(spelling))
                .map(move |s| (o, *s))
        })
        .collect();
    match matches.as_slice() {
        [] => Named::Unknown,
        [(spec, _)] => Named::One(spec),
        many => Named::Ambiguous(many.iter().map(|(_, s)| *s).collect()),
    }
}

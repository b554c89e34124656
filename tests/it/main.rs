//! The one integration-test binary: CLI behaviour, fixtures, and multi-node scenarios in network namespaces.

/// No test run keeps a history unless it asks for one (`--history PATH`): set once, before any
/// test starts, so every `preflight` a test starts (directly, through a namespace, Slurm or
/// mpirun) inherits it, and no test sees another's runs or writes /var/lib/preflight.
#[ctor::ctor(unsafe)]
fn no_history_by_default() {
    // SAFETY: runs before main, when no other thread exists to read the environment.
    unsafe { std::env::set_var("PREFLIGHT_HISTORY", "off") };
}

mod allreduce;
mod as_written;
mod c10d;
mod cli;
mod cluster;
mod common;
mod demo;
mod egress;
mod explain_hang;
mod explain_log;
mod fabrics;
mod fail_slow;
mod faults;
mod firewall_fixes;
mod first_run;
mod gemm;
mod gpu_health;
mod healthy_set;
mod history;
mod hooks;
mod hooks_k8s;
mod hostile;
mod hostile_input;
mod html;
mod idle_timeout;
mod join_causes;
mod launchers;
mod layers;
mod local_tasks;
mod master_names;
mod mtu_blackhole;
mod nccl;
mod nccl_auto_pick;
mod net_causes;
mod netns;
mod props;
mod rails;
mod render_cluster;
mod render_node;
mod render_scale;
mod report_contract;
mod rp_filter;
mod scale;
mod scale_cluster;
mod signals;
mod slurm;
mod slurm_running;
mod slurm_tasks;
mod synthetic;
mod torchrun;
mod torchrun_argparse;

//! Helpers every CLI-level test module shares: the binary, repository paths, JSON output.

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// Held by the tests that judge measured speed and by those that load every core (dozens of
/// agents): a judgment of throughput measured while another test's 64 agents own both cores
/// would be a judgment of that test, not of the links.
static MEASURED_SPEED: Mutex<()> = Mutex::new(());

/// Waits for [`MEASURED_SPEED`] (a panicked holder does not poison it for the others).
pub fn measured_speed() -> MutexGuard<'static, ()> {
    MEASURED_SPEED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The built `preflight`, without colour and without a token inherited from the caller.
pub fn bin() -> Command {
    let mut c = Command::cargo_bin("preflight").expect("binary built");
    c.env("NO_COLOR", "1").env_remove("PREFLIGHT_TOKEN");
    c
}

/// A path inside the repository.
pub fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A path under `tests/fixtures`.
pub fn fixture(rel: &str) -> PathBuf {
    repo("tests/fixtures").join(rel)
}

/// stdout parsed as JSON; panics with the text when it is not.
pub fn json_of(out: &[u8]) -> Value {
    serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(out)))
}

/// A run's report from its stdout; panics with its stderr when stdout is not JSON.
pub fn report_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Variables of the caller that would change how a run places itself or which worker it
/// starts; every test that starts `preflight cluster` itself removes them.
pub const INHERITED_ENV_TO_CLEAR: &[&str] = &[
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "NODE_RANK",
    "GROUP_RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_NODEID",
    "SLURM_NNODES",
    "SLURM_JOB_ID",
    "PREFLIGHT_TOKEN",
    "PREFLIGHT_NCCL_WORKER",
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
    "NCCL_HOSTID",
    "SLURM_LOCALID",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_NTASKS_PER_NODE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "PMI_LOCAL_RANK",
    "PMI_LOCAL_SIZE",
];

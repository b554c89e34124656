//! The real `preflight nccl-worker` on a machine without a GPU driver, alone and through the parent API.

use assert_cmd::Command;
use preflight::measure::nccl::{self, NcclError, NcclJob};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn bin_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_preflight"))
}

/// True where an NVIDIA driver is loaded: the "no libcuda" assertions do not apply there.
fn has_driver() -> bool {
    let present = Path::new("/proc/driver/nvidia").exists();
    if present {
        eprintln!("skipping: an NVIDIA driver is loaded on this machine");
    }
    present
}

fn worker(args: &[&str]) -> (Vec<Value>, i32, String) {
    let out = Command::new(bin_path())
        .arg("nccl-worker")
        .args(args)
        .write_stdin("")
        .timeout(Duration::from_secs(30))
        .output()
        .expect("ran");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (lines, out.status.code().unwrap_or(-1), stderr)
}

#[test]
fn worker_without_libcuda_prints_one_clear_error_line() {
    if has_driver() {
        return;
    }
    let (lines, code, stderr) = worker(&[
        "--nranks",
        "2",
        "--first-rank",
        "0",
        "--gpus",
        "1",
        "--sizes",
        "1M,2M",
    ]);
    assert_eq!(code, 1, "stderr: {stderr}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let err = lines[0]["error"].as_str().expect("an error line");
    assert!(err.starts_with("libcuda not found"), "{err}");
    assert!(err.contains("NVIDIA driver"), "{err}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn worker_rejects_ranks_that_do_not_fit_before_touching_cuda() {
    let (lines, code, _) = worker(&[
        "--nranks",
        "2",
        "--first-rank",
        "1",
        "--gpus",
        "2",
        "--sizes",
        "64K",
    ]);
    assert_eq!(code, 1);
    let err = lines[0]["error"].as_str().expect("an error line");
    assert!(err.contains("ranks 1..2 do not fit in --nranks 2"), "{err}");
}

#[test]
fn worker_is_hidden_and_validates_sizes() {
    let help = Command::new(bin_path())
        .arg("--help")
        .output()
        .expect("ran");
    assert!(!String::from_utf8_lossy(&help.stdout).contains("nccl-worker"));
    let bad = Command::new(bin_path())
        .args([
            "nccl-worker",
            "--nranks",
            "1",
            "--first-rank",
            "0",
            "--gpus",
            "1",
            "--sizes",
            "1T",
        ])
        .output()
        .expect("ran");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a size"));
}

#[test]
fn parent_reports_the_real_workers_libcuda_error() {
    if has_driver() {
        return;
    }
    let job = NcclJob {
        nranks: 1,
        first_rank: 0,
        gpus: 1,
        sizes: vec![1 << 20],
        warmup: 1,
        iters: 1,
        timeout: Duration::from_secs(30),
        program: Some(bin_path()),
        ..Default::default()
    };
    let mut w = nccl::start(&job).expect("start");
    match w.unique_id(Duration::from_secs(20)) {
        Err(NcclError::Failed { message, .. }) => {
            assert!(message.starts_with("libcuda not found"), "{message}")
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(id) => panic!("got an id without a driver: {id}"),
    }
}

/// `check --thorough` runs the NCCL all-reduce over the node's GPUs through the worker child
/// and judges it as the cluster's is (here two fake GPUs and the fake worker speaking the
/// protocol; the real one ran on an H100, the guide: docs/src/node-check.md, GPU node health).
#[test]
fn check_thorough_runs_the_one_node_allreduce_and_judges_it() {
    let fake =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-worker/fake-worker.sh");
    let run = |mode: &str| -> Value {
        let out = Command::new(bin_path())
            .args(["check", "--thorough", "--format", "json"])
            .env("PREFLIGHT_TEST_FAKE_GPUS", "2")
            .env("PREFLIGHT_NCCL_WORKER", &fake)
            .env("FAKE_MODE", mode)
            .timeout(Duration::from_secs(120))
            .output()
            .expect("ran");
        crate::common::report_of(&out)
    };
    let finding = |r: &Value, id: &str| -> Value {
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id}"))
    };
    let r = run("ok");
    let c = &r["collectives"][0];
    assert_eq!(c["transport"], "nccl", "{r:#}");
    assert_eq!(c["ranks"], 2);
    let sizes: Vec<u64> = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes.first(), Some(&(1 << 20)), "{sizes:?}");
    assert_eq!(sizes.last(), Some(&(256 << 20)), "{sizes:?}");
    assert_eq!(finding(&r, "collective.wrong")["status"], "pass");
    // A worker that prints garbage: the all-reduce is an error with its cause, never a pass.
    let r = run("garbage");
    assert!(r["collectives"][0]["error"].is_string(), "{r:#}");
    let err = finding(&r, "collective.error");
    assert_eq!(err["status"], "error", "{err:#}");
    // Its fix reruns what ran: this node's all-reduce, not a cluster's.
    let rerun = err["fix"]["commands"][0].as_str().unwrap();
    assert!(rerun.ends_with("preflight check --thorough"), "{rerun}");
    assert_eq!(r["status"], "error");
}

//! The GPU matrix-multiply test (issue 35) without a GPU: the real `preflight gemm-worker`
//! without a driver, the parent against a fake worker that hangs, crashes or lies, `check
//! --gemm`/`--burn` judged from the fake's lines, and a 2-node cluster whose second node's GPUs
//! are slow, judged across the nodes by real agents in network namespaces.

use crate::netns::Cluster;
use assert_cmd::Command;
use preflight::measure::gemm::{self, GemmJob};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn bin_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_preflight"))
}

fn fake() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemm-worker/fake-worker.sh")
}

fn job(timeout_s: u64, program: PathBuf) -> GemmJob {
    GemmJob {
        gpus: 2,
        size: 256,
        check_size: 64,
        burn_s: 0,
        seed: 1,
        timeout: Duration::from_secs(timeout_s),
        lib_dirs: Vec::new(),
        program: Some(program),
    }
}

/// A program that runs the fake worker in `mode`.
fn fake_in(mode: &str, dir: &Path) -> PathBuf {
    let p = dir.join(format!("fake-{mode}.sh"));
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nFAKE_GEMM_MODE={mode} exec {} \"$@\"\n",
            fake().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p
}

#[test]
fn the_real_worker_without_a_driver_says_what_is_missing() {
    if Path::new("/proc/driver/nvidia").exists() {
        return;
    }
    let out = Command::new(bin_path())
        .args(["gemm-worker", "--gpus", "1"])
        .timeout(Duration::from_secs(30))
        .output()
        .expect("ran");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("libcuda not found"), "{text}");
    // Through the parent: one error line, never a panic.
    let run = gemm::run(&job(30, bin_path()), &mut |_| {});
    assert!(
        run.error
            .as_deref()
            .unwrap_or_default()
            .contains("libcuda not found"),
        "{run:?}"
    );
}

#[test]
fn a_hung_worker_is_killed_at_its_deadline() {
    let t = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let run = gemm::run(&job(2, fake_in("hang", t.path())), &mut |_| {});
    let took = started.elapsed();
    assert!(took < Duration::from_secs(8), "{took:?}");
    let e = run.error.unwrap();
    assert!(e.starts_with("the GEMM worker timed out: killed after 2 s (1 GPUs opened, 0 rates and 0 checks reported)"), "{e}");
}

#[test]
fn a_crashed_worker_and_a_lying_one_are_errors_with_their_cause() {
    let t = tempfile::tempdir().unwrap();
    let run = gemm::run(&job(20, fake_in("crash", t.path())), &mut |_| {});
    let e = run.error.unwrap();
    assert!(e.contains("killed by signal 11 (SIGSEGV)"), "{e}");
    let started = Instant::now();
    let run = gemm::run(&job(20, fake_in("garbage", t.path())), &mut |_| {});
    assert!(started.elapsed() < Duration::from_secs(8));
    let e = run.error.unwrap();
    assert!(
        e.contains("printed garbage") && e.contains("this is not a worker line"),
        "{e}"
    );
}

fn check(args: &[&str], mode: &str) -> Value {
    let out = Command::new(bin_path())
        .arg("check")
        .args(args)
        .args(["--format", "json"])
        .env("PREFLIGHT_TEST_FAKE_GPUS", "4")
        .env("PREFLIGHT_GEMM_WORKER", fake())
        .env("FAKE_GEMM_MODE", mode)
        .timeout(Duration::from_secs(60))
        .output()
        .expect("ran");
    crate::common::report_of(&out)
}

fn findings<'a>(r: &'a Value, id: &str) -> Vec<&'a Value> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == id)
        .collect()
}

#[test]
fn check_gemm_judges_the_workers_results() {
    let r = check(&["--gemm"], "ok");
    let slow = findings(&r, "gpu.compute-slow");
    assert_eq!(slow.len(), 1, "{slow:#?}");
    assert_eq!(slow[0]["status"], "pass");
    assert_eq!(findings(&r, "gpu.compute-wrong")[0]["status"], "pass");
    let compute = &r["nodes"][0]["facts"]["gpu"]["compute"];
    assert_eq!(compute["gpus"].as_array().unwrap().len(), 4, "{compute:#}");
    assert_eq!(compute["cublas_version"], 120803);

    let r = check(&["--gemm"], "slow");
    let slow = findings(&r, "gpu.compute-slow");
    assert_eq!(slow.len(), 1, "{slow:#?}");
    assert_eq!(slow[0]["status"], "fail");
    assert_eq!(slow[0]["subject"], "GPU 1");
    let text = slow[0]["summary"].as_str().unwrap();
    assert!(
        text.contains(
            "bf16 444 TFLOP/s, 60% of the model's reference 740 (upper quartile of 4 GPUs)"
        ),
        "{text}"
    );

    let r = check(&["--gemm"], "wrong");
    let wrong = findings(&r, "gpu.compute-wrong");
    assert_eq!(wrong.len(), 1, "{wrong:#?}");
    assert_eq!(wrong[0]["status"], "fail");
    assert!(
        wrong[0]["summary"]
            .as_str()
            .unwrap()
            .contains("17 elements of its bf16 product differ from the exact result")
    );
}

#[test]
fn check_burn_names_the_gpu_that_slows_with_its_timeline() {
    let r = check(&["--burn", "3"], "throttle");
    let t = findings(&r, "gpu.compute-throttle");
    assert_eq!(t.len(), 1, "{t:#?}");
    assert_eq!(t[0]["status"], "fail");
    assert_eq!(t[0]["subject"], "GPU 0");
    let text = t[0]["summary"].as_str().unwrap();
    assert!(
        text.contains("slowed from 740 to 518 TFLOP/s (70%) under sustained load"),
        "{text}"
    );
    assert_eq!(t[0]["evidence"]["timeline"].as_array().unwrap().len(), 3);
}

#[test]
fn the_default_check_and_the_slurm_hooks_leave_it_out() {
    let r = check(&[], "ok");
    assert!(findings(&r, "gpu.compute-slow").is_empty());
    assert!(r["nodes"][0]["facts"]["gpu"].get("compute").is_none());
}

#[test]
fn without_gpus_it_skips_with_the_reason() {
    let out = Command::new(bin_path())
        .args(["check", "--gemm", "--no-gpu", "--format", "json"])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("ran");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let slow = findings(&r, "gpu.compute-slow");
    assert_eq!(slow[0]["status"], "skip", "{slow:#?}");
    assert!(
        slow[0]["summary"]
            .as_str()
            .unwrap()
            .contains("no GPU to multiply on")
    );
}

/// Two real agents: the second node's GPUs are slower than the first's, which neither node can
/// see alone; the cluster names the second node and no other.
#[test]
fn the_cluster_names_the_node_whose_gpus_are_slow() {
    let Some(c) = Cluster::flat("gemm", 2, "eth0").build() else {
        return;
    };
    let mut run = c
        .preflight()
        .timeout(30)
        .args(&["--allreduce=off", "--gemm"]);
    for rank in 0..2 {
        run = run
            .env_on(rank, "PREFLIGHT_TEST_FAKE_GPUS", "4")
            .env_on(rank, "PREFLIGHT_GEMM_WORKER", &fake().display().to_string())
            .env_on(
                rank,
                "FAKE_GEMM_RATE",
                if rank == 1 { "520" } else { "740" },
            );
    }
    let runs = run.run();
    let r0 = &runs[0];
    let slow: Vec<&Value> = r0
        .findings("gpu.compute-slow")
        .into_iter()
        .filter(|f| f["status"] == "fail")
        .collect();
    assert_eq!(slow.len(), 1, "{}", r0.describe());
    assert_eq!(slow[0]["node"], 1);
    let text = slow[0]["summary"].as_str().unwrap();
    assert!(text.starts_with("all 4 GPUs of "), "{text}");
    assert!(
        text.contains(
            "bf16 520 TFLOP/s against the model's reference 740 (upper quartile of 8 GPUs), 70%"
        ),
        "{text}"
    );
}

/// Rank 0's GPU hangs in the multiply: its watchdog cuts the worker off at the join timeout,
/// the other node waits that long to join, and the report names the hung test on rank 0
/// instead of a node that never joined.
#[test]
fn a_hung_gpu_on_rank_0_is_named_and_the_nodes_still_join() {
    let Some(c) = Cluster::flat("gemmhang", 2, "eth0").build() else {
        return;
    };
    let started = Instant::now();
    let runs = c
        .preflight()
        .timeout(6)
        .args(&["--allreduce=off", "--gemm"])
        .env_on(0, "PREFLIGHT_TEST_FAKE_GPUS", "2")
        .env_on(1, "PREFLIGHT_TEST_FAKE_GPUS", "2")
        .env_on(0, "PREFLIGHT_GEMM_WORKER", &fake().display().to_string())
        .env_on(1, "PREFLIGHT_GEMM_WORKER", &fake().display().to_string())
        .env_on(0, "FAKE_GEMM_MODE", "hang")
        .run();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(45), "{took:?}");
    let r0 = &runs[0];
    assert!(
        r0.findings("cluster.rendezvous")
            .iter()
            .all(|f| f["status"] == "pass"),
        "{}",
        r0.describe()
    );
    let nodes = r0.report()["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{}", r0.describe());
    let why = nodes[0]["facts"]["gpu"]["compute"]["skipped"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.starts_with("the GEMM worker timed out: killed after 6 s"),
        "{why}"
    );
    let skip: Vec<&Value> = r0
        .findings("gpu.compute-slow")
        .into_iter()
        .filter(|f| f["node"] == 0 && f["status"] == "skip")
        .collect();
    assert_eq!(skip.len(), 1, "{}", r0.describe());
    // Rank 1's GPUs were measured.
    assert_eq!(
        nodes[1]["facts"]["gpu"]["compute"]["gpus"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

//! Under the launchers people use: env fixtures of srun/torchrun/Kubernetes, the shipped recipes
//! (sbatch, Indexed Job manifest), torchrun's one-preflight-per-node rule, and `preflight launch`.

use preflight::cli::{Cli, Command as Sub};
use preflight::placement::{self as launcher, LocalIdentity, Placement, PlacementFlags};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{bin, repo};

fn fixtures() -> PathBuf {
    repo("tests/fixtures")
}

fn bin_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("preflight")
}

/// `KEY=VALUE` lines; `#` comments and blank lines skipped.
fn read_env(name: &str) -> BTreeMap<String, String> {
    let path = fixtures().join("launchers").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{name}: {l}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn cluster_args(flags: &[&str]) -> PlacementFlags {
    use clap::Parser;
    match Cli::try_parse_from(["preflight", "cluster"].iter().chain(flags.iter()))
        .expect("flags parse")
        .command
    {
        Sub::Cluster(c) => preflight::config::placement_flags(&c),
        _ => unreachable!(),
    }
}

/// Two ports in a row, the first held by the returned listener (as torchrun's store holds
/// MASTER_PORT), the second free now: (listener, master port).
fn port_pair() -> (TcpListener, u16) {
    for _ in 0..200 {
        let l = TcpListener::bind("0.0.0.0:0").expect("bind");
        let p = l.local_addr().expect("addr").port();
        if p < 65535 && TcpListener::bind(("0.0.0.0", p + 1)).is_ok() {
            return (l, p);
        }
    }
    panic!("no two consecutive free ports");
}

// ---------------------------------------------------------------- env fixtures

#[test]
fn env_fixtures_resolve_to_the_expected_placement() {
    struct Case {
        file: &'static str,
        nnodes: u32,
        rank: u32,
        master: &'static str,
        port: u16,
        coordinator: u16,
        job: Option<&'static str>,
        source: &'static str,
    }
    let cases = [
        Case {
            file: "slurm-srun-node2.env",
            nnodes: 4,
            rank: 2,
            master: "gpu01",
            port: 29500,
            coordinator: 29500,
            job: Some("123456"),
            source: "slurm",
        },
        Case {
            file: "slurm-srun-with-master-port.env",
            nnodes: 3,
            rank: 0,
            master: "a100-n7",
            port: 29600,
            coordinator: 29600,
            job: Some("777"),
            source: "slurm",
        },
        Case {
            file: "torchrun-static-worker.env",
            nnodes: 2,
            rank: 1,
            master: "10.1.0.5",
            port: 29500,
            coordinator: 29501,
            job: None,
            source: "torchrun-env",
        },
        Case {
            file: "torchrun-c10d-worker.env",
            nnodes: 3,
            rank: 2,
            master: "gpu01",
            port: 29400,
            coordinator: 29401,
            job: Some("job42"),
            source: "torchrun-env",
        },
        Case {
            file: "torchrun-under-srun.env",
            nnodes: 2,
            rank: 1,
            master: "node1",
            port: 29500,
            coordinator: 29501,
            job: Some("5150"),
            source: "slurm",
        },
        Case {
            file: "k8s-indexed-job-pod1.env",
            nnodes: 2,
            rank: 1,
            master: "preflight-0.preflight",
            port: 29500,
            coordinator: 29500,
            job: None,
            source: "torchrun-env",
        },
        Case {
            file: "kubeflow-pytorchjob-worker.env",
            nnodes: 3,
            rank: 2,
            master: "bert-master-0",
            port: 23456,
            coordinator: 23456,
            job: None,
            source: "torchrun-env",
        },
    ];
    let me = LocalIdentity {
        hostname: "elsewhere".into(),
        addrs: vec![],
    };
    for c in cases {
        let env = read_env(c.file);
        let p: Placement = launcher::resolve(&cluster_args(&[]), &env, &me)
            .unwrap_or_else(|e| panic!("{}: {e}", c.file));
        let got = (
            p.nnodes,
            p.rank,
            p.master_addr.as_str(),
            p.master_port,
            p.coordinator_port,
            p.job_id.as_deref(),
            p.source,
        );
        let want = (
            c.nnodes,
            c.rank,
            c.master,
            c.port,
            c.coordinator,
            c.job,
            c.source,
        );
        assert_eq!(got, want, "{}", c.file);
        // A note exactly when the coordinator is not on the master port.
        assert_eq!(
            p.coordinator_note.is_some(),
            c.coordinator != c.port,
            "{}",
            c.file
        );
    }
}

// ---------------------------------------------------------------- the Kubernetes manifest

/// The manifest as JSON, through python3's yaml module; None (with a message) when it is missing.
fn yaml_to_json(path: &Path) -> Option<Vec<Value>> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import json,sys,yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(path)
        .output();
    match out {
        Ok(o) if o.status.success() => Some(serde_json::from_slice(&o.stdout).expect("json")),
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named") => {
            eprintln!("skipped: python3 has no yaml module (pip install pyyaml) to parse {path:?}");
            None
        }
        Ok(o) => panic!(
            "{path:?} is not valid YAML: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("skipped: no python3 to parse {path:?}: {e}");
            None
        }
    }
}

#[test]
fn kubernetes_manifest_sets_what_preflight_reads() {
    let path = repo("examples/kubernetes/preflight-indexed-job.yaml");
    let Some(docs) = yaml_to_json(&path) else {
        return;
    };
    let service = docs
        .iter()
        .find(|d| d["kind"] == "Service")
        .expect("Service");
    let job = docs.iter().find(|d| d["kind"] == "Job").expect("Job");
    assert_eq!(service["spec"]["clusterIP"], "None", "headless");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["subdomain"], service["metadata"]["name"]);
    let env = pod["containers"][0]["env"].as_array().expect("env list");
    let names: Vec<&str> = env.iter().filter_map(|e| e["name"].as_str()).collect();
    for n in &names {
        assert!(
            launcher::ENV_VARS.contains(n) || *n == "PREFLIGHT_TOKEN",
            "the manifest sets {n}, which preflight does not read"
        );
    }
    let value = |k: &str| {
        env.iter()
            .find(|e| e["name"] == k)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{k} not set"))
    };
    assert_eq!(value("NNODES"), job["spec"]["completions"].to_string());
    assert_eq!(value("NNODES"), job["spec"]["parallelism"].to_string());
    // MASTER_ADDR is pod 0's stable name: <job>-0.<service>.
    let master = format!(
        "{}-0.{}",
        job["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["name"].as_str().unwrap()
    );
    assert_eq!(value("MASTER_ADDR"), master);
    assert_eq!(
        value("MASTER_PORT"),
        service["spec"]["ports"][0]["port"].to_string()
    );
    let token = env.iter().find(|e| e["name"] == "PREFLIGHT_TOKEN").unwrap();
    assert!(token["valueFrom"]["secretKeyRef"]["name"].is_string());
    // What pod 1 sees resolves as the fixture says.
    let mut pod1: BTreeMap<String, String> = names
        .iter()
        .filter(|n| **n != "PREFLIGHT_TOKEN")
        .map(|n| (n.to_string(), value(n).to_string()))
        .collect();
    pod1.insert("JOB_COMPLETION_INDEX".into(), "1".into());
    let me = LocalIdentity::default();
    let p = launcher::resolve(&cluster_args(&[]), &pod1, &me).expect("resolves");
    assert_eq!(
        (p.nnodes, p.rank, p.master_addr.as_str()),
        (2, 1, master.as_str())
    );
}

// ---------------------------------------------------------------- the sbatch script

fn write_exec(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn sbatch_script_parses() {
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(repo("examples/slurm/preflight.sbatch"))
        .status()
        .expect("bash");
    assert!(st.success());
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(repo("examples/pdsh.sh"))
        .status()
        .expect("bash");
    assert!(st.success());
}

/// The whole sbatch flow on one node: a fake `srun` (sets SLURM_* for one node and runs the
/// command) and a fake `torchrun` (records what it was given).
#[test]
fn sbatch_script_runs_preflight_then_torchrun_with_the_measured_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = dir.path().join("bin");
    std::fs::create_dir(&fake).unwrap();
    let record = dir.path().join("torchrun.txt");
    write_exec(
        &fake.join("srun"),
        "#!/bin/bash\n\
         while [ $# -gt 0 ] && [ \"${1#-}\" != \"$1\" ]; do shift; done\n\
         export SLURM_JOB_NODELIST=127.0.0.1 SLURM_NNODES=1 SLURM_NODEID=0 SLURM_PROCID=0\n\
         export SLURM_STEP_NODELIST=127.0.0.1 SLURMD_NODENAME=$(hostname)\n\
         exec \"$@\"\n",
    );
    write_exec(
        &fake.join("torchrun"),
        &format!(
            "#!/bin/bash\n{{ echo \"ARGS $*\"; env | grep -E '^(NCCL|GLOO|MASTER)_' | sort; }} > {}\n",
            record.display()
        ),
    );
    let (held, port) = port_pair();
    drop(held);
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .arg(repo("examples/slurm/preflight.sbatch"))
        .args(["train.py", "--lr", "0.1"])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("PREFLIGHT", bin_path())
        .env("SLURM_JOB_ID", "4242")
        .env("MASTER_PORT", port.to_string())
        .env("PREFLIGHT_TOKEN", "test-token")
        .env_remove("TORCHELASTIC_RUN_ID")
        .env_remove("LOCAL_WORLD_SIZE")
        .env_remove("GROUP_RANK")
        .output()
        .expect("bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sbatch script failed: {stderr}");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("preflight-4242.json")).expect("report"),
    )
    .expect("json");
    assert_eq!(report["mode"], "cluster");
    let rec = &report["recommendation"];
    let got = std::fs::read_to_string(&record).expect("torchrun ran");
    let args = got.lines().next().unwrap_or_default();
    assert!(
        args.starts_with(&format!(
            "ARGS --nnodes=1 --nproc-per-node={} --node-rank=0 --master-addr={} --master-port={port} train.py --lr 0.1",
            1.max(
                rec["launch"][0]["command"]
                    .as_str()
                    .and_then(|c| c.split("--nproc-per-node=").nth(1))
                    .and_then(|c| c.split(' ').next())
                    .and_then(|n| n.parse::<u32>().ok())
                    .unwrap_or(1)
            ),
            rec["master_addr"].as_str().unwrap()
        )),
        "{got}"
    );
    for (k, v) in rec["env"].as_object().unwrap() {
        assert!(
            got.contains(&format!("\n{k}={}\n", v.as_str().unwrap())),
            "{k} not exported: {got}"
        );
    }
}

// ---------------------------------------------------------------- under torchrun

/// One local rank as torchrun would start it (same parent: this test process).
fn torchrun_worker(local_rank: u32, port: u16, tmp: &Path) -> std::process::Child {
    std::process::Command::new(bin_path())
        .args([
            "cluster",
            "--format",
            "json",
            "--no-gpu",
            "--quick",
            "--timeout",
            "10",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TMPDIR", tmp)
        .env("PREFLIGHT_HISTORY", "off")
        .env("NO_COLOR", "1")
        .env("GROUP_RANK", "0")
        .env("RANK", local_rank.to_string())
        .env("LOCAL_RANK", local_rank.to_string())
        .env("LOCAL_WORLD_SIZE", "2")
        .env("WORLD_SIZE", "2")
        .env("GROUP_WORLD_SIZE", "1")
        .env("TORCHELASTIC_RUN_ID", "emulated")
        .env("TORCHELASTIC_RESTART_COUNT", "0")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preflight")
}

fn wait_bounded(child: std::process::Child, limit: Duration) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            // SAFETY: kill on a pid we spawned and have not reaped yet.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("pid {pid} still running after {limit:?}");
        }
    }
}

#[test]
fn emulated_torchrun_runs_one_preflight_per_node_on_master_port_plus_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // torchrun's own store holds MASTER_PORT, as it would on the master node.
    let (_store, port) = port_pair();
    let started = Instant::now();
    let follower = torchrun_worker(1, port, tmp.path());
    let leader = torchrun_worker(0, port, tmp.path());
    let leader = wait_bounded(leader, Duration::from_secs(40));
    let follower = wait_bounded(follower, Duration::from_secs(40));
    let lerr = String::from_utf8_lossy(&leader.stderr);
    let ferr = String::from_utf8_lossy(&follower.stderr);
    let code = leader.status.code().expect("leader exit code");
    assert!(code == 0 || code == 1, "leader exit {code}: {lerr}");
    assert_eq!(follower.status.code(), Some(code), "follower: {ferr}");
    // One report: from the leader; the follower prints nothing on stdout.
    assert!(
        follower.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&follower.stdout)
    );
    assert!(ferr.contains("local rank 1 of 2"), "{ferr}");
    assert!(ferr.contains(&format!("exit code {code}")), "{ferr}");
    let report: Value =
        serde_json::from_slice(&leader.stdout).unwrap_or_else(|e| panic!("{e}: {lerr}"));
    assert_eq!(report["mode"], "cluster");
    assert_eq!(report["nodes"].as_array().unwrap().len(), 1);
    assert!(
        lerr.contains(&format!("master 127.0.0.1:{}", port + 1)),
        "{lerr}"
    );
    assert!(lerr.contains("MASTER_PORT + 1"), "{lerr}");
    // The advice keeps the job's master port; the held port is not reported as a failure.
    assert_eq!(report["recommendation"]["master_port"], port);
    let port_fail = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["id"] == "port.in-use" && f["status"] == "fail");
    assert!(!port_fail, "{report}");
    // nproc defaults to LOCAL_WORLD_SIZE.
    let cmd = report["recommendation"]["launch"][0]["command"]
        .as_str()
        .unwrap();
    assert!(cmd.contains("--nproc-per-node=2"), "{cmd}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn emulated_torchrun_followers_take_the_leaders_failure() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // MASTER_PORT 65535 leaves no room for MASTER_PORT + 1: the leader cannot run (exit 2).
    let follower = torchrun_worker(1, 65535, tmp.path());
    let leader = torchrun_worker(0, 65535, tmp.path());
    let leader = wait_bounded(leader, Duration::from_secs(20));
    let follower = wait_bounded(follower, Duration::from_secs(20));
    assert_eq!(leader.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&leader.stderr).contains("--coordinator-port"));
    assert_eq!(follower.status.code(), Some(2));
    assert!(follower.stdout.is_empty());
}

#[test]
fn real_torchrun_when_torch_is_installed() {
    let has_torch = std::process::Command::new("python3")
        .args(["-c", "import torch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_torch {
        eprintln!(
            "skipped: python3 cannot import torch; the torchrun emulation tests cover this machine"
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (held, port) = port_pair();
    drop(held);
    let out = std::process::Command::new("python3")
        .args([
            "-m",
            "torch.distributed.run",
            "--no-python",
            "--nnodes=1",
            "--nproc-per-node=2",
        ])
        .args(["--master-addr=127.0.0.1", &format!("--master-port={port}")])
        .arg(bin_path())
        .args([
            "cluster",
            "--format",
            "json",
            "--no-gpu",
            "--quick",
            "--timeout",
            "20",
        ])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("torchrun");
    let out = wait_bounded(out, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0) | Some(1)),
        "torchrun exit {code:?}: {stderr}"
    );
    // Exactly one report on stdout.
    let reports: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(reports.len(), 1, "{stdout}");
    assert_eq!(reports[0]["recommendation"]["master_port"], port);
}

// ---------------------------------------------------------------- preflight launch

fn launch(args: &[&str]) -> std::process::Output {
    bin()
        .current_dir(fixtures())
        .arg("launch")
        .args(args)
        .output()
        .expect("run")
}

#[test]
fn launch_snapshots_of_every_format() {
    for format in ["torchrun", "sbatch", "k8s-env"] {
        let out = launch(&[
            "--format",
            format,
            "--report",
            "reports/cluster-2-nodes.json",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        insta::assert_snapshot!(
            format!("launch_{format}"),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let out = launch(&[
        "--format",
        "sbatch",
        "--report",
        "reports/cluster-2-nodes.json",
        "--nproc-per-node=4",
        "--script",
        "my train.py",
        "--",
        "--epochs",
        "5",
    ]);
    insta::assert_snapshot!("launch_sbatch_script", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn launch_torchrun_matches_the_reports_own_commands() {
    let out = launch(&["--report", "reports/cluster-2-nodes.json"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("reports/cluster-2-nodes.json")).unwrap(),
    )
    .unwrap();
    let saved: Vec<&str> = report["recommendation"]["launch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands, saved);
}

#[test]
fn launch_sbatch_is_valid_bash_and_k8s_env_is_valid_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let out = launch(&[
        "--format",
        "sbatch",
        "--report",
        "reports/cluster-2-nodes.json",
    ]);
    let script = dir.path().join("run.sh");
    std::fs::write(&script, &out.stdout).unwrap();
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(st.success());
    let out = launch(&[
        "--format",
        "k8s-env",
        "--report",
        "reports/cluster-2-nodes.json",
    ]);
    let yaml = dir.path().join("env.yaml");
    std::fs::write(&yaml, &out.stdout).unwrap();
    if let Some(docs) = yaml_to_json(&yaml) {
        let list = docs[0].as_array().expect("a list");
        let get = |k: &str| {
            list.iter()
                .find(|e| e["name"] == k)
                .map(|e| e["value"].clone())
        };
        assert_eq!(get("NCCL_IB_HCA"), Some(Value::from("mlx5_0:1,mlx5_1:1")));
        assert_eq!(get("MASTER_PORT"), Some(Value::from("29500")));
        assert_eq!(get("PET_NNODES"), Some(Value::from("2")));
    }
}

#[test]
fn launch_errors_say_what_to_rerun() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["--report", "reports/missing.json"],
            "cannot read the report",
        ),
        (
            &["--report", "reports/cluster-failed.json"],
            "cluster.rendezvous",
        ),
        (
            &["--report", "launchers/k8s-indexed-job-pod1.env"],
            "not a preflight JSON report",
        ),
    ];
    for (args, want) in cases {
        let out = launch(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(err.contains("preflight cluster"), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    // A node report (preflight check) is told apart.
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node.json");
    bin()
        .args(["check", "--facts"])
        .arg(fixtures().join("facts/ib-node.json"))
        .args(["--format", "json", "-o"])
        .arg(&node)
        .output()
        .unwrap();
    let out = bin()
        .arg("launch")
        .arg("--report")
        .arg(&node)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("single-node report"));
}

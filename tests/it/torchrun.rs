//! `preflight torchrun`: the real binary on users' own commands, validated (`--no-run`) and run
//! as a 1-node cluster on loopback.

use serde_json::Value;
use std::net::TcpListener;

use crate::common::{bin, fixture, json_of};

fn finding<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} finding"))
}

fn command_of(report: &Value) -> String {
    finding(report, "launch.command")["evidence"]["command"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The words of `printed` that are not the environment prefix.
fn without_env(printed: &str) -> Vec<String> {
    printed
        .split(' ')
        .skip_while(|w| {
            w.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            })
        })
        .map(str::to_string)
        .collect()
}

const IB_ENV: &str =
    "NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0 NCCL_IB_DISABLE=0 NCCL_IB_HCA=mlx5_0:1";

#[test]
fn no_run_lowers_nproc_to_the_visible_gpus_and_changes_nothing_else() {
    let cmd = [
        "torchrun",
        "--nnodes=2",
        "--nproc_per_node=16",
        "--node-rank=0",
        "--rdzv-endpoint=10.1.0.11:29500",
        "--rdzv-backend=c10d",
        "--rdzv_id=123",
        "test.py",
        "50",
        "10",
    ];
    let out = bin()
        .args(["torchrun", "--no-run", "--format", "json", "--facts"])
        .arg(fixture("facts/ib-node.json"))
        .args(cmd)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json_of(&out.stdout);
    let nproc = finding(&r, "launch.nproc");
    assert_eq!(nproc["status"], "fail");
    assert_eq!(nproc["node"], 0);
    assert_eq!(nproc["evidence"]["visible_gpus"], 8);
    assert_eq!(finding(&r, "launch.endpoint")["status"], "pass");
    assert_eq!(finding(&r, "launch.port")["status"], "pass");
    let printed = command_of(&r);
    let mut expected: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    expected[2] = "--nproc_per_node=8".into();
    assert_eq!(printed, format!("{IB_ENV} {}", expected.join(" ")));
    assert_eq!(without_env(&printed), expected);
}

#[test]
fn a_pasted_line_prints_back_in_the_table_with_the_fix() {
    // github.com/FoundationVision/VAR/issues/108: --nnodes=1 with --node_rank=3 hangs.
    let line = "torchrun --nproc_per_node=4 --nnodes=1 --node_rank=3 --master_addr='10.1.0.11' --master_port=12345 train.py --depth=16 --bs=768";
    let out = bin()
        .args(["torchrun", "--no-run", "--facts"])
        .arg(fixture("facts/ib-node.json"))
        .arg(line)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("launch.node-rank"), "{text}");
    let fixed = line.replace("--node_rank=3", "--node_rank=0");
    assert!(
        text.contains(&format!("Your command for rank 3, with the recommended environment and 1 corrected flag(s):\n  {IB_ENV} {fixed}\n")),
        "{text}"
    );
}

#[test]
fn no_run_moves_a_held_master_port_on_this_machine() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let out = bin()
        .args([
            "torchrun",
            "--no-run",
            "--no-gpu",
            "--format",
            "json",
            "--nnodes=1",
        ])
        .arg(format!("--master-port={port}"))
        .args(["train.py", "--master-port", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r = json_of(&out.stdout);
    let f = finding(&r, "launch.port");
    assert_eq!(f["status"], "fail");
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {}", std::process::id())),
        "{f}"
    );
    let free = f["evidence"]["suggested_free"]
        .as_u64()
        .expect("a free port was found");
    let words = without_env(&command_of(&r));
    assert_eq!(
        words,
        vec![
            "torchrun",
            "--nnodes=1",
            &format!("--master-port={free}"),
            "train.py",
            "--master-port",
            "1"
        ]
    );
    drop(holder);
}

#[test]
fn unknown_flags_and_bad_input_are_findings_or_exit_2_never_a_crash() {
    let out = bin()
        .args([
            "torchrun",
            "--no-run",
            "--no-gpu",
            "--format",
            "json",
            "--nprocs=2",
            "--standalone",
            "t.py",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r = json_of(&out.stdout);
    let f = finding(&r, "launch.unknown-flag");
    assert_eq!(f["status"], "fail");
    assert!(
        f["fix"]["hint"]
            .as_str()
            .unwrap()
            .contains("--nproc-per-node")
    );
    let bad = bin()
        .args(["torchrun", "--no-run", "torchrun --nnodes='2 t.py"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unterminated"));
}

#[test]
fn one_node_run_rendezvous_on_the_given_endpoint_and_prints_the_command() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let args = [
        "--nnodes=1".to_string(),
        "--nproc-per-node=1".to_string(),
        "--master-addr=127.0.0.1".to_string(),
        format!("--master-port={port}"),
        "train.py".to_string(),
        "--lr".to_string(),
        "3".to_string(),
    ];
    let out = bin()
        .args([
            "torchrun",
            "--no-gpu",
            "--quick",
            "--timeout",
            "15",
            "--format",
            "json",
            "torchrun",
        ])
        .args(&args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let r = json_of(&out.stdout);
    assert_eq!(
        r["mode"],
        "cluster",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(finding(&r, "cluster.rendezvous")["status"], "pass");
    assert_eq!(finding(&r, "launch.port")["status"], "pass");
    assert_eq!(r["recommendation"]["master_port"], port);
    let printed = command_of(&r);
    let mut expected = vec!["torchrun".to_string()];
    expected.extend(args.iter().cloned());
    assert_eq!(without_env(&printed), expected);
    assert!(printed.starts_with("NCCL_SOCKET_IFNAME="), "{printed}");
    let worst = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["status"].as_str().unwrap())
        .collect::<Vec<_>>();
    let expected_status = if worst.contains(&"fail") {
        "fail"
    } else if worst.contains(&"warn") {
        "warn"
    } else {
        "pass"
    };
    assert_eq!(r["status"], expected_status);

    // The table ends with the same command.
    let table = bin()
        .args([
            "torchrun",
            "--no-gpu",
            "--quick",
            "--timeout",
            "15",
            "torchrun",
        ])
        .args(&args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.trim_end().ends_with(&printed), "{text}");
}

#[test]
fn a_multi_node_command_that_cannot_meet_is_not_rendezvoused() {
    // Two nodes on loopback without --node-rank: every node would be rank 0 on its own machine.
    let started = std::time::Instant::now();
    let out = bin()
        .args([
            "torchrun",
            "--no-gpu",
            "--timeout",
            "30",
            "--format",
            "json",
        ])
        .args([
            "--nnodes=2",
            "--master-addr=127.0.0.1",
            "--master-port=29999",
            "t.py",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(started.elapsed().as_secs() < 20, "waited for a rendezvous");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not starting the rendezvous"));
    let r = json_of(&out.stdout);
    assert_eq!(r["mode"], "node");
    assert_eq!(finding(&r, "launch.node-rank")["status"], "fail");
    assert_eq!(finding(&r, "launch.endpoint")["status"], "fail");
}

/// Issue 11: rank 1 given its own address as the master says so at `--no-run`, and so does
/// `preflight check` when the launcher's environment gives a nonzero node rank.
#[test]
fn no_run_and_check_fail_when_a_nonzero_rank_is_given_its_own_address_as_master() {
    let out = bin()
        .args(["torchrun", "--no-run", "--format", "json", "--facts"])
        .arg(fixture("facts/ib-node.json"))
        .args([
            "torchrun",
            "--nnodes=2",
            "--nproc_per_node=8",
            "--node-rank=1",
            "--master-addr=10.1.0.11",
            "--master-port=29500",
            "train.py",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r = json_of(&out.stdout);
    let f = finding(&r, "launch.endpoint");
    assert_eq!(f["status"], "fail", "{f:#}");
    let summary = f["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("rank 1 was given its own address 10.1.0.11 as the master address"),
        "{summary}"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut facts: Value =
        serde_json::from_slice(&std::fs::read(fixture("facts/ib-node.json")).unwrap()).unwrap();
    facts["env"]["MASTER_ADDR"] = "10.1.0.11".into();
    facts["env"]["NODE_RANK"] = "1".into();
    let path = dir.path().join("facts.json");
    std::fs::write(&path, serde_json::to_vec(&facts).unwrap()).unwrap();
    let out = bin()
        .args(["check", "--format", "json", "--facts"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r = json_of(&out.stdout);
    let f = finding(&r, "env.master");
    assert_eq!(f["status"], "fail", "{f:#}");
    assert_eq!(f["evidence"]["rank_from"], "NODE_RANK");
}

// ----- issue 12: the launch line as people paste it -----

/// `preflight` with the caller's launcher variables removed.
fn clean() -> assert_cmd::Command {
    let mut c = bin();
    for v in crate::common::INHERITED_ENV_TO_CLEAR {
        c.env_remove(v);
    }
    for v in [
        "SLURM_STEP_NODELIST",
        "SLURM_NODELIST",
        "SLURM_STEP_NUM_NODES",
        "SLURM_JOB_NUM_NODES",
        "SLURMD_NODENAME",
        "PET_NNODES",
        "PET_NODE_RANK",
        "NNODES",
        "JOB_COMPLETION_INDEX",
        "SLURM_GPUS_PER_TASK",
    ] {
        c.env_remove(v);
    }
    c
}

fn no_run_json(facts: &str, line: &str) -> (Option<i32>, Value) {
    let out = clean()
        .args(["torchrun", "--no-run", "--format", "json", "--facts"])
        .arg(fixture(facts))
        .arg(line)
        .output()
        .unwrap();
    (out.status.code(), json_of(&out.stdout))
}

#[test]
fn an_environment_prefix_is_the_jobs_environment_and_is_kept_in_the_command() {
    let line = "NCCL_SOCKET_IFNAME=bond0 NCCL_IB_DISABLE=1 torchrun --nnodes=2 --nproc_per_node=4 --node-rank=0 --rdzv-endpoint=214.2.5.4:60002 --rdzv-backend=c10d --rdzv_id=123 test.py 50 10";
    let (code, r) = no_run_json("facts/plain-vm.json", line);
    assert_eq!(code, Some(1));
    let args = finding(&r, "launch.args");
    assert_eq!(args["evidence"]["script"], "test.py");
    assert_eq!(
        args["evidence"]["script_args"],
        serde_json::json!(["50", "10"])
    );
    // bond0 is judged as this node's NCCL_SOCKET_IFNAME: there is none here.
    let ifname = finding(&r, "env.socket-ifname");
    assert_eq!(ifname["status"], "fail", "{ifname}");
    assert!(ifname["summary"].as_str().unwrap().contains("bond0"));
    let cmd = finding(&r, "launch.command");
    assert_eq!(
        cmd["evidence"]["command"],
        "NCCL_SOCKET_IFNAME=eth0 NCCL_IB_DISABLE=1 GLOO_SOCKET_IFNAME=eth0 torchrun --nnodes=2 --nproc_per_node=4 --node-rank=0 --rdzv-endpoint=214.2.5.4:60002 --rdzv-backend=c10d --rdzv_id=123 test.py 50 10"
    );
    assert_eq!(cmd["evidence"]["env_replaced"][0]["yours"], "bond0");
    assert!(
        cmd["summary"]
            .as_str()
            .unwrap()
            .contains("NCCL_SOCKET_IFNAME=bond0 -> eth0")
    );
}

#[test]
fn srun_in_front_is_seen_through() {
    let (_, r) = no_run_json(
        "facts/ib-node.json",
        "srun --ntasks-per-node=1 torchrun --nnodes=2 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29400 train.py",
    );
    let args = finding(&r, "launch.args");
    assert_eq!(args["status"], "pass");
    assert_eq!(args["evidence"]["script"], "train.py");
    assert_eq!(args["evidence"]["wrappers"], serde_json::json!(["srun"]));
    assert!(command_of(&r).contains(" srun --ntasks-per-node=1 torchrun --nnodes=2"));
}

#[test]
fn a_deepspeed_line_is_read_for_what_maps_and_never_wrapped_in_torchrun() {
    let (_, r) = no_run_json("facts/ib-node.json", "deepspeed --num_gpus 8 train.py");
    let args = finding(&r, "launch.args");
    assert_eq!(args["status"], "warn");
    assert_eq!(args["evidence"]["launcher"], "Deepspeed");
    let printed = command_of(&r);
    assert!(
        printed.ends_with(" deepspeed --num_gpus 8 train.py"),
        "{printed}"
    );
    assert!(!printed.contains("torchrun"), "{printed}");
    // Any other program fails launch.args and is not run.
    let (code, r) = no_run_json("facts/ib-node.json", "bash run_all.sh --nodes 2");
    assert_eq!(code, Some(1));
    assert_eq!(finding(&r, "launch.args")["status"], "fail");
    assert!(!command_of(&r).contains("torchrun"));
}

#[test]
fn no_driver_fails_the_gpu_job_and_why_agrees_with_your_command() {
    let line = "torchrun --standalone --nnodes=1 --nproc-per-node=4 imagenet_elastic_trainer.py --arch resnet18";
    let out = clean()
        .args(["torchrun", "--no-run", "--facts"])
        .arg(fixture("facts/plain-vm.json"))
        .arg(line)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("launch.nproc"), "{text}");
    assert!(!text.contains("--nproc-per-node=1"), "{text}");
    assert_eq!(text.matches("Your command").count(), 1, "{text}");
    assert!(!text.contains("Launch:"), "{text}");
    assert!(
        text.contains("--nproc-per-node=4 imagenet_elastic_trainer.py"),
        "{text}"
    );
    // CPU-only says so: no failure.
    let (_, r) = {
        let out = clean()
            .args([
                "torchrun", "--no-run", "--no-gpu", "--format", "json", "--facts",
            ])
            .arg(fixture("facts/plain-vm.json"))
            .arg(line)
            .output()
            .unwrap();
        (out.status.code(), json_of(&out.stdout))
    };
    assert_eq!(finding(&r, "launch.nproc")["status"], "pass");
}

#[test]
fn no_run_under_slurm_reads_the_rank_the_run_reads() {
    let out = clean()
        .env("SLURM_JOB_NODELIST", "gpu-ib-00,gpu-ib-01")
        .env("SLURM_NNODES", "2")
        .env("SLURM_NODEID", "1")
        .env("SLURM_JOB_ID", "4242")
        .args(["torchrun", "--no-run", "--facts"])
        .arg(fixture("facts/ib-node.json"))
        .arg("srun torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=gpu-ib-00:29400 train.py")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Your command for rank 1"), "{text}");
    assert!(!text.contains("reads as rank 0"), "{text}");
    assert_eq!(text.matches("Your command").count(), 1, "{text}");
}

#[test]
fn check_reads_the_launchers_environment() {
    let out = clean()
        .env("MASTER_ADDR", "10.9.9.9")
        .env("MASTER_PORT", "29600")
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .args(["check", "--format", "json", "--facts"])
        .arg(fixture("facts/plain-vm.json"))
        .output()
        .unwrap();
    let r = json_of(&out.stdout);
    let rec = &r["recommendation"];
    assert_eq!(rec["master_port"], 29600);
    assert_eq!(rec["master_addr"], "10.9.9.9");
    let launch = rec["launch"].as_array().unwrap();
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0]["node_rank"], 1);
    let cmd = launch[0]["command"].as_str().unwrap();
    assert!(
        cmd.contains("--node-rank=1 --master-addr=10.9.9.9 --master-port=29600"),
        "{cmd}"
    );
    assert!(!cmd.contains("--node-rank=0"), "{cmd}");
    let master = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "env.master")
        .all(|f| f["status"] != "warn");
    assert!(
        master,
        "MASTER_PORT is the port checked, so env.master does not warn"
    );
}

/// Issue 55 (2): `preflight torchrun --no-run 'torchrun --standalone --max-restart=3
/// --nproc-per=1 ok.py'` passes launch.unknown-flag, as torchrun's argparse takes a unique
/// prefix; `--nproc=1` is ambiguous, in argparse's words.
#[test]
fn a_unique_prefix_is_torchruns_option_and_an_ambiguous_one_is_named() {
    let run = |line: &str| {
        let out = bin()
            .args(["torchrun", "--no-run", "--no-gpu", "--format", "json", line])
            .output()
            .unwrap();
        json_of(&out.stdout)
    };
    let ok = run("torchrun --standalone --max-restart=3 --nproc-per=1 ok.py");
    let f = finding(&ok, "launch.unknown-flag");
    assert_eq!(f["status"], "pass", "{f:#}");
    assert!(
        f["summary"]
            .as_str()
            .unwrap()
            .contains("--max-restart is --max-restarts, --nproc-per is --nproc-per-node"),
        "{f:#}"
    );
    let bad = run("torchrun --standalone --nproc=1 ok.py");
    let f = finding(&bad, "launch.unknown-flag");
    assert_eq!(f["status"], "fail");
    assert_eq!(
        f["summary"],
        "torchrun on rank 0 stops with \"ambiguous option: --nproc=1 could match --nproc-per-node, --nproc_per_node\""
    );
    // In the script's arguments too: argparse classifies every word before a `--`.
    let script = run("torchrun --standalone ok.py --master 1");
    let f = finding(&script, "launch.unknown-flag");
    assert_eq!(f["status"], "fail");
    assert!(
        f["fix"]["hint"]
            .as_str()
            .unwrap()
            .contains("put -- before the script"),
        "{f:#}"
    );
}

/// Issue 55 (3): preflight's flags after the quoted line are preflight's; the command printed
/// back is the user's line, never that line wrapped in another torchrun.
#[test]
fn preflight_flags_after_the_quoted_line_are_read_as_preflights() {
    let out = bin()
        .env_remove("PREFLIGHT_HISTORY")
        .args([
            "torchrun",
            "--no-run",
            "--no-gpu",
            "torchrun --standalone --nproc-per-node=1 ok.py",
            "--history",
            "off",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let report = json_of(&out.stdout);
    assert_eq!(finding(&report, "launch.args")["status"], "pass");
    let command = command_of(&report);
    assert!(
        command.ends_with(" torchrun --standalone --nproc-per-node=1 ok.py"),
        "{command}"
    );
    let refused = bin()
        .args([
            "torchrun",
            "--no-run",
            "torchrun --standalone ok.py",
            "--epochs",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("preflight torchrun --no-run 'torchrun --standalone ok.py --epochs 5'"),
        "{err}"
    );
}

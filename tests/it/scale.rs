//! Settings that bite only at scale, for real: a 3-node `preflight cluster --nproc-per-node 10`
//! (world size 30) in network namespaces, whose per-namespace sysctls (somaxconn,
//! tcp_max_syn_backlog, tcp_abort_on_overflow) and one node's RLIMIT_NOFILE (`prlimit`) are set
//! with the host's own tools; the same cluster with the settings raised reports none of them.

use crate::netns::{Cluster, NodeRun, node};
use serde_json::Value;

/// `--timeout` for these runs (an upper bound: a healthy run ends sooner).
const TIMEOUT: u64 = 20;
/// The ids these runs must not raise (those that depend on the host machine, such as its
/// /dev/shm or cgroup, are left out).
const SCALE_IDS: &[&str] = &[
    "sys.listen-backlog",
    "sys.nofile",
    "sys.port-range",
    "sys.neigh-table",
    "ib.gid-index",
    "net.arp-flux",
    "launch.tcpstore",
];

fn sysctl(c: &Cluster, rank: usize, setting: &str) {
    let out = c.exec(rank, &["sysctl", "-w", setting]);
    assert!(
        out.status.success(),
        "sysctl -w {setting} in {}: {}",
        c.ns(rank),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every finding of rank 0's report whose status is warn or worse and whose id is in
/// [`SCALE_IDS`], as (id, node, status).
fn raised(run: &NodeRun) -> Vec<(String, Option<u64>, String)> {
    run.report()["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| SCALE_IDS.contains(&f["id"].as_str().unwrap_or_default()))
        .filter(|f| !["pass", "skip"].contains(&f["status"].as_str().unwrap_or_default()))
        .map(|f| {
            (
                f["id"].as_str().unwrap_or_default().to_string(),
                f["node"].as_u64(),
                f["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn finding<'a>(run: &'a NodeRun, id: &str, rank: u64) -> &'a Value {
    run.report()["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["id"] == id && f["node"].as_u64() == Some(rank))
        .unwrap_or_else(|| panic!("no {id} finding for rank {rank}:\n{}", run.describe()))
}

fn run(c: &Cluster, nofile: &str) -> Vec<NodeRun> {
    let limit = format!("--nofile={nofile}");
    c.preflight()
        .timeout(TIMEOUT)
        .args(&["--nproc-per-node=10", "--no-gpu", "--allreduce=off"])
        .wrap_on(2, &["prlimit", &limit, "--"])
        .run()
}

#[test]
fn a_30_rank_job_warns_of_the_master_backlog_and_one_nodes_fd_limit_and_not_once_raised() {
    let Some(c) = Cluster::flat("scale", 3, "eth0")
        .needs(&["sysctl", "prlimit"])
        .build()
    else {
        return;
    };
    sysctl(&c, 0, "net.core.somaxconn=20");
    sysctl(&c, 0, "net.ipv4.tcp_abort_on_overflow=1");
    let runs = run(&c, "24:4096");
    let r0 = node(&runs, 0);
    let got = raised(r0);
    println!("3 nodes × 10, rank 0 somaxconn 20 + abort, rank 2 nofile 24:4096: {got:?}");
    let mut want = vec![
        (
            "sys.listen-backlog".to_string(),
            Some(0),
            "warn".to_string(),
        ),
        ("sys.nofile".to_string(), Some(2), "warn".to_string()),
    ];
    want.sort();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    assert_eq!(got_sorted, want, "\n{}", r0.describe());
    let backlog = finding(r0, "sys.listen-backlog", 0);
    println!("{}", serde_json::to_string_pretty(backlog).unwrap());
    assert_eq!(backlog["evidence"]["somaxconn"], 20);
    assert_eq!(backlog["evidence"]["tcp_abort_on_overflow"], 1);
    assert_eq!(backlog["evidence"]["world_size"], 30);
    assert!(backlog["summary"].as_str().unwrap().contains("reset"));
    let nofile = finding(r0, "sys.nofile", 2);
    println!("{}", serde_json::to_string_pretty(nofile).unwrap());
    assert_eq!(nofile["evidence"]["nofile_soft"], "24");
    assert_eq!(nofile["evidence"]["nofile_hard"], "4096");
    assert!(nofile["evidence"]["need"].as_u64().unwrap() > 24);
    assert_eq!(nofile["fix"]["commands"][0], "ulimit -n 4096");
    for rank in [1, 2] {
        assert_eq!(finding(r0, "sys.listen-backlog", rank)["status"], "pass");
    }

    // Raised: somaxconn and the SYN backlog 65535 on every node, nofile at the hard limit.
    for rank in 0..3 {
        sysctl(&c, rank, "net.core.somaxconn=65535");
        sysctl(&c, rank, "net.ipv4.tcp_max_syn_backlog=65535");
    }
    let runs = run(&c, "4096:4096");
    let r0 = node(&runs, 0);
    let got = raised(r0);
    println!("raised: {got:?}");
    assert!(got.is_empty(), "\n{}", r0.describe());
    for rank in 0..3 {
        assert_eq!(finding(r0, "sys.listen-backlog", rank)["status"], "pass");
        assert_eq!(finding(r0, "sys.nofile", rank)["status"], "pass");
    }
}

// ------------------------------------------------------- the binary on the fixture node trees

use crate::common::{INHERITED_ENV_TO_CLEAR, bin, fixture, json_of};

/// `preflight check --format json` on a fixture tree with `args`, and the launcher `env`.
fn check_json(tree: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut cmd = bin();
    for var in INHERITED_ENV_TO_CLEAR {
        cmd.env_remove(var);
    }
    cmd.args(["check", "--format", "json", "--no-gpu", "--root"])
        .arg(fixture(tree))
        .args(args)
        .envs(env.iter().copied());
    json_of(&cmd.output().unwrap().stdout)
}

fn status_of(report: &Value, id: &str) -> Vec<String> {
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["id"] == id)
        .map(|f| f["status"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_gpu_node_of_a_64_node_job_with_small_settings_fires_every_node_check() {
    let r = check_json(
        "scale-small",
        &[
            "--nnodes",
            "64",
            "--nproc-per-node",
            "8",
            "--expect-gpus",
            "8",
        ],
        &[],
    );
    for (id, want) in [
        ("sys.listen-backlog", "warn"),
        ("sys.nofile", "fail"),
        ("sys.port-range", "warn"),
        ("sys.pids", "warn"),
        ("sys.stale-nccl", "warn"),
        ("sys.neigh-table", "pass"),
        ("net.arp-flux", "pass"),
    ] {
        assert_eq!(status_of(&r, id), vec![want], "{id}: {r:#}");
    }
    let ports = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "sys.port-range")
        .unwrap();
    assert_eq!(ports["evidence"]["usable_ports"], 50);
    assert!(
        ports["evidence"]["estimate"]
            .as_str()
            .unwrap()
            .contains("(64−1)·8²·2·2 = 16128")
    );
    // The facts carry what was read, for `check --facts` later.
    assert_eq!(r["nodes"][0]["facts"]["scale"]["somaxconn"], 128);
}

#[test]
fn the_raised_tree_of_a_4_node_job_fires_none_and_no_world_size_says_so() {
    let r = check_json(
        "scale-raised",
        &[
            "--nnodes",
            "4",
            "--nproc-per-node",
            "8",
            "--expect-gpus",
            "8",
        ],
        &[],
    );
    for id in [
        "sys.listen-backlog",
        "sys.nofile",
        "sys.port-range",
        "sys.pids",
        "sys.stale-nccl",
    ] {
        assert_eq!(status_of(&r, id), vec!["pass"], "{id}: {r:#}");
    }
    let r = check_json("scale-small", &[], &[]);
    let backlog = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "sys.listen-backlog")
        .unwrap();
    assert_eq!(backlog["status"], "skip");
    assert!(
        backlog["summary"]
            .as_str()
            .unwrap()
            .contains("no world size known")
    );
}

#[test]
fn the_launchers_environment_gives_the_world_size_as_cluster_mode_reads_it() {
    // Slurm: 192 nodes × 8 = 1,536 ranks, at the old default backlog of 128.
    let slurm = [
        ("SLURM_JOB_ID", "77"),
        ("SLURM_NNODES", "192"),
        ("SLURM_NODEID", "5"),
        ("SLURM_JOB_NODELIST", "gpu[001-192]"),
    ];
    let r = check_json("scale-small", &["--nproc-per-node", "8"], &slurm);
    let backlog = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "sys.listen-backlog")
        .unwrap();
    assert_eq!(backlog["status"], "warn", "{backlog:#}");
    assert_eq!(backlog["evidence"]["world_size"], 1536);
    // torchrun's variables: WORLD_SIZE counts processes (32 = 4 nodes × 8).
    let torchrun = [
        ("TORCHELASTIC_RUN_ID", "j1"),
        ("WORLD_SIZE", "32"),
        ("LOCAL_WORLD_SIZE", "8"),
        ("GROUP_RANK", "1"),
        ("MASTER_ADDR", "10.0.2.99"),
        ("MASTER_PORT", "29500"),
    ];
    let r = check_json("scale-small", &["--nproc-per-node", "8"], &torchrun);
    let backlog = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "sys.listen-backlog")
        .unwrap();
    assert_eq!(backlog["evidence"]["world_size"], 32, "{backlog:#}");
    assert_eq!(backlog["status"], "pass");
}

#[test]
fn torchrun_judges_the_pasted_lines_world_size() {
    let mut cmd = bin();
    for var in INHERITED_ENV_TO_CLEAR {
        cmd.env_remove(var);
    }
    let out = cmd
        .env("PREFLIGHT_ROOT", fixture("scale-small"))
        .args(["torchrun", "--no-run", "--no-gpu", "--format", "json"])
        .arg("torchrun --nnodes=192 --nproc-per-node=8 --node-rank=0 --master-addr=10.0.2.15 --master-port=29500 train.py")
        .output()
        .unwrap();
    let r = json_of(&out.stdout);
    let backlog = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "sys.listen-backlog")
        .unwrap_or_else(|| panic!("{r:#}"));
    assert_eq!(backlog["status"], "warn", "{backlog:#}");
    assert_eq!(backlog["evidence"]["world_size"], 1536);
}

/// The node report a person reads for a GPU node of a 256 × 8 job with small settings, at 80
/// and 120 columns: every fix command on a line of its own, whole.
#[test]
fn snapshot_of_a_small_node_judged_for_2048_ranks() {
    for width in [80u16, 120] {
        let out = bin()
            .args([
                "check",
                "--nnodes",
                "256",
                "--nproc-per-node",
                "8",
                "--facts",
            ])
            .arg(fixture("facts/scale-small.json"))
            .env("COLUMNS", width.to_string())
            .env("LANG", "C.UTF-8")
            .env_remove("LC_ALL")
            .env_remove("LC_CTYPE")
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap().replace(
            concat!("preflight ", env!("CARGO_PKG_VERSION"), " "),
            "preflight [version] ",
        );
        for cmd in [
            "        sysctl -w net.core.somaxconn=4096",
            "        ulimit -Hn 1048576 && ulimit -n 1048576",
            "        sysctl -w net.ipv4.ip_local_port_range=\"15000 64999\"",
            "        rm -f /dev/shm/nccl-Dd8kPq",
            "        export USE_LIBUV=1",
        ] {
            assert!(text.lines().any(|l| l == cmd), "{cmd} missing\n{text}");
        }
        insta::assert_snapshot!(format!("scale_small_2048_ranks_{width}cols"), text);
    }
}

#[test]
fn the_neighbour_table_of_a_flat_16_fires_at_2048_nodes_and_not_when_raised() {
    let args = ["--nnodes", "2048", "--nproc-per-node", "8"];
    let small = check_json("scale-small", &args, &[]);
    assert_eq!(
        status_of(&small, "sys.neigh-table"),
        vec!["warn"],
        "{small:#}"
    );
    let raised = check_json("scale-raised", &args, &[]);
    assert_eq!(
        status_of(&raised, "sys.neigh-table"),
        vec!["pass"],
        "{raised:#}"
    );
}

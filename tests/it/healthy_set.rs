//! The healthy set: when the cluster fails, the nodes that work together and the launch on them.
//!
//! From a saved real report (no namespaces): the block under the verdict (snapshots), the
//! `cluster.healthy-set` failure, and every `preflight launch --healthy-set` format checked by
//! the program that reads it (bash parses the srun line, bash sources the k8s script). In
//! network namespaces: 10 real nodes with a dead node, a filtered node and a broken pair, and 5
//! with rank 0's data ports filtered; each time a real torchrun + gloo all-reduce job is started
//! with the lines the JSON report printed, on exactly the healthy set, and must complete.

use crate::common::{bin, fixture};
use crate::netns::{Cluster, MASTER_PORT, NodeRun, Verdict, node};
use preflight::advise::healthy::{HealthyInput, attach};
use preflight::render::Style;
use preflight_checks::cluster::healthy_set::HealthyOptions;
use preflight_checks::model::{Report, Status};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A saved real report: 3 nodes, the pair 0->2 filtered (see tests/fixtures/reports).
const FILTERED: &str = "reports/cluster-3-filtered-slow.json";

fn saved(name: &str) -> Report {
    let text = std::fs::read_to_string(fixture(name)).expect("fixture");
    serde_json::from_str(&text).expect("report")
}

/// The report with its healthy set attached under `opts`, as the coordinator does.
fn with_set(name: &str, opts: HealthyOptions) -> Report {
    let mut r = saved(name);
    let nnodes = r.nodes.len() as u32;
    attach(
        &mut r,
        &HealthyInput::new(&opts, nnodes, None, &["train.py".into()]),
    );
    r
}

/// What follows the verdict line in rank `rank`'s terminal report, `width` columns wide.
fn block(report: &Report, rank: u32, width: u16) -> String {
    let style = Style {
        width,
        ..Style::plain()
    };
    let text = preflight::render::doctor::render_for_rank(report, style, rank);
    let at = text
        .find("do not launch")
        .and_then(|i| text[i..].find('\n').map(|j| i + j + 1))
        .expect("a verdict line");
    text[at..].to_string()
}

fn write_report(report: &Report, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("dir");
    let path = dir.join("cluster.json");
    std::fs::write(&path, serde_json::to_string(report).expect("json")).expect("write");
    path
}

fn launch(report: &Path, args: &[&str]) -> std::process::Output {
    bin()
        .arg("launch")
        .arg("--report")
        .arg(report)
        .arg("--healthy-set")
        .args(args)
        .output()
        .expect("run preflight launch")
}

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn block_under_the_verdict_of_a_saved_failing_report() {
    let r = with_set(FILTERED, HealthyOptions::default());
    let h = r
        .recommendation
        .as_ref()
        .unwrap()
        .healthy_set
        .as_ref()
        .unwrap();
    assert_eq!((h.count, h.total), (2, 3));
    assert_eq!(h.ranks, vec![0, 1]);
    assert_eq!(h.excluded.len(), 1);
    assert_eq!(
        (h.excluded[0].node, h.excluded[0].reasons.clone()),
        (2, vec!["link.unreachable".to_string()])
    );
    assert!(h.largest && h.constraints.met);
    assert_eq!(h.exclude_hosts, "gpu13");
    for width in [120, 80] {
        let text = block(&r, 0, width);
        assert!(
            text.contains("Train now on 2 of 3 nodes: gpu[11-12]"),
            "{text}"
        );
        insta::assert_snapshot!(format!("healthy_block_rank0_{width}cols"), text);
    }
    // Rank 2 is told it is left out and why; rank 1 gets its own line.
    let two = block(&r, 2, 80);
    assert!(two.contains("This node (rank 2) is left out"), "{two}");
    let one = block(&r, 1, 120);
    assert!(
        one.contains("This node is rank 1 of the set") && one.contains("--nnodes=2"),
        "{one}"
    );
    // A passing report has no block and no healthy_set in its JSON.
    let healthy = with_set("reports/cluster-3-healthy.json", HealthyOptions::default());
    assert_ne!(healthy.status, Status::Fail);
    let json = serde_json::to_value(&healthy).unwrap();
    assert!(json["recommendation"].get("healthy_set").is_none());
}

#[test]
fn too_few_nodes_for_min_nodes_is_a_failure_that_says_why() {
    let opts = HealthyOptions {
        min_nodes: 3,
        ..Default::default()
    };
    let r = with_set(FILTERED, opts);
    let f: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.id == "cluster.healthy-set")
        .collect();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].status, Status::Fail);
    assert_eq!(
        f[0].remedy_of(),
        Some(preflight_checks::model::Remedy::node(
            preflight_checks::model::Action::DrainAndRepair
        ))
    );
    assert_eq!(
        f[0].summary,
        "the cluster cannot train now even without its failing nodes: the healthy set has 2 of 3 nodes, fewer than --min-nodes 3; the findings that cost the most nodes: link.unreachable (1 node)"
    );
    let text = block(&r, 0, 80);
    assert!(text.contains("cannot train now on a healthy set"), "{text}");
    assert!(
        !text.contains("torchrun"),
        "no launch line when the set is too small: {text}"
    );
    insta::assert_snapshot!("healthy_block_too_small_80cols", text);
    // Met: no such finding.
    let met = with_set(FILTERED, HealthyOptions::default());
    assert!(met.findings.iter().all(|f| f.id != "cluster.healthy-set"));
}

/// Every `preflight launch --healthy-set` format from the report at `path`, checked against the
/// set `hosts` (node-rank order), `excluded` hosts and `k8s` node names to cordon.
fn check_launch_formats(path: &Path, hosts: &[&str], excluded: &str, cordon: &[&str]) {
    let dir = path.parent().unwrap();
    // The hostfile: the set, one per line, in node-rank order.
    let hostfile = stdout(&launch(path, &["--format", "hostfile"]));
    assert_eq!(hostfile.lines().collect::<Vec<_>>(), hosts);
    // The exclude list.
    assert_eq!(
        stdout(&launch(path, &["--format", "exclude"])).trim(),
        excluded
    );
    // The srun line, parsed back by bash: its words as srun gets them.
    let srun = stdout(&launch(path, &["--format", "srun"]));
    let line = srun
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let fake = dir.join("fake-bin");
    std::fs::create_dir_all(&fake).unwrap();
    let record = dir.join("srun-args");
    write_exec(
        &fake.join("srun"),
        &format!(
            "#!/bin/bash\nprintf '%s\\0' \"$@\" > {}\n",
            record.display()
        ),
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&line)
        .env("PATH", format!("{}:/usr/bin:/bin", fake.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let words = std::fs::read_to_string(&record).unwrap();
    let words: Vec<&str> = words.split('\0').collect();
    assert!(
        words.contains(&format!("--nodes={}", hosts.len()).as_str()),
        "{words:?}"
    );
    assert!(words.contains(&"--ntasks-per-node=1"), "{words:?}");
    if !excluded.is_empty() {
        assert!(
            words.contains(&format!("--exclude={excluded}").as_str()),
            "{words:?}"
        );
    }
    let body = words
        .iter()
        .find(|w| w.starts_with("case "))
        .expect("the per-node body");
    for (rank, host) in hosts.iter().enumerate() {
        assert!(
            body.contains(&format!("{host}|{host}.*) NODE_RANK={rank}")),
            "{body}"
        );
    }
    assert!(
        body.contains(&format!("--nnodes={}", hosts.len())),
        "{body}"
    );
    // The k8s script, sourced by bash with kubectl recorded: cordons exactly the excluded nodes.
    let k8s = stdout(&launch(path, &["--format", "k8s-env"]));
    let script = dir.join("k8s.sh");
    std::fs::write(&script, &k8s).unwrap();
    let cordoned = dir.join("kubectl-args");
    write_exec(
        &fake.join("kubectl"),
        &format!("#!/bin/bash\necho \"$*\" >> {}\n", cordoned.display()),
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("set -eu; source {}", script.display()))
        .env("PATH", format!("{}:/usr/bin:/bin", fake.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{k8s}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = std::fs::read_to_string(&cordoned).unwrap_or_default();
    let want: Vec<String> = cordon.iter().map(|n| format!("cordon {n}")).collect();
    assert_eq!(calls.lines().collect::<Vec<_>>(), want, "{k8s}");
    assert!(
        k8s.contains(&format!("- name: PET_NNODES\n  value: \"{}\"", hosts.len())),
        "{k8s}"
    );
}

fn write_exec(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn launch_formats_of_the_healthy_set_of_a_saved_report() {
    let dir = std::env::temp_dir().join(format!("pf-healthy-launch-{}", std::process::id()));
    let mut r = with_set(FILTERED, HealthyOptions::default());
    // Rank 2's pod said its Kubernetes node name (downward API spec.nodeName).
    r.nodes[2]
        .facts
        .env
        .insert("PREFLIGHT_NODE_NAME".into(), "k8s-worker-13".into());
    let path = write_report(&r, &dir);
    check_launch_formats(&path, &["gpu11", "gpu12"], "gpu13", &["k8s-worker-13"]);
    // The per-node torchrun lines carry the new --nnodes and the set's ranks.
    let torchrun = stdout(&launch(&path, &["--format", "torchrun"]));
    assert!(
        torchrun.contains("# Left out: gpu13 (link.unreachable)"),
        "{torchrun}"
    );
    assert_eq!(torchrun.matches("--nnodes=2 ").count(), 2, "{torchrun}");
    // Computed again with other constraints: a multiple of 2 keeps 2; at least 3 is refused, saying why.
    let two = stdout(&launch(
        &path,
        &["--format", "hostfile", "--nodes-multiple-of", "2"],
    ));
    assert_eq!(two.lines().count(), 2);
    let out = launch(&path, &["--min-nodes", "3"]);
    assert_eq!(out.status.code(), Some(2), "no launch to print");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fewer than --min-nodes 3") && err.contains("link.unreachable (1 node)"),
        "{err}"
    );
    // Without a healthy set (a passing report): said, not guessed.
    let ok = write_report(&saved("reports/cluster-3-healthy.json"), &dir.join("ok"));
    let out = launch(&ok, &["--format", "exclude"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no healthy set"));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- real nodes, real job

/// torch is needed for the real job: CI installs it; elsewhere the test says it skipped.
fn has_torch() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("PREFLIGHT_REQUIRE_NETNS").is_none(),
            "python3 cannot import torch (CI installs torch==2.11.0)"
        );
        eprintln!("skipped: python3 cannot import torch");
    }
    ok
}

fn healthy_set(run: &NodeRun) -> &Value {
    &run.recommendation()["healthy_set"]
}

/// Starts each launch line of the healthy set on its host, all at once, and checks that the
/// job completed on every node with the set's world size.
fn run_job_on_the_set(c: &Cluster, set: &Value) {
    let launch = set["launch"].as_array().expect("launch lines");
    let count = set["count"].as_u64().unwrap() as usize;
    assert_eq!(launch.len(), count);
    let jobs: Vec<(usize, Vec<String>)> = launch
        .iter()
        .map(|l| {
            let host = l["node"].as_u64().unwrap() as usize;
            let line = l["command"].as_str().unwrap().to_string();
            (host, vec!["bash".into(), "-c".into(), line])
        })
        .collect();
    let t = Instant::now();
    let outs = c.exec_all(&jobs, Duration::from_secs(240));
    eprintln!(
        "torchrun + gloo all-reduce on {count} nodes: {:?}",
        t.elapsed()
    );
    let mut lines = Vec::new();
    for ((host, argv), out) in jobs.iter().zip(outs) {
        let out = out.unwrap_or_else(|e| panic!("{argv:?} on host {host}: {e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "torchrun on host {host} ({argv:?}): {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        lines.extend(
            text.lines()
                .filter(|l| l.starts_with("allreduce"))
                .map(str::to_string),
        );
    }
    for l in &lines {
        eprintln!("{l}");
    }
    assert_eq!(lines.len(), count, "{lines:#?}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("allreduce ok") && l.contains(&format!(" of {count} "))),
        "{lines:#?}"
    );
}

#[test]
fn ten_nodes_with_a_dead_node_a_filtered_node_and_a_broken_pair_train_on_seven() {
    if !has_torch() {
        return;
    }
    let Some(c) = Cluster::flat("hset", 10, "eth0")
        .needs(&["iptables"])
        .build()
    else {
        return;
    };
    // Rank 5 drops every connection to its data ports; host 8 drops rank 0's to its own.
    c.block_high_ports(5, MASTER_PORT, Verdict::Drop);
    let from0 = c.addr(0, "data");
    c.iptables(
        8,
        &[
            "-A",
            "INPUT",
            "-s",
            &from0,
            "-p",
            "tcp",
            "--syn",
            "--dport",
            "1024:65535",
            "-j",
            "DROP",
        ],
    );
    let script = fixture("healthy-set/allreduce.py");
    let mut run = c
        .preflight()
        .ranks(&[0, 1, 2, 4, 5, 6, 7, 8, 9])
        .timeout(6)
        .args(&["--proceed-with-healthy-set", "--hosts", "node[0-9]"])
        .script(&[script.to_str().unwrap()]);
    for r in 0..10 {
        run = run.env_on(r, "PREFLIGHT_NODE_NAME", &format!("k8s-node{r}"));
    }
    let runs = run.run();
    let r0 = node(&runs, 0);
    assert_eq!(
        r0.exit_code,
        Some(0),
        "--proceed-with-healthy-set: {}",
        r0.describe()
    );
    assert_eq!(r0.report()["status"], "fail");
    let set = healthy_set(r0);
    eprintln!(
        "healthy_set: {}",
        serde_json::to_string_pretty(set).unwrap()
    );
    assert_eq!(set["count"], 7);
    assert_eq!(set["total"], 10);
    assert_eq!(set["ranks"], serde_json::json!([0, 1, 2, 4, 6, 7, 9]));
    assert_eq!(set["hosts"], "node[0-2,4,6-7,9]");
    let excluded: Vec<(u64, Vec<String>)> = set["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let ids = e["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_str().unwrap().to_string());
            (e["node"].as_u64().unwrap(), ids.collect())
        })
        .collect();
    assert_eq!(
        excluded,
        vec![
            (3, vec!["cluster.rendezvous".to_string()]),
            (5, vec!["link.unreachable".to_string()]),
            (8, vec!["link.unreachable".to_string()]),
        ],
        "{set:#}"
    );
    assert_eq!(set["exclude_hosts"], "node[3,5,8]");
    assert_eq!(set["master_addr"].as_str(), Some(from0.as_str()));
    assert_eq!(set["largest"], true);
    assert_eq!(set["constraints"]["met"], true);
    assert!(
        set["recheck"]
            .as_str()
            .unwrap()
            .starts_with("preflight cluster --hosts 'node[0-2,4,6-7,9]'")
    );
    // The terminal block rank 0 printed, from the JSON it wrote.
    let report: Report = serde_json::from_value(r0.report().clone()).unwrap();
    let text = block(&report, 0, 100);
    let whole = preflight::render::doctor::render_for_rank(
        &report,
        Style {
            width: 100,
            ..Style::plain()
        },
        0,
    );
    let verdict = whole
        .lines()
        .find(|l| l.contains("do not launch"))
        .unwrap_or_default();
    eprintln!("{verdict}\n{text}");
    assert!(
        text.contains("Train now on 7 of 10 nodes: node[0-2,4,6-7,9]"),
        "{text}"
    );
    assert!(
        text.contains("node[5,8] (link.unreachable)")
            && text.contains("node3 (cluster.rendezvous)"),
        "{text}"
    );
    // The launch formats from the saved report, and other constraints computed again from it.
    let dir = c.host_tmp(0).join("healthy");
    let path = write_report(&report, &dir);
    check_launch_formats(
        &path,
        &[
            "node0", "node1", "node2", "node4", "node6", "node7", "node9",
        ],
        "node[3,5,8]",
        &["k8s-node5", "k8s-node8"],
    );
    let four = stdout(&launch(
        &path,
        &["--format", "hostfile", "--nodes-multiple-of", "4"],
    ));
    assert_eq!(four.lines().count(), 4, "{four}");
    let out = launch(&path, &["--min-nodes", "9"]);
    assert_eq!(out.status.code(), Some(2), "no launch to print");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the healthy set has 7 of 10 nodes, fewer than --min-nodes 9"),
        "{err}"
    );
    let mut nine = report.clone();
    attach(
        &mut nine,
        &HealthyInput::new(
            &HealthyOptions {
                min_nodes: 9,
                ..Default::default()
            },
            10,
            None,
            &[],
        ),
    );
    let f = nine
        .findings
        .iter()
        .find(|f| f.id == "cluster.healthy-set")
        .expect("a failure");
    assert!(
        f.summary
            .contains("link.unreachable (2 nodes), cluster.rendezvous (1 node)"),
        "{}",
        f.summary
    );
    // The real job on exactly those 7 nodes, with the lines the report printed.
    run_job_on_the_set(&c, set);
}

#[test]
fn rank_0_with_its_data_ports_filtered_is_left_out_and_a_new_master_runs_the_job() {
    if !has_torch() {
        return;
    }
    let Some(c) = Cluster::flat("hset0", 5, "eth0")
        .needs(&["iptables"])
        .build()
    else {
        return;
    };
    c.block_high_ports(0, MASTER_PORT, Verdict::Drop);
    let script = fixture("healthy-set/allreduce.py");
    let runs = c
        .preflight()
        .timeout(6)
        .script(&[script.to_str().unwrap()])
        .run();
    let r0 = node(&runs, 0);
    assert_eq!(
        r0.exit_code,
        Some(1),
        "a failing cluster exits 1 without the flag"
    );
    let set = healthy_set(r0);
    eprintln!(
        "healthy_set: {}",
        serde_json::to_string_pretty(set).unwrap()
    );
    assert_eq!(set["ranks"], serde_json::json!([1, 2, 3, 4]));
    assert_eq!(set["excluded"][0]["node"], 0);
    assert_eq!(
        set["excluded"][0]["reasons"],
        serde_json::json!(["link.unreachable"])
    );
    assert_eq!(
        set["master_addr"].as_str(),
        Some(c.addr(1, "data").as_str())
    );
    assert_eq!(set["master_port"], MASTER_PORT);
    let why = set["master_reason"].as_str().unwrap();
    assert!(
        why.contains("rank 0 is left out, so rank 1 (node1) is the master"),
        "{why}"
    );
    assert_eq!(set["launch"][0]["node"], 1);
    assert_eq!(set["launch"][0]["node_rank"], 0);
    run_job_on_the_set(&c, set);
}

// ---------------------------------------------------------------- a real Slurm allocation

/// `slurm-netns` (the shared tool that starts a real Slurm in namespaces), when this checkout
/// has it and Slurm is installed.
fn slurm_netns() -> Option<PathBuf> {
    let tool = std::env::var_os("PREFLIGHT_SLURM_NETNS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::common::repo("../shared/tools/slurm-netns"));
    let installed = ["/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun"]
        .iter()
        .all(|p| Path::new(p).exists());
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if tool.exists() && installed && root {
        Some(tool)
    } else {
        eprintln!(
            "skipped: the Slurm flow needs root, Debian's slurmctld/slurmd/slurm-client/munge and {} (or PREFLIGHT_SLURM_NETNS)",
            tool.display()
        );
        None
    }
}

/// A Slurm cluster that `slurm-netns down` removes on drop.
struct Slurm {
    tool: PathBuf,
    dir: PathBuf,
}

impl Slurm {
    fn run(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(&self.tool)
            .arg("run")
            .arg(&self.dir)
            .args(args)
            .output()
            .expect("slurm-netns run")
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.tool)
            .arg("down")
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// examples/slurm/train-healthy-set.sbatch in a real 3-node allocation where preflight never
/// starts on node3: preflight's step proceeds with the healthy set, and the sbatch's
/// `srun --exclude` line runs the real gloo job on node1 and node2 inside the allocation.
#[test]
fn the_slurm_flow_trains_on_the_healthy_set_inside_the_allocation() {
    if !has_torch() {
        return;
    }
    let Some(tool) = slurm_netns() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("pf-hset-slurm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let slurm = Slurm {
        tool: tool.clone(),
        dir: dir.clone(),
    };
    let up = std::process::Command::new(&tool)
        .args(["up"])
        .arg(&dir)
        .args(["3", "10.238"])
        .output()
        .expect("slurm-netns up");
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    // preflight never starts on node3 (a node whose job step dies at once).
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let wrapper = dir.join("preflight");
    write_exec(
        &wrapper,
        &format!(
            "#!/bin/bash\nif [ \"$(hostname)\" = node3 ] && [ \"$1\" = cluster ]; then exit 0; fi\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_preflight")
        ),
    );
    let script = crate::common::repo("examples/slurm/train-healthy-set.sbatch");
    let job = fixture("healthy-set/allreduce.py");
    let t = Instant::now();
    let out = slurm.run(&[
        "sbatch",
        "-N",
        "3",
        "--gpus-per-node=0",
        "--wait",
        &format!("--chdir={}", work.display()),
        &format!(
            "--export=ALL,PREFLIGHT={},PREFLIGHT_TIMEOUT=5,PREFLIGHT_TOKEN=healthy-set-test,PREFLIGHT_ARGS=--quick",
            wrapper.display()
        ),
        script.to_str().unwrap(),
        job.to_str().unwrap(),
    ]);
    let log: String = std::fs::read_dir(&work)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".out"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    eprintln!("sbatch --wait: {:?}\n{log}", t.elapsed());
    assert!(
        out.status.success(),
        "{}\n{log}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        log.contains("preflight: training on the healthy set; left out: node3"),
        "{log}"
    );
    let done: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("allreduce ok"))
        .collect();
    assert_eq!(done.len(), 2, "{log}");
    assert!(
        done.iter().any(|l| l.contains("of 2 on node1"))
            && done.iter().any(|l| l.contains("of 2 on node2")),
        "{log}"
    );
}

//! Issue 26: the Slurm hooks on a real Slurm (Debian's slurmctld, slurmd, munge): a controller
//! and one slurmd per network namespace, each its own host `nodeI`, brought up by
//! `tests/tools/slurm-netns` (a copy of the shared tool) on 10.237.0.0/16. Root only;
//! `PREFLIGHT_REQUIRE_NETNS=1` turns a skip into a failure. Every cluster is brought down by
//! its guard's Drop, on success and on failure; the clusters run one at a time.

use crate::common::repo;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The subnet this module's clusters use (others use 10.238 and 10.239).
const SUBNET: &str = "10.237";
/// One cluster at a time: the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn tool() -> PathBuf {
    repo("tests/tools/slurm-netns")
}

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_preflight")
}

fn skip_or_fail(reason: &str) {
    if std::env::var("PREFLIGHT_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("PREFLIGHT_REQUIRE_NETNS=1 but the Slurm tests cannot run: {reason}");
    }
    eprintln!("skipped: the Slurm tests need root, slurmctld, slurmd, srun and munged ({reason})");
}

fn in_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
            .any(|d| d.join(tool).is_file())
    })
}

/// Runs `cmd` with a wall-clock bound (coreutils `timeout`, then SIGKILL).
fn bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut c = Command::new("timeout");
    c.arg("-k")
        .arg("5")
        .arg(limit.as_secs().to_string())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()))
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A running Slurm cluster; Drop brings it down and stops what the test started in it.
pub struct SlurmCluster {
    pub dir: PathBuf,
    children: Vec<Child>,
    /// Pid files of processes started on nodes (the node command forks inside the script).
    pids: Vec<PathBuf>,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl SlurmCluster {
    /// Brings up `n` nodes with `extra` appended to slurm.conf (written into the fresh
    /// directory first, with `files` beside it); None when the tests must skip.
    pub fn up(tag: &str, n: usize, extra: &str, files: &[(&str, String)]) -> Option<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            skip_or_fail("not root");
            return None;
        }
        if let Some(t) = ["slurmctld", "slurmd", "srun", "munged", "ip", "unshare"]
            .iter()
            .find(|t| !in_path(t))
        {
            skip_or_fail(&format!("{t} is not installed"));
            return None;
        }
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("pf-slurm-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cluster dir");
        let c = SlurmCluster {
            dir: dir.clone(),
            children: Vec::new(),
            pids: Vec::new(),
            _turn: turn,
        };
        for (name, body) in files {
            c.write_exec(name, body);
        }
        std::fs::write(
            dir.join("slurm.conf.extra"),
            extra.replace("@DIR@", &c.path()),
        )
        .expect("slurm.conf.extra");
        let out = bounded(
            Command::new(tool()).args(["up", &c.path(), &n.to_string(), SUBNET]),
            Duration::from_secs(120),
        );
        assert!(
            out.status.success(),
            "slurm-netns up failed: {}",
            text(&out)
        );
        Some(c)
    }

    pub fn path(&self) -> String {
        self.dir.display().to_string()
    }

    /// Writes an executable file into the cluster's directory (`@DIR@`, `@BIN@` and
    /// `@EXAMPLES@`, the repository's examples/slurm, replaced).
    pub fn write_exec(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.dir.join(name);
        let examples = repo("examples/slurm").display().to_string();
        let body = body
            .replace("@DIR@", &self.path())
            .replace("@BIN@", bin())
            .replace("@EXAMPLES@", &examples);
        std::fs::write(&p, body).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    /// A client command on the login node (the controller's namespace).
    pub fn run(&self, args: &[&str], limit: Duration) -> Output {
        bounded(
            Command::new(tool()).arg("run").arg(&self.dir).args(args),
            limit,
        )
    }

    /// A command on node `i` (1..n), as that host.
    pub fn node(&self, i: usize, args: &[&str], limit: Duration) -> Output {
        bounded(
            Command::new(tool())
                .arg("node")
                .arg(&self.dir)
                .arg(i.to_string())
                .args(args),
            limit,
        )
    }

    /// Starts a long-running command on node `i`, stopped when the cluster is dropped.
    pub fn spawn_on(&mut self, i: usize, args: &[&str]) -> usize {
        let child = Command::new(tool())
            .arg("node")
            .arg(&self.dir)
            .arg(i.to_string())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn on node");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Stops a process [`hold_port`] started, by the pid it wrote.
    pub fn stop(&mut self, handle: usize) {
        kill_pid_file(&self.pids[handle]);
    }

    /// Holds TCP `port` on node `i` with a listening Python process (it writes its pid first).
    pub fn hold_port(&mut self, i: usize, port: u16) -> usize {
        let pid_file = self.dir.join(format!("holder-{}.pid", self.pids.len()));
        self.spawn_on(
            i,
            &[
                "python3",
                "-c",
                &format!(
                    "import os,socket,time\nopen({:?},'w').write(str(os.getpid()))\ns=socket.socket()\ns.bind(('0.0.0.0',{port}))\ns.listen()\ntime.sleep(600)",
                    pid_file.display().to_string()
                ),
            ],
        );
        self.pids.push(pid_file);
        let h = self.pids.len() - 1;
        // Bound: the listener is up once node i sees it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let o = self.node(
                i,
                &["ss", "-ltnH", &format!("sport = :{port}")],
                Duration::from_secs(10),
            );
            if !String::from_utf8_lossy(&o.stdout).trim().is_empty() {
                return h;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the port holder on node{i} never listened on {port}");
    }

    /// `sinfo -N`: node -> (state, reason or "").
    pub fn nodes(&self) -> BTreeMap<String, (String, String)> {
        let o = self.run(
            &["sinfo", "-h", "-N", "-o", "%N|%T|%E"],
            Duration::from_secs(30),
        );
        assert!(o.status.success(), "sinfo: {}", text(&o));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let mut p = l.splitn(3, '|');
                let (n, s, r) = (p.next()?, p.next()?, p.next()?);
                let r = if r == "none" { "" } else { r };
                Some((n.to_string(), (s.to_string(), r.to_string())))
            })
            .collect()
    }

    /// `sinfo -R` as a person reads it (the reason column widened).
    pub fn sinfo_r(&self) -> String {
        text(&self.run(
            &["sinfo", "-R", "-o", "%120E %9u %N"],
            Duration::from_secs(30),
        ))
    }

    /// Polls `sinfo` until `ok` holds (at most `limit`); the last view either way.
    pub fn wait_nodes(
        &self,
        limit: Duration,
        ok: impl Fn(&BTreeMap<String, (String, String)>) -> bool,
    ) -> (bool, BTreeMap<String, (String, String)>) {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.nodes();
            if ok(&v) {
                return (true, v);
            }
            if Instant::now() >= deadline {
                return (false, v);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }
}

/// Kills the process whose pid the file holds, if it is still there.
fn kill_pid_file(f: &Path) {
    if let Some(pid) = std::fs::read_to_string(f)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
        .filter(|p| *p > 1)
    {
        // SAFETY: kill has no memory preconditions; the pid is one our holder wrote.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = std::fs::remove_file(f);
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        for f in &self.pids {
            kill_pid_file(f);
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let out = bounded(
            Command::new(tool()).arg("down").arg(&self.dir),
            Duration::from_secs(60),
        );
        let left: Vec<String> = String::from_utf8_lossy(
            &Command::new("ip")
                .args(["netns", "list"])
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default(),
        )
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .filter(|ns| ns.starts_with(&ns_prefix(&self.dir)))
        .collect();
        let clean = out.status.success() && left.is_empty();
        // Kept when the test failed, for its logs.
        if clean && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        if !std::thread::panicking() {
            assert!(clean, "slurm-netns down left {left:?}: {}", text(&out));
        }
    }
}

/// The namespace prefix slurm-netns derives from the directory (`psl` + sha256[..6]).
fn ns_prefix(dir: &Path) -> String {
    let o = Command::new("sh")
        .arg("-c")
        .arg("printf '%s' \"$1\" | sha256sum | cut -c1-6")
        .arg("sh")
        .arg(dir)
        .output()
        .expect("sha256sum");
    format!("psl{}", String::from_utf8_lossy(&o.stdout).trim())
}

// ---------------------------------------------------------------- HealthCheckProgram

/// examples/slurm/preflight-health.sh as the guide documents it (docs/src/schedulers.md), with the SLURM_CONF this
/// cluster needs (slurmd runs HealthCheckProgram with an empty environment; a real node has
/// /etc/slurm/slurm.conf), and its time taken logged.
const HEALTH: &str = "#!/bin/sh\n\
export SLURM_CONF=@DIR@/slurm.conf PREFLIGHT=@BIN@ PREFLIGHT_ARGS=--no-gpu PREFLIGHT_HISTORY=@DIR@/history-$SLURMD_NODENAME.db\n\
export PREFLIGHT_LOG=@DIR@/health-$SLURMD_NODENAME.log\n\
start=$(date +%s%N)\n\
@EXAMPLES@/preflight-health.sh\n\
rc=$?\n\
echo \"exit $rc in $(( ($(date +%s%N) - start) / 1000000 )) ms\" >> @DIR@/health-$SLURMD_NODENAME.log\n\
exit $rc\n";

/// A cluster of `n` nodes whose slurmd runs `health` every 10 s on nodes in any state, once
/// every node is idle with no reason; `None` where the test is skipped.
fn health_cluster(tag: &str, n: usize, health: String) -> Option<SlurmCluster> {
    let c = SlurmCluster::up(
        tag,
        n,
        "HealthCheckProgram=@DIR@/health.sh\nHealthCheckInterval=10\nHealthCheckNodeState=ANY\n",
        &[("health.sh", health)],
    )?;
    let (ok, v) = c.wait_nodes(Duration::from_secs(20), |v| {
        v.values().all(|(s, r)| s == "idle" && r.is_empty())
    });
    assert!(ok, "not all idle at the start: {v:?}");
    Some(c)
}

#[test]
fn health_check_drains_the_faulty_node_keeps_foreign_reasons_and_resumes_its_own() {
    let Some(mut c) = health_cluster("health", 3, HEALTH.to_string()) else {
        return;
    };
    // An operator drained node3 for a reason of their own; node2 and node3 then get a fault:
    // the master port held by a leftover process.
    let o = c.run(
        &[
            "scontrol",
            "update",
            "NodeName=node3",
            "State=DRAIN",
            "Reason=bad DIMM, ticket 4711",
        ],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "{}", text(&o));
    let h2 = c.hold_port(2, 29500);
    let _h3 = c.hold_port(3, 29500);
    let (ok, v) = c.wait_nodes(Duration::from_secs(40), |v| {
        v["node2"]
            .1
            .starts_with("preflight: [node_problem] restart-job: port.in-use: master port 29500 is already in use by pid")
    });
    let shown = c.sinfo_r();
    println!("sinfo -R with node2 faulted:\n{shown}");
    println!("node2's health check said:\n{}", c.read("health-node2.log"));
    assert!(
        ok,
        "node2 not drained by preflight: {v:?}\n{}",
        c.read("health-node2.log")
    );
    assert!(v["node2"].0.starts_with("drain"), "{v:?}");
    assert_eq!(v["node1"], ("idle".to_string(), String::new()), "{v:?}");
    // More checks run: node2's first reason and the time Slurm stamped on it stay; node3
    // keeps the operator's reason.
    let stamped = |c: &SlurmCluster| {
        text(&c.run(
            &["sinfo", "-h", "-R", "-n", "node2", "-o", "%H|%E"],
            Duration::from_secs(30),
        ))
    };
    let first = stamped(&c);
    std::thread::sleep(Duration::from_secs(22));
    assert_eq!(
        stamped(&c),
        first,
        "node2's reason or its time changed while the fault held"
    );
    assert!(
        c.read("health-node2.log")
            .contains("node2 stays drained for port.in-use"),
        "{}",
        c.read("health-node2.log")
    );
    let v = c.nodes();
    assert_eq!(v["node3"].1, "bad DIMM, ticket 4711", "{v:?}");
    assert!(v["node3"].0.starts_with("drain"), "{v:?}");
    assert!(
        c.read("health-node3.log")
            .contains("already has a reason preflight did not set (\"bad DIMM, ticket 4711\""),
        "{}",
        c.read("health-node3.log")
    );
    // The fault goes away: the next check resumes node2, and only node2.
    c.stop(h2);
    let (ok, v) = c.wait_nodes(Duration::from_secs(40), |v| {
        v["node2"] == ("idle".to_string(), String::new())
    });
    println!(
        "sinfo -R after the fault on node2 was removed:\n{}",
        c.sinfo_r()
    );
    assert!(
        ok,
        "node2 not resumed: {v:?}\n{}",
        c.read("health-node2.log")
    );
    assert_eq!(v["node3"].1, "bad DIMM, ticket 4711", "{v:?}");
    assert!(v["node3"].0.starts_with("drain"), "{v:?}");
    assert!(c.read("health-node2.log").contains("resumed node2"));
    // Every run returned well inside HealthCheckInterval (10 s).
    let mut runs = 0;
    for i in 1..=3 {
        for l in c.read(&format!("health-node{i}.log")).lines() {
            if let Some(t) = l.strip_prefix("exit ").and_then(|r| r.split(" in ").nth(1)) {
                let ms: u64 = t.trim_end_matches(" ms").trim().parse().unwrap_or(u64::MAX);
                assert!(ms < 5000, "node{i}: a health check took {ms} ms");
                runs += 1;
            }
        }
    }
    assert!(runs >= 6, "only {runs} health checks ran");
}

/// A node left drained by preflight for a user problem (as a failing prolog leaves it), whose
/// health check finds only a user problem (`NCCL_SOCKET_IFNAME` naming no interface:
/// `env.socket-ifname`, fix-config): the health check resumes it and never drains it, while a
/// node problem on the other node (the master port held: port.in-use) drains that node with
/// `[node_problem]` and the action in its reason.
#[test]
fn health_check_drains_for_node_problems_only_and_resumes_a_node_drained_for_a_user_problem() {
    let health = HEALTH.replace(
        "@EXAMPLES@/preflight-health.sh\n",
        "[ \"$SLURMD_NODENAME\" = node1 ] && export NCCL_SOCKET_IFNAME=nosuch0\n\
         @EXAMPLES@/preflight-health.sh\n",
    );
    assert_ne!(health, HEALTH);
    let Some(mut c) = health_cluster("owner", 2, health) else {
        return;
    };
    let left = "preflight: [user_problem] fix-config: env.socket-ifname: NCCL_SOCKET_IFNAME=nosuch0 matches no interface";
    let o = c.run(
        &[
            "scontrol",
            "update",
            "NodeName=node1",
            "State=DRAIN",
            &format!("Reason={left}"),
        ],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "{}", text(&o));
    let _h2 = c.hold_port(2, 29500);
    let (ok, v) = c.wait_nodes(Duration::from_secs(40), |v| {
        v["node1"] == ("idle".to_string(), String::new())
            && v["node2"].1.starts_with(
                "preflight: [node_problem] restart-job: port.in-use: master port 29500 is already in use by pid",
            )
    });
    println!("sinfo -R:\n{}", c.sinfo_r());
    let log1 = c.read("health-node1.log");
    println!("node1's health check said:\n{log1}");
    assert!(
        ok,
        "{v:?}\nnode1:\n{log1}\nnode2:\n{}",
        c.read("health-node2.log")
    );
    assert!(v["node2"].0.starts_with("drain"), "{v:?}");
    assert!(
        log1.contains("fail env.socket-ifname [user_problem] fix-config: "),
        "{log1}"
    );
    assert!(log1.contains("not drained: only user problems"), "{log1}");
    assert!(log1.contains("resumed node1"), "{log1}");
    // More checks run: node1 stays in service with its user problem.
    std::thread::sleep(Duration::from_secs(12));
    let v = c.nodes();
    assert_eq!(v["node1"], ("idle".to_string(), String::new()), "{v:?}");
    assert!(!c.read("health-node1.log").contains("drained node1"));
}

/// A lemon on the real Slurm (issues 53 and 54): the master port of node2 is held through three
/// health checks, then freed: a standing fault, fixed, and node2 is resumed and no lemon. Held
/// again, the fault came back after it had gone: a lemon, said in the reason of the drain for
/// the port that fails now; freed again, node2 is back at the next check, the lemon in its log
/// and store. node1 is never touched.
#[test]
fn health_check_resumes_a_fixed_standing_fault_and_drains_a_fault_that_comes_and_goes() {
    let Some(mut c) = health_cluster("lemon", 2, HEALTH.to_string()) else {
        return;
    };
    // Health checks of node2 that ended with `exit <rc>`.
    let ended = |c: &SlurmCluster, rc: u8| {
        let tag = format!("exit {rc} ");
        c.read("health-node2.log")
            .lines()
            .filter(|l| l.starts_with(&tag))
            .count()
    };
    let until = |c: &SlurmCluster, rc: u8, n: usize| {
        let start = std::time::Instant::now();
        while ended(c, rc) < n && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(300));
        }
        let got = ended(c, rc);
        assert!(
            got >= n,
            "{got} health checks of node2 with exit {rc} in 60 s, {n} wanted:\n{}",
            c.read("health-node2.log")
        );
    };
    // A standing fault: the port held through 3 checks, then freed. It was one fault, fixed:
    // node2 is resumed at the next check and is no lemon.
    let held = c.hold_port(2, 29500);
    until(&c, 1, 3);
    c.stop(held);
    let passed = ended(&c, 0);
    until(&c, 0, passed + 1);
    let (ok, v) = c.wait_nodes(Duration::from_secs(20), |v| {
        v["node2"] == ("idle".to_string(), String::new())
    });
    let log2 = c.read("health-node2.log");
    assert!(
        ok,
        "node2 not resumed after its standing fault was fixed: {v:?}\n{log2}"
    );
    assert!(!log2.contains("history.lemon"), "{log2}");
    assert!(log2.contains("resumed node2"), "{log2}");
    // The fault comes back: held for one more check. Back after it had gone, it is a lemon
    // (4 of node2's last 5 runs): drained for the port that fails now, the lemon said in the
    // reason after it (a process that keeps coming back: reboot, never a replacement).
    let failed = ended(&c, 1);
    let held = c.hold_port(2, 29500);
    until(&c, 1, failed + 1);
    let drained = "preflight: [node_problem] restart-job: port.in-use: ";
    let lemon = " | [node_problem] reboot: history.lemon: ";
    let (ok, v) = c.wait_nodes(Duration::from_secs(30), |v| {
        v["node2"].1.starts_with(drained) && v["node2"].1.contains(lemon)
    });
    println!("sinfo -R with node2 a lemon:\n{}", c.sinfo_r());
    let log2 = c.read("health-node2.log");
    assert!(ok, "node2 not drained with its lemon said: {v:?}\n{log2}");
    assert!(v["node2"].0.starts_with("drain"), "{v:?}");
    assert_eq!(v["node1"], ("idle".to_string(), String::new()), "{v:?}");
    // Freed: nothing fails now, so node2 is back at the next check; the lemon stays in its log
    // and its store (the operator decides; --drain-lemons keeps such a node drained).
    c.stop(held);
    let (ok, v) = c.wait_nodes(Duration::from_secs(30), |v| {
        v["node2"] == ("idle".to_string(), String::new())
    });
    let log2 = c.read("health-node2.log");
    println!("node2's health check said:\n{log2}");
    assert!(
        ok,
        "node2 not resumed once its port was freed: {v:?}\n{log2}"
    );
    assert!(
        log2.contains("lemon, not drained for (it passes now"),
        "{log2}"
    );
    // The store on node2 names it too, and node1's does not.
    let history = |i: usize| {
        let store = format!("{}/history-node{i}.db", c.path());
        c.node(
            i,
            &[bin(), "history", "--history", &store],
            Duration::from_secs(30),
        )
    };
    let o = history(2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("port.in-use"), "{}", text(&o));
    let words = text(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("the fix did not hold"), "{words}");
    let o = history(1);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

// ---------------------------------------------------------------- TaskProlog

/// Task env lines of `srun -l`: task number -> (NAME -> value).
fn task_envs(out: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut m: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for l in out.lines() {
        let Some((task, rest)) = l.split_once(": ") else {
            continue;
        };
        if let Some((k, v)) = rest.split_once('=') {
            m.entry(task.trim().to_string())
                .or_default()
                .insert(k.to_string(), v.to_string());
        }
    }
    m
}

#[test]
fn task_prolog_exports_the_advice_into_every_task_and_nothing_undecided() {
    let Some(c) = SlurmCluster::up(
        "taskprolog",
        3,
        "TaskProlog=@DIR@/taskprolog.sh\n",
        &[(
            "taskprolog.sh",
            "#!/bin/sh\nexport PREFLIGHT=@BIN@ PREFLIGHT_ARGS=--no-gpu PREFLIGHT_HISTORY=@DIR@/history-$SLURMD_NODENAME.db PREFLIGHT_LOG=@DIR@/taskprolog.err\n\
             exec @EXAMPLES@/preflight-taskprolog.sh\n"
                .to_string(),
        )],
    ) else {
        return;
    };
    // node2's address moves from eth0 to lo (/32, routed out of eth0): Slurm still reaches
    // it, but no interface has a usable address, so preflight cannot choose one there.
    let o = c.node(
        2,
        &[
            "sh",
            "-c",
            "ip addr del 10.237.0.2/24 dev eth0 && ip addr add 10.237.0.2/32 dev lo && ip route add 10.237.0.0/24 dev eth0 src 10.237.0.2",
        ],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = c.run(
        &[
            "srun",
            "-N3",
            "--ntasks-per-node=1",
            "-l",
            "sh",
            "-c",
            "echo SLURMD_NODENAME=$SLURMD_NODENAME; env",
        ],
        Duration::from_secs(120),
    );
    let out = text(&o);
    assert!(
        o.status.success(),
        "srun: {out}\n{}",
        c.read("taskprolog.err")
    );
    let envs = task_envs(&out);
    assert_eq!(envs.len(), 3, "{out}");
    let mut seen = Vec::new();
    for env in envs.values() {
        let node = env["SLURMD_NODENAME"].clone();
        let get = |k: &str| env.get(k).map(String::as_str);
        let line = format!(
            "{node}: NCCL_SOCKET_IFNAME={:?} GLOO_SOCKET_IFNAME={:?} NCCL_IB_DISABLE={:?}",
            get("NCCL_SOCKET_IFNAME"),
            get("GLOO_SOCKET_IFNAME"),
            get("NCCL_IB_DISABLE")
        );
        println!("{line}");
        if node == "node2" {
            assert_eq!(get("NCCL_SOCKET_IFNAME"), None, "{line}");
            assert_eq!(get("GLOO_SOCKET_IFNAME"), None, "{line}");
        } else {
            assert_eq!(get("NCCL_SOCKET_IFNAME"), Some("eth0"), "{line}");
            assert_eq!(get("GLOO_SOCKET_IFNAME"), Some("eth0"), "{line}");
        }
        assert_eq!(get("NCCL_IB_DISABLE"), Some("1"), "{line}");
        seen.push(node);
    }
    seen.sort();
    assert_eq!(seen, ["node1", "node2", "node3"]);
}

// ---------------------------------------------------------------- Prolog

#[test]
fn prolog_drains_the_faulty_node_with_preflights_reason_and_the_job_is_requeued_elsewhere() {
    let Some(mut c) = SlurmCluster::up(
        "prolog",
        3,
        "Prolog=@DIR@/prolog.sh\nSchedulerParameters=nohold_on_prolog_fail\n",
        &[(
            "prolog.sh",
            "#!/bin/sh\nexport PREFLIGHT=@BIN@ PREFLIGHT_ARGS=--no-gpu PREFLIGHT_HISTORY=@DIR@/history-$SLURMD_NODENAME.db PREFLIGHT_LOG=@DIR@/prolog-$SLURMD_NODENAME.log\n\
             exec @EXAMPLES@/preflight-prolog.sh\n"
                .to_string(),
        )],
    ) else {
        return;
    };
    // node1, where the scheduler puts a one-node job first, has the master port held.
    c.hold_port(1, 29500);
    let o = c.run(
        &[
            "sbatch",
            "-N1",
            "--open-mode=append",
            &format!("--output={}/job-%j.out", c.path()),
            "--wrap",
            "echo ran on $(hostname) restart $SLURM_RESTART_COUNT",
        ],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "sbatch: {}", text(&o));
    let id: String = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string();
    let out = format!("job-{id}.out");
    // Slurm starts the requeued job about two minutes later.
    let deadline = Instant::now() + Duration::from_secs(300);
    while !c.read(&out).contains("ran on") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    let ran = c.read(&out);
    println!("job {id}: {ran}");
    println!("sinfo -R:\n{}", c.sinfo_r());
    println!("node1's prolog said:\n{}", c.read("prolog-node1.log"));
    let v = c.nodes();
    assert!(
        v["node1"]
            .1
            .starts_with("preflight: [node_problem] restart-job: port.in-use: master port 29500 is already in use"),
        "node1's reason is not preflight's: {v:?}\n{}",
        c.read("prolog-node1.log")
    );
    assert!(v["node1"].0.starts_with("drain"), "{v:?}");
    // Slurm's contract: the batch job is requeued (not held, with nohold_on_prolog_fail) and
    // runs on another node, its restart count 1.
    // The first start failed on node1 (slurmstepd wrote this to the job's output) ...
    assert!(ran.contains("Error running slurm prolog"), "{ran}");
    // ... and the requeued job ran elsewhere.
    let last = ran.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("ran on node"),
        "the job never ran: {ran} {v:?}"
    );
    assert!(!last.contains("node1"), "{ran}");
    assert!(last.contains("restart 1"), "{ran}");
    for n in ["node2", "node3"] {
        assert_eq!(v[n].1, "", "{v:?}");
    }
}

// ---------------------------------------------------------------- the job step before training

#[test]
fn sbatch_preflight_step_names_the_filtered_node_and_torchrun_trains_on_the_others() {
    let py = Command::new("python3")
        .args(["-c", "import sys, torch; print(sys.executable)"])
        .output();
    let Some(python) = py
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    else {
        if std::env::var("PREFLIGHT_REQUIRE_NETNS").as_deref() == Ok("1") {
            panic!(
                "PREFLIGHT_REQUIRE_NETNS=1 but torch is not installed (pip install torch==2.11.0)"
            );
        }
        eprintln!("skipped: torch is not installed");
        return;
    };
    let Some(c) = SlurmCluster::up("sbatch", 3, "", &[]) else {
        return;
    };
    // node3's listeners are filtered: only slurmd's port and replies get in.
    let o = c.node(
        3,
        &[
            "sh",
            "-c",
            "iptables -A INPUT -i lo -j ACCEPT && iptables -A INPUT -m state --state ESTABLISHED,RELATED -j ACCEPT \
             && iptables -A INPUT -p tcp --dport 6818 -j ACCEPT && iptables -A INPUT -p tcp -j DROP",
        ],
        Duration::from_secs(30),
    );
    assert!(o.status.success(), "iptables: {}", text(&o));
    let pydir = Path::new(&python).parent().unwrap().display().to_string();
    let path = format!("{pydir}:{}", std::env::var("PATH").unwrap_or_default());
    let mut sbatch = Command::new(tool());
    sbatch
        .arg("run")
        .arg(&c.dir)
        .args([
            "sbatch",
            "-N3",
            &format!("--chdir={}", c.path()),
            &format!("--output={}/train-%j.out", c.path()),
        ])
        .arg(repo("examples/slurm/preflight-then-train.sbatch"))
        .arg(repo("examples/slurm/allreduce_check.py"))
        .env("PATH", path)
        .env("PREFLIGHT", bin());
    for k in crate::common::INHERITED_ENV_TO_CLEAR {
        sbatch.env_remove(k);
    }
    let o = bounded(&mut sbatch, Duration::from_secs(30));
    assert!(o.status.success(), "sbatch: {}", text(&o));
    let id = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string();
    let out = format!("train-{id}.out");
    let deadline = Instant::now() + Duration::from_secs(400);
    let done = |t: &str| t.contains("training: exit") || t.contains("not starting the job");
    while !done(&c.read(&out)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
    }
    let t = c.read(&out);
    println!("{out}:\n{t}");
    assert!(t.contains("failed: node3; passed: node[1-2]"), "{t}");
    assert!(t.contains("excluding node3"), "{t}");
    assert!(t.contains("training: exit 0"), "{t}");
    assert_eq!(c.read(&format!("nodes-failed-{id}")), "node3\n");
    assert_eq!(c.read(&format!("nodes-passed-{id}")), "node[1-2]\n");
    let report: serde_json::Value =
        serde_json::from_str(&c.read(&format!("preflight-{id}.json"))).expect("the report");
    let fails: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "fail")
        .map(|f| format!("{} (node {}): {}", f["id"], f["node"], f["summary"]))
        .collect();
    println!("the report's fail findings: {fails:#?}");
    assert!(
        fails
            .iter()
            .any(|f| f.contains("(node 2)") && f.contains("node3")),
        "no fail finding names node3 (rank 2): {fails:#?}"
    );
    // With one node cut off no network reaches every node, so the report advises no
    // interface (issue 24 adds the healthy set's advice); what it advises reaches the tasks.
    let rec = &report["recommendation"]["env"];
    let gloo = rec["GLOO_SOCKET_IFNAME"]
        .as_str()
        .unwrap_or("None")
        .to_string();
    println!("advised: {rec}");
    let mut ranks: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("allreduce ok: rank"))
        .collect();
    ranks.sort();
    assert_eq!(ranks.len(), 2, "{t}");
    for (i, l) in ranks.iter().enumerate() {
        assert!(
            l.starts_with(&format!("allreduce ok: rank {i} of 2 on node")),
            "{l}"
        );
        assert!(!l.contains("on node3"), "{l}");
        assert!(l.contains(&format!("GLOO_SOCKET_IFNAME={gloo},")), "{l}");
        assert!(
            l.contains(&format!(
                "NCCL_IB_DISABLE={}",
                rec["NCCL_IB_DISABLE"].as_str().unwrap()
            )),
            "{l}"
        );
    }
}

//! Several preflight tasks per node under a real Slurm (`srun --ntasks-per-node`) and a real Open MPI `mpirun`, on the namespaces of `slurm-netns` (`../shared/tools`, else the copy in `tests/tools`).
//!
//! Each test brings up its own 3-node Slurm (a fresh directory, subnet 10.238) and takes it
//! down on success and failure (a Drop guard). Open MPI's `mpirun` runs in the controller's
//! namespace and reaches the nodes through `ns-rsh` (from the same place). A faulted node is node3
//! with its routes to node1 and node2 blackholed inside its own namespace (Slurm's own traffic
//! goes through the controller and keeps working). The tests take turns: each starts a dozen
//! processes, and CI has two cores.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The subnet of these tests' clusters (slurm-netns's SUBNET: first two octets).
const SUBNET: &str = "10.238";
/// One scenario at a time.
static TURN: Mutex<()> = Mutex::new(());
/// What every preflight task runs with: short, no GPU.
const PREFLIGHT_ARGS: &str = "cluster --quick --no-gpu --timeout 8";

/// `../shared/tools/NAME` beside the checkout when it is there (the team's current copy), else
/// the copy under `tests/tools` (a clean clone in CI).
fn tool_path(name: &str) -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let shared = repo.join("../shared/tools").join(name);
    if shared.is_file() {
        shared
    } else {
        repo.join("tests/tools").join(name)
    }
}

fn preflight() -> String {
    env!("CARGO_BIN_EXE_preflight").to_string()
}

fn in_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
            .any(|d| d.join(tool).is_file())
    })
}

/// Why these tests cannot run here, if they cannot; with `PREFLIGHT_REQUIRE_NETNS=1` a failure.
fn usable(extra: &[&str]) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let reason = if unsafe { libc::geteuid() } != 0 {
        Some("not running as root".to_string())
    } else if let Some(t) = ["slurm-netns", "ns-rsh"]
        .into_iter()
        .map(tool_path)
        .find(|t| !t.is_file())
    {
        Some(format!("{} is missing", t.display()))
    } else {
        ["slurmctld", "slurmd", "srun", "munged", "ip"]
            .iter()
            .chain(extra)
            .find(|t| !in_path(t))
            .map(|t| format!("`{t}` is not installed (apt-get install slurmctld slurmd slurm-client munge openmpi-bin)"))
    };
    match reason {
        None => true,
        Some(r) if std::env::var("PREFLIGHT_REQUIRE_NETNS").as_deref() == Ok("1") => {
            panic!("PREFLIGHT_REQUIRE_NETNS=1 but the Slurm task tests cannot run: {r}")
        }
        Some(r) => {
            eprintln!("skipping: the Slurm task tests cannot run here ({r})");
            false
        }
    }
}

/// Runs `cmd` with a wall-clock bound; the bound ending is a test failure naming the command.
fn bounded(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so a command past its bound is killed with its children.
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let what = format!("{cmd:?}");
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => {
            // SAFETY: kill on the process group of a child we spawned and have not reaped.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            panic!("{what} still running after {limit:?}");
        }
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A real 3-node Slurm from slurm-netns in a fresh directory, down on drop.
struct Slurm {
    dir: PathBuf,
    /// Kept (not removed) when the cgroup bind mount inside it could not be undone.
    tmp: Option<tempfile::TempDir>,
}

impl Slurm {
    fn up() -> Slurm {
        let tmp = tempfile::Builder::new()
            .prefix("pf-slurm-tasks-")
            .tempdir()
            .expect("tempdir");
        let dir = tmp.path().join("cluster");
        let slurm = Slurm {
            dir,
            tmp: Some(tmp),
        };
        let out = bounded(
            slurm.tool(&["up", &slurm.dir_str(), "3", SUBNET]),
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "slurm-netns up: {}", text(&out));
        slurm
    }

    fn dir_str(&self) -> String {
        self.dir.to_string_lossy().into_owned()
    }

    fn tool(&self, args: &[&str]) -> Command {
        let mut c = Command::new(tool_path("slurm-netns"));
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PREFLIGHT_HISTORY", "off");
        c
    }

    /// `srun ...` (or any command) on the login node.
    fn run(&self, argv: &[&str], limit: Duration) -> Output {
        let dir = self.dir_str();
        let mut args = vec!["run", dir.as_str()];
        args.extend_from_slice(argv);
        bounded(self.tool(&args), limit)
    }

    /// The namespaces' common prefix (slurm-netns derives it from the directory), as ns-rsh wants it.
    fn ns_prefix(&self) -> String {
        use sha2::{Digest, Sha256};
        let d = Sha256::digest(self.dir_str().as_bytes());
        let hex: String = d.iter().take(3).map(|b| format!("{b:02x}")).collect();
        format!("psl{hex}")
    }

    /// Node `i`'s routes to every other node blackholed: it reaches none of them.
    fn fault(&self, i: u32) {
        let ns = format!("{}{i}", self.ns_prefix());
        for peer in (1..=3).filter(|p| *p != i) {
            let out = bounded(
                {
                    let mut c = Command::new("ip");
                    c.args(["-n", &ns, "route", "add", "blackhole"])
                        .arg(format!("{SUBNET}.0.{peer}/32"));
                    c
                },
                Duration::from_secs(10),
            );
            assert!(out.status.success(), "blackhole on {ns}: {}", text(&out));
        }
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = bounded(
            self.tool(&["down", &self.dir_str()]),
            Duration::from_secs(60),
        );
        // Never walk into a cgroup tree still mounted there: leave the directory instead.
        use std::os::unix::fs::MetadataExt;
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        let cgroup = self.dir.join("cgroup");
        if cgroup.exists() && dev(&cgroup) != dev(&self.dir) {
            if let Some(tmp) = self.tmp.take() {
                eprintln!(
                    "leaving {} (its cgroup mount is still there)",
                    tmp.keep().display()
                );
            }
        }
    }
}

/// Every file `<dir>/<stem>.<N>` by N.
fn per_task(dir: &Path, stem: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|t| std::fs::read_to_string(dir.join(format!("{stem}.{t}"))).unwrap_or_default())
        .collect()
}

/// Task 0 of node `rank + 1` printed the report: of 3 nodes when healthy; with node3 faulted,
/// nodes 1 and 2 name the node that never joined and node3 says it cannot reach the master.
fn assert_leader(out: &str, err: &str, rank: usize, faulted: bool) {
    let host = format!("node{}", rank + 1);
    if !faulted {
        let want = format!("cluster check of 3 nodes, this is rank {rank} ({host})");
        assert!(out.contains(&want), "{host} task 0: {out}\n{err}");
    } else if rank < 2 {
        assert!(
            out.contains("cluster.rendezvous"),
            "{host} task 0: {out}\n{err}"
        );
    } else {
        let all = format!("{out}{err}");
        assert!(all.contains("node1:29500"), "{host} task 0: {all}");
    }
}

/// Each task's exit code as srun reports a non-zero one ("srun: error: node2: tasks 4-7:
/// Exited with exit code 1", "task 5: ..."); tasks it does not name exited 0.
fn srun_exit_codes(stderr: &str, ntasks: usize) -> Vec<i32> {
    let mut codes = vec![0; ntasks];
    for line in stderr.lines() {
        let Some((head, code)) = line.split_once(": Exited with exit code ") else {
            continue;
        };
        let code: i32 = code.trim().parse().expect("an exit code");
        let list = head.rsplit_once(" task").map(|(_, l)| l).expect("tasks");
        let list = list.trim_start_matches('s').trim();
        for part in list.split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let first: usize = a.trim().parse().expect("a task number");
            let last: usize = b.trim().parse().expect("a task number");
            codes[first..=last].fill(code);
        }
    }
    codes
}

/// A follower's stderr: exactly one line, the leader's verdict.
fn assert_one_follower_line(err: &str, host: &str, task: usize, status: &str) {
    let lines: Vec<&str> = err.lines().collect();
    let want = format!("preflight: {host} task {task}: same verdict as task 0: {status}");
    assert!(
        lines.len() == 1 && lines[0].starts_with(&want),
        "want one line starting {want:?}, got:\n{err}"
    );
}

/// `srun -N3 --ntasks-per-node=4 preflight cluster`: srun's block layout puts tasks 0-3 on
/// node1, 4-7 on node2, 8-11 on node3; task 0 of each node prints the report of 3 nodes, the
/// other 9 print one line each; srun's status is the worst task's.
fn srun_direct(slurm: &Slurm, logs: &Path, faulted: bool) {
    let out_pat = logs.join("out.%t");
    let err_pat = logs.join("err.%t");
    let cmd = format!(
        "srun -N3 --ntasks-per-node=4 --output={} --error={} {} {PREFLIGHT_ARGS}",
        out_pat.display(),
        err_pat.display(),
        preflight()
    );
    let argv: Vec<&str> = cmd.split(' ').collect();
    let started = Instant::now();
    let run = slurm.run(&argv, Duration::from_secs(90));
    let outs = per_task(logs, "out", 12);
    let errs = per_task(logs, "err", 12);
    let all = format!("{}\n{errs:#?}", text(&run));
    assert_eq!(run.status.code(), Some(i32::from(faulted)), "{all}");
    let codes = srun_exit_codes(&String::from_utf8_lossy(&run.stderr), 12);
    assert_eq!(codes, vec![i32::from(faulted); 12], "{all}");
    for (t, (out, err)) in outs.iter().zip(&errs).enumerate() {
        let host = format!("node{}", t / 4 + 1);
        if t % 4 == 0 {
            assert_leader(out, err, t / 4, faulted);
        } else {
            assert!(out.is_empty(), "task {t} printed a report: {out}");
            assert_one_follower_line(err, &host, t % 4, if faulted { "fail" } else { "" });
            if faulted {
                assert!(err.contains("(exit code 1;"), "task {t}: {err}");
            } else {
                assert!(
                    err.contains(": pass (exit code 0;") || err.contains(": warn (exit code 0;"),
                    "task {t}: {err}"
                );
            }
        }
    }
    eprintln!(
        "srun -N3 --ntasks-per-node=4 ({}): exit {:?}, task exit codes {codes:?}, in {:.1} s; node2 task 3 printed: {}",
        if faulted { "node3 faulted" } else { "healthy" },
        run.status.code(),
        started.elapsed().as_secs_f64(),
        errs[7].trim()
    );
}

/// `srun -N3 --ntasks-per-node=2 bash -c 'preflight cluster --quick && echo TRAIN $SLURM_PROCID'`.
fn srun_train(slurm: &Slurm, faulted: bool) -> Vec<String> {
    let script = format!(
        "{} {PREFLIGHT_ARGS} >/dev/null 2>&1 && echo TRAIN $SLURM_PROCID",
        preflight()
    );
    let run = slurm.run(
        &["srun", "-N3", "--ntasks-per-node=2", "bash", "-c", &script],
        Duration::from_secs(90),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut trained: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with("TRAIN "))
        .map(str::to_string)
        .collect();
    trained.sort();
    eprintln!(
        "srun -N3 --ntasks-per-node=2 bash -c 'preflight cluster --quick && echo TRAIN $SLURM_PROCID' ({}): exit {:?}, {} TRAIN lines",
        if faulted { "node3 faulted" } else { "healthy" },
        run.status.code(),
        trained.len()
    );
    let expected = if faulted { 0 } else { 6 };
    assert_eq!(trained.len(), expected, "{}", text(&run));
    trained
}

#[test]
fn srun_with_several_tasks_per_node_runs_one_preflight_per_node() {
    if !usable(&[]) {
        return;
    }
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let slurm = Slurm::up();
    let logs = tempfile::tempdir().expect("tempdir");
    let healthy = logs.path().join("healthy");
    std::fs::create_dir(&healthy).unwrap();
    srun_direct(&slurm, &healthy, false);
    let trained = srun_train(&slurm, false);
    let want: Vec<String> = {
        let mut w: Vec<String> = (0..6).map(|t| format!("TRAIN {t}")).collect();
        w.sort();
        w
    };
    assert_eq!(trained, want);
    slurm.fault(3);
    let faulted = logs.path().join("faulted");
    std::fs::create_dir(&faulted).unwrap();
    srun_direct(&slurm, &faulted, true);
    srun_train(&slurm, true);
}

/// `mpirun --host node1:4,node2:4,node3:4 ... preflight cluster --hosts node[1-3]`: every task
/// writes its exit status; one report per node, the same status on all 12.
fn mpirun(slurm: &Slurm, logs: &Path, faulted: bool) -> Vec<String> {
    let script = format!(
        "{} {PREFLIGHT_ARGS} --hosts 'node[1-3]' --token slurm-tasks >{dir}/out.$OMPI_COMM_WORLD_RANK 2>{dir}/err.$OMPI_COMM_WORLD_RANK; echo $? >{dir}/rc.$OMPI_COMM_WORLD_RANK",
        preflight(),
        dir = logs.display()
    );
    let rsh = tool_path("ns-rsh");
    let prefix = slurm.ns_prefix();
    let rsh = rsh.to_string_lossy();
    let run = slurm.run(
        &[
            "env",
            &format!("NS_RSH_PREFIX={prefix}"),
            "mpirun",
            "--allow-run-as-root",
            "--host",
            "node1:4,node2:4,node3:4",
            "--mca",
            "plm_rsh_agent",
            &rsh,
            "--mca",
            "oob_tcp_if_include",
            "eth0",
            "bash",
            "-c",
            &script,
        ],
        Duration::from_secs(120),
    );
    let rcs: Vec<String> = per_task(logs, "rc", 12)
        .into_iter()
        .map(|r| r.trim().to_string())
        .collect();
    let errs = per_task(logs, "err", 12);
    let outs = per_task(logs, "out", 12);
    assert!(run.status.success(), "{}\n{errs:#?}", text(&run));
    // --host node1:4,...: ranks 0-3 on node1, 4-7 on node2, 8-11 on node3.
    for t in 0..12 {
        let host = format!("node{}", t / 4 + 1);
        if t % 4 == 0 {
            assert_leader(&outs[t], &errs[t], t / 4, faulted);
        } else {
            assert!(outs[t].is_empty(), "rank {t}: {}", outs[t]);
            assert_one_follower_line(&errs[t], &host, t % 4, "");
            assert!(errs[t].contains("under Open MPI's mpirun"), "{}", errs[t]);
        }
    }
    eprintln!(
        "mpirun --host node1:4,node2:4,node3:4 preflight cluster --hosts node[1-3]: exit statuses {rcs:?}; rank 5 printed: {}",
        errs[5].trim()
    );
    rcs
}

#[test]
fn mpirun_with_several_ranks_per_node_runs_one_preflight_per_node() {
    if !usable(&["mpirun"]) {
        return;
    }
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let slurm = Slurm::up();
    let logs = tempfile::tempdir().expect("tempdir");
    let healthy = logs.path().join("healthy");
    std::fs::create_dir(&healthy).unwrap();
    let rcs = mpirun(&slurm, &healthy, false);
    assert_eq!(rcs, vec!["0".to_string(); 12]);
    slurm.fault(3);
    let faulted = logs.path().join("faulted");
    std::fs::create_dir(&faulted).unwrap();
    let rcs = mpirun(&slurm, &faulted, true);
    assert_eq!(rcs, vec!["1".to_string(); 12]);
}

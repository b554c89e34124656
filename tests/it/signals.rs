//! Ctrl-C, SIGTERM and `kill -9` of a real one-node `preflight cluster` (on loopback) whose fake
//! NCCL worker hangs in init: nothing of the run is left behind.
//!
//! Each run gets its own TMPDIR, which is also the marker that finds the run's processes (every
//! process of the run inherits it: preflight, the worker, the worker's own child).

use crate::common::INHERITED_ENV_TO_CLEAR;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long preflight may take to reach the hung worker (probing, joining, the TCP phases).
const REACH_WORKER: Duration = Duration::from_secs(60);
/// How long an interrupted preflight may take to clean up and exit.
const EXIT_LIMIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

fn fake_worker() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-worker/fake-worker.sh")
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    let l = TcpListener::bind(("0.0.0.0", 0)).expect("bind an ephemeral port");
    l.local_addr().expect("addr").port()
}

/// A one-node `preflight cluster --allreduce nccl` with the fake worker in `FAKE_MODE=mode`.
struct Run {
    child: Child,
    tmp: tempfile::TempDir,
    port: u16,
    started: Instant,
}

impl Run {
    fn start(mode: &str) -> Run {
        Run::start_with(mode, &[])
    }

    /// With more environment (e.g. torchrun's local-rank variables).
    fn start_with(mode: &str, env: &[(&str, &str)]) -> Run {
        let tmp = tempfile::Builder::new()
            .prefix("pf-signals-")
            .tempdir()
            .expect("tmp");
        let port = free_port();
        let stderr = std::fs::File::create(tmp.path().join("stderr.txt")).expect("stderr file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_preflight"));
        cmd.args([
            "cluster",
            "--nnodes=1",
            "--node-rank=0",
            "--master-addr=127.0.0.1",
            &format!("--master-port={port}"),
            "--allreduce=nccl",
            "--quick",
            "--timeout=60",
            "--format=json",
        ]);
        for var in INHERITED_ENV_TO_CLEAR {
            cmd.env_remove(var);
        }
        cmd.env("TMPDIR", tmp.path())
            .env("NO_COLOR", "1")
            .env("PREFLIGHT_TEST_FAKE_GPUS", "1")
            .env("PREFLIGHT_NCCL_WORKER", fake_worker())
            .env("FAKE_MODE", mode)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = cmd.spawn().expect("start preflight");
        Run {
            child,
            tmp,
            port,
            started: Instant::now(),
        }
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("stderr.txt")).unwrap_or_default()
    }

    /// Live processes of this run other than preflight itself: (pid, command line).
    fn others(&self) -> Vec<(i32, String)> {
        processes_with_tmpdir(self.tmp.path())
            .into_iter()
            .filter(|(pid, _)| *pid != self.pid())
            .collect()
    }

    /// Waits until a process of the run other than preflight runs `needle` (the hung worker).
    fn wait_for_worker(&mut self, needle: &str) -> Vec<(i32, String)> {
        let deadline = Instant::now() + REACH_WORKER;
        while Instant::now() < deadline {
            let others = self.others();
            if others.iter().any(|(_, cmd)| cmd.contains(needle)) {
                return others;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "preflight ended ({status}) before the worker hung:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(POLL);
        }
        panic!(
            "no `{needle}` of the run within {REACH_WORKER:?}:\n{}",
            self.stderr()
        );
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0, "kill {sig}");
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
                _ => return None,
            }
        }
    }

    /// Entries of the run's TMPDIR that preflight made.
    fn preflight_files(&self) -> Vec<String> {
        std::fs::read_dir(self.tmp.path())
            .expect("read TMPDIR")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("preflight-"))
            .collect()
    }

    /// Whether the master port can be bound again (on every address, as the coordinator binds it).
    fn port_is_free(&self) -> bool {
        TcpListener::bind(("0.0.0.0", self.port)).is_ok()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // Whatever an assertion left running: preflight, then every process of the run.
        let _ = self.child.kill();
        let _ = self.child.wait();
        for (pid, _) in processes_with_tmpdir(self.tmp.path()) {
            // SAFETY: kill(2) on a process that carries this run's unique TMPDIR.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Live (not zombie) processes whose environment has `TMPDIR=<dir>`: (pid, command line).
fn processes_with_tmpdir(dir: &Path) -> Vec<(i32, String)> {
    let marker = format!("TMPDIR={}", dir.display()).into_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv == marker.as_slice()))
                .unwrap_or(false)
        })
        .map(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (pid, cmd.trim().to_string())
        })
        .collect()
}

/// The process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .unwrap_or("X");
    state != "Z" && state != "X"
}

impl Run {
    /// Sends `sig` (and, after `second`, `sig` again); returns the exit code and the time from the first signal to the exit.
    fn interrupt(&mut self, sig: i32, second: Option<Duration>) -> (Option<i32>, Duration) {
        let t0 = Instant::now();
        self.signal(sig);
        if let Some(after) = second {
            std::thread::sleep(after);
            self.signal(sig);
        }
        let status = self.wait_exit(EXIT_LIMIT).unwrap_or_else(|| {
            panic!(
                "preflight still running {EXIT_LIMIT:?} after signal {sig}:\n{}",
                self.stderr()
            )
        });
        (status.code(), t0.elapsed())
    }

    /// No process of the run, and the master port free; with `files`, no temp file either.
    fn assert_nothing_left(&self, files: bool) {
        let left = self.others();
        assert!(left.is_empty(), "processes of the run survived: {left:?}");
        if files {
            assert_eq!(
                self.preflight_files(),
                Vec::<String>::new(),
                "temp files left"
            );
        }
        assert!(
            self.port_is_free(),
            "master port {} still bound:\n{}",
            self.port,
            self.stderr()
        );
    }
}

/// Interrupts the run with `sig` while the worker hangs in init (with a child of its own) and
/// checks what is left.
fn interrupted_run_leaves_nothing(sig: i32, code: i32) {
    let mut run = Run::start("hang-init");
    let before = run.wait_for_worker("sleep 1000");
    assert!(
        before.iter().any(|(_, c)| c.contains("fake-worker.sh")),
        "the worker and its child: {before:?}"
    );
    assert!(
        !run.preflight_files().is_empty(),
        "the worker's temp dir exists while it runs"
    );
    let reached = run.started.elapsed();
    let (exit, took) = run.interrupt(sig, None);
    assert_eq!(exit, Some(code), "{}", run.stderr());
    assert!(took < Duration::from_secs(3), "cleanup took {took:?}");
    run.assert_nothing_left(true);
    let err = run.stderr();
    // The temp dir may be gone before the cleanup looks: the worker's owner removes it when it
    // sees the worker die. Either way none is left (checked above).
    assert!(
        err.contains("stopped 1 child process group(s), removed "),
        "{err}"
    );
    eprintln!(
        "signal {sig}: worker hung after {reached:.1?}; exit {code} {took:.2?} after the signal"
    );
}

#[test]
fn sigint_stops_the_nccl_worker_group_removes_temp_files_and_exits_130() {
    interrupted_run_leaves_nothing(libc::SIGINT, 130);
}

#[test]
fn sigterm_stops_the_nccl_worker_group_removes_temp_files_and_exits_143() {
    interrupted_run_leaves_nothing(libc::SIGTERM, 143);
}

#[test]
fn an_interrupted_torchrun_leader_removes_its_local_group_files_too() {
    // Local rank 0 of 2 under (emulated) torchrun: it writes preflight-local-*.leader first.
    let mut run = Run::start_with(
        "hang-init",
        &[
            ("TORCHELASTIC_RUN_ID", "signals-test"),
            ("LOCAL_RANK", "0"),
            ("LOCAL_WORLD_SIZE", "2"),
        ],
    );
    run.wait_for_worker("sleep 1000");
    let files = run.preflight_files();
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("preflight-local-") && f.ends_with(".leader"))
            && files.iter().any(|f| f.starts_with("preflight-nccl-")),
        "{files:?}"
    );
    let (exit, _) = run.interrupt(libc::SIGTERM, None);
    assert_eq!(exit, Some(143), "{}", run.stderr());
    run.assert_nothing_left(true);
    assert!(
        ["removed 1 temp path(s)", "removed 2 temp path(s)"]
            .iter()
            .any(|n| run.stderr().contains(n)),
        ".leader, and the nccl dir unless its owner removed it first: {}",
        run.stderr()
    );
}

#[test]
fn a_worker_deaf_to_sigterm_gets_sigkill_after_the_one_second_grace() {
    let mut run = Run::start("hang-init-deaf");
    run.wait_for_worker("sleep 1000");
    let (exit, took) = run.interrupt(libc::SIGINT, None);
    assert_eq!(exit, Some(130), "{}", run.stderr());
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "SIGTERM, 1 s, SIGKILL: took {took:?}"
    );
    run.assert_nothing_left(true);
    assert!(
        run.stderr().contains("(1 needed SIGKILL)"),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_second_signal_during_cleanup_exits_at_once_and_still_kills_the_worker() {
    let mut run = Run::start("hang-init-deaf");
    run.wait_for_worker("sleep 1000");
    let (exit, took) = run.interrupt(libc::SIGINT, Some(Duration::from_millis(200)));
    assert_eq!(exit, Some(130), "{}", run.stderr());
    assert!(
        took < Duration::from_millis(900),
        "the second signal must not wait out the grace: {took:?}"
    );
    // SIGKILL to the worker's group on the way out; the temp dir is not waited for.
    let deadline = Instant::now() + Duration::from_secs(1);
    while !run.others().is_empty() && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    run.assert_nothing_left(false);
}

#[test]
fn kill_9_of_preflight_takes_the_nccl_worker_down_with_it() {
    // `hang`: the worker prints the unique id, then execs `sleep 1000` (one process, no child
    // of its own); only its parent-death signal can end it once preflight is SIGKILLed.
    let mut run = Run::start("hang");
    let workers = run.wait_for_worker("sleep 1000");
    assert_eq!(workers.len(), 1, "{workers:?}");
    let worker = workers[0].0;
    run.signal(libc::SIGKILL);
    let status = run.wait_exit(EXIT_LIMIT).expect("SIGKILL ends preflight");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(worker) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    assert!(
        !alive(worker),
        "worker {worker} outlived its SIGKILLed parent"
    );
    let left = run.others();
    assert!(left.is_empty(), "processes of the run survived: {left:?}");
    assert!(run.port_is_free(), "master port {} still bound", run.port);
    // No handler runs on SIGKILL: the temp dir stays (the tempdir of the test removes it).
}

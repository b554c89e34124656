//! Matrix-multiply speed and exactness of this node's GPUs, in a child process
//! (`preflight gemm-worker`, cuBLAS loaded at run time) under a watchdog.
//!
//! The child is its own process group, registered with `cleanup` (SIGINT/SIGTERM of preflight
//! kill it) and tied to the spawning thread with `PR_SET_PDEATHSIG`; the parent reads its lines
//! with a deadline and kills the group when it passes. `PREFLIGHT_GEMM_WORKER` replaces the
//! child with another program (the test hook: a fake worker that prints the same lines).

pub mod exact;
pub mod fp8;
pub mod libs;
pub mod protocol;
pub mod worker;

use crate::measure::child::{
    describe_exit, kill_group, read_stderr, spawn_supervised, worker_program,
};
use crate::measure::nccl::libdir::prepend_path;
use protocol::Line;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Test hook: the program run instead of `preflight gemm-worker` (it gets the same arguments).
pub const WORKER_ENV: &str = "PREFLIGHT_GEMM_WORKER";
/// Lines read from a worker at most (a worker that floods is cut off).
const MAX_LINES: usize = 100_000;
/// How long a worker that printed its last line may take to exit.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// One run of the worker.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmJob {
    pub gpus: u32,
    pub size: u32,
    pub check_size: u32,
    pub burn_s: u32,
    pub seed: u64,
    /// The watchdog kills the worker this long after it started.
    pub timeout: Duration,
    /// Directories put first in the worker's `LD_LIBRARY_PATH` (where libcublas is).
    pub lib_dirs: Vec<PathBuf>,
    /// The program to run instead of this executable (tests); else `PREFLIGHT_GEMM_WORKER`,
    /// else `preflight gemm-worker`.
    pub program: Option<PathBuf>,
}

/// What the worker printed, and how it ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GemmRun {
    pub lines: Vec<Line>,
    /// Why the run is incomplete (timed out, crashed, garbage); None after `{"done":true}`.
    pub error: Option<String>,
}

/// Seconds the watchdog gives a worker: start-up, per GPU the timed and checked multiplies, and
/// the sustained load.
pub fn timeout_for(gpus: u32, burn_s: u32) -> Duration {
    Duration::from_secs(60 + 10 * u64::from(gpus) + u64::from(burn_s) * 12 / 10)
}

fn worker_args(job: &GemmJob) -> Vec<String> {
    vec![
        "gemm-worker".into(),
        "--gpus".into(),
        job.gpus.to_string(),
        "--size".into(),
        job.size.to_string(),
        "--check-size".into(),
        job.check_size.to_string(),
        "--burn".into(),
        job.burn_s.to_string(),
        "--seed".into(),
        job.seed.to_string(),
    ]
}

/// Runs the worker; `seen` is called on every line as it comes (the burn's NVML samples are
/// taken then). Never waits past `job.timeout` plus [`EXIT_GRACE`].
pub fn run(job: &GemmJob, seen: &mut dyn FnMut(&Line)) -> GemmRun {
    let program = match worker_program(job.program.as_deref(), std::env::var_os(WORKER_ENV)) {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot find preflight's own executable: {e}")),
    };
    let mut cmd = Command::new(&program);
    cmd.args(worker_args(job))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if !job.lib_dirs.is_empty() {
        let mut path = std::env::var("LD_LIBRARY_PATH").ok();
        for dir in job.lib_dirs.iter().rev() {
            path = Some(prepend_path(dir, path.as_deref()));
        }
        cmd.env("LD_LIBRARY_PATH", path.unwrap_or_default());
    }
    let (mut child, _group) = match spawn_supervised(&mut cmd) {
        Ok(x) => x,
        Err(e) => return failed(format!("cannot start {}: {e}", program.display())),
    };
    let started = Instant::now();
    let deadline = started + job.timeout;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || read_lines(out, tx));
    }
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(err) = child.stderr.take() {
        let keep = stderr.clone();
        std::thread::spawn(move || read_stderr(err, keep));
    }
    let mut out = GemmRun::default();
    let mut finished = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(line)) => {
                seen(&line);
                match &line {
                    Line::Done(_) => finished = true,
                    Line::Error(e) => out.error = Some(e.clone()),
                    _ => {}
                }
                out.lines.push(line);
            }
            Ok(Err(garbage)) => {
                out.error = Some(format!("the GEMM worker printed garbage: {garbage}"));
                kill_group(&mut child);
                break;
            }
            Err(RecvTimeoutError::Timeout) => {
                kill_group(&mut child);
                out.error = Some(format!(
                    "the GEMM worker timed out: killed after {} s ({})",
                    job.timeout.as_secs(),
                    progress(&out.lines)
                ));
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    // Reap it, bounded: a worker that closed stdout but hangs is killed.
    let grace = Instant::now() + EXIT_GRACE;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < grace => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                kill_group(&mut child);
                break child.wait().ok();
            }
        }
    };
    if !finished && out.error.is_none() {
        let how = status.map_or_else(|| "did not exit".to_string(), |s| describe_exit(&s));
        let tail: Vec<String> = stderr
            .lock()
            .map(|q| q.iter().rev().take(3).rev().cloned().collect())
            .unwrap_or_default();
        out.error = Some(format!(
            "the GEMM worker {how} ({}){}",
            progress(&out.lines),
            if tail.is_empty() {
                String::new()
            } else {
                format!("; its stderr ends: {}", tail.join(" | "))
            }
        ));
    }
    out
}

fn failed(why: String) -> GemmRun {
    GemmRun {
        lines: Vec::new(),
        error: Some(why),
    }
}

/// Where a worker was when it stopped: "2 GPUs opened, 5 rates, 1 check".
fn progress(lines: &[Line]) -> String {
    let count = |f: fn(&Line) -> bool| lines.iter().filter(|l| f(l)).count();
    format!(
        "{} GPUs opened, {} rates and {} checks reported",
        count(|l| matches!(l, Line::Gpu(_))),
        count(|l| matches!(l, Line::Rate(_))),
        count(|l| matches!(l, Line::Check(_)))
    )
}

/// Parses stdout into lines (each at most `protocol::MAX_LINE` bytes) until EOF or garbage.
fn read_lines(out: impl Read, tx: mpsc::Sender<Result<Line, String>>) {
    let mut reader = BufReader::new(out);
    for _ in 0..MAX_LINES {
        let mut raw = Vec::new();
        let n = match (&mut reader)
            .take(protocol::MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut raw)
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let parsed = if n > protocol::MAX_LINE {
            Err(format!("a line longer than {} bytes", protocol::MAX_LINE))
        } else {
            Line::parse(text)
        };
        let stop = parsed.is_err();
        if tx.send(parsed).is_err() || stop {
            return;
        }
    }
    let _ = tx.send(Err(format!("more than {MAX_LINES} lines")));
}

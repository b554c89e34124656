//! NCCL all-reduce across the nodes' GPUs, run in a child process (`preflight nccl-worker`) under a watchdog.
//!
//! The parent side: [`start`] spawns the worker with the recommended environment,
//! `NCCL_DEBUG=INFO` to a private temp dir, and `LD_LIBRARY_PATH` starting with a dir holding
//! a `libnccl.so` link to the library the node probe found. A watchdog thread kills the
//! worker's whole process group (SIGKILL, then reaps it) when the job's timeout passes, so a
//! hung or aborting NCCL never hangs the tool. The group and the temp dir are registered in
//! `cleanup` (SIGINT/SIGTERM of preflight kill and remove them), and the worker gets
//! `PR_SET_PDEATHSIG`, so even a `kill -9` of preflight ends it. Rank 0's worker makes the unique id
//! ([`Worker::unique_id`]); the coordinator hands it to every node ([`Worker::give_id`]);
//! [`Worker::finish`] collects the rows and the network NCCL used (from its log).
//!
//! Test hook: when `PREFLIGHT_NCCL_WORKER=/path/to/program` is set (or [`NcclJob::program`]),
//! that program runs instead of `preflight nccl-worker` (it receives the same arguments,
//! starting with `nccl-worker`); CI uses fake workers written in shell.

pub mod libdir;
pub mod log;
pub mod protocol;
pub mod rail;
pub mod worker;

pub use log::{NetUsed, differs_from_advice};
pub use protocol::RankRow;

use crate::cleanup;
use crate::measure::child::{
    self, describe_exit, kill_group, read_stderr, skip_rest_of_line, spawn_supervised,
};
use preflight_checks::model::NodeFacts;
use protocol::Event;
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Environment variable naming a program to run instead of `preflight nccl-worker` (a test hook).
pub const WORKER_ENV: &str = "PREFLIGHT_NCCL_WORKER";
/// Most protocol events read from one worker; later lines are dropped.
const MAX_EVENTS: usize = 100_000;
/// How often the watchdog looks at the child.
const WATCH_TICK: Duration = Duration::from_millis(20);
/// How long a finished worker may take to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);
/// Most NCCL log bytes read per file, and files read.
const MAX_LOG_BYTES: u64 = 16 << 20;
const MAX_LOG_FILES: usize = 64;
/// Lines kept in [`NcclOutcome::log_excerpt`].
const MAX_EXCERPT: usize = 40;

/// One node's part of an NCCL all-reduce measurement.
#[derive(Clone, Debug, Default)]
pub struct NcclJob {
    /// NCCL ranks over all nodes (sum of every node's `gpus`).
    pub nranks: u32,
    /// Global rank of this node's first GPU.
    pub first_rank: u32,
    /// GPUs this node drives.
    pub gpus: u32,
    /// Message sizes in bytes.
    pub sizes: Vec<u64>,
    pub warmup: u32,
    pub iters: u32,
    /// The recommended NCCL environment (and anything else the worker should see).
    pub env: BTreeMap<String, String>,
    /// The watchdog kills the worker this long after it started.
    pub timeout: Duration,
    /// The libnccl the node probe found (`facts.nccl.library`); None lets the worker search.
    pub lib: Option<PathBuf>,
    /// Program to run instead of this binary (test hook; overrides `PREFLIGHT_NCCL_WORKER`).
    pub program: Option<PathBuf>,
}

/// What a finished worker measured.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclOutcome {
    pub rows: Vec<RankRow>,
    /// `collectives[].net`: "NET/Socket eth0", "NET/IB mlx5_0:1"; None when no NCCL log was written.
    pub net: Option<String>,
    /// The parsed log, for [`differs_from_advice`].
    pub net_used: Option<NetUsed>,
    /// The NCCL log lines that tell the network story (version, NET/, Bootstrap, WARN).
    pub log_excerpt: Vec<String>,
}

/// Why the NCCL measurement failed; every variant carries the evidence to show.
#[derive(Debug, Clone, PartialEq)]
pub enum NcclError {
    /// No libnccl to load, or the link to it could not be made.
    LibraryMissing(String),
    /// The worker could not be started.
    Spawn { program: String, detail: String },
    /// The worker died (signal or exit code) without reporting an error.
    Crashed {
        how: String,
        phase: String,
        evidence: Evidence,
    },
    /// The watchdog (or a bounded wait) ran out; the worker was killed.
    TimedOut {
        after_s: u64,
        phase: String,
        evidence: Evidence,
    },
    /// The worker reported `{"error": ..}` ("what failed: detail").
    Failed {
        message: String,
        phase: String,
        evidence: Evidence,
    },
    /// The worker printed something that is not the protocol.
    Garbage { line: String, evidence: Evidence },
    /// The API was used out of order (e.g. `unique_id` on a worker that makes none).
    Usage(String),
}

/// The worker's last stderr lines and the NCCL log's WARN lines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evidence {
    pub stderr: Vec<String>,
    pub nccl_warnings: Vec<String>,
}

impl std::fmt::Display for NcclError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NcclError::LibraryMissing(m) => write!(f, "libnccl missing: {m}"),
            NcclError::Spawn { program, detail } => {
                write!(f, "could not start the NCCL worker {program}: {detail}")
            }
            NcclError::Crashed {
                how,
                phase,
                evidence,
            } => {
                write!(
                    f,
                    "the NCCL worker crashed ({how}) during {phase}{evidence}"
                )
            }
            NcclError::TimedOut {
                after_s,
                phase,
                evidence,
            } => write!(
                f,
                "the NCCL worker timed out: killed after {after_s} s while {phase}{evidence}"
            ),
            NcclError::Failed {
                message,
                phase,
                evidence,
            } => {
                write!(
                    f,
                    "the NCCL worker failed during {phase}: {message}{evidence}"
                )
            }
            NcclError::Garbage { line, evidence } => {
                write!(f, "the NCCL worker printed garbage: {line}{evidence}")
            }
            NcclError::Usage(m) => write!(f, "NCCL worker misuse: {m}"),
        }
    }
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.nccl_warnings.is_empty() {
            write!(f, "; NCCL warned: {}", self.nccl_warnings.join(" | "))?;
        }
        if !self.stderr.is_empty() {
            write!(f, "; stderr: {}", self.stderr.join(" | "))?;
        }
        Ok(())
    }
}

impl std::error::Error for NcclError {}

impl NcclError {
    /// The evidence, when the worker ran.
    pub fn evidence(&self) -> Option<&Evidence> {
        match self {
            NcclError::Crashed { evidence, .. }
            | NcclError::TimedOut { evidence, .. }
            | NcclError::Failed { evidence, .. }
            | NcclError::Garbage { evidence, .. } => Some(evidence),
            _ => None,
        }
    }
}

/// Why a node cannot run the NCCL worker, judged from its facts alone (so the coordinator can
/// judge every node, and the node itself the same way); None when it can.
pub fn unready(facts: &NodeFacts) -> Option<String> {
    if preflight_checks::visible_devices::visible_gpu_count(facts) == 0 {
        return Some(match (&facts.gpu.nvml_error, facts.gpu.gpus.len()) {
            (Some(e), _) => format!("no GPU visible: NVML could not load ({e})"),
            (None, 0) => "no GPU visible: NVML found 0 GPUs".to_string(),
            (None, n) => format!(
                "no GPU visible: CUDA_VISIBLE_DEVICES={} hides all {n} (see gpu.visible-devices)",
                facts
                    .env
                    .get("CUDA_VISIBLE_DEVICES")
                    .map_or("", String::as_str)
            ),
        });
    }
    let Some(lib) = &facts.nccl.library else {
        return Some(
            "no libnccl found (searched Python environments, LD_LIBRARY_PATH, ld.so.cache); \
             install it with `pip install nvidia-nccl-cu12` in the job's environment"
                .to_string(),
        );
    };
    match &facts.nccl.error {
        Some(e) if e.starts_with("ncclGetVersion failed") => {
            Some(format!("libnccl at {lib} could not be loaded: {e}"))
        }
        _ => None,
    }
}

/// Whether this node can run the NCCL worker ([`unready`], and the library is still there); Ok gives its path.
pub fn available(facts: &NodeFacts) -> Result<PathBuf, String> {
    if let Some(why) = unready(facts) {
        return Err(why);
    }
    let lib = facts.nccl.library.as_deref().unwrap_or_default();
    let path = PathBuf::from(lib);
    if !path.exists() {
        return Err(format!("libnccl at {lib} no longer exists"));
    }
    Ok(path)
}

/// A running worker; dropping it kills the worker.
pub struct Worker {
    events: Receiver<Event>,
    stdin: Option<ChildStdin>,
    exit: Receiver<Result<ExitStatus, String>>,
    stop: Arc<AtomicBool>,
    timed_out: Arc<AtomicBool>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    started: Instant,
    timeout: Duration,
    makes_id: bool,
    sizes: Vec<u64>,
    phase: String,
    rows: Vec<RankRow>,
    done: bool,
    /// How the worker ended, once told (its events and exit are read only once).
    ended: Option<NcclError>,
    dir: libdir::TempDir,
}

/// Spawns the worker for `job` under a watchdog.
pub fn start(job: &NcclJob) -> Result<Worker, NcclError> {
    let program = child::worker_program(job.program.as_deref(), std::env::var_os(WORKER_ENV))
        .map_err(|e| NcclError::Spawn {
            program: "preflight (current executable)".into(),
            detail: e.to_string(),
        })?;
    let dir = libdir::TempDir::new().map_err(|e| NcclError::Spawn {
        program: program.display().to_string(),
        detail: format!("cannot create a temp dir for the NCCL logs: {e}"),
    })?;
    let mut cmd = Command::new(&program);
    cmd.args(worker_args(job))
        .envs(&job.env)
        .env("NCCL_DEBUG", "INFO")
        .env("NCCL_DEBUG_SUBSYS", "INIT,NET")
        .env("NCCL_DEBUG_FILE", dir.path().join("nccl.%h.%p.log"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(lib) = &job.lib {
        let libdir = dir.link_nccl(lib).map_err(|e| {
            NcclError::LibraryMissing(format!(
                "cannot link {} as libnccl.so for the worker: {e}",
                lib.display()
            ))
        })?;
        let existing = job
            .env
            .get("LD_LIBRARY_PATH")
            .cloned()
            .or_else(|| std::env::var("LD_LIBRARY_PATH").ok());
        cmd.env(
            "LD_LIBRARY_PATH",
            libdir::prepend_path(&libdir, existing.as_deref()),
        );
    }
    let (mut child, group) = spawn_supervised(&mut cmd).map_err(|e| NcclError::Spawn {
        program: program.display().to_string(),
        detail: e.to_string(),
    })?;
    let stdin = child.stdin.take();
    let (etx, events) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || read_events(out, etx));
    }
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(err) = child.stderr.take() {
        let keep = stderr.clone();
        std::thread::spawn(move || read_stderr(err, keep));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let (xtx, exit) = mpsc::channel();
    let started = Instant::now();
    {
        let (stop, timed_out) = (stop.clone(), timed_out.clone());
        let deadline = started + job.timeout;
        std::thread::spawn(move || watchdog(child, group, deadline, stop, timed_out, xtx));
    }
    let makes_id = job.first_rank == 0;
    Ok(Worker {
        events,
        stdin,
        exit,
        stop,
        timed_out,
        stderr,
        started,
        timeout: job.timeout,
        makes_id,
        sizes: job.sizes.clone(),
        phase: if makes_id {
            "creating the unique id (ncclGetUniqueId)".into()
        } else {
            "waiting for the unique id".into()
        },
        rows: Vec::new(),
        done: false,
        ended: None,
        dir,
    })
}

fn worker_args(job: &NcclJob) -> Vec<String> {
    let sizes: Vec<String> = job.sizes.iter().map(u64::to_string).collect();
    vec![
        "nccl-worker".into(),
        "--nranks".into(),
        job.nranks.to_string(),
        "--first-rank".into(),
        job.first_rank.to_string(),
        "--gpus".into(),
        job.gpus.to_string(),
        "--sizes".into(),
        sizes.join(","),
        "--warmup".into(),
        job.warmup.to_string(),
        "--iters".into(),
        job.iters.to_string(),
    ]
}

/// Kills the child's process group at the deadline or when asked; always reaps it and reports
/// how it ended. `_group` (the group's registration for the signal handler) ends with it, once
/// the child is reaped.
fn watchdog(
    mut child: Child,
    _group: cleanup::Guard<'static>,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    timed_out: Arc<AtomicBool>,
    tx: Sender<Result<ExitStatus, String>>,
) {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let _ = tx.send(Ok(status));
                return;
            }
            Ok(None) => {}
            Err(e) => {
                kill_group(&mut child);
                let _ = tx.send(Err(format!("cannot watch the worker: {e}")));
                return;
            }
        }
        let late = Instant::now() >= deadline;
        if late || stop.load(Ordering::SeqCst) {
            timed_out.store(late, Ordering::SeqCst);
            kill_group(&mut child);
            let _ = tx.send(child.wait().map_err(|e| e.to_string()));
            return;
        }
        std::thread::sleep(WATCH_TICK);
    }
}

/// Reads protocol lines (each at most MAX_LINE bytes) until EOF; keeps draining after the limits.
fn read_events(out: impl Read, tx: Sender<Event>) {
    let mut reader = BufReader::new(out);
    let mut sent = 0usize;
    loop {
        let mut line = Vec::new();
        let n = match (&mut reader)
            .take(protocol::MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let event = if n > protocol::MAX_LINE {
            skip_rest_of_line(&mut reader);
            Event::Garbage(format!("a line longer than {} bytes", protocol::MAX_LINE))
        } else {
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            protocol::parse_line(text)
        };
        if sent < MAX_EVENTS {
            sent += 1;
            if tx.send(event).is_err() {
                return;
            }
        }
    }
}

/// How a worker's wait for events ended badly.
enum Ending {
    Reported(String),
    Garbage(String),
    /// stdout closed: the worker exited or died.
    Closed,
    /// Our own bounded wait ran out.
    Waited,
}

impl Worker {
    /// Rank 0 only: waits (at most `timeout`) for the worker's NCCL unique id, as 256 hex digits.
    pub fn unique_id(&mut self, timeout: Duration) -> Result<String, NcclError> {
        if !self.makes_id {
            return Err(NcclError::Usage(
                "unique_id() asked of a worker whose first rank is not 0".into(),
            ));
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.next_event(deadline) {
                Ok(Event::UniqueId(hex)) => {
                    self.phase = "waiting for the unique id to come back".into();
                    return Ok(hex);
                }
                Ok(Event::Phase(p)) => self.phase = p,
                Ok(other) => {
                    let line = format!("{other:?} before the unique id");
                    return Err(self.collapse(Ending::Garbage(line)));
                }
                Err(ending) => return Err(self.collapse(ending)),
            }
        }
    }

    /// Hands the unique id (256 hex digits, from rank 0) to this worker.
    pub fn give_id(&mut self, hex: &str) -> Result<(), NcclError> {
        protocol::decode_id(hex).map_err(|e| NcclError::Usage(format!("bad unique id: {e}")))?;
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(NcclError::Usage("give_id() called twice".into()));
        };
        let line = format!("{}\n", protocol::id_line(hex));
        let sent = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush());
        self.stdin = None;
        self.phase = "init (ncclCommInitRank)".into();
        if sent.is_err() {
            // The worker is gone: how it ended is read now, and finish() tells the same.
            let e = self.collapse(Ending::Closed);
            self.ended = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Waits for every size's row (bounded by the job's timeout) and reads the NCCL log.
    pub fn finish(mut self) -> Result<NcclOutcome, NcclError> {
        if let Some(e) = self.ended.take() {
            return Err(e);
        }
        self.stdin = None;
        let deadline = self.started + self.timeout + Duration::from_secs(1);
        while !self.done {
            match self.next_event(deadline) {
                Ok(Event::Row(row)) => self.take_row(row),
                Ok(Event::Phase(p)) => self.phase = p,
                Ok(Event::Done) => self.done = true,
                Ok(Event::UniqueId(_)) => {}
                Ok(Event::Error(m)) => return Err(self.collapse(Ending::Reported(m))),
                Ok(Event::Garbage(g)) => return Err(self.collapse(Ending::Garbage(g))),
                Err(ending) => return Err(self.collapse(ending)),
            }
        }
        if let Some(missing) = self.sizes.get(self.rows.len()) {
            let msg = format!(
                "done after {} row(s); size {missing} has none",
                self.rows.len()
            );
            return Err(self.collapse(Ending::Garbage(msg)));
        }
        match self.exit.recv_timeout(EXIT_GRACE) {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => {
                self.phase = "exit after the last size".into();
                let how = describe_exit(&status);
                return Err(NcclError::Crashed {
                    how,
                    phase: self.phase.clone(),
                    evidence: self.evidence(),
                });
            }
            // Measured, but slow to exit (ncclCommDestroy): keep the numbers, kill it on drop.
            _ => {}
        }
        Ok(self.outcome())
    }

    fn take_row(&mut self, row: RankRow) {
        self.rows.push(row);
        self.phase = match self.sizes.get(self.rows.len()) {
            Some(next) => format!("allreduce of {next} bytes"),
            None => "finishing (ncclCommDestroy)".into(),
        };
    }

    fn outcome(&self) -> NcclOutcome {
        let text = self.read_logs();
        let (net, net_used) = if text.is_empty() {
            (None, None)
        } else {
            let used = log::parse(&text);
            (Some(used.summary()), Some(used))
        };
        NcclOutcome {
            rows: self.rows.clone(),
            net,
            net_used,
            log_excerpt: excerpt(&text),
        }
    }

    /// Next event before `deadline`; Err when the stream ended, the worker reported an error, or time ran out.
    fn next_event(&mut self, deadline: Instant) -> Result<Event, Ending> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.events.recv_timeout(left) {
            Ok(Event::Error(m)) => Err(Ending::Reported(m)),
            Ok(Event::Garbage(g)) => Err(Ending::Garbage(g)),
            Ok(e) => Ok(e),
            Err(RecvTimeoutError::Disconnected) => Err(Ending::Closed),
            Err(RecvTimeoutError::Timeout) => Err(Ending::Waited),
        }
    }

    /// Stops the worker (if still running), waits for its end, and names what happened.
    fn collapse(&mut self, ending: Ending) -> NcclError {
        self.stdin = None;
        // A worker that reported an error or closed stdout exits by itself; give it a moment.
        let grace = match ending {
            Ending::Reported(_) | Ending::Closed => EXIT_GRACE,
            _ => Duration::ZERO,
        };
        let exit = match self.exit.recv_timeout(grace) {
            Ok(r) => Some(r),
            Err(_) => {
                self.stop.store(true, Ordering::SeqCst);
                self.exit.recv_timeout(EXIT_GRACE).ok()
            }
        };
        // Drain what the worker said before it ended (phases, rows, its error).
        let mut reported = None;
        let mut garbage = None;
        while let Ok(e) = self.events.try_recv() {
            match e {
                Event::Phase(p) => self.phase = p,
                Event::Row(r) => self.take_row(r),
                Event::Error(m) => reported = reported.or(Some(m)),
                Event::Garbage(g) => garbage = garbage.or(Some(g)),
                _ => {}
            }
        }
        // A worker that printed garbage and exited may be seen first as a closed pipe.
        let ending = match (ending, garbage) {
            (Ending::Closed, Some(g)) => Ending::Garbage(g),
            (ending, _) => ending,
        };
        let evidence = self.evidence();
        let phase = self.phase.clone();
        if self.timed_out.load(Ordering::SeqCst) || matches!(ending, Ending::Waited) {
            let after_s = self.started.elapsed().as_secs();
            return NcclError::TimedOut {
                after_s,
                phase,
                evidence,
            };
        }
        match (ending, reported) {
            (Ending::Reported(message), _) | (_, Some(message)) => NcclError::Failed {
                message,
                phase,
                evidence,
            },
            (Ending::Garbage(line), None) => NcclError::Garbage { line, evidence },
            (Ending::Closed | Ending::Waited, None) => {
                let how = match exit {
                    Some(Ok(status)) => describe_exit(&status),
                    Some(Err(e)) => e,
                    None => "did not exit; killed".into(),
                };
                NcclError::Crashed {
                    how,
                    phase,
                    evidence,
                }
            }
        }
    }

    fn evidence(&self) -> Evidence {
        let stderr = self
            .stderr
            .lock()
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default();
        let warnings = log::parse(&self.read_logs()).warnings;
        let skip = warnings.len().saturating_sub(5);
        Evidence {
            stderr,
            nccl_warnings: warnings.into_iter().skip(skip).collect(),
        }
    }

    /// Every NCCL log file the worker wrote (`nccl.<host>.<pid>.log`), concatenated.
    fn read_logs(&self) -> String {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return String::new();
        };
        let mut names: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("nccl.") && n.ends_with(".log"))
            })
            .take(MAX_LOG_FILES)
            .collect();
        names.sort();
        let mut text = String::new();
        for path in names {
            if let Ok(f) = std::fs::File::open(&path) {
                let mut bytes = Vec::new();
                if f.take(MAX_LOG_BYTES).read_to_end(&mut bytes).is_ok() {
                    text.push_str(&String::from_utf8_lossy(&bytes));
                    text.push('\n');
                }
            }
        }
        text
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Reaped by the watchdog; wait briefly so the temp dir is not removed under a live worker.
        let _ = self.exit.recv_timeout(EXIT_GRACE);
    }
}

/// The lines that tell which network NCCL used, and its warnings.
fn excerpt(text: &str) -> Vec<String> {
    const KEYS: &[&str] = &[
        "NCCL version",
        "Using network",
        "NET/IB :",
        "NET/Socket :",
        "Bootstrap :",
        "NCCL WARN",
        "via NET/",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if out.len() >= MAX_EXCERPT {
            break;
        }
        let line = line.trim_end();
        if KEYS.iter().any(|k| line.contains(k)) && !out.iter().any(|l| l == line) {
            out.push(protocol::shorten(line));
        }
    }
    out
}

#[cfg(test)]
mod tests;

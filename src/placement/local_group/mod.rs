//! One preflight per node under any launcher that starts several tasks per node (torchrun,
//! srun, mpirun, MPICH/Intel MPI): local rank 0 takes part, the others wait for its verdict and
//! exit with its status.
//!
//! `srun --ntasks-per-node=G preflight cluster` (or torchrun, mpirun ...) starts G copies on
//! every node. Only the copy with local rank 0 (the leader; [`crate::placement::local_tasks`]
//! reads which launcher and which rank) joins the cluster; the others (followers) wait for it
//! and exit with its exit code, so the launcher sees one verdict per node.
//!
//! The leader and its followers meet through small files in `$TMPDIR` (else /tmp), named after
//! this user, the launcher's per-node process (torchrun's agent: the parent; srun's
//! `slurmstepd`, Open MPI's `orted`, hydra's proxy: the nearest ancestor of that name) with its
//! pid and start time, and a hash of the run's ids (job, step, restart count) and this host's
//! name. A file of an earlier run can never carry the same name, so it is never read:
//!
//! - `<key>.leader`: `"<pid> <start>"`, created (exclusively) by the leader before it does
//!   anything else; a second live claimant is a layout conflict, never a second leader;
//! - `<key>.task<N>`: `"<pid> <start>"`, created (exclusively) by the follower of local rank N;
//! - `<key>.conflict`: what a conflicting task found, for the leader's report;
//! - `<key>.exit`: `"<code> <pid> <start> <status>"`, written by the leader when it is done.
//!
//! Files are written to a temporary name and linked or renamed, so a reader sees all or
//! nothing, and a reader accepts only files owned by its own user. A follower polls (bounded):
//! it exits with the leader's code, or with 2 when the leader dies without writing one, never
//! announces itself, or outlives the generous cap.
//!
//! A leader stopped by SIGINT/SIGTERM before it published its code removes both files (they are
//! registered in the cleanup registry from the claim until the publication: `claim` and
//! `publish` are `runtime::group_files`, above this layer); its followers, which saw it, then
//! judge it by pid like a leader that died.

use crate::placement::local_tasks::{self, Launcher, LayoutError};
use anyhow::anyhow;
use preflight_checks::model::{Finding, Fix, Status};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// File name prefix of every group file.
const PREFIX: &str = "preflight-local-";
/// Directory entries looked at when removing files of finished runs.
const MAX_SCAN: usize = 10_000;
/// How long followers wait for the leader to announce itself (launchers start all local ranks together).
const CLAIM_WAIT: Duration = Duration::from_secs(60);
/// Time past the join timeout a follower still waits for a live leader (the measurement phases).
const LEADER_MARGIN: Duration = Duration::from_secs(600);
/// How often a follower looks.
const POLL: Duration = Duration::from_millis(100);
/// How long a finished leader waits for followers that have not announced themselves yet.
pub const FOLLOWER_GRACE: Duration = Duration::from_secs(5);
/// Ancestors looked at for the launcher's per-node process.
const MAX_ANCESTORS: usize = 32;
/// The finding id of a layout that cannot be trusted.
pub use preflight_checks::launch::ids::TASKS_PER_NODE;

/// This process's place among the local tasks its launcher started on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalGroup {
    pub local_rank: u32,
    pub local_world_size: u32,
    pub launcher: Launcher,
    /// This host's name, for the followers' line.
    pub host: String,
    /// The node's index when the launcher says it (`SLURM_NODEID`).
    pub node_index: Option<u32>,
    /// The launcher's variables, for findings.
    pub vars: BTreeMap<String, String>,
    /// `<dir>/<prefix><key>`; the files add `.leader`, `.task<N>`, `.conflict` and `.exit`.
    base: PathBuf,
    /// The launcher's per-node process (0 when not found), for messages.
    agent_pid: u32,
}

/// A process as named in the files: pid and start time (clock ticks since boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) pid: u32,
    pub(crate) start: u64,
}

/// How long a follower waits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub claim_wait: Duration,
    pub total: Duration,
    pub poll: Duration,
}

impl Limits {
    /// For a join timeout of `timeout` seconds: the leader's own timeouts end it well before `total`.
    pub fn for_timeout(timeout: u64) -> Limits {
        Limits {
            claim_wait: CLAIM_WAIT,
            total: Duration::from_secs(timeout.saturating_mul(3)) + LEADER_MARGIN,
            poll: POLL,
        }
    }
}

/// What the leader published: its exit code and the report's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub code: u8,
    /// "pass", "warn", "fail", "error"; "unknown" when the leader could not say.
    pub status: String,
    /// The leader's pid.
    pub leader_pid: u32,
}

/// Why a task could not take its place in the group: another live task holds it.
#[derive(Debug)]
pub enum JoinError {
    /// Another live process claimed the same local rank: the layout is wrong.
    Taken { rank: u32, other_pid: u32 },
    /// The group's files could not be written.
    Io(anyhow::Error),
}

/// The local group this process belongs to: `None` when no launcher started several tasks on
/// this node; an error when the launcher's variables cannot be trusted.
pub fn detect(env: &BTreeMap<String, String>) -> Result<Option<LocalGroup>, LayoutError> {
    let Some(tasks) = local_tasks::local_tasks(env)? else {
        return Ok(None);
    };
    let agent = match tasks.launcher {
        Launcher::Torchrun => {
            let pid = std::os::unix::process::parent_id();
            Proc {
                pid,
                start: proc_start(pid).unwrap_or(0),
            }
        }
        l => launcher_daemon(l.daemons()).unwrap_or(Proc { pid: 0, start: 0 }),
    };
    let host = hostname();
    let dir = env
        .get("TMPDIR")
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    let run = format!(
        "{}\0{}\0{}\0{:?}",
        tasks.launcher.name(),
        tasks.run_id,
        host,
        tasks.node_index
    );
    let key = group_key(current_uid(), agent, &run);
    Ok(Some(LocalGroup {
        local_rank: tasks.local_rank,
        local_world_size: tasks.local_size,
        launcher: tasks.launcher,
        host,
        node_index: tasks.node_index,
        vars: tasks.vars,
        base: dir.join(format!("{PREFIX}{key}")),
        agent_pid: agent.pid,
    }))
}

/// `<uid>-<agent pid>-<agent start>-<run hash>`: the uid and agent first, for cleanup.
fn group_key(uid: u32, agent: Proc, run: &str) -> String {
    let digest = Sha256::digest(run.as_bytes());
    let hash: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{uid}-{}-{}-{hash}", agent.pid, agent.start)
}

/// The nearest ancestor whose process name is one of `names` (bounded walk up the parents).
fn launcher_daemon(names: &[&str]) -> Option<Proc> {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..MAX_ANCESTORS {
        if pid <= 1 {
            return None;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        if names.contains(&comm.trim()) {
            return Some(Proc {
                pid,
                start: proc_start(pid)?,
            });
        }
        pid = proc_ppid(pid)?;
    }
    None
}

/// This host's name (the kernel's), for messages and the group's key.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this node".to_string())
}

/// The fix's words without the command that follows them on its own line.
fn fix_hint(e: &LayoutError) -> String {
    match e.fix.strip_suffix(e.launcher.one_per_node()) {
        Some(words) => format!(
            "{} (the command below)",
            words.trim_end().trim_end_matches(':')
        ),
        None => e.fix.clone(),
    }
}

/// The `launch.tasks-per-node` finding for a layout that cannot be trusted.
pub fn layout_finding(e: &LayoutError, node: Option<u32>) -> Finding {
    let vars = e
        .vars
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    Finding::new(
        TASKS_PER_NODE,
        Status::Fail,
        e.launcher.name(),
        format!(
            "several tasks on this node under {}, and which one takes part cannot be told: {}",
            e.launcher.name(),
            e.problem
        ),
    )
    .on_node(node)
    .with("variables", vars)
    .fix(Fix::new(fix_hint(e)).command(e.launcher.one_per_node()))
}

impl LocalGroup {
    pub(crate) fn leader_file(&self) -> PathBuf {
        with_suffix(&self.base, ".leader")
    }

    pub(crate) fn exit_file(&self) -> PathBuf {
        with_suffix(&self.base, ".exit")
    }

    fn task_file(&self, rank: u32) -> PathBuf {
        with_suffix(&self.base, &format!(".task{rank}"))
    }

    fn conflict_file(&self) -> PathBuf {
        with_suffix(&self.base, ".conflict")
    }

    pub(crate) fn dir(&self) -> &Path {
        self.base.parent().unwrap_or(Path::new("/tmp"))
    }

    /// The follower's one line: "node2 task 3: same verdict as task 0: warn (...)".
    pub fn verdict_line(&self, v: &Verdict) -> String {
        format!(
            "{}: same verdict as task 0: {} (exit code {}; local rank {} of {} under {}; task 0 is pid {} and printed the report)",
            self.who(),
            v.status,
            v.code,
            self.local_rank,
            self.local_world_size,
            self.launcher.name(),
            v.leader_pid
        )
    }

    /// "node2 task 3", for messages.
    pub fn who(&self) -> String {
        format!("{} task {}", self.host, self.local_rank)
    }

    /// A follower announces itself under its local rank; another live task with the same
    /// local rank is [`JoinError::Taken`].
    pub fn register(&self) -> Result<(), JoinError> {
        let file = self.task_file(self.local_rank);
        match create_exclusively(&file) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(other)) => Err(JoinError::Taken {
                rank: self.local_rank,
                other_pid: other.pid,
            }),
            Err(e) => Err(JoinError::Io(anyhow::Error::new(e).context(format!(
                "local task {} cannot write {}; set TMPDIR to a writable directory on this node",
                self.local_rank,
                file.display()
            )))),
        }
    }

    /// Tells the leader what this task found wrong with the layout (best effort).
    pub fn note_conflict(&self, text: &str) {
        let _ = write_atomically(&self.conflict_file(), &format!("{text}\n"));
    }

    /// What a conflicting task of this run wrote, if any.
    pub fn conflict(&self) -> Option<String> {
        read_owned(&self.conflict_file(), 4096).map(|s| s.trim().to_string())
    }

    /// The followers (local ranks 1..size) that have not announced themselves within `grace`.
    pub fn missing_followers(&self, grace: Duration) -> Vec<u32> {
        let started = Instant::now();
        loop {
            let missing: Vec<u32> = (1..self.local_world_size)
                .filter(|r| read_owned(&self.task_file(*r), 256).is_none())
                .collect();
            if missing.is_empty() || started.elapsed() >= grace {
                return missing;
            }
            std::thread::sleep(POLL);
        }
    }

    /// The finding of the leader when the tasks that started are not the ones the variables
    /// announced (`conflict`: what another task found; `missing`: followers never seen).
    pub fn mismatch_finding(
        &self,
        conflict: Option<&str>,
        missing: &[u32],
        node: Option<u32>,
    ) -> Option<Finding> {
        let mut problems = Vec::new();
        if let Some(c) = conflict {
            problems.push(c.to_string());
        }
        if !missing.is_empty() {
            problems.push(format!(
                "the variables announce {} tasks on {}, but local rank{} {} never started preflight within {} s of the verdict",
                self.local_world_size,
                self.host,
                if missing.len() == 1 { "" } else { "s" },
                missing
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                FOLLOWER_GRACE.as_secs()
            ));
        }
        if problems.is_empty() {
            return None;
        }
        Some(layout_finding(
            &LayoutError {
                launcher: self.launcher,
                problem: problems.join("; "),
                vars: self.vars.clone(),
                fix: format!(
                    "start preflight as every task of the step (a wrapper must run it on every task and keep the launcher's variables), or run the preflight step with one task per node: {}",
                    self.launcher.one_per_node()
                ),
            },
            node,
        ))
    }

    /// Waits for the leader's verdict, within `limits`.
    pub fn follow(&self, limits: Limits) -> anyhow::Result<Verdict> {
        let started = Instant::now();
        let mut dead_since: Option<Instant> = None;
        // The leader last seen: an interrupted leader removes its file, and is then judged by pid.
        let mut seen: Option<Proc> = None;
        loop {
            let waited = started.elapsed();
            let leader = read_owned(&self.leader_file(), 256)
                .and_then(|s| parse_proc(&s))
                .filter(|l| self.of_this_run(*l));
            seen = leader.or(seen);
            match seen {
                None if waited >= limits.claim_wait => {
                    return Err(anyhow!(
                        "{}: no local rank 0 of {} (launcher process pid {}) announced itself in {} within {} s, so this node's verdict is unknown; start preflight itself as every task (under torchrun: torchrun --no-python ... preflight cluster; a wrapper script must `exec preflight ...`), check that the launcher's local-rank variables reach it, and give every task the same TMPDIR",
                        self.who(),
                        self.launcher.name(),
                        self.agent_pid,
                        self.dir().display(),
                        limits.claim_wait.as_secs()
                    ));
                }
                None => {}
                Some(leader) => {
                    if let Some(verdict) = self.verdict_of(leader) {
                        return Ok(verdict);
                    }
                    if is_alive(leader) {
                        dead_since = None;
                    } else {
                        // Give a write that raced with the liveness check one more look.
                        let since = *dead_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= limits.poll * 5 {
                            return Err(anyhow!(
                                "{}: local rank 0 (pid {}) ended without reporting its exit code (interrupted, killed or crashed: see its output above, and dmesg for the OOM killer); this node's result is unknown: rerun the same command",
                                self.who(),
                                leader.pid
                            ));
                        }
                    }
                    if waited >= limits.total {
                        return Err(anyhow!(
                            "{}: local rank 0 (pid {}) is still running after {} s; gave up waiting for it (its own --timeout should have ended it: see its output)",
                            self.who(),
                            leader.pid,
                            waited.as_secs()
                        ));
                    }
                }
            }
            std::thread::sleep(limits.poll);
        }
    }

    /// Without the launcher's process in the key (`agent_pid` 0), a name can come back with a
    /// later run of the same ids (a reused pid in MPICH's kvs name): a leader that started
    /// more than the claim wait before this task belongs to an earlier run and is not read.
    fn of_this_run(&self, leader: Proc) -> bool {
        if self.agent_pid != 0 {
            return true;
        }
        // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
        let ticks = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
            .ok()
            .filter(|t| *t > 0)
            .unwrap_or(100);
        leader.start.saturating_add(CLAIM_WAIT.as_secs() * ticks) >= own_proc().start
    }

    /// The verdict in `<key>.exit` when it was written by `leader`.
    fn verdict_of(&self, leader: Proc) -> Option<Verdict> {
        let text = read_owned(&self.exit_file(), 256)?;
        let mut words = text.split_whitespace();
        let code: u8 = words.next()?.parse().ok()?;
        let writer = Proc {
            pid: words.next()?.parse().ok()?,
            start: words.next()?.parse().ok()?,
        };
        let status = words.next().unwrap_or("unknown").to_string();
        (writer == leader).then_some(Verdict {
            code,
            status,
            leader_pid: leader.pid,
        })
    }
}

/// Creates `path` holding this process (`"<pid> <start>"`) unless another live process holds
/// it (`Ok(Err(that process))`); a file of a dead process is replaced.
pub(crate) fn create_exclusively(path: &Path) -> std::io::Result<Result<(), Proc>> {
    let me = own_proc();
    let text = format!("{} {}\n", me.pid, me.start);
    for _ in 0..3 {
        let tmp = with_suffix(path, &format!(".{}.tmp", me.pid));
        let _ = std::fs::remove_file(&tmp);
        write_new(&tmp, &text)?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => return Ok(Ok(())),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match read_owned(path, 256).and_then(|s| parse_proc(&s)) {
                    Some(other) if other == me => return Ok(Ok(())),
                    Some(other) if is_alive(other) => return Ok(Err(other)),
                    _ => {
                        let _ = std::fs::remove_file(path);
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "{} kept reappearing",
        path.display()
    )))
}

fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
}

fn with_suffix(base: &Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

pub(crate) fn own_proc() -> Proc {
    let pid = std::process::id();
    Proc {
        pid,
        start: proc_start(pid).unwrap_or(0),
    }
}

/// `"<pid> <start>"`.
fn parse_proc(s: &str) -> Option<Proc> {
    let mut w = s.split_whitespace();
    let pid = w.next()?.parse().ok()?;
    let start = w.next()?.parse().ok()?;
    Some(Proc { pid, start })
}

/// A process's state letter and start time from `/proc/<pid>/stat` (fields 3 and 22).
fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command (field 2) is in parentheses and may hold spaces and ')': split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// A process's parent (field 4 of `/proc/<pid>/stat`).
fn proc_ppid(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn proc_start(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, start)| start)
}

/// Running (not a zombie) and the same process, not a later one that reused the pid.
fn is_alive(p: Proc) -> bool {
    matches!(proc_stat(p.pid), Some((state, start)) if start == p.start && state != 'Z' && state != 'X')
}

/// The file's text when it exists, is small, and belongs to this user.
fn read_owned(path: &Path, cap: u64) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.uid() != current_uid() || meta.len() > cap {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Writes to a fresh temporary name in the same directory, then renames over `path`.
pub(crate) fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = with_suffix(path, &format!(".{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes this user's group files whose torchrun agent is gone (bounded scan).
pub(crate) fn remove_finished_runs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mine = format!("{PREFIX}{}-", current_uid());
    for entry in entries.take(MAX_SCAN).flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&mine)) else {
            continue;
        };
        let mut parts = rest.split(['-', '.']);
        let agent = parts.next().zip(parts.next()).and_then(|(p, s)| {
            Some(Proc {
                pid: p.parse().ok()?,
                start: s.parse().ok()?,
            })
        });
        // Agent 0: the launcher's process was not found; such files are named by the run's ids.
        if agent.is_some_and(|a| a.pid != 0 && !is_alive(a)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests;

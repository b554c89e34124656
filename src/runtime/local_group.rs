//! Under torchrun, one preflight per node: local rank 0 takes part, the other local ranks wait for it and exit with its status.
//!
//! `torchrun --nproc-per-node=G ... preflight cluster` starts G copies on every node. Only the
//! copy with `LOCAL_RANK=0` (the leader) joins the cluster; the others (followers) wait for it
//! and exit with its exit code, so torchrun sees one verdict per node.
//!
//! The leader and its followers meet through two small files in `$TMPDIR` (else /tmp), named
//! after this user, the parent torchrun agent's pid and start time (from `/proc/<ppid>/stat`),
//! `TORCHELASTIC_RESTART_COUNT` and a hash of `TORCHELASTIC_RUN_ID`. A file of an earlier run
//! can never carry the same name, so it is never read:
//!
//! - `<key>.leader`: `"<pid> <start>"`, written by the leader before it does anything else;
//! - `<key>.exit`: `"<code> <pid> <start>"`, written by the leader when it is done.
//!
//! Both are written to a temporary name and renamed, so a reader sees all or nothing, and a
//! reader accepts only files owned by its own user. A follower polls (bounded): it exits with
//! the leader's code, or with 2 when the leader dies without writing one, never announces
//! itself, or outlives the generous cap.
//!
//! A leader stopped by SIGINT/SIGTERM before it published its code removes both files (they are
//! registered in `cleanup` from the claim until the publication); its followers, which saw it,
//! then judge it by pid like a leader that died.

use crate::cleanup;
use crate::placement;
use crate::transport::events::Events;
use anyhow::{Context, anyhow};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// File name prefix of every group file.
const PREFIX: &str = "preflight-local-";
/// Directory entries looked at when removing files of finished runs.
const MAX_SCAN: usize = 10_000;
/// How long followers wait for the leader to announce itself (torchrun starts all local ranks together).
const CLAIM_WAIT: Duration = Duration::from_secs(60);
/// Time past the join timeout a follower still waits for a live leader (the measurement phases).
const LEADER_MARGIN: Duration = Duration::from_secs(600);
/// How often a follower looks.
const POLL: Duration = Duration::from_millis(100);

/// This process's place among the local ranks torchrun started on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalGroup {
    pub local_rank: u32,
    pub local_world_size: u32,
    /// `<dir>/<prefix><key>`; the two files add `.leader` and `.exit`.
    base: PathBuf,
    /// The parent torchrun agent's pid, for messages.
    agent_pid: u32,
}

/// A process as named in the files: pid and start time (clock ticks since boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Proc {
    pid: u32,
    start: u64,
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

/// The local group this process belongs to: `None` when not under torchrun, or alone on its node.
pub fn detect(env: &BTreeMap<String, String>) -> anyhow::Result<Option<LocalGroup>> {
    if !placement::under_torchrun(env) {
        return Ok(None);
    }
    let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let (Some(lws), Some(lr)) = (get("LOCAL_WORLD_SIZE"), get("LOCAL_RANK")) else {
        return Ok(None);
    };
    let local_world_size: u32 = lws.parse().map_err(|_| {
        anyhow!("LOCAL_WORLD_SIZE={lws:?} is not a number of processes; torchrun sets it: run preflight as torchrun's entry point (torchrun --no-python ... preflight cluster)")
    })?;
    let local_rank: u32 = lr.parse().map_err(|_| {
        anyhow!("LOCAL_RANK={lr:?} is not a local rank; torchrun sets it: run preflight as torchrun's entry point (torchrun --no-python ... preflight cluster)")
    })?;
    if local_world_size <= 1 {
        return Ok(None);
    }
    if local_rank >= local_world_size {
        return Err(anyhow!(
            "LOCAL_RANK={local_rank} is not below LOCAL_WORLD_SIZE={local_world_size}; unset both, or run under torchrun which sets them"
        ));
    }
    let agent_pid = std::os::unix::process::parent_id();
    let agent_start = proc_start(agent_pid).unwrap_or(0);
    let dir = get("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    let key = group_key(
        current_uid(),
        agent_pid,
        agent_start,
        get("TORCHELASTIC_RESTART_COUNT").unwrap_or("0"),
        get("TORCHELASTIC_RUN_ID").unwrap_or("none"),
    );
    Ok(Some(LocalGroup {
        local_rank,
        local_world_size,
        base: dir.join(format!("{PREFIX}{key}")),
        agent_pid,
    }))
}

/// `<uid>-<agent pid>-<agent start>-<restart count>-<run id hash>`: the uid and agent first, for cleanup.
fn group_key(uid: u32, agent_pid: u32, agent_start: u64, restart: &str, run_id: &str) -> String {
    let digest = Sha256::digest(format!("{restart}\0{run_id}").as_bytes());
    let hash: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{uid}-{agent_pid}-{agent_start}-{hash}")
}

impl LocalGroup {
    fn leader_file(&self) -> PathBuf {
        with_suffix(&self.base, ".leader")
    }

    fn exit_file(&self) -> PathBuf {
        with_suffix(&self.base, ".exit")
    }

    fn dir(&self) -> &Path {
        self.base.parent().unwrap_or(Path::new("/tmp"))
    }

    /// The leader announces itself (after removing files of finished runs). Both group files
    /// stay registered in [`cleanup::global`] while the guard lives, so an interrupted leader
    /// removes them; drop the guard after [`publish`](Self::publish), when the followers need them.
    pub fn claim(&self) -> anyhow::Result<cleanup::Guard<'static>> {
        remove_finished_runs(self.dir());
        let me = own_proc();
        let _ = std::fs::remove_file(self.exit_file());
        let (leader, exit) = (self.leader_file(), self.exit_file());
        let made = cleanup::global().make(
            || write_atomically(&leader, &format!("{} {}\n", me.pid, me.start)),
            |()| {
                vec![
                    cleanup::Undo::Path(leader.clone()),
                    cleanup::Undo::Path(exit.clone()),
                ]
            },
        );
        let ((), guard) = made.with_context(|| {
            format!(
                "local rank 0 cannot write {} for the other local ranks; set TMPDIR to a writable directory on this node",
                leader.display()
            )
        })?;
        Ok(guard)
    }

    /// The leader's exit code, for the followers.
    /// Refused once an interrupted run is cleaning up, so no file is written after the
    /// cleanup removed the group's files.
    pub fn publish(&self, code: u8) -> anyhow::Result<()> {
        let me = own_proc();
        let text = format!("{code} {} {}\n", me.pid, me.start);
        cleanup::global()
            .make(
                || write_atomically(&self.exit_file(), &text),
                |()| Vec::new(),
            )
            .map(|((), _nothing_new)| ())
            .with_context(|| format!("cannot write {}", self.exit_file().display()))
    }

    /// Waits for the leader's exit code, within `limits`.
    pub fn follow(&self, limits: Limits, events: &Events) -> anyhow::Result<u8> {
        let started = Instant::now();
        let mut dead_since: Option<Instant> = None;
        // The leader last seen: an interrupted leader removes its file, and is then judged by pid.
        let mut seen: Option<Proc> = None;
        loop {
            let waited = started.elapsed();
            let leader = read_owned(&self.leader_file()).and_then(|s| parse_proc(&s));
            seen = leader.or(seen);
            match seen {
                None if waited >= limits.claim_wait => {
                    return Err(anyhow!(
                        "local rank {}: no local rank 0 of torchrun agent pid {} announced itself in {} within {} s; run preflight itself as torchrun's entry point (torchrun --no-python ... preflight cluster; a wrapper script must `exec preflight ...`) and give every local rank the same TMPDIR",
                        self.local_rank,
                        self.agent_pid,
                        self.dir().display(),
                        limits.claim_wait.as_secs()
                    ));
                }
                None => {}
                Some(leader) => {
                    if let Some(code) = self.exit_code_of(leader) {
                        events.log(format!(
                            "local rank 0 (pid {}) finished with exit code {code}",
                            leader.pid
                        ));
                        return Ok(code);
                    }
                    if is_alive(leader) {
                        dead_since = None;
                    } else {
                        // Give a write that raced with the liveness check one more look.
                        let since = *dead_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= limits.poll * 5 {
                            return Err(anyhow!(
                                "local rank 0 (pid {}) ended without reporting its exit code (interrupted, killed or crashed: see its output above, and dmesg for the OOM killer); this node's result is unknown: rerun the same torchrun command",
                                leader.pid
                            ));
                        }
                    }
                    if waited >= limits.total {
                        return Err(anyhow!(
                            "local rank 0 (pid {}) is still running after {} s; gave up waiting for it (its own --timeout should have ended it: see its output)",
                            leader.pid,
                            waited.as_secs()
                        ));
                    }
                }
            }
            std::thread::sleep(limits.poll);
        }
    }

    /// The exit code in `<key>.exit` when it was written by `leader`.
    fn exit_code_of(&self, leader: Proc) -> Option<u8> {
        let text = read_owned(&self.exit_file())?;
        let mut words = text.split_whitespace();
        let code: u8 = words.next()?.parse().ok()?;
        let writer = parse_proc(&words.collect::<Vec<_>>().join(" "))?;
        (writer == leader).then_some(code)
    }
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

fn own_proc() -> Proc {
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

fn proc_start(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, start)| start)
}

/// Running (not a zombie) and the same process, not a later one that reused the pid.
fn is_alive(p: Proc) -> bool {
    matches!(proc_stat(p.pid), Some((state, start)) if start == p.start && state != 'Z' && state != 'X')
}

/// The file's text when it exists, is small, and belongs to this user.
fn read_owned(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.uid() != current_uid() || meta.len() > 256 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Writes to a fresh temporary name in the same directory, then renames over `path`.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
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
fn remove_finished_runs(dir: &Path) {
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
        if agent.is_some_and(|a| !is_alive(a)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn group_in(dir: &Path, local_rank: u32) -> LocalGroup {
        LocalGroup {
            local_rank,
            local_world_size: 2,
            base: dir.join(format!("{PREFIX}{}-test", current_uid())),
            agent_pid: std::os::unix::process::parent_id(),
        }
    }

    fn quick() -> Limits {
        Limits {
            claim_wait: Duration::from_millis(300),
            total: Duration::from_secs(5),
            poll: Duration::from_millis(10),
        }
    }

    /// A pid whose process has ended and been reaped.
    fn dead_proc() -> Proc {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        let start = proc_start(pid).unwrap_or(1);
        child.wait().expect("wait");
        Proc { pid, start }
    }

    #[test]
    fn detects_torchrun_local_ranks_only() {
        let g = detect(&env(&[
            ("TORCHELASTIC_RUN_ID", "job1"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "4"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((g.local_rank, g.local_world_size), (1, 4));
        assert!(
            g.base
                .to_string_lossy()
                .starts_with(&format!("/tmp/{PREFIX}{}-", current_uid()))
        );
        // Not torchrun, alone on the node, or no LOCAL_RANK: no group.
        assert_eq!(detect(&env(&[("LOCAL_RANK", "1")])).unwrap(), None);
        let alone = [
            ("GROUP_RANK", "0"),
            ("LOCAL_RANK", "0"),
            ("LOCAL_WORLD_SIZE", "1"),
        ];
        assert_eq!(detect(&env(&alone)).unwrap(), None);
        assert_eq!(detect(&env(&[("LOCAL_WORLD_SIZE", "2")])).unwrap(), None);
        // Garbage is named.
        let e = detect(&env(&[("LOCAL_WORLD_SIZE", "2"), ("LOCAL_RANK", "x")])).unwrap_err();
        assert!(e.to_string().contains("LOCAL_RANK=\"x\""), "{e}");
        let e = detect(&env(&[("LOCAL_WORLD_SIZE", "2"), ("LOCAL_RANK", "2")])).unwrap_err();
        assert!(
            e.to_string().contains("not below LOCAL_WORLD_SIZE=2"),
            "{e}"
        );
    }

    #[test]
    fn key_changes_with_agent_restart_and_run_id() {
        let k = group_key(1000, 42, 777, "0", "job");
        assert!(k.starts_with("1000-42-777-"), "{k}");
        assert_ne!(k, group_key(1000, 42, 778, "0", "job"));
        assert_ne!(k, group_key(1000, 42, 777, "1", "job"));
        assert_ne!(k, group_key(1000, 42, 777, "0", "job2"));
        assert_eq!(k, group_key(1000, 42, 777, "0", "job"));
    }

    #[test]
    fn reads_its_own_start_time_and_sees_itself_alive() {
        let me = own_proc();
        assert!(me.start > 0);
        assert!(is_alive(me));
        assert!(!is_alive(Proc {
            start: me.start + 1,
            ..me
        }));
        assert!(!is_alive(dead_proc()));
    }

    #[test]
    fn follower_gets_the_leaders_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let leader = group_in(dir.path(), 0);
        let _files = leader.claim().unwrap();
        let follower = group_in(dir.path(), 1);
        let waiter = std::thread::spawn(move || follower.follow(quick(), &Events::none()));
        std::thread::sleep(Duration::from_millis(50));
        leader.publish(1).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), 1);
    }

    #[test]
    fn an_exit_file_from_another_leader_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let g = group_in(dir.path(), 1);
        let dead = dead_proc();
        // The claim names this (live) process; the exit file was written by someone else.
        let me = own_proc();
        std::fs::write(g.leader_file(), format!("{} {}\n", me.pid, me.start)).unwrap();
        std::fs::write(g.exit_file(), format!("0 {} {}\n", dead.pid, dead.start)).unwrap();
        let e = g
            .follow(
                Limits {
                    total: Duration::from_millis(200),
                    ..quick()
                },
                &Events::none(),
            )
            .unwrap_err();
        assert!(e.to_string().contains("still running"), "{e}");
    }

    #[test]
    fn a_leader_that_died_silently_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let g = group_in(dir.path(), 1);
        let dead = dead_proc();
        std::fs::write(g.leader_file(), format!("{} {}\n", dead.pid, dead.start)).unwrap();
        let t = Instant::now();
        let e = g.follow(quick(), &Events::none()).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(2));
        let s = e.to_string();
        assert!(s.contains(&format!("pid {}", dead.pid)), "{s}");
        assert!(s.contains("without reporting its exit code"), "{s}");
    }

    #[test]
    fn the_claim_registers_both_files_for_an_interrupted_leader() {
        let dir = tempfile::tempdir().unwrap();
        let g = group_in(dir.path(), 0);
        let files = g.claim().unwrap();
        assert!(g.leader_file().is_file());
        assert_eq!(
            files.entries(),
            vec![
                cleanup::Undo::Path(g.leader_file()),
                cleanup::Undo::Path(g.exit_file())
            ]
        );
        g.publish(0).unwrap();
        // Dropped after the publication: the files stay for the followers.
        drop(files);
        assert!(g.leader_file().is_file() && g.exit_file().is_file());
    }

    #[test]
    fn a_leader_whose_file_vanished_is_judged_by_its_pid() {
        let dir = tempfile::tempdir().unwrap();
        let g = group_in(dir.path(), 1);
        let mut leader = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = leader.id();
        let start = proc_start(pid).expect("start time");
        std::fs::write(g.leader_file(), format!("{pid} {start}\n")).unwrap();
        let file = g.leader_file();
        let follower = std::thread::spawn(move || g.follow(quick(), &Events::none()));
        std::thread::sleep(Duration::from_millis(100));
        // As an interrupted leader does: remove the file, then exit.
        std::fs::remove_file(&file).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        leader.kill().unwrap();
        leader.wait().unwrap();
        let t = Instant::now();
        let e = follower.join().unwrap().unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(
            e.to_string()
                .contains(&format!("local rank 0 (pid {pid}) ended without reporting")),
            "{e}"
        );
    }

    #[test]
    fn no_leader_at_all_ends_after_the_claim_wait() {
        let dir = tempfile::tempdir().unwrap();
        let e = group_in(dir.path(), 1)
            .follow(quick(), &Events::none())
            .unwrap_err();
        assert!(e.to_string().contains("no local rank 0"), "{e}");
        assert!(e.to_string().contains("exec preflight"), "{e}");
    }

    #[test]
    fn files_of_finished_agents_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let uid = current_uid();
        let dead = dead_proc();
        let me = own_proc();
        let stale = dir.path().join(format!(
            "{PREFIX}{uid}-{}-{}-abc.exit",
            dead.pid, dead.start
        ));
        let live = dir
            .path()
            .join(format!("{PREFIX}{uid}-{}-{}-abc.exit", me.pid, me.start));
        let other = dir.path().join("unrelated.txt");
        for f in [&stale, &live, &other] {
            std::fs::write(f, "0 1 1\n").unwrap();
        }
        remove_finished_runs(dir.path());
        assert!(!stale.exists());
        assert!(live.exists());
        assert!(other.exists());
    }
}

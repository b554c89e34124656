//! What an interrupted preflight must undo: child process groups to kill and temp paths to remove.
//!
//! Whoever starts a child process group or creates a temp file registers it here through
//! [`Registry::make`] and keeps the returned [`Guard`]; when the owner finishes normally (it
//! reaped its child, removed its dir) it drops the guard, which unregisters the entry. On
//! SIGINT/SIGTERM, `app`'s signal thread calls [`Registry::drain`] on [`global`]: every
//! registered group gets SIGTERM, then SIGKILL after a grace period, and every registered
//! path is removed; then `app` exits.
//!
//! [`Registry::make`] runs the creation under the registry's lock, so a drain sees either
//! nothing or the registered entry, never a child or a dir in between; once a drain started,
//! `make` refuses (`ErrorKind::Interrupted`) rather than create what nobody would undo.
//!
//! Layer 0: it names nothing else in the crate and never prints.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a process group has between SIGTERM and SIGKILL when preflight is interrupted.
pub const TERM_GRACE: Duration = Duration::from_secs(1);
/// How long a drain waits for SIGKILLed groups to be gone before removing paths.
const KILL_WAIT: Duration = Duration::from_millis(500);
/// How often a drain looks whether the groups are gone.
const POLL: Duration = Duration::from_millis(10);
/// Directory entries of /proc looked at when searching a group's members.
const MAX_PROC_SCAN: usize = 100_000;

/// One thing to undo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undo {
    /// The process group with this id (a child started with `process_group(0)`: its pid).
    Group(i32),
    /// A file or directory (removed with its contents); a missing one is fine.
    Path(PathBuf),
}

#[derive(Debug)]
struct State {
    next: u64,
    entries: BTreeMap<u64, Undo>,
    /// A drain has started: nothing new may be made.
    draining: bool,
    /// The groups the drain took, for [`Registry::kill_now`].
    draining_groups: Vec<i32>,
}

/// What to undo, by id; see the module docs.
#[derive(Debug)]
pub struct Registry {
    state: Mutex<State>,
}

/// Registered entries; dropping it unregisters them (the owner undid them itself, or keeps them on purpose).
#[must_use = "dropping the guard unregisters at once"]
#[derive(Debug)]
pub struct Guard<'a> {
    registry: &'a Registry,
    ids: Vec<u64>,
}

/// What a drain did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Process groups signalled.
    pub groups: usize,
    /// Groups that needed SIGKILL after the grace period.
    pub killed: usize,
    /// Groups with a live member even after SIGKILL and a short wait.
    pub stubborn: Vec<i32>,
    /// Paths that existed and were removed.
    pub removed: Vec<PathBuf>,
    /// Paths that could not be removed, with why.
    pub failed: Vec<(PathBuf, String)>,
}

static GLOBAL: Registry = Registry::new();

/// The process-wide registry the signal handler drains.
pub fn global() -> &'static Registry {
    &GLOBAL
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    pub const fn new() -> Registry {
        Registry {
            state: Mutex::new(State {
                next: 0,
                entries: BTreeMap::new(),
                draining: false,
                draining_groups: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `make` and registers what `undo` says undoes its result, atomically with respect
    /// to [`drain`](Self::drain). Once a drain started, `make` is not run and the answer is
    /// `ErrorKind::Interrupted`.
    pub fn make<T>(
        &self,
        make: impl FnOnce() -> io::Result<T>,
        undo: impl FnOnce(&T) -> Vec<Undo>,
    ) -> io::Result<(T, Guard<'_>)> {
        let mut state = self.lock();
        if state.draining {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "preflight is being interrupted: cleaning up, not starting anything new",
            ));
        }
        let made = make()?;
        let ids = undo(&made)
            .into_iter()
            .map(|u| {
                let id = state.next;
                state.next += 1;
                state.entries.insert(id, u);
                id
            })
            .collect();
        Ok((
            made,
            Guard {
                registry: self,
                ids,
            },
        ))
    }

    /// How many entries are registered.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a drain has started (the process is about to exit).
    pub fn is_draining(&self) -> bool {
        self.lock().draining
    }

    /// Undoes everything registered (bounded: about `grace` + 0.5 s): SIGTERM to every group,
    /// SIGKILL to those with a live member after `grace`, then removes every path. From now
    /// on [`make`](Self::make) refuses.
    pub fn drain(&self, grace: Duration) -> Drained {
        let (entries, groups) = {
            let mut state = self.lock();
            state.draining = true;
            let entries: Vec<Undo> = std::mem::take(&mut state.entries).into_values().collect();
            let groups = groups_of(&entries);
            state.draining_groups.extend(&groups);
            (entries, groups)
        };
        let mut done = Drained {
            groups: groups.len(),
            ..Drained::default()
        };
        for &g in &groups {
            signal_group(g, libc::SIGTERM);
        }
        let left = wait_gone(&groups, grace);
        done.killed = left.len();
        for &g in &left {
            signal_group(g, libc::SIGKILL);
        }
        done.stubborn = wait_gone(&left, KILL_WAIT);
        for u in entries {
            if let Undo::Path(p) = u {
                match remove(&p) {
                    Ok(true) => done.removed.push(p),
                    Ok(false) => {}
                    Err(e) => done.failed.push((p, e.to_string())),
                }
            }
        }
        done
    }
}

impl Registry {
    /// SIGKILL to every registered group and every group a drain is ending, without waiting
    /// and without blocking (when the lock is busy this does nothing): for a second signal,
    /// just before exiting at once. Paths are left alone.
    pub fn kill_now(&self) -> usize {
        let state = match self.state.try_lock() {
            Ok(s) => s,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return 0,
        };
        let entries: Vec<Undo> = state.entries.values().cloned().collect();
        let mut groups = groups_of(&entries);
        groups.extend(&state.draining_groups);
        drop(state);
        for &g in &groups {
            signal_group(g, libc::SIGKILL);
        }
        groups.len()
    }
}

/// The process groups among `entries` (never 0 or 1: kill(-1) would signal everything).
fn groups_of(entries: &[Undo]) -> Vec<i32> {
    entries
        .iter()
        .filter_map(|u| match u {
            Undo::Group(g) if *g > 1 => Some(*g),
            _ => None,
        })
        .collect()
}

impl Guard<'_> {
    /// What this guard keeps registered (for tests and messages).
    pub fn entries(&self) -> Vec<Undo> {
        let state = self.registry.lock();
        self.ids
            .iter()
            .filter_map(|id| state.entries.get(id).cloned())
            .collect()
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let mut state = self.registry.lock();
        for id in &self.ids {
            state.entries.remove(id);
        }
    }
}

/// kill(2) to every process of group `g`.
fn signal_group(g: i32, sig: i32) {
    // SAFETY: plain kill(2) on a process group this process registered (its own child's).
    unsafe {
        libc::kill(-g, sig);
    }
}

/// Waits until no group in `groups` has a live (not zombie) member, at most `limit`; returns those that still have one.
fn wait_gone(groups: &[i32], limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left: Vec<i32> = groups.iter().copied().filter(|&g| group_alive(g)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(POLL);
    }
}

/// Whether group `g` has a member that is not a zombie (a zombie waits for its parent to reap it
/// and holds nothing). Without a readable /proc, any member counts.
pub fn group_alive(g: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the group exists.
    if unsafe { libc::kill(-g, 0) } != 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.take(MAX_PROC_SCAN)
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat_state_and_group)
        .any(|(state, pgrp)| pgrp == g && state != 'Z' && state != 'X')
}

/// State letter and process group from `/proc/<pid>/stat` (fields 3 and 5).
fn stat_state_and_group(pid: u32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Removes a file or a directory tree; Ok(false) when it was not there.
fn remove(p: &Path) -> io::Result<bool> {
    let meta = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let removed = if meta.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        std::fs::remove_file(p)
    };
    match removed {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    /// `sh -c 'sleep 30 & sleep 30; wait'` as the leader of its own group: a leader and a grandchild.
    fn sleeping_group() -> Child {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30; wait"])
            .process_group(0);
        cmd.spawn().expect("spawn sh")
    }

    fn pgid(child: &Child) -> i32 {
        i32::try_from(child.id()).expect("pid")
    }

    /// Reaps `child` on a thread (as the NCCL watchdog does), so its zombie does not linger.
    fn reap_in_background(mut child: Child) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let _ = child.wait();
        })
    }

    #[test]
    fn make_registers_and_dropping_the_guard_unregisters() {
        let r = Registry::new();
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("x");
        let (made, guard) = r
            .make(
                || std::fs::write(&path, b"x").map(|()| 7),
                |_| vec![Undo::Path(path.clone()), Undo::Group(12345)],
            )
            .expect("make");
        assert_eq!(made, 7);
        assert_eq!(r.len(), 2);
        assert_eq!(
            guard.entries(),
            vec![Undo::Path(path.clone()), Undo::Group(12345)]
        );
        drop(guard);
        assert!(r.is_empty());
        // Unregistered: a drain leaves the file alone.
        assert_eq!(r.drain(Duration::ZERO), Drained::default());
        assert!(path.exists());
    }

    #[test]
    fn a_failed_make_registers_nothing() {
        let r = Registry::new();
        let e = r
            .make(
                || -> io::Result<()> { Err(io::Error::other("no")) },
                |_| vec![Undo::Group(1)],
            )
            .expect_err("fails");
        assert_eq!(e.to_string(), "no");
        assert!(r.is_empty());
    }

    #[test]
    fn drain_kills_a_real_process_group_and_removes_a_temp_dir() {
        let r = Registry::new();
        let (child, _group) = r
            .make(|| Ok(sleeping_group()), |c| vec![Undo::Group(pgid(c))])
            .expect("spawn");
        let g = pgid(&child);
        let reaper = reap_in_background(child);
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("preflight-nccl-test");
        let (_, _dir) = r
            .make(
                || {
                    std::fs::create_dir(&dir)?;
                    std::fs::write(dir.join("nccl.log"), b"log")
                },
                |_| vec![Undo::Path(dir.clone())],
            )
            .expect("dir");
        // Both sleeps are up before the drain.
        let t0 = Instant::now();
        while members(g) < 3 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(POLL);
        }
        assert_eq!(members(g), 3, "sh and two sleeps in group {g}");

        let t0 = Instant::now();
        let done = r.drain(TERM_GRACE);
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!(done.groups, 1);
        assert!(done.stubborn.is_empty(), "{done:?}");
        assert_eq!(done.removed, vec![dir.clone()]);
        assert!(!dir.exists());
        assert!(!group_alive(g), "group {g} survived the drain");
        reaper.join().expect("reaped");
        assert!(r.is_empty());
    }

    #[test]
    fn a_group_that_ignores_sigterm_gets_sigkill_after_the_grace() {
        let r = Registry::new();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; echo up; while :; do sleep 0.05; done"])
            .stdout(std::process::Stdio::piped())
            .process_group(0);
        let (mut child, _g) = r
            .make(|| cmd.spawn(), |c| vec![Undo::Group(pgid(c))])
            .expect("spawn");
        let g = pgid(&child);
        // Wait for the trap to be set.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("read");
        let reaper = reap_in_background(child);
        let t0 = Instant::now();
        let done = r.drain(Duration::from_millis(200));
        assert!(t0.elapsed() >= Duration::from_millis(200));
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert_eq!((done.groups, done.killed), (1, 1), "{done:?}");
        assert!(done.stubborn.is_empty(), "{done:?}");
        assert!(!group_alive(g));
        reaper.join().expect("reaped");
    }

    #[test]
    fn kill_now_ends_a_group_a_slow_drain_is_still_waiting_for() {
        let r = Registry::new();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; echo up; sleep 30"])
            .stdout(std::process::Stdio::piped())
            .process_group(0);
        let (mut child, _g) = r
            .make(|| cmd.spawn(), |c| vec![Undo::Group(pgid(c))])
            .expect("spawn");
        let g = pgid(&child);
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("read");
        let reaper = reap_in_background(child);
        std::thread::scope(|s| {
            // The drain waits out its 30 s grace on a group that ignores SIGTERM...
            let drain = s.spawn(|| r.drain(Duration::from_secs(30)));
            let t0 = Instant::now();
            while !r.is_draining() {
                std::thread::sleep(POLL);
            }
            std::thread::sleep(Duration::from_millis(50));
            assert!(group_alive(g), "SIGTERM is ignored");
            // ...and a second signal does not wait for it.
            assert_eq!(r.kill_now(), 1);
            let t1 = Instant::now();
            while group_alive(g) && t1.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(POLL);
            }
            assert!(!group_alive(g), "SIGKILL ends the group at once");
            let done = drain.join().expect("drain");
            assert_eq!(done.killed, 0, "{done:?}");
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        });
        reaper.join().expect("reaped");
    }

    #[test]
    fn nothing_new_is_made_once_a_drain_started() {
        let r = Registry::new();
        let _ = r.drain(Duration::ZERO);
        let mut ran = false;
        let e = r
            .make(
                || {
                    ran = true;
                    Ok(())
                },
                |_| Vec::new(),
            )
            .expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        assert!(!ran);
    }

    #[test]
    fn a_missing_path_is_not_an_error() {
        let r = Registry::new();
        let tmp = tempfile::tempdir().expect("tmp");
        let gone = tmp.path().join("never-made");
        let (_, _g) = r.make(|| Ok(()), |_| vec![Undo::Path(gone)]).expect("make");
        let done = r.drain(Duration::ZERO);
        assert!(
            done.removed.is_empty() && done.failed.is_empty(),
            "{done:?}"
        );
    }

    /// Live members of group `g`.
    fn members(g: i32) -> usize {
        std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(stat_state_and_group)
            .filter(|&(s, p)| p == g && s != 'Z')
            .count()
    }
}

//! A worker child under supervision (the NCCL and GEMM workers): which program runs it, its own
//! process group killed with its spawning thread and by SIGINT/SIGTERM of preflight, the tail
//! of its stderr, and how it exited, in words.

use crate::cleanup;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};

/// Lines of the worker's stderr kept for error messages.
const STDERR_LINES: usize = 20;
/// Longest stderr line kept (longer ones are cut).
const STDERR_LINE_MAX: usize = 500;
/// The program to run: the explicit one, else the test hook's variable (`env_value`, when not
/// empty), else this executable (whose hidden subcommand is the worker).
pub(crate) fn worker_program(
    explicit: Option<&Path>,
    env_value: Option<OsString>,
) -> std::io::Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(v) = env_value.filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(v));
    }
    std::env::current_exe()
}

/// Spawns `cmd` as the leader of its own process group (so a watchdog and the signal handler
/// can kill anything it started too), dying with the spawning thread ([`die_with_parent`]),
/// and registered with `cleanup` until the returned guard is dropped, after the child is
/// reaped: SIGINT/SIGTERM of preflight kill the group.
pub(crate) fn spawn_supervised(
    cmd: &mut Command,
) -> std::io::Result<(Child, cleanup::Guard<'static>)> {
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    die_with_parent(cmd);
    cleanup::global().make(
        || cmd.spawn(),
        |c| {
            i32::try_from(c.id())
                .map(|pid| vec![cleanup::Undo::Group(pid)])
                .unwrap_or_default()
        },
    )
}

/// The worker gets SIGKILL when the thread that spawned it ends (`PR_SET_PDEATHSIG`), so even a
/// `kill -9` of preflight (no handler runs) cannot leave a worker holding GPUs. The kernel ties
/// the signal to the spawning *thread*: a worker must be started from a thread that outlives
/// the worker (the node agent's main thread does).
pub(crate) fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: between fork and exec the closure calls only async-signal-safe functions
    // (prctl, getppid) and builds errors without allocating.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal would ever come.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// SIGKILL to the child's process group (the child is not yet reaped, so the id is still its own).
pub(crate) fn kill_group(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: plain kill(2) on the group the child leads.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// Reads and drops the rest of an over-long line, in bounded chunks.
pub(crate) fn skip_rest_of_line(reader: &mut impl BufRead) {
    loop {
        let mut chunk = Vec::new();
        match reader.take(1 << 16).read_until(b'\n', &mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(_) if chunk.ends_with(b"\n") => return,
            Ok(_) => {}
        }
    }
}

/// Keeps the last STDERR_LINES lines of the worker's stderr, each cut to STDERR_LINE_MAX.
pub(crate) fn read_stderr(err: impl Read, keep: Arc<Mutex<VecDeque<String>>>) {
    let mut reader = BufReader::new(err);
    loop {
        let mut line = Vec::new();
        match (&mut reader).take(4096).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text: String = String::from_utf8_lossy(&line)
            .trim_end()
            .chars()
            .take(STDERR_LINE_MAX)
            .collect();
        if text.is_empty() {
            continue;
        }
        if let Ok(mut k) = keep.lock() {
            if k.len() == STDERR_LINES {
                k.pop_front();
            }
            k.push_back(text);
        }
    }
}

/// "killed by signal 6 (SIGABRT)", "exited with code 3".
pub(crate) fn describe_exit(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGABRT => " (SIGABRT: NCCL or CUDA aborted)",
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGBUS => " (SIGBUS: /dev/shm too small?)",
            libc::SIGKILL => " (SIGKILL: out of memory, or killed)",
            libc::SIGTERM => " (SIGTERM)",
            _ => "",
        };
        return format!("killed by signal {sig}{name}");
    }
    match status.code() {
        Some(0) => "exited with code 0 before finishing".into(),
        Some(c) => format!("exited with code {c}"),
        None => "ended without an exit code".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_program_prefers_explicit_then_env_then_self() {
        let p = Path::new("/x/fake");
        assert_eq!(
            worker_program(Some(p), Some("/y".into())).ok(),
            Some(p.to_path_buf())
        );
        assert_eq!(
            worker_program(None, Some("/y".into())).ok(),
            Some(PathBuf::from("/y"))
        );
        let own = std::env::current_exe().expect("exe");
        assert_eq!(
            worker_program(None, Some("".into())).ok(),
            Some(own.clone())
        );
        assert_eq!(worker_program(None, None).ok(), Some(own));
    }
}

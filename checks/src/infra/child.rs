//! The one bounded runner of external commands (firewall tools, the kernel log, Slurm's
//! clients): found on PATH or in the sbin directories, run with `LC_ALL=C` and no input,
//! stopped at a deadline, each output read on its own thread up to a byte cap so a large
//! answer can neither stall the child nor fill memory.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// After the command ends (or is stopped), how long its outputs may take to close: a
/// grandchild that left the command's process group can hold a pipe open.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Where system tools live when PATH (a Slurm prolog's, a service's) leaves them out.
pub const SYSTEM_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The first `name` on PATH, then in [`SYSTEM_DIRS`].
pub fn find_tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(SYSTEM_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What a bounded run gave.
#[derive(Debug)]
pub struct Output {
    /// How it exited; None when it was stopped at the deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    /// More than the byte cap came on stdout (the rest was dropped).
    pub stdout_truncated: bool,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// Runs `program args` with `LC_ALL=C` for at most `timeout`, keeping at most `max_bytes` of
/// each output. Err only when it cannot be started or waited for.
pub fn run(
    program: &Path,
    args: &[&str],
    timeout: Duration,
    max_bytes: usize,
) -> Result<Output, String> {
    run_with(program, args, &[], timeout, max_bytes)
}

/// [`run`] with `env` added to the child's environment (`SLURM_CONF` for Slurm's clients).
pub fn run_with(
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
    max_bytes: usize,
) -> Result<Output, String> {
    // Its own process group, so stopping it stops what it started (`sh -c`'s children) too.
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdout = child.stdout.take().map(|r| read_capped(r, max_bytes));
    let stderr = child.stderr.take().map(|r| read_capped(r, max_bytes));
    let deadline = Instant::now() + timeout;
    // Most tools finish in milliseconds: poll often at first (1, 2, 4 ms ...), then every
    // 10 ms, so a check does not wait a fixed 10 ms per command.
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                // SAFETY: kill(2) with the negative pid of the group this child leads.
                if let Ok(pgid) = i32::try_from(child.id()) {
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                }
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("waiting for {}: {e}", program.display())),
        }
    };
    let until = Instant::now() + DRAIN_GRACE;
    let collect = |rx: Option<Receiver<Vec<u8>>>| {
        rx.and_then(|rx| {
            rx.recv_timeout(until.saturating_duration_since(Instant::now()))
                .ok()
        })
        .unwrap_or_default()
    };
    let (out, err) = (collect(stdout), collect(stderr));
    let stdout_truncated = out.len() > max_bytes;
    let text = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(max_bytes)]).into_owned();
    Ok(Output {
        status,
        stdout: text(&out),
        stdout_truncated,
        stderr: text(&err),
    })
}

/// Reads up to `max_bytes + 1` bytes (one more tells a cut), then drains the rest unread so
/// the child never blocks on a full pipe; the bytes come back on a channel, so the caller's
/// wait for them is bounded.
fn read_capped<R: Read + Send + 'static>(mut r: R, max_bytes: usize) -> Receiver<Vec<u8>> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.by_ref().take(max_bytes as u64 + 1).read_to_end(&mut buf);
        let _ = tx.send(buf);
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_stopped_at_its_deadline() {
        let sh = find_tool("sh").expect("sh");
        let start = Instant::now();
        let out = run(&sh, &["-c", "sleep 5"], Duration::from_millis(200), 1024).unwrap();
        assert!(out.status.is_none());
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn output_is_capped_and_the_cut_is_said() {
        let sh = find_tool("sh").expect("sh");
        let out = run(
            &sh,
            &["-c", "head -c 100000 /dev/zero | tr '\\0' x; echo err >&2"],
            Duration::from_secs(5),
            1000,
        )
        .unwrap();
        assert!(out.success(), "{out:?}");
        assert_eq!(out.stdout.len(), 1000);
        assert!(out.stdout_truncated);
        assert_eq!(out.stderr.trim(), "err");
    }

    #[test]
    fn a_missing_program_is_an_error_not_a_panic() {
        let e = run(
            Path::new("/nonexistent/tool"),
            &[],
            Duration::from_secs(1),
            10,
        )
        .unwrap_err();
        assert!(e.contains("cannot run /nonexistent/tool"), "{e}");
    }
}

//! Runs the firewall tools: found on PATH or in the sbin directories, with `LC_ALL=C`, under a timeout, output read on threads.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest time any external command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
const SBIN_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

pub(crate) fn find_tool(name: &str) -> Option<PathBuf> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

pub(crate) struct CommandOutput {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs a command with `LC_ALL=C`, killing it after [`COMMAND_TIMEOUT`]. Output is read on
/// threads so a large ruleset cannot fill the pipe and stall the child.
pub(crate) fn run_with_timeout(program: &Path, args: &[&str]) -> Result<CommandOutput, String> {
    let mut child = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdout = child.stdout.take().map(read_on_thread);
    let stderr = child.stderr.take().map(read_on_thread);
    let deadline = Instant::now() + COMMAND_TIMEOUT;
    // These tools finish in milliseconds: poll often at first (1, 2, 4 ms ...), then every
    // 10 ms, so `check` does not wait a fixed 10 ms per tool it runs.
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
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
    let collect = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    match status {
        Some(s) => Ok(CommandOutput {
            success: s.success(),
            stdout,
            stderr,
        }),
        None => Err(format!(
            "{} timed out after {} s",
            program.display(),
            COMMAND_TIMEOUT.as_secs()
        )),
    }
}

fn read_on_thread<R: Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

pub(super) fn command_failure(tool: &str, out: &CommandOutput) -> String {
    let msg = out.stderr.trim();
    let lower = msg.to_ascii_lowercase();
    if lower.contains("permission denied") || lower.contains("operation not permitted") {
        format!("not root: {tool} was denied ({msg}); run as root to read the firewall rules")
    } else if msg.is_empty() {
        format!("{tool} failed")
    } else {
        format!("{tool} failed: {msg}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_time_out_and_report_failures() {
        let Some(sleep) = find_tool("sleep") else {
            return;
        };
        let started = Instant::now();
        let err = run_with_timeout(&sleep, &["30"]).err().expect("timed out");
        assert!(err.contains("timed out"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let out = CommandOutput {
            success: false,
            stdout: String::new(),
            stderr: "iptables-save v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)\n".into(),
        };
        assert!(command_failure("iptables-save", &out).starts_with("not root"));
    }
}

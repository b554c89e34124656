//! Runs the firewall tools through the crate's one bounded runner, and says why one failed.

use std::path::Path;
use std::time::Duration;

/// Longest time any external command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) use crate::infra::child::find_tool;

pub(crate) struct CommandOutput {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// A ruleset's text is at most this big (the largest seen are a few MiB).
const MAX_OUTPUT: usize = 64 << 20;

/// Runs a command with `LC_ALL=C` through [`crate::infra::child::run`], stopped after
/// [`COMMAND_TIMEOUT`].
pub(crate) fn run_with_timeout(program: &Path, args: &[&str]) -> Result<CommandOutput, String> {
    let out = crate::infra::child::run(program, args, COMMAND_TIMEOUT, MAX_OUTPUT)?;
    if out.status.is_none() {
        return Err(format!(
            "{} timed out after {} s",
            program.display(),
            COMMAND_TIMEOUT.as_secs()
        ));
    }
    Ok(CommandOutput {
        success: out.success(),
        stdout: out.stdout,
        stderr: out.stderr,
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
    use std::time::Instant;

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

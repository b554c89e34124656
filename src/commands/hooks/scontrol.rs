//! Slurm's own clients behind a small trait: `sinfo` reads a node's state and reason,
//! `scontrol update` drains or resumes it. Each call is bounded by [`CALL_TIMEOUT`].

use super::decide::NodeState;
use std::time::Duration;

/// Longest any one Slurm client call may take (two calls stay well inside Slurm's 60 s
/// HealthCheckTimeout and PrologTimeout).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What a hook needs from Slurm.
pub trait Slurm {
    /// The node's state and reason.
    fn node(&self, name: &str) -> Result<NodeState, String>;
    /// Runs `scontrol` with these arguments (`update NodeName=... State=...`).
    fn scontrol(&self, args: &[String]) -> Result<(), String>;
}

/// The real clients, found on PATH or in the usual directories.
pub struct Clients;

impl Slurm for Clients {
    fn node(&self, name: &str) -> Result<NodeState, String> {
        let out = run("sinfo", &["-h", "-N", "-n", name, "-o", "%T|%E"])?;
        parse_sinfo(&out).ok_or_else(|| {
            format!(
                "sinfo does not know node {} (check the NodeName in slurm.conf, or give --slurm-node)",
                preflight_checks::shellword::quoted(name)
            )
        })
    }

    fn scontrol(&self, args: &[String]) -> Result<(), String> {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run("scontrol", &args).map(|_| ())
    }
}

/// The first line of `sinfo -h -N -n NODE -o '%T|%E'`.
pub fn parse_sinfo(out: &str) -> Option<NodeState> {
    let line = out.lines().map(str::trim).find(|l| !l.is_empty())?;
    let (state, reason) = line.split_once('|')?;
    let state = state
        .trim()
        .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-'])
        .to_ascii_lowercase();
    let reason = Some(reason.trim().to_string()).filter(|r| !r.is_empty() && r != "none");
    Some(NodeState { state, reason })
}

/// A client's stderr on one line (its lines joined by "; "), at most 400 characters.
fn one_line(s: &str) -> String {
    let joined = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if joined.chars().count() > 400 {
        format!("{}...", joined.chars().take(397).collect::<String>())
    } else {
        joined
    }
}

/// Runs a Slurm client with `LC_ALL=C` under [`CALL_TIMEOUT`] (the crate's one bounded
/// runner); its stdout, or why it failed.
fn run(tool: &str, args: &[&str]) -> Result<String, String> {
    let shown = format!("{tool} {}", args.join(" "));
    // With the configuration slurmd uses when SLURM_CONF is unset (crate::slurmd::conf).
    let out = crate::slurmd::client(tool, args, CALL_TIMEOUT)
        .map_err(|e| format!("{e} (is slurm-client installed?)"))?;
    match out.status {
        None => Err(format!(
            "`{shown}` did not answer within {} s (is slurmctld reachable from this node?)",
            CALL_TIMEOUT.as_secs()
        )),
        Some(s) if s.success() => Ok(out.stdout),
        Some(s) => Err(format!("`{shown}` failed ({s}): {}", one_line(&out.stderr))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinfo_lines_parse() {
        assert_eq!(
            parse_sinfo("drained|preflight: port.in-use: x y\n"),
            Some(NodeState {
                state: "drained".into(),
                reason: Some("preflight: port.in-use: x y".into())
            })
        );
        assert_eq!(
            parse_sinfo("idle*|none\nidle|none\n"),
            Some(NodeState {
                state: "idle".into(),
                reason: None
            })
        );
        assert_eq!(parse_sinfo(""), None);
        assert_eq!(parse_sinfo("garbage"), None);
    }

    #[test]
    fn client_errors_are_one_bounded_line() {
        assert_eq!(one_line("a: x\n\n  b: y\n"), "a: x; b: y");
        assert_eq!(one_line(&"z".repeat(1000)).chars().count(), 400);
    }

    #[test]
    fn a_missing_client_is_an_error_not_a_panic() {
        let e = run("preflight-no-such-slurm-client", &[]).unwrap_err();
        assert!(e.contains("cannot run"), "{e}");
    }
}

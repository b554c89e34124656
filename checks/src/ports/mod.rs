//! `port.in-use`: can torchrun bind the master port here, and if not, who holds it.

pub mod catalog;
pub mod ids;
pub mod probe;

use crate::core::CheckContext;
use crate::core::{BindResult, BindStatus, Finding, Fix, NodeFacts, PortFacts, PortHolder, Status};

pub use crate::ports::ids::IN_USE as ID;

/// Longest command shown in a summary; evidence keeps the whole one.
const SUMMARY_COMMAND_CHARS: usize = 80;

pub fn check(facts: &NodeFacts, _ctx: &CheckContext) -> Vec<Finding> {
    let this_job = facts
        .env
        .get("SLURM_JOB_ID")
        .map(String::as_str)
        .filter(|j| !j.is_empty());
    vec![judge(&facts.ports, this_job)]
}

/// Who holds a port, by the Slurm job of each holder: this job itself (a rank of the job that
/// this check runs for, in its TaskProlog), another job that runs on this node now (that job's
/// port, the user's problem, never the node's), or nothing that runs (a leftover: the node's).
#[derive(Debug, PartialEq)]
enum Owner<'a> {
    ThisJob,
    RunningJobs(Vec<&'a str>),
    Leftover,
}

fn owner<'a>(p: &'a PortFacts, this_job: Option<&str>) -> Owner<'a> {
    if p.holders.is_empty() {
        return Owner::Leftover;
    }
    let mut others: Vec<&str> = Vec::new();
    for h in &p.holders {
        match (h.slurm_job.as_deref(), h.job_running) {
            (Some(j), r) if Some(j) == this_job && r != Some(false) => {}
            (Some(j), Some(true)) => {
                if !others.contains(&j) {
                    others.push(j);
                }
            }
            _ => return Owner::Leftover,
        }
    }
    if others.is_empty() {
        Owner::ThisJob
    } else {
        Owner::RunningJobs(others)
    }
}

fn judge(p: &PortFacts, this_job: Option<&str>) -> Finding {
    let (v4, v6) = (p.ipv4.status, p.ipv6.status);
    let finding = if v4 == BindStatus::InUse || v6 == BindStatus::InUse {
        match owner(p, this_job) {
            Owner::Leftover => in_use(p),
            Owner::ThisJob => held_by_this_job(p, this_job.unwrap_or_default()),
            Owner::RunningJobs(jobs) => held_by_running_jobs(p, &jobs, this_job),
        }
    } else if v4 == BindStatus::Error || v6 == BindStatus::Error {
        bind_error(p)
    } else if v4 == BindStatus::Denied || v6 == BindStatus::Denied {
        denied(p)
    } else if v4 == BindStatus::Free {
        free(p)
    } else {
        // IPv4 Unsupported: no IPv4 stack at all.
        Finding::new(
            ID,
            Status::Error,
            p.port.to_string(),
            format!("cannot test port {}: IPv4 is not available", p.port),
        )
    };
    with_evidence(finding, p)
}

fn with_evidence(f: Finding, p: &PortFacts) -> Finding {
    f.with("port", p.port)
        .with("ipv4", &p.ipv4)
        .with("ipv6", &p.ipv6)
        .with("holders", &p.holders)
        .with("suggested_free", p.suggested_free)
}

fn in_use(p: &PortFacts) -> Finding {
    let known: Vec<&PortHolder> = p.holders.iter().filter(|h| h.pid.is_some()).collect();
    let who = if known.is_empty() {
        "by a process this user cannot see".to_string()
    } else {
        let names: Vec<String> = known.iter().map(|h| describe_holder(h)).collect();
        format!("by {}", names.join(", "))
    };
    let ended: Vec<&str> = p
        .holders
        .iter()
        .filter(|h| h.job_running == Some(false))
        .filter_map(|h| h.slurm_job.as_deref())
        .collect();
    let left = match ended.first() {
        Some(j) => format!(", left behind by Slurm job {j}, which no longer runs here"),
        None => String::new(),
    };
    let summary = format!(
        "master port {} is already in use {who}{left}; torchrun will fail with \"Address already in use\"",
        p.port
    );
    Finding::new(ID, Status::Fail, p.port.to_string(), summary).fix(in_use_fix(p, &known))
}

/// The port is held by the job this check runs for (another of its tasks is listening): as it
/// should be.
fn held_by_this_job(p: &PortFacts, job: &str) -> Finding {
    Finding::new(
        ID,
        Status::Pass,
        p.port.to_string(),
        format!(
            "master port {} is held by this job's own process ({}, Slurm job {job}): its rendezvous is up",
            p.port,
            holders_text(p)
        ),
    )
    .with("owner", "this-job")
}

/// The port is held by other Slurm jobs running on this node: their port, not a leftover and
/// not the node's fault. The job this check runs for must launch on another port (a failure,
/// the user's); a check outside any job (the health check) only says so.
fn held_by_running_jobs(p: &PortFacts, jobs: &[&str], this_job: Option<&str>) -> Finding {
    let free = p
        .suggested_free
        .map(|f| format!("; port {f} is free"))
        .unwrap_or_default();
    let named = jobs.join(", ");
    let (status, summary) = match this_job {
        Some(me) => (
            Status::Fail,
            format!(
                "master port {} is held by running Slurm job {named} ({}), not a leftover: job {me} must launch on another port{free}",
                p.port,
                holders_text(p)
            ),
        ),
        None => (
            Status::Warn,
            format!(
                "master port {} is held by running Slurm job {named} ({}): that job's own port, not a leftover; another job on this node must use another{free}",
                p.port,
                holders_text(p)
            ),
        ),
    };
    let mut fix = Fix::new(format!(
        "Give each job on a shared node its own master port (torchrun --master-port, or MASTER_PORT derived from the job id); job {named} is running and keeps {}.",
        p.port
    ));
    if let Some(free) = p.suggested_free {
        fix = fix.command(format!("torchrun --master-port={free} ..."));
    }
    fix = fix.command(r#"export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))"#);
    Finding::new(ID, status, p.port.to_string(), summary)
        .with("owner", "running-job")
        .with("jobs", jobs)
        .remedy(crate::core::Remedy::user(crate::core::Action::FixConfig))
        .fix(fix)
}

fn holders_text(p: &PortFacts) -> String {
    let known: Vec<String> = p
        .holders
        .iter()
        .filter(|h| h.pid.is_some())
        .map(describe_holder)
        .collect();
    if known.is_empty() {
        "a process this user cannot see".into()
    } else {
        known.join(", ")
    }
}

fn describe_holder(h: &PortHolder) -> String {
    let pid = h.pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into());
    match &h.command {
        Some(c) => format!("pid {pid} ({})", shorten(c)),
        None => format!("pid {pid}"),
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= SUMMARY_COMMAND_CHARS {
        s.to_string()
    } else {
        let head: String = s.chars().take(SUMMARY_COMMAND_CHARS).collect();
        format!("{head}...")
    }
}

fn in_use_fix(p: &PortFacts, known: &[&PortHolder]) -> Fix {
    let mut pids: Vec<u32> = known.iter().filter_map(|h| h.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let alternative = match p.suggested_free {
        Some(free) => format!(", or launch on a free port with --master-port={free}"),
        None => String::new(),
    };
    let hint = if pids.is_empty() {
        format!(
            "Find the holder as root (run preflight as root, or `ss -ltnp`) and stop it{alternative}."
        )
    } else {
        format!("Stop the process left over from an earlier run{alternative}.")
    };
    let mut fix = Fix::new(hint);
    for pid in &pids {
        fix = fix.command(format!("kill {pid}"));
    }
    if pids.is_empty() {
        fix = fix.command(format!("sudo ss -ltnp 'sport = :{}'", p.port));
    }
    if !pids.is_empty() {
        fix = fix.command(format!("ss -ltnp 'sport = :{}'", p.port));
    }
    fix
}

fn bind_error(p: &PortFacts) -> Finding {
    let reason = first_error(&p.ipv4)
        .or_else(|| first_error(&p.ipv6))
        .unwrap_or("the bind test did not run");
    Finding::new(
        ID,
        Status::Error,
        p.port.to_string(),
        format!("could not test master port {}: {reason}", p.port),
    )
}

fn first_error(b: &BindResult) -> Option<&str> {
    if b.status == BindStatus::Error {
        Some(
            b.error
                .as_deref()
                .unwrap_or("bind failed for an unknown reason"),
        )
    } else {
        None
    }
}

fn denied(p: &PortFacts) -> Finding {
    let privileged = p.port < 1024;
    let why = if privileged {
        "ports below 1024 need root or CAP_NET_BIND_SERVICE"
    } else {
        "a security policy refused the bind"
    };
    let mut fix = Fix::new("Use an unprivileged port such as torchrun's default 29500.")
        .command("torchrun --master-port=29500 ...");
    if let Some(free) = p.suggested_free.filter(|f| *f >= 1024) {
        fix = fix.command(format!("torchrun --master-port={free} ..."));
    }
    Finding::new(
        ID,
        Status::Warn,
        p.port.to_string(),
        format!("this user may not bind master port {}: {why}", p.port),
    )
    .fix(fix)
}

fn free(p: &PortFacts) -> Finding {
    let ipv6 = if p.ipv6.status == BindStatus::Unsupported {
        " (IPv4 only: IPv6 is not available here)"
    } else {
        " on IPv4 and IPv6"
    };
    Finding::new(
        ID,
        Status::Pass,
        p.port.to_string(),
        format!("master port {} is free{ipv6}", p.port),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(status: BindStatus) -> BindResult {
        let error = match status {
            BindStatus::Free => None,
            BindStatus::InUse => Some("Address already in use (os error 98)".into()),
            BindStatus::Denied => Some("Permission denied (os error 13)".into()),
            BindStatus::Unsupported => {
                Some("Address family not supported by protocol (os error 97)".into())
            }
            BindStatus::Error => Some("No buffer space available (os error 105)".into()),
        };
        BindResult { status, error }
    }

    fn facts(port: u16, v4: BindStatus, v6: BindStatus) -> NodeFacts {
        NodeFacts {
            ports: PortFacts {
                port,
                ipv4: bind(v4),
                ipv6: bind(v6),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn run(f: &NodeFacts) -> Finding {
        let out = check(f, &CheckContext::default());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, ID);
        out[0].clone()
    }

    #[test]
    fn passes_when_free_on_both_families() {
        let f = run(&facts(29500, BindStatus::Free, BindStatus::Free));
        assert_eq!(f.status, Status::Pass);
        assert_eq!(f.subject, "29500");
        assert!(f.fix.is_none());
        let v4only = run(&facts(29500, BindStatus::Free, BindStatus::Unsupported));
        assert_eq!(v4only.status, Status::Pass);
        assert!(v4only.summary.contains("IPv4 only"));
    }

    #[test]
    fn fails_naming_holder_with_kill_and_alternative_port() {
        let mut nf = facts(29500, BindStatus::Free, BindStatus::InUse);
        nf.ports.suggested_free = Some(29501);
        nf.ports.holders = vec![PortHolder {
            pid: Some(4242),
            command: Some("/usr/bin/python3 -m torch.distributed.run train.py".into()),
            local_address: "[::]:29500".into(),
            inode: 3141592,
            ..Default::default()
        }];
        let f = run(&nf);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("pid 4242"), "{}", f.summary);
        assert!(f.summary.contains("torch.distributed.run"));
        let fix = f.fix.expect("fix");
        assert_eq!(fix.commands, vec!["kill 4242", "ss -ltnp 'sport = :29500'"]);
        assert!(fix.hint.contains("--master-port=29501"));
        assert_eq!(f.evidence["holders"][0]["pid"], 4242);
        assert_eq!(f.evidence["ipv6"]["status"], "in-use");
    }

    fn held_by(job: &str, running: Option<bool>) -> NodeFacts {
        let mut nf = facts(29500, BindStatus::InUse, BindStatus::InUse);
        nf.ports.suggested_free = Some(29501);
        nf.ports.holders = vec![PortHolder {
            pid: Some(4242),
            command: Some("python3 train.py".into()),
            slurm_job: Some(job.into()),
            job_running: running,
            ..Default::default()
        }];
        nf
    }

    #[test]
    fn a_port_a_running_job_holds_is_that_jobs_and_never_the_nodes_problem() {
        use crate::core::Problem;
        // The health check (no job of its own): a warning, the user's.
        let f = run(&held_by("77", Some(true)));
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.problem, Some(Problem::User));
        assert!(f.summary.contains("running Slurm job 77"), "{}", f.summary);
        assert!(f.summary.contains("port 29501 is free"), "{}", f.summary);
        // Another job's prolog or TaskProlog: that job fails, as the user's problem.
        let mut other = held_by("77", Some(true));
        other.env.insert("SLURM_JOB_ID".into(), "78".into());
        let f = run(&other);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.problem, Some(Problem::User));
        assert!(
            f.summary.contains("job 78 must launch on another port"),
            "{}",
            f.summary
        );
        assert!(f.fix.unwrap().commands[0].contains("--master-port=29501"));
        // The job's own task, checked by its next task's TaskProlog: as it should be.
        let mut own = held_by("77", None);
        own.env.insert("SLURM_JOB_ID".into(), "77".into());
        assert_eq!(run(&own).status, Status::Pass);
        // A job that ended and left its process: a leftover, the node's.
        let f = run(&held_by("76", Some(false)));
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.problem, None, "the catalog's: the node's");
        assert!(
            f.summary.contains("left behind by Slurm job 76"),
            "{}",
            f.summary
        );
        // A job id from the environment that slurmd could not confirm: a leftover too.
        assert!(
            !run(&held_by("75", None))
                .summary
                .contains("running Slurm job")
        );
    }

    #[test]
    fn unknown_holder_says_to_look_as_root() {
        let mut nf = facts(29500, BindStatus::InUse, BindStatus::InUse);
        nf.ports.holders = vec![PortHolder {
            pid: None,
            command: None,
            local_address: "0.0.0.0:29500".into(),
            inode: 99,
            ..Default::default()
        }];
        let f = run(&nf);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("cannot see"));
        let fix = f.fix.expect("fix");
        assert!(fix.hint.contains("as root"));
        assert_eq!(fix.commands, vec!["sudo ss -ltnp 'sport = :29500'"]);
    }

    #[test]
    fn long_commands_are_shortened_in_the_summary_only() {
        let mut nf = facts(29500, BindStatus::InUse, BindStatus::InUse);
        let long = format!("python3 {}", "x".repeat(300));
        nf.ports.holders = vec![PortHolder {
            pid: Some(7),
            command: Some(long.clone()),
            ..Default::default()
        }];
        let f = run(&nf);
        assert!(f.summary.len() < 250);
        assert_eq!(f.evidence["holders"][0]["command"], long.as_str());
    }

    #[test]
    fn errors_when_the_bind_test_failed_otherwise() {
        let f = run(&facts(29500, BindStatus::Error, BindStatus::Free));
        assert_eq!(f.status, Status::Error);
        assert!(f.summary.contains("os error 105"), "{}", f.summary);
        // Facts without a bind test (old facts file) cannot be judged either.
        let empty = run(&NodeFacts::default());
        assert_eq!(empty.status, Status::Error);
    }

    #[test]
    fn warns_on_privileged_port() {
        let f = run(&facts(80, BindStatus::Denied, BindStatus::Denied));
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("below 1024"));
        assert!(f.fix.is_some());
    }
}

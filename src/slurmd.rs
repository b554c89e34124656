//! This node's slurmd, as Slurm's own clients see it: where its configuration is when
//! `SLURM_CONF` is unset (slurmd runs HealthCheckProgram and Prolog with an empty environment,
//! and a slurmd started with `-f PATH` or configless keeps it elsewhere than `/etc/slurm`), and
//! which running jobs hold which processes (`scontrol listpids`, answered by slurmd).

use preflight_checks::model::PortFacts;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest `scontrol listpids` may take.
const LISTPIDS_TIMEOUT: Duration = Duration::from_secs(5);

/// Where slurmd keeps a configuration it fetched from slurmctld (configless mode): Slurm
/// 20.02+ caches it under its spool directory, 21.08+ links it from `/run/slurm/conf`.
const CONFIGLESS: [&str; 3] = [
    "/run/slurm/conf/slurm.conf",
    "/var/spool/slurmd/conf-cache/slurm.conf",
    "/var/spool/slurm/d/conf-cache/slurm.conf",
];

/// The `SLURM_CONF` Slurm's clients need here, when this process was not given one: the one
/// its slurmd ancestor was started with (`slurmd -f PATH`, or its own `SLURM_CONF`), else a
/// configless cache, else None (the clients' default `/etc/slurm/slurm.conf`).
pub fn conf() -> Option<PathBuf> {
    if std::env::var_os("SLURM_CONF").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    conf_from(Path::new("/proc"), std::process::id(), Path::new("/"))
}

/// [`conf`] over a proc tree at `proc` and a file system at `root`, from process `pid` up.
pub fn conf_from(proc: &Path, pid: u32, root: &Path) -> Option<PathBuf> {
    let mut at = pid;
    for _ in 0..16 {
        let stat = std::fs::read_to_string(proc.join(at.to_string()).join("stat")).ok()?;
        // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
        let (head, tail) = stat.rsplit_once(')')?;
        let comm = head.split_once('(').map(|(_, c)| c)?;
        if comm == "slurmd" || comm == "slurmstepd" {
            if let Some(p) = slurmd_conf(proc, at) {
                return Some(p);
            }
        }
        at = tail.split_whitespace().nth(1)?.parse().ok()?;
        if at <= 1 {
            break;
        }
    }
    CONFIGLESS
        .iter()
        .map(|p| root.join(p.trim_start_matches('/')))
        .find(|p| p.is_file())
}

/// A slurmd's configuration: its `-f PATH` argument, else its `SLURM_CONF`.
fn slurmd_conf(proc: &Path, pid: u32) -> Option<PathBuf> {
    let dir = proc.join(pid.to_string());
    let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    for (i, a) in args.iter().enumerate() {
        if *a == b"-f" {
            if let Some(p) = args.get(i + 1).filter(|p| !p.is_empty()) {
                return Some(PathBuf::from(String::from_utf8_lossy(p).into_owned()));
            }
        } else if let Some(p) = a.strip_prefix(b"-f").filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(String::from_utf8_lossy(p).into_owned()));
        }
    }
    let environ = std::fs::read(dir.join("environ")).unwrap_or_default();
    environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"SLURM_CONF="))
        .filter(|v| !v.is_empty())
        .map(|v| PathBuf::from(String::from_utf8_lossy(v).into_owned()))
}

/// The environment Slurm's clients are run with: `SLURM_CONF` when [`conf`] found one.
pub fn client_env() -> Vec<(&'static str, String)> {
    conf()
        .map(|p| vec![("SLURM_CONF", p.display().to_string())])
        .unwrap_or_default()
}

/// Runs a Slurm client (`scontrol`, `sinfo`) with [`client_env`], bounded by `timeout` and 1 MiB
/// of output.
pub fn client(
    tool: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<preflight_checks::infra::child::Output, String> {
    let program = preflight_checks::infra::child::find_tool(tool)
        .or_else(|| {
            // Where Slurm's clients live when PATH (slurmd's empty environment) has none.
            ["/usr/local/bin", "/opt/slurm/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| format!("cannot run {tool}: not found on PATH"))?;
    let env = client_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    preflight_checks::infra::child::run_with(&program, args, &env, timeout, 1 << 20)
}

/// `scontrol listpids`'s table: pid to job id, for the jobs running on this node.
pub fn parse_listpids(out: &str) -> Vec<(u32, String)> {
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let pid = w.next()?.parse().ok()?;
            let job = w.next()?;
            job.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| (pid, job.to_string()))
        })
        .collect()
}

/// Confirms with slurmd which port holders belong to jobs running here: a holder whose job is
/// known only from its environment is `job_running: true` when slurmd lists its pid, `false`
/// when slurmd answered without it (its job ended and left it behind). Nothing to do, and no
/// call, when no holder names a job; left unknown when slurmd cannot be asked.
pub fn confirm_port_holders(ports: &mut PortFacts) {
    if !ports
        .holders
        .iter()
        .any(|h| h.slurm_job.is_some() && h.job_running.is_none())
    {
        return;
    }
    let Ok(out) = client("scontrol", &["listpids"], LISTPIDS_TIMEOUT) else {
        return;
    };
    if !out.success() {
        return;
    }
    let running = parse_listpids(&out.stdout);
    for h in ports
        .holders
        .iter_mut()
        .filter(|h| h.slurm_job.is_some() && h.job_running.is_none())
    {
        let listed = h
            .pid
            .and_then(|pid| running.iter().find(|(p, _)| *p == pid));
        match listed {
            Some((_, job)) => {
                h.slurm_job = Some(job.clone());
                h.job_running = Some(true);
            }
            None => h.job_running = Some(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpids_rows_map_pids_to_jobs() {
        let out = "PID      JOBID    STEPID   LOCALID GLOBALID\n\
                   4242     77       batch    0       0\n\
                   4250     77       0        0       0\n\
                   -1       78       extern   -       -\n";
        assert_eq!(
            parse_listpids(out),
            vec![(4242, "77".to_string()), (4250, "77".to_string())]
        );
        assert!(
            parse_listpids("slurm_load_jobs error: Unable to contact slurm controller\n")
                .is_empty()
        );
    }

    #[test]
    fn a_slurmd_ancestor_names_its_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        let mk = |pid: u32, comm: &str, ppid: u32, cmdline: &[&str], env: &[&str]| {
            let d = proc.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("stat"), format!("{pid} ({comm}) S {ppid} 1 1 0")).unwrap();
            std::fs::write(d.join("cmdline"), cmdline.join("\0")).unwrap();
            std::fs::write(d.join("environ"), env.join("\0")).unwrap();
        };
        mk(300, "preflight", 200, &["preflight"], &[]);
        mk(200, "sh (x)", 100, &["/bin/sh", "health.sh"], &[]);
        mk(
            100,
            "slurmd",
            1,
            &["/usr/sbin/slurmd", "-D", "-f", "/srv/slurm/slurm.conf"],
            &[],
        );
        assert_eq!(
            conf_from(&proc, 300, dir.path()),
            Some(PathBuf::from("/srv/slurm/slurm.conf"))
        );
        mk(
            100,
            "slurmd",
            1,
            &["/usr/sbin/slurmd"],
            &["PATH=/bin", "SLURM_CONF=/etc/x/slurm.conf"],
        );
        assert_eq!(
            conf_from(&proc, 300, dir.path()),
            Some(PathBuf::from("/etc/x/slurm.conf"))
        );
        // Configless: slurmd knows no file; its cache does.
        mk(
            100,
            "slurmd",
            1,
            &["/usr/sbin/slurmd", "--conf-server", "ctl"],
            &[],
        );
        assert_eq!(conf_from(&proc, 300, dir.path()), None);
        let cache = dir.path().join("run/slurm/conf");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(cache.join("slurm.conf"), "ClusterName=x\n").unwrap();
        assert_eq!(
            conf_from(&proc, 300, dir.path()),
            Some(cache.join("slurm.conf"))
        );
    }
}

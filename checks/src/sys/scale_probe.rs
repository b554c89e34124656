//! Node settings that only bite at scale: network sysctls (listen backlog, ephemeral ports,
//! neighbour table, arp_ignore), RLIMIT_NOFILE/NPROC, the cgroup pids limit and `ip rule`.

use crate::core::{PidsLimit, ScaleFacts};
use crate::infra::root::Root;

/// Most `ip rule` lines kept (a node with thousands of rules is judged on the first ones).
const MAX_RULES: usize = 256;
/// Most interfaces whose arp_ignore is read.
const MAX_IFACES: usize = 256;

/// The soft open-file limit this process started with, before it raised its own for a run of
/// many nodes (`note_started_nofile`): the limit a worker started like it gets.
static STARTED_NOFILE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();

/// Records the soft `RLIMIT_NOFILE` (None: unlimited) before the process raises its own; the
/// first call wins, so the probe reports what the job's workers will get, not preflight's own.
pub fn note_started_nofile(soft: Option<u64>) {
    let _ = STARTED_NOFILE.set(soft);
}

pub fn probe(root: &Root) -> ScaleFacts {
    let mut f = ScaleFacts {
        probed: true,
        ..Default::default()
    };
    let mut num = |name: &str, path: &str| -> Option<u64> {
        match root.read(path) {
            Ok(s) => match s.trim().parse::<u64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    f.errors
                        .insert(name.into(), format!("{path}: not a number: {:?}", s.trim()));
                    None
                }
            },
            // A missing file is "not known here" (an old kernel, a fixture without it).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                f.errors.insert(name.into(), format!("{path}: {e}"));
                None
            }
        }
    };
    let somaxconn = num("somaxconn", "/proc/sys/net/core/somaxconn");
    let syn = num(
        "tcp_max_syn_backlog",
        "/proc/sys/net/ipv4/tcp_max_syn_backlog",
    );
    let abort = num(
        "tcp_abort_on_overflow",
        "/proc/sys/net/ipv4/tcp_abort_on_overflow",
    );
    let g4 = num(
        "neigh_gc_thresh3_v4",
        "/proc/sys/net/ipv4/neigh/default/gc_thresh3",
    );
    let g6 = num(
        "neigh_gc_thresh3_v6",
        "/proc/sys/net/ipv6/neigh/default/gc_thresh3",
    );
    f.somaxconn = somaxconn;
    f.tcp_max_syn_backlog = syn;
    f.tcp_abort_on_overflow = abort;
    f.neigh_gc_thresh3_v4 = g4;
    f.neigh_gc_thresh3_v6 = g6;
    if let Ok(s) = root.read("/proc/sys/net/ipv4/ip_local_port_range") {
        match parse_port_range(&s) {
            Some(r) => f.port_range = Some(r),
            None => {
                f.errors.insert(
                    "port_range".into(),
                    format!("ip_local_port_range: cannot parse {:?}", s.trim()),
                );
            }
        }
    }
    if let Ok(s) = root.read("/proc/sys/net/ipv4/ip_local_reserved_ports") {
        f.reserved_ports = parse_reserved_ports(&s);
    }
    match root.read("/proc/self/limits") {
        Ok(text) => {
            if let Some((soft, hard)) = parse_limit_line(&text, "Max open files") {
                f.nofile_soft = match STARTED_NOFILE.get() {
                    Some(started) if root.is_system() => *started,
                    _ => soft,
                };
                f.nofile_hard = hard;
            } else {
                f.errors.insert(
                    "nofile".into(),
                    "no parsable 'Max open files' line in /proc/self/limits".into(),
                );
            }
            if let Some((soft, hard)) = parse_limit_line(&text, "Max processes") {
                f.nproc_soft = soft;
                f.nproc_hard = hard;
            }
        }
        Err(e) => {
            f.errors.insert(
                "nofile".into(),
                format!("cannot read /proc/self/limits: {e}"),
            );
        }
    }
    f.uid = root
        .read("/proc/self/status")
        .ok()
        .and_then(|s| parse_uid(&s));
    match pids_limit(root) {
        Ok(p) => f.pids = p,
        Err(e) => {
            f.errors.insert("pids".into(), e);
        }
    }
    f.arp_ignore = conf_values(root, "arp_ignore");
    f.rp_filter = conf_values(root, "rp_filter");
    f.ip_rules = ip_rules(root);
    f.nccl_shm = super::nccl_shm_probe::probe(root);
    f.gids = crate::rdma::probe::gid::probe(root);
    f
}

/// `ip_local_port_range`: two numbers separated by whitespace.
pub fn parse_port_range(s: &str) -> Option<[u32; 2]> {
    let mut it = s.split_whitespace().map(|w| w.parse::<u32>());
    let (lo, hi) = (it.next()?.ok()?, it.next()?.ok()?);
    (it.next().is_none() && lo <= hi && hi <= 65535).then_some([lo, hi])
}

/// `ip_local_reserved_ports`: "1000-1010,2000"; garbage items are dropped.
pub fn parse_reserved_ports(s: &str) -> Vec<[u32; 2]> {
    s.trim()
        .split(',')
        .filter_map(|item| {
            let item = item.trim();
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
                None => {
                    let p: u32 = item.parse().ok()?;
                    (p, p)
                }
            };
            (lo <= hi && hi <= 65535).then_some([lo, hi])
        })
        .take(1024)
        .collect()
}

/// (soft, hard) of one line of /proc/<pid>/limits; None inside = unlimited.
pub fn parse_limit_line(limits: &str, name: &str) -> Option<(Option<u64>, Option<u64>)> {
    let rest = limits.lines().find_map(|l| l.strip_prefix(name))?;
    let mut words = rest.split_whitespace();
    let word = |w: &str| -> Option<Option<u64>> {
        if w == "unlimited" {
            Some(None)
        } else {
            w.parse().ok().map(Some)
        }
    };
    Some((word(words.next()?)?, word(words.next()?)?))
}

/// The real uid from the `Uid:` line of /proc/self/status.
fn parse_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The tightest pids limit from this process's cgroup up to the root (v2 unified, else v1's
/// pids controller). Ok(None) when no cgroup sets one.
fn pids_limit(root: &Root) -> Result<Option<PidsLimit>, String> {
    let text = match root.read("/proc/self/cgroup") {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("/proc/self/cgroup: {e}")),
    };
    let (version, base, path) = match cgroup_path(&text) {
        Some(x) => x,
        None => return Ok(None),
    };
    let mut best: Option<PidsLimit> = None;
    let mut dir = path.trim_end_matches('/').to_string();
    loop {
        let at = format!("{base}{dir}");
        if let Some(max) = root.attr(format!("{at}/pids.max")) {
            let max = if max == "max" {
                None
            } else {
                Some(
                    max.parse::<u64>()
                        .map_err(|_| format!("{at}/pids.max: not a number: {max:?}"))?,
                )
            };
            let current = root.attr_num::<u64>(format!("{at}/pids.current"));
            let room = |p: &PidsLimit| {
                p.max
                    .map(|m| m.saturating_sub(p.current.unwrap_or(0)))
                    .unwrap_or(u64::MAX)
            };
            let here = PidsLimit {
                cgroup: if dir.is_empty() {
                    "/".into()
                } else {
                    dir.clone()
                },
                version: version.into(),
                max,
                current,
            };
            if best.as_ref().is_none_or(|b| room(&here) < room(b)) {
                best = Some(here);
            }
        }
        match dir.rfind('/') {
            Some(i) => dir.truncate(i),
            None => break,
        }
    }
    Ok(best.filter(|b| b.max.is_some()))
}

/// ("v2"|"v1", mount base, path) from /proc/self/cgroup: v1's pids controller when it has one,
/// else the unified (0::) hierarchy.
fn cgroup_path(text: &str) -> Option<(&'static str, &'static str, String)> {
    let mut unified = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrls.split(',').any(|c| c == "pids") {
            return Some(("v1", "/sys/fs/cgroup/pids", path.to_string()));
        }
        if ctrls.is_empty() {
            unified = Some(("v2", "/sys/fs/cgroup", path.to_string()));
        }
    }
    unified
}

/// The IPv4 setting `key` (`arp_ignore`, `rp_filter`) of "all" and of every interface under
/// /proc/sys/net/ipv4/conf.
fn conf_values(root: &Root, key: &str) -> std::collections::BTreeMap<String, u64> {
    root.list("/proc/sys/net/ipv4/conf")
        .into_iter()
        .filter(|n| n != "default")
        .take(MAX_IFACES)
        .filter_map(|n| {
            let v = root.attr_num::<u64>(format!("/proc/sys/net/ipv4/conf/{n}/{key}"))?;
            Some((n, v))
        })
        .collect()
}

/// `ip -4 rule show` on this machine; None under a fixture root or without `ip`.
fn ip_rules(root: &Root) -> Option<Vec<String>> {
    if !root.is_system() {
        return None;
    }
    use crate::firewall::probe::runner::{find_tool, run_with_timeout};
    let ip = find_tool("ip")?;
    let out = run_with_timeout(&ip, &["-4", "rule", "show"]).ok()?;
    out.success.then(|| {
        out.stdout
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .take(MAX_RULES)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_range_and_reserved_ports() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some([32768, 60999]));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("1 2 3"), None);
        assert_eq!(parse_port_range("x"), None);
        assert_eq!(
            parse_reserved_ports("1000-1010,2000, x,9-1\n"),
            vec![[1000, 1010], [2000, 2000]]
        );
        assert!(parse_reserved_ports("\n").is_empty());
    }

    #[test]
    fn limit_lines() {
        let l = "Max open files            1024                 524288               files\n\
                 Max processes             unlimited            unlimited            processes\n";
        assert_eq!(
            parse_limit_line(l, "Max open files"),
            Some((Some(1024), Some(524288)))
        );
        assert_eq!(parse_limit_line(l, "Max processes"), Some((None, None)));
        assert_eq!(
            parse_limit_line("Max open files  a b", "Max open files"),
            None
        );
    }

    #[test]
    fn cgroup_lines() {
        assert_eq!(
            cgroup_path("0::/system.slice/job.scope\n"),
            Some(("v2", "/sys/fs/cgroup", "/system.slice/job.scope".into()))
        );
        assert_eq!(
            cgroup_path("12:pids:/slurm/uid_0/job_7\n3:memory:/x\n0::/\n"),
            Some(("v1", "/sys/fs/cgroup/pids", "/slurm/uid_0/job_7".into()))
        );
        assert_eq!(cgroup_path("garbage"), None);
    }

    #[test]
    fn the_system_probe_reads_this_machine() {
        let f = probe(&Root::system());
        assert!(f.probed);
        assert!(f.somaxconn.is_some_and(|v| v > 0), "{:?}", f.errors);
        assert!(f.port_range.is_some(), "{:?}", f.errors);
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) }, 0);
        #[allow(clippy::unnecessary_cast)]
        let as_opt = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v as u64);
        assert_eq!(f.nofile_soft, as_opt(rl.rlim_cur));
        assert_eq!(f.nofile_hard, as_opt(rl.rlim_max));
        assert!(f.arp_ignore.contains_key("all"));
        assert!(f.rp_filter.contains_key("all"));
    }
}

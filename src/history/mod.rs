//! This node's memory of its runs (issue 44): where the store is (`--history PATH|off`), the
//! bounded summary a node judges itself by and sends rank 0 (`facts.history`), and the record
//! every live run leaves. None of it ever fails or holds up a check: a store that cannot be
//! used is a `history.store` warning.

pub mod place;
pub mod store;

use preflight_checks::history::RunInfo;
use preflight_checks::model::{HistorySummary, Report, SUMMARY_RUNS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
pub use store::{Retention, Store};

/// Where this run's history goes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum HistoryOpt {
    /// `--history off`: nothing read or written.
    #[default]
    Off,
    /// The store's file, its retention, and why it is there when the default folder was on a
    /// network file system ([`place::node_local`]).
    At(PathBuf, Retention, Option<String>),
}

/// Records read per run summarised: a job of several tasks leaves one per TaskProlog.
const RECORDS_PER_RUN: usize = 10;

/// The file name inside the default folders.
const FILE: &str = "history.db";

impl HistoryOpt {
    /// From `--history` (or `PREFLIGHT_HISTORY`, which clap reads into it): `off`, a path, or
    /// the default: `/var/lib/preflight/history.db` as root, else
    /// `$XDG_STATE_HOME/preflight/history.db`, else `~/.local/state/preflight/history.db`, moved
    /// to a node-local folder when that is on a network file system; off when none of those can
    /// be named. `PREFLIGHT_HISTORY_DAYS` / `PREFLIGHT_HISTORY_MAX_MB`
    /// set the retention.
    pub fn resolve(flag: Option<&str>, env: &BTreeMap<String, String>) -> HistoryOpt {
        let keep = retention(env);
        match flag.map(str::trim) {
            Some("off" | "none" | "0" | "false") => HistoryOpt::Off,
            Some(p) if !p.is_empty() => HistoryOpt::At(PathBuf::from(p), keep, None),
            _ => default_path(env).map_or(HistoryOpt::Off, |p| {
                // SAFETY: geteuid has no preconditions and cannot fail.
                let uid = unsafe { libc::geteuid() };
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_string())
                    .unwrap_or_default();
                let at = place::node_local(p, &host, uid, &place::shared_fs);
                HistoryOpt::At(at.path, keep, at.why)
            }),
        }
    }

    /// The store's path, when there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            HistoryOpt::Off => None,
            HistoryOpt::At(p, _, _) => Some(p),
        }
    }

    /// Why the store is where it is, when not in the default folder (a network file system).
    pub fn why(&self) -> Option<&str> {
        match self {
            HistoryOpt::Off => None,
            HistoryOpt::At(_, _, why) => why.as_deref(),
        }
    }
}

fn retention(env: &BTreeMap<String, String>) -> Retention {
    let mut keep = Retention::default();
    if let Some(d) = env
        .get("PREFLIGHT_HISTORY_DAYS")
        .and_then(|v| v.parse::<u32>().ok())
    {
        keep.days = d.clamp(1, 36_500);
    }
    if let Some(mb) = env
        .get("PREFLIGHT_HISTORY_MAX_MB")
        .and_then(|v| v.parse::<u64>().ok())
    {
        keep.max_bytes = mb.clamp(1, 1 << 20) << 20;
    }
    keep
}

fn default_path(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return Some(PathBuf::from("/var/lib/preflight").join(FILE));
    }
    let nonempty = |k: &str| env.get(k).filter(|v| v.starts_with('/'));
    if let Some(state) = nonempty("XDG_STATE_HOME") {
        return Some(PathBuf::from(state).join("preflight").join(FILE));
    }
    nonempty("HOME").map(|h| PathBuf::from(h).join(".local/state/preflight").join(FILE))
}

/// `hostname`'s last runs, running totals and the store's health, for `facts.history`; None
/// when the history is off.
pub fn summary(opt: &HistoryOpt, hostname: &str) -> Option<HistorySummary> {
    let path = opt.path()?;
    let mut out = HistorySummary {
        store: Some(path.display().to_string()),
        ..HistorySummary::default()
    };
    let store = match Store::open(path) {
        Ok(s) => s,
        Err(why) => {
            out.problem = Some(why);
            return Some(out);
        }
    };
    if let Some(aside) = &store.set_aside {
        out.problem = Some(format!(
            "{} was not a sound database: it was set aside as {} and a new store started",
            path.display(),
            aside.display()
        ));
    }
    // The last SUMMARY_RUNS runs, each job's records (its prolog, every task's TaskProlog, its
    // cluster run) one run: read as many records as a job of several tasks leaves, then merge.
    let read = || -> Result<_, String> {
        let records = store.recent(hostname, SUMMARY_RUNS * RECORDS_PER_RUN)?;
        let mut runs = preflight_checks::history::merge(&records);
        runs.sort_by_key(|r| r.time);
        for r in &mut runs {
            r.findings.truncate(preflight_checks::model::RUN_FINDINGS);
        }
        let start = runs.len().saturating_sub(SUMMARY_RUNS);
        Ok((
            runs.split_off(start),
            store.total_runs(hostname)?,
            store.totals(hostname)?,
        ))
    };
    match read() {
        Ok((runs, total, totals)) => {
            out.runs = runs;
            out.total_runs = total;
            out.totals = totals;
        }
        Err(why) => out.problem = Some(why),
    }
    Some(out)
}

/// Records `hostname`'s part of `report` (the run it took part in); the problem in words when
/// the store could not keep it. Never panics; bounded by the store's busy timeout.
pub fn record(opt: &HistoryOpt, report: &Report, info: &RunInfo, hostname: &str) -> Option<String> {
    let HistoryOpt::At(path, keep, _) = opt else {
        return None;
    };
    let runs = preflight_checks::history::node_runs(report, info);
    let mine = runs.into_iter().find(|r| r.node == hostname)?;
    let mut store = match Store::open(path) {
        Ok(s) => s,
        Err(why) => return Some(why),
    };
    store.record(&mine, *keep).err()
}

/// This run's identity: the launcher's job id where there is one (every node of the job sees
/// it), else `<mode>-<host>-<unix time>-<pid>`.
pub fn run_info(
    mode: &str,
    env: &BTreeMap<String, String>,
    shared: Option<&str>,
    hostname: &str,
) -> RunInfo {
    let time = now();
    let job = [
        "SLURM_JOB_ID",
        "TORCHELASTIC_RUN_ID",
        "JOB_COMPLETION_INDEX",
    ]
    .iter()
    .take(2)
    .find_map(|k| {
        env.get(*k)
            .filter(|v| !v.is_empty() && *v != "none")
            .cloned()
    });
    let run = match (shared, &job) {
        (Some(s), _) => s.to_string(),
        (None, Some(j)) => format!("{mode}-{j}"),
        (None, None) => format!("{mode}-{hostname}-{time}-{}", std::process::id()),
    };
    RunInfo {
        run,
        time,
        mode: mode.to_string(),
        job,
    }
}

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// What `report`'s nodes' `facts.history` says of this run: each finding that stands since it
/// first appeared says so in its summary, and the lemons are added as `history.lemon` findings
/// with each escalated action.
pub fn judge_lemons(report: &mut Report, info: &RunInfo) {
    preflight_checks::history::mark_standing(report, info);
    let lemons = preflight_checks::history::judge(report, info, &preflight_checks::registry::entry);
    if !lemons.is_empty() {
        preflight_checks::registry::add_findings(report, lemons);
    }
}

/// Records rank `rank`'s part of a finished `report` (a cluster run's shared id when rank 0
/// gave one) in `mode`; the problem in words when the store could not keep it.
pub fn record_node(
    opt: &HistoryOpt,
    report: &Report,
    mode: &str,
    env: &BTreeMap<String, String>,
    rank: u32,
) -> Option<String> {
    if *opt == HistoryOpt::Off {
        return None;
    }
    let host = report.hostname(rank)?.to_string();
    let info = run_info(mode, env, report.run_id.as_deref(), &host);
    record(opt, report, &info, &host)
}

//! `preflight history`: what one node's store, or a folder of many nodes' reports and exports,
//! remembers, with the lemons named; `--export` and `--import` move runs in and out of a store.

use super::Outcome;
use crate::config::HistoryJob;
use crate::history::{HistoryOpt, Store};
use preflight_checks::history::{RunInfo, node_runs, view};
use preflight_checks::model::NodeRun;
use std::path::Path;

/// Files a folder may hold that are read (the rest are counted, not read).
pub const MAX_FILES: usize = 200_000;
/// Runs read in all (the newest of a store; a folder stops there and says so).
pub const MAX_RUNS: usize = 4_000_000;
/// Longest line of an export file.
const MAX_LINE: usize = 1 << 20;
/// Largest export file read.
const MAX_EXPORT: u64 = 1 << 30;
/// Notes kept about what was skipped.
const MAX_NOTES: usize = 10;

pub fn history(job: HistoryJob) -> anyhow::Result<Outcome> {
    if let Some((report, times)) = &job.import {
        return import(&job.store, report, *times);
    }
    let (runs, notes, files) = match &job.reports {
        Some(dir) => read_folder(dir)?,
        None => (read_store(&job.store)?, Vec::new(), None),
    };
    if job.export {
        let mut out = String::new();
        for r in &runs {
            out.push_str(&serde_json::to_string(r)?);
            out.push('\n');
        }
        return Ok(Outcome::Text(out));
    }
    let mut v = view(&runs, &preflight_checks::registry::entry);
    v.notes = notes;
    v.reports = files;
    if job.reports.is_none() {
        v.store = job.store.path().map(|p| match job.store.why() {
            Some(why) => format!("{} ({why})", p.display()),
            None => p.display().to_string(),
        });
    }
    Ok(Outcome::History(Box::new(v), job.json))
}

fn store_path(opt: &HistoryOpt) -> anyhow::Result<&Path> {
    opt.path().ok_or_else(|| {
        anyhow::anyhow!(
            "the history is off (--history off or PREFLIGHT_HISTORY=off): give the store with --history PATH, or a folder of reports with --reports DIR"
        )
    })
}

fn read_store(opt: &HistoryOpt) -> anyhow::Result<Vec<NodeRun>> {
    let path = store_path(opt)?;
    anyhow::ensure!(
        path.exists(),
        "{} does not exist: this node has no history yet (every `preflight check`, `cluster` and hook run records one; give another store with --history PATH)",
        path.display()
    );
    let store = Store::open(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    store.all(MAX_RUNS).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Every report (`*.json`) and export (`*.jsonl`) of `dir`, as records; notes on what was
/// skipped; the files read. Bounded in files, bytes per file, line length and runs.
fn read_folder(dir: &Path) -> anyhow::Result<(Vec<NodeRun>, Vec<String>, Option<usize>)> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read the folder {}: {e}", dir.display()))?;
    let mut paths: Vec<std::path::PathBuf> = Vec::new();
    let mut over = 0usize;
    for e in entries.flatten() {
        let p = e.path();
        let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
        if ext != "json" && ext != "jsonl" {
            continue;
        }
        if paths.len() >= MAX_FILES {
            over += 1;
            continue;
        }
        paths.push(p);
    }
    paths.sort();
    let mut notes = Vec::new();
    let note = |n: &mut Vec<String>, s: String| {
        if n.len() < MAX_NOTES {
            n.push(s);
        }
    };
    if over > 0 {
        note(
            &mut notes,
            format!("{over} more file(s) beyond the first {MAX_FILES} were not read"),
        );
    }
    let mut runs = Vec::new();
    let mut skipped = 0usize;
    let mut read = 0usize;
    for p in &paths {
        if runs.len() >= MAX_RUNS {
            note(
                &mut notes,
                format!("stopped at {MAX_RUNS} runs: the rest of the folder was not read"),
            );
            break;
        }
        let got = if p.extension().is_some_and(|x| x == "jsonl") {
            read_export(p, &mut runs)
        } else {
            read_report(p, &mut runs)
        };
        match got {
            Ok(()) => read += 1,
            Err(why) => {
                skipped += 1;
                note(&mut notes, format!("{} skipped: {why}", p.display()));
            }
        }
    }
    if skipped > MAX_NOTES {
        notes.push(format!("{skipped} file(s) skipped in all"));
    }
    if paths.is_empty() {
        anyhow::bail!(
            "{} holds no preflight reports (*.json) or history exports (*.jsonl): write reports there with `-o {}/$(hostname)-$(date +%s).json`, or exports with `preflight history --export > {}/$(hostname).jsonl`",
            dir.display(),
            dir.display(),
            dir.display()
        );
    }
    Ok((runs, notes, Some(read)))
}

fn read_report(p: &Path, runs: &mut Vec<NodeRun>) -> Result<(), String> {
    let report = crate::recipe::read(p).map_err(|e| e.to_string())?;
    let time = std::fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64);
    let name = p
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let info = RunInfo {
        run: report
            .run_id
            .clone()
            .unwrap_or_else(|| format!("file:{name}")),
        time,
        mode: format!("{:?}", report.mode).to_lowercase(),
        job: None,
    };
    runs.extend(node_runs(&report, &info));
    Ok(())
}

fn read_export(p: &Path, runs: &mut Vec<NodeRun>) -> Result<(), String> {
    use std::io::{BufRead, Read};
    let meta = std::fs::metadata(p).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_EXPORT {
        return Err(format!(
            "{} bytes, over the {} MiB an export may hold",
            meta.len(),
            MAX_EXPORT >> 20
        ));
    }
    let file = std::fs::File::open(p).map_err(|e| e.to_string())?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let mut bad = 0usize;
    loop {
        line.clear();
        let n = Read::by_ref(&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        if line.len() > MAX_LINE {
            return Err(format!("a line longer than {} KiB", MAX_LINE >> 10));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<NodeRun>(&line) {
            Ok(r) if !r.node.is_empty() => runs.push(r),
            _ => bad += 1,
        }
        if runs.len() >= MAX_RUNS {
            break;
        }
    }
    if bad > 0 {
        return Err(format!("{bad} line(s) are not history records"));
    }
    Ok(())
}

/// Records every node of a saved report into the store, `times` times.
fn import(opt: &HistoryOpt, report: &Path, times: u32) -> anyhow::Result<Outcome> {
    let path = store_path(opt)?;
    let keep = match opt {
        HistoryOpt::At(_, keep, _) => *keep,
        HistoryOpt::Off => crate::history::Retention::default(),
    };
    let report = crate::recipe::read(report)?;
    let mut store = Store::open(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let pid = std::process::id();
    for i in 0..times {
        let info = RunInfo {
            run: format!("import-{pid}-{i}"),
            time: crate::history::now(),
            mode: "import".into(),
            job: None,
        };
        for run in node_runs(&report, &info) {
            store
                .record(&run, keep)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    Ok(Outcome::Text(format!(
        "recorded {} run(s) of {} node(s) into {}\n",
        times,
        report.nodes.len(),
        path.display()
    )))
}

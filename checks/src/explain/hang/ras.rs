//! NCCL RAS status (`ncclras`, or `STATUS`/`VERBOSE STATUS` on the RAS port), text as NCCL 2.24
//! to 2.29 print it and JSON as 2.28.7+ print it (`SET FORMAT json`; formats read in NCCL's
//! `src/ras/client_support.cc`): missing, unresponsive and dead processes by host, pid and GPU,
//! and per communicator the ranks *behind* in collective counts (RAS itself lists whichever
//! group is smaller, which is the ranks ahead when most ranks lag).

use serde::Serialize;
use serde_json::Value;

/// A rank or process RAS named.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RasRank {
    /// The rank in its communicator (None for a process line).
    pub rank: Option<u32>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// "0", "0,1", "2 (NVML 3)".
    pub gpu: Option<String>,
}

/// Ranks of one communicator at one collective count.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct CountGroup {
    /// `AllReduce` (2.26+ count per function), or "" (2.24-2.25: one count).
    pub func: String,
    /// Operations launched (0: none).
    pub launched: u64,
    /// Ranks at this count (RAS may list fewer).
    pub count: u32,
    pub ranks: Vec<RasRank>,
}

/// One communicator RAS reported a problem with.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RasComm {
    /// `#0-0 (0123456789abcdef)`, or the JSON hash.
    pub id: String,
    pub size: Option<u32>,
    /// Ranks whose data never came (their process did not answer).
    pub missing: Vec<RasRank>,
    pub counts: Vec<CountGroup>,
    /// `Rank 3 reported Remote process error`, `2 ranks have status ABORT`.
    pub errors: Vec<String>,
}

/// The ranks behind in one communicator's count of one function.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct RasBehind {
    pub comm: String,
    pub func: String,
    /// Their count, and the highest count of the others.
    pub launched: u64,
    pub ahead_at: u64,
    pub count: u32,
    /// Named ranks (RAS names only the smaller groups unless asked `VERBOSE STATUS`).
    pub ranks: Vec<RasRank>,
}

/// A RAS status, read.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Ras {
    /// "text" or "json".
    pub format: String,
    pub nccl_version: Option<String>,
    /// Processes that did not answer (text: INCOMPLETE; JSON: `unresponsive`).
    pub unresponsive: Vec<RasRank>,
    /// Processes RAS considers dead.
    pub dead: Vec<RasRank>,
    pub comms: Vec<RasComm>,
    pub behind: Vec<RasBehind>,
    /// Lines or fields not understood (at most 20 kept).
    pub unread: Vec<String>,
    pub lines: u64,
}

/// `Rank 3 -- GPU 1 managed by process 4242 on node 10.0.0.2`, tail after the rank.
fn who(tail: &str) -> (Option<String>, Option<u32>, Option<String>) {
    let Some(rest) = tail.split_once("-- ").map(|x| x.1) else {
        return (None, None, None);
    };
    let gpu = rest
        .strip_prefix("GPU ")
        .or_else(|| rest.strip_prefix("GPUs "))
        .and_then(|r| r.split_once(" managed by").map(|x| x.0.to_string()));
    let pid = rest
        .split_once("process ")
        .and_then(|x| x.1.split_whitespace().next())
        .and_then(|p| p.parse().ok());
    let host = rest
        .rsplit_once(" on node ")
        .map(|x| x.1.trim().to_string());
    (host, pid, gpu)
}

/// `Process 4242 on node 10.0.0.2 managing GPU 0` / `GPUs 0,1`.
fn process(line: &str) -> Option<RasRank> {
    let rest = line.trim().strip_prefix("Process ")?;
    let (pid, rest) = rest.split_once(" on node ")?;
    let (host, gpu) = rest.split_once(" managing ").unwrap_or((rest, ""));
    Some(RasRank {
        rank: None,
        host: Some(host.trim().to_string()),
        pid: pid.trim().parse().ok(),
        gpu: gpu
            .trim()
            .strip_prefix("GPUs ")
            .or_else(|| gpu.trim().strip_prefix("GPU "))
            .map(str::to_string),
    })
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.split_whitespace().next()?.parse().ok()
}

#[derive(PartialEq, Clone, Copy)]
enum Sec {
    None,
    Incomplete,
    Dead,
    Comm,
}

/// Reads RAS's text status.
pub fn parse_text(text: &str) -> Ras {
    let mut r = Ras {
        format: "text".into(),
        ..Ras::default()
    };
    let mut sec = Sec::None;
    let mut func = String::new();
    let mut in_counts = false;
    for raw in text.lines() {
        r.lines += 1;
        let line = raw.trim_end();
        let t = line.trim();
        if let Some(v) = t.strip_prefix("NCCL version ") {
            r.nccl_version = v.split_whitespace().next().map(str::to_string);
        } else if t == "INCOMPLETE" && !line.starts_with(' ') {
            sec = Sec::Incomplete;
        } else if t == "DEAD" && !line.starts_with(' ') {
            sec = Sec::Dead;
        } else if t.starts_with('#') && t.contains(") ") {
            sec = Sec::Comm;
            in_counts = false;
            let id = t.rsplit_once(' ').map_or(t, |x| x.0).to_string();
            if r.comms.last().is_none_or(|c| c.id != id) {
                r.comms.push(RasComm {
                    id,
                    ..RasComm::default()
                });
            }
        } else if t == "Errors" || t == "Warnings" || t.starts_with("Group ") {
            sec = Sec::None;
        } else if let Some(p) = process(t).filter(|_| matches!(sec, Sec::Incomplete | Sec::Dead)) {
            if sec == Sec::Dead {
                r.dead.push(p)
            } else {
                r.unresponsive.push(p)
            }
        } else if sec == Sec::Comm {
            comm_line(&mut r, t, &mut func, &mut in_counts);
        } else if (t.starts_with("Rank ") || t.contains("ranks have launched"))
            && r.unread.len() < 20
        {
            r.unread.push(t.to_string());
        }
    }
    r.behind = behind(&r.comms);
    r
}

fn comm_line(r: &mut Ras, t: &str, func: &mut String, in_counts: &mut bool) {
    let Some(c) = r.comms.last_mut() else { return };
    if t.starts_with("Communicator ranks have different") {
        *in_counts = t.ends_with("operation counts");
        *func = t
            .strip_prefix("Communicator ranks have different ")
            .and_then(|x| x.strip_suffix(" operation counts"))
            .filter(|f| *f != "collective")
            .unwrap_or("")
            .to_string();
    } else if let Some(rest) = t.strip_suffix(" ranks have not launched any operations") {
        c.counts.push(CountGroup {
            func: func.clone(),
            launched: 0,
            count: num(rest).unwrap_or(0),
            ranks: vec![],
        });
    } else if let Some((n, op)) = t.split_once(" ranks have launched up to operation ") {
        c.counts.push(CountGroup {
            func: func.clone(),
            launched: num(op).unwrap_or(0),
            count: num(n).unwrap_or(0),
            ranks: vec![],
        });
    } else if let Some(rest) = t
        .strip_prefix("The missing rank")
        .and_then(|x| x.split_once(": "))
    {
        for n in rest.1.split(',').filter_map(num::<u32>) {
            c.missing.push(RasRank {
                rank: Some(n),
                ..RasRank::default()
            });
        }
    } else if t.starts_with("Missing communicator data from") {
        *in_counts = false;
        c.errors.push(t.to_string());
    } else if let Some(rest) = t.strip_prefix("Rank ") {
        let rank: Option<u32> = num(rest);
        let (host, pid, gpu) = who(rest);
        let rr = RasRank {
            rank,
            host,
            pid,
            gpu,
        };
        if let Some((_, op)) = rest.split_once(" has launched up to operation ") {
            c.counts.push(CountGroup {
                func: func.clone(),
                launched: num(op).unwrap_or(0),
                count: 1,
                ranks: vec![rr],
            });
        } else if rest.contains(" has not launched any operations") {
            c.counts.push(CountGroup {
                func: func.clone(),
                launched: 0,
                count: 1,
                ranks: vec![rr],
            });
        } else if rest.contains(" reported ") || rest.contains(" has status ") {
            c.errors.push(t.to_string());
        } else if *in_counts {
            if let Some(g) = c.counts.last_mut() {
                g.ranks.push(rr);
            }
        } else {
            c.missing.push(rr);
        }
    } else if t.contains(" reported ") || t.contains(" have status ") || t.contains(" error") {
        *in_counts = false;
        c.errors.push(t.to_string());
    }
}

/// Per communicator and function: the ranks at the lowest count when counts differ.
fn behind(comms: &[RasComm]) -> Vec<RasBehind> {
    let mut out = Vec::new();
    for c in comms {
        let mut funcs: Vec<&str> = c.counts.iter().map(|g| g.func.as_str()).collect();
        funcs.dedup();
        for f in funcs {
            let gs: Vec<&CountGroup> = c.counts.iter().filter(|g| g.func == f).collect();
            let (Some(lo), Some(hi)) = (
                gs.iter().map(|g| g.launched).min(),
                gs.iter().map(|g| g.launched).max(),
            ) else {
                continue;
            };
            if lo == hi {
                continue;
            }
            let low: Vec<&&CountGroup> = gs.iter().filter(|g| g.launched == lo).collect();
            out.push(RasBehind {
                comm: c.id.clone(),
                func: f.to_string(),
                launched: lo,
                ahead_at: hi,
                count: low.iter().map(|g| g.count).sum(),
                ranks: low.iter().flat_map(|g| g.ranks.iter().cloned()).collect(),
            });
        }
    }
    out
}

/// Reads RAS's JSON status (NCCL 2.28.7+).
pub fn parse_json(v: &Value) -> Ras {
    let mut r = Ras {
        format: "json".into(),
        nccl_version: v
            .get("nccl_version")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..Ras::default()
    };
    for c in v
        .get("communicators")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let comm = comm_of_json(c, &mut r);
        r.comms.push(comm);
    }
    r.behind = behind(&r.comms);
    r
}

/// A rank of RAS's JSON.
fn rank_of(x: &Value) -> RasRank {
    RasRank {
        rank: x
            .get("rank")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        host: x
            .get("host")
            .and_then(Value::as_str)
            .filter(|h| *h != "unknown")
            .map(str::to_string),
        pid: x
            .get("pid")
            .and_then(Value::as_i64)
            .and_then(|n| u32::try_from(n).ok()),
        gpu: x
            .get("cuda_dev")
            .and_then(Value::as_i64)
            .filter(|d| *d >= 0)
            .map(|d| d.to_string()),
    }
}

/// One communicator of RAS's JSON; its dead and unresponsive processes go to `r`.
fn comm_of_json(c: &Value, r: &mut Ras) -> RasComm {
    let mut comm = RasComm {
        id: c
            .get("hash")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string(),
        size: c
            .get("size")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        ..RasComm::default()
    };
    let ranks: Vec<&Value> = c
        .get("ranks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut funcs: Vec<String> = Vec::new();
    for x in &ranks {
        if let Some(Value::Object(cc)) = x.get("collective_counts") {
            for k in cc.keys() {
                if !funcs.contains(k) {
                    funcs.push(k.clone());
                }
            }
        }
        let s = x.get("status");
        let flag = |n: &str| {
            s.and_then(|s| s.get(n))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let code = |n: &str| {
            s.and_then(|s| s.get(n))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let rr = rank_of(x);
        // ncclSuccess 0 and ncclInProgress 7 are not errors.
        for (what, n) in [
            ("initialization error", code("init_state")),
            ("asynchronous error", code("async_error")),
        ] {
            if n != 0 && n != 7 {
                comm.errors
                    .push(format!("Rank {} reported {what} {n}", rr.rank.unwrap_or(0)));
            }
        }
        if flag("abort_flag") {
            comm.errors
                .push(format!("Rank {} has status ABORT", rr.rank.unwrap_or(0)));
        }
    }
    for f in &funcs {
        let mut by: std::collections::BTreeMap<u64, Vec<RasRank>> = Default::default();
        for x in &ranks {
            let n = x
                .get("collective_counts")
                .and_then(|cc| cc.get(f))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            by.entry(n).or_default().push(rank_of(x));
        }
        for (launched, rs) in by {
            comm.counts.push(CountGroup {
                func: f.clone(),
                launched,
                count: rs.len() as u32,
                ranks: rs,
            });
        }
    }
    for m in c
        .get("missing_ranks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let rr = rank_of(m);
        let dead = m
            .get("status")
            .and_then(|s| s.get("considered_dead"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let unresponsive = m
            .get("status")
            .and_then(|s| s.get("unresponsive"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let proc_ = rr.clone();
        if dead && !r.dead.contains(&proc_) {
            r.dead.push(proc_);
        } else if unresponsive && !dead && !r.unresponsive.contains(&proc_) {
            r.unresponsive.push(proc_);
        }
        comm.missing.push(rr);
    }
    comm
}

/// Reads either format; a JSON document starts with `{`. Anything else is read as text, and a
/// text with nothing RAS prints is said to be foreign by the caller (no version, no sections).
pub fn parse(bytes: &[u8]) -> Result<Ras, String> {
    let text = String::from_utf8_lossy(bytes);
    let t = text.trim_start();
    if t.starts_with('{') {
        let budget =
            crate::infra::budget::Budget::of_bytes("NCCL RAS JSON", bytes.len().saturating_add(16));
        crate::infra::budget::scan(bytes, &budget).map_err(|e| e.to_string())?;
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not readable JSON: {e}"))?;
        if v.get("communicators").is_none() {
            return Err("JSON without `communicators`: not NCCL RAS output".into());
        }
        return Ok(parse_json(&v));
    }
    let r = parse_text(&text);
    if r.nccl_version.is_none()
        && r.comms.is_empty()
        && r.dead.is_empty()
        && r.unresponsive.is_empty()
        && !text.contains("Job summary")
    {
        return Err("no line NCCL's RAS prints (`NCCL version`, `Job summary`, communicators): not RAS output".into());
    }
    Ok(r)
}

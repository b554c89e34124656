//! One rank's Flight Recorder dump, read from the bytes c10d wrote (pickle or JSON, dump
//! versions 2.3 to 2.10, NCCL or gloo) into the few fields the verdict needs, with budgets
//! checked before parsing. The rank and host come from the file name when the dump lacks them.

use super::pickle::{self, PickleBudget};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// What one dump file may hold.
#[derive(Clone, Copy, Debug)]
pub struct Budgets {
    /// Bytes of one file.
    pub file_bytes: u64,
    /// Entries (recorded operations) kept per dump; older ones beyond it are dropped and counted.
    pub entries: usize,
    /// Containers nested inside each other.
    pub depth: usize,
    /// Values in one dump once pickle memo references are expanded.
    pub values: u64,
    /// Dump files read in one run.
    pub files: usize,
    /// Stack frames kept per entry.
    pub frames: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            file_bytes: 256 << 20,
            entries: 100_000,
            depth: 32,
            values: 50_000_000,
            files: 65_536,
            frames: 16,
        }
    }
}

/// One stack frame of the Python code that called the collective.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub name: String,
    pub filename: String,
    pub line: i64,
}

/// One recorded operation.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub record_id: i64,
    /// The process group's name (`process_group[0]`: "0" for the default group).
    pub pg: String,
    /// Its description (`default_pg`, `undefined`, a user's `group_desc`).
    pub pg_desc: String,
    /// This rank's own id of the group: the key of `pg_status`.
    pub pg_id: String,
    /// Collective sequence number in that group (0 for point-to-point).
    pub seq: i64,
    pub p2p_seq: i64,
    pub is_p2p: bool,
    /// `nccl:all_reduce`, `gloo:broadcast`.
    pub op: String,
    pub input_sizes: Value,
    pub input_dtypes: Value,
    pub output_sizes: Value,
    pub output_dtypes: Value,
    /// `scheduled`, `started`, `completed` (gloo writes `scheduled` throughout).
    pub state: String,
    pub time_created_ns: i64,
    pub timeout_ms: Option<i64>,
    pub frames: Vec<Frame>,
}

impl Entry {
    /// The operation without its backend prefix: `all_reduce`.
    pub fn op_name(&self) -> &str {
        self.op.split_once(':').map_or(&self.op, |(_, o)| o)
    }
}

/// A process group as the dump's `pg_config` describes it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct PgConfig {
    pub desc: String,
    /// Global ranks, when the dump lists them (gloo's dumps in torch 2.11 list none).
    pub ranks: Vec<u32>,
}

/// One rank's dump, as read.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Dump {
    /// The file it came from.
    pub file: String,
    pub rank: u32,
    /// From the file name (`<prefix><host>_<rank>`), when it has one.
    pub host: Option<String>,
    pub version: String,
    /// "nccl", "gloo", or what the operations' prefix says.
    pub backend: String,
    pub comm_lib_version: Option<String>,
    pub pg_config: BTreeMap<String, PgConfig>,
    /// `pg_status`: this rank's group id (an entry's `pg_id`) -> (last enqueued, last started,
    /// last completed).
    pub pg_status: BTreeMap<String, [i64; 3]>,
    /// Entries kept, oldest first.
    pub entries: Vec<Entry>,
    /// Entries beyond the budget, dropped (the oldest).
    pub entries_dropped: usize,
}

/// Why a file was not judged: one clear line each.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Unread {
    pub file: String,
    /// The rank its name gives, when it gives one.
    pub rank: Option<u32>,
    pub why: String,
}

fn as_i64(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

fn as_str(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// `"[0, 1, 2]"` (how c10d writes a group's ranks) or a real list.
fn ranks_of(v: Option<&Value>) -> Vec<u32> {
    match v {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| as_i64(Some(x)))
            .filter_map(|x| u32::try_from(x).ok())
            .collect(),
        Some(Value::String(s)) => s
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|t| t.parse().ok())
            .collect(),
        _ => Vec::new(),
    }
}

fn frames_of(v: Option<&Value>, keep: usize) -> Vec<Frame> {
    let Some(Value::Array(a)) = v else {
        return Vec::new();
    };
    a.iter()
        .take(keep)
        .filter_map(|f| {
            let o = f.as_object()?;
            Some(Frame {
                name: as_str(o.get("name")),
                filename: as_str(o.get("filename")),
                line: as_i64(o.get("line")).unwrap_or(0),
            })
        })
        .collect()
}

fn entry_of(v: &Value, frames: usize) -> Option<Entry> {
    let o = v.as_object()?;
    let (pg, pg_desc) = match o.get("process_group") {
        Some(Value::Array(a)) => (as_str(a.first()), as_str(a.get(1))),
        other => (as_str(other), String::new()),
    };
    let pg = if pg.is_empty() {
        as_str(o.get("pg_id"))
    } else {
        pg
    };
    Some(Entry {
        record_id: as_i64(o.get("record_id")).unwrap_or(0),
        pg_id: as_str(o.get("pg_id")),
        pg,
        pg_desc,
        seq: as_i64(o.get("collective_seq_id").or(o.get("seq_id"))).unwrap_or(0),
        p2p_seq: as_i64(o.get("p2p_seq_id")).unwrap_or(0),
        is_p2p: as_i64(o.get("is_p2p")).unwrap_or(0) != 0,
        op: as_str(o.get("profiling_name")),
        input_sizes: o.get("input_sizes").cloned().unwrap_or(Value::Null),
        input_dtypes: o.get("input_dtypes").cloned().unwrap_or(Value::Null),
        output_sizes: o.get("output_sizes").cloned().unwrap_or(Value::Null),
        output_dtypes: o.get("output_dtypes").cloned().unwrap_or(Value::Null),
        state: as_str(o.get("state")),
        time_created_ns: as_i64(o.get("time_created_ns")).unwrap_or(0),
        timeout_ms: as_i64(o.get("timeout_ms")),
        frames: frames_of(o.get("frames"), frames),
    })
}

/// The rank and host a file name gives: `<prefix><rank>` or `<prefix><host>_<rank>`, with an
/// optional `.json`/`.pkl`/`.pickle` ending. `prefix` is the part every file shares.
pub fn name_parts(file_name: &str, prefix: &str) -> Option<(u32, Option<String>)> {
    let stem = ["json", "pkl", "pickle", "pt"]
        .iter()
        .find_map(|e| file_name.strip_suffix(&format!(".{e}")))
        .unwrap_or(file_name);
    let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 9 {
        return None;
    }
    let rank: u32 = stem[stem.len() - digits..].parse().ok()?;
    let head = &stem[..stem.len() - digits];
    let middle = head.strip_prefix(prefix).unwrap_or(head);
    let host = middle.trim_end_matches(['_', '-']);
    let host = (!host.is_empty()).then(|| host.to_string());
    Some((rank, host))
}

/// The prefix the file names share, cut back to a separator so that a host name is not
/// swallowed ("trace_nodeA_3", "trace_nodeB_5" -> "trace_"); c10d's default names first.
pub fn common_prefix(names: &[&str]) -> String {
    for known in ["nccl_trace_rank_", "fr_trace_rank_"] {
        if !names.is_empty() && names.iter().all(|n| n.starts_with(known)) {
            return known.to_string();
        }
    }
    let stems: Vec<&str> = names
        .iter()
        .map(|n| {
            n.split('.')
                .next()
                .unwrap_or(n)
                .trim_end_matches(|c: char| c.is_ascii_digit())
        })
        .collect();
    let Some(first) = stems.first() else {
        return String::new();
    };
    if stems.iter().all(|s| s == first) {
        return first.to_string();
    }
    let mut len = first.len();
    for s in &stems[1..] {
        len = len.min(
            first
                .bytes()
                .zip(s.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    let lcp = &first[..len];
    match lcp.rfind(['_', '-', '.']) {
        Some(i) => lcp[..=i].to_string(),
        None => String::new(),
    }
}

/// Reads one dump's bytes. `rank`/`host` are what the file name says.
pub fn parse(
    file: &str,
    bytes: &[u8],
    rank: Option<u32>,
    host: Option<String>,
    b: &Budgets,
) -> Result<Dump, String> {
    if bytes.is_empty() {
        return Err(
            "empty file (0 bytes): the rank died while writing it, or never wrote it".into(),
        );
    }
    if bytes.len() as u64 > b.file_bytes {
        return Err(format!(
            "{} bytes, over the {} byte budget for one dump",
            bytes.len(),
            b.file_bytes
        ));
    }
    let first = bytes.iter().find(|c| !c.is_ascii_whitespace()).copied();
    let value = match first {
        Some(0x80) => pickle::to_json(
            bytes,
            PickleBudget {
                depth: b.depth,
                values: b.values,
                bytes: usize::try_from(b.file_bytes.saturating_mul(4)).unwrap_or(usize::MAX),
            },
        )
        .map_err(|e| e.to_string())?,
        Some(b'{') => {
            let budget = crate::infra::budget::Budget {
                depth: b.depth,
                ..crate::infra::budget::Budget::of_bytes(
                    "Flight Recorder JSON dump",
                    bytes.len().saturating_add(16),
                )
            };
            crate::infra::budget::scan(bytes, &budget).map_err(|e| e.to_string())?;
            serde_json::from_slice(bytes).map_err(|e| format!("not readable JSON: {e}"))?
        }
        _ => {
            return Err(format!(
                "neither a pickle (first byte 0x80) nor JSON: starts with {}",
                crate::infra::shellword::quoted(&String::from_utf8_lossy(
                    &bytes[..bytes.len().min(16)]
                ))
            ));
        }
    };
    from_value(file, &value, rank, host, b)
}

/// The fields the verdict needs, from a decoded dump.
pub fn from_value(
    file: &str,
    v: &Value,
    rank: Option<u32>,
    host: Option<String>,
    b: &Budgets,
) -> Result<Dump, String> {
    let o = v
        .as_object()
        .ok_or("not a Flight Recorder dump: the top level is not a dictionary")?;
    let Some(Value::Array(raw)) = o.get("entries") else {
        return Err("not a Flight Recorder dump: it has no `entries` list".into());
    };
    let version = as_str(o.get("version"));
    let rank = as_i64(o.get("rank"))
        .and_then(|r| u32::try_from(r).ok())
        .or(rank)
        .ok_or("no rank: neither the dump nor its file name (<prefix><rank>) gives one")?;
    let skip = raw.len().saturating_sub(b.entries);
    let entries: Vec<Entry> = raw[skip..]
        .iter()
        .filter_map(|e| entry_of(e, b.frames))
        .collect();
    let pg_config = match o.get("pg_config") {
        Some(Value::Object(m)) => m
            .iter()
            .filter(|(k, _)| !k.is_empty())
            .map(|(k, c)| {
                (
                    k.clone(),
                    PgConfig {
                        desc: as_str(c.get("desc")),
                        ranks: ranks_of(c.get("ranks")),
                    },
                )
            })
            .collect(),
        _ => BTreeMap::new(),
    };
    let pg_status = match o.get("pg_status") {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, s)| {
                let g = |n| as_i64(s.get(n)).unwrap_or(-1);
                (
                    k.clone(),
                    [
                        g("last_enqueued_collective"),
                        g("last_started_collective"),
                        g("last_completed_collective"),
                    ],
                )
            })
            .collect(),
        _ => BTreeMap::new(),
    };
    let backend = entries
        .iter()
        .find_map(|e| e.op.split_once(':').map(|(b, _)| b.to_string()))
        .unwrap_or_else(|| {
            if o.contains_key("nccl_comm_state") {
                "nccl".into()
            } else {
                String::new()
            }
        });
    Ok(Dump {
        file: file.to_string(),
        rank,
        host,
        version,
        backend,
        comm_lib_version: Some(as_str(o.get("comm_lib_version"))).filter(|s| !s.is_empty()),
        pg_config,
        pg_status,
        entries,
        entries_dropped: skip,
    })
}

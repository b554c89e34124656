//! The verdict across ranks: every process group judged on its own ranks, collective by
//! collective sequence number: who never entered the collective the others wait in (missing,
//! behind), whose operation, sizes or dtypes differ (mismatch), who left no dump while the
//! others wait (likely dead), the last collective every rank completed, and where each culprit
//! stands. A rank that waits in another group's collective is followed to the one it waits for.

use super::dump::{Dump, Entry, Frame};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Ranks that did the same thing at one sequence number.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Side {
    /// The operation, sizes or dtypes, as text.
    pub value: String,
    pub ranks: Vec<u32>,
}

/// Ranks that disagree at one collective.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub seq: i64,
    /// "operation", "sizes" or "dtypes".
    pub field: &'static str,
    /// Largest side first.
    pub sides: Vec<Side>,
}

/// A collective as the ranks at the front of a group recorded it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Collective {
    pub seq: i64,
    pub op: String,
    pub sizes: String,
    pub dtypes: String,
    pub state: String,
    /// Ranks that entered it.
    pub entered_by: Vec<u32>,
    pub timeout_ms: Option<i64>,
    /// Where the first of them called it.
    pub frames: Vec<Frame>,
}

/// A place a rank stands: a group's collective.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub pg: String,
    pub pg_desc: String,
    pub seq: i64,
    pub op: String,
    pub state: String,
}

/// A rank of a group that never entered the collective the front of the group is in.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Behind {
    pub rank: u32,
    /// The last collective of this group it entered (0: none).
    pub entered: i64,
    /// Its last recorded operation in any group.
    pub last: Option<Place>,
    /// Set when that last operation is itself a collective others have not all entered: the
    /// rank is blocked there, not the cause.
    pub blocked_in: Option<Place>,
    /// Seconds between its last operation and the front's collective, when both have times.
    pub idle_s: Option<f64>,
    pub frames: Vec<Frame>,
}

/// One process group's verdict.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Group {
    pub pg: String,
    pub desc: String,
    pub ranks: Vec<u32>,
    /// Where the member list came from: "pg_config", "world" (the default group), "entries".
    pub members_from: &'static str,
    pub no_dump: Vec<u32>,
    /// The highest collective any rank entered.
    pub front: Option<Collective>,
    pub behind: Vec<Behind>,
    pub mismatch: Option<Mismatch>,
    /// The last collective every rank with a dump completed, and its operation.
    pub last_completed_by_all: Option<(i64, String)>,
    /// "healthy", "hang" (someone waits), "mismatch".
    pub status: &'static str,
}

/// What a culprit did.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Never entered the collective the others wait in; its last operation completed.
    Missing,
    /// Left no dump while the others wait: likely dead.
    NoDump,
    /// Entered a collective that differs from the others' at the same sequence number.
    Mismatch,
}

/// A rank the job waits for, with what is known of it.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Culprit {
    pub rank: u32,
    pub kind: Kind,
    pub pg: String,
    pub pg_desc: String,
    /// The collective it did not enter, or entered differently.
    pub seq: i64,
    pub op: String,
    /// Ranks waiting for it in that collective.
    pub waiting: Vec<u32>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub device: Option<String>,
    /// Its last operation, and the seconds it had been idle when the others entered.
    pub last: Option<Place>,
    pub idle_s: Option<f64>,
    pub frames: Vec<Frame>,
    /// One line: what the dumps prove about it.
    pub detail: String,
}

/// The verdict over one set of dumps.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Verdict {
    pub world_size: u32,
    pub dumped: Vec<u32>,
    pub no_dump: Vec<u32>,
    pub groups: Vec<Group>,
    pub culprits: Vec<Culprit>,
    pub healthy: bool,
}

/// A group's view of one rank: its entries of that group by sequence number.
struct View<'a> {
    dump: &'a Dump,
    by_seq: BTreeMap<i64, &'a Entry>,
    entered: i64,
}

fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        other => other.to_string().replace('"', ""),
    }
}

/// Ops whose sizes legitimately differ across ranks.
fn sizes_may_differ(op: &str) -> bool {
    [
        "all_to_all",
        "alltoall",
        "scatter",
        "gather",
        "send",
        "recv",
        "coalesced",
        "_base",
    ]
    .iter()
    .any(|w| op.contains(w))
        && !op.contains("all_gather")
}

fn members(pg: &str, desc: &str, dumps: &[Dump], world: u32) -> (Vec<u32>, &'static str) {
    let cfg: BTreeSet<u32> = dumps
        .iter()
        .filter_map(|d| d.pg_config.get(pg))
        .flat_map(|c| c.ranks.iter().copied())
        .collect();
    if !cfg.is_empty() {
        return (cfg.into_iter().collect(), "pg_config");
    }
    if desc == "default_pg" || pg == "0" {
        return ((0..world).collect(), "world");
    }
    let seen: BTreeSet<u32> = dumps
        .iter()
        .filter(|d| d.entries.iter().any(|e| e.pg == pg))
        .map(|d| d.rank)
        .collect();
    (seen.into_iter().collect(), "entries")
}

fn place(e: &Entry) -> Place {
    Place {
        pg: e.pg.clone(),
        pg_desc: e.pg_desc.clone(),
        seq: e.seq,
        op: e.op_name().to_string(),
        state: e.state.clone(),
    }
}

/// What one field of an entry says, as text.
type Describe = dyn Fn(&Entry) -> String;

/// The first sequence number where ranks disagree, with the sides.
fn first_mismatch(views: &[View]) -> Option<Mismatch> {
    let all: BTreeSet<i64> = views
        .iter()
        .flat_map(|v| v.by_seq.keys().copied())
        .collect();
    for seq in all {
        let at: Vec<(u32, &Entry)> = views
            .iter()
            .filter_map(|v| v.by_seq.get(&seq).map(|e| (v.dump.rank, *e)))
            .collect();
        if at.len() < 2 {
            continue;
        }
        let op_of = |e: &Entry| e.op_name().to_string();
        let fields: [(&'static str, &Describe); 3] = [
            ("operation", &op_of),
            ("sizes", &|e: &Entry| {
                format!("{} -> {}", text(&e.input_sizes), text(&e.output_sizes))
            }),
            ("dtypes", &|e: &Entry| text(&e.input_dtypes)),
        ];
        for (field, f) in fields {
            if field == "sizes" && sizes_may_differ(at[0].1.op_name()) {
                continue;
            }
            let mut sides: BTreeMap<String, Vec<u32>> = BTreeMap::new();
            for (r, e) in &at {
                sides.entry(f(e)).or_default().push(*r);
            }
            if sides.len() > 1 {
                let mut sides: Vec<Side> = sides
                    .into_iter()
                    .map(|(value, ranks)| Side { value, ranks })
                    .collect();
                sides.sort_by(|a, b| {
                    b.ranks
                        .len()
                        .cmp(&a.ranks.len())
                        .then(a.ranks.cmp(&b.ranks))
                });
                return Some(Mismatch { seq, field, sides });
            }
        }
    }
    None
}

/// Whether an entry's state says it finished (NCCL); gloo records `scheduled` throughout.
fn completed(e: &Entry) -> bool {
    e.state == "completed"
}

fn judge_group(pg: &str, desc: &str, dumps: &[Dump], world: u32) -> Group {
    let (ranks, members_from) = members(pg, desc, dumps, world);
    let by_rank: BTreeMap<u32, &Dump> = dumps.iter().map(|d| (d.rank, d)).collect();
    let views: Vec<View> = ranks
        .iter()
        .filter_map(|r| by_rank.get(r))
        .map(|d| view(pg, d))
        .collect();
    let no_dump: Vec<u32> = ranks
        .iter()
        .copied()
        .filter(|r| !by_rank.contains_key(r))
        .collect();
    let front_seq = views.iter().map(|v| v.entered).max().unwrap_or(0);
    let entered_by: Vec<u32> = views
        .iter()
        .filter(|v| v.entered >= front_seq)
        .map(|v| v.dump.rank)
        .collect();
    let front_entry = views.iter().find_map(|v| v.by_seq.get(&front_seq).copied());
    let front = front_entry.map(|e| Collective {
        seq: front_seq,
        op: e.op_name().to_string(),
        sizes: text(&e.input_sizes),
        dtypes: text(&e.input_dtypes),
        state: e.state.clone(),
        entered_by: entered_by.clone(),
        timeout_ms: e.timeout_ms,
        frames: e.frames.clone(),
    });
    let mismatch = first_mismatch(&views);
    let behind: Vec<Behind> = views
        .iter()
        .filter(|v| v.entered < front_seq)
        .map(|v| behind(v, front_entry))
        .collect();
    let hang = !behind.is_empty() || (!no_dump.is_empty() && front_seq > 0);
    let mut lcba = completed_by_all(&views);
    if hang {
        lcba = lcba.min(front_seq - 1);
    }
    if let Some(m) = &mismatch {
        lcba = lcba.min(m.seq - 1);
    }
    let lcba_op = views
        .iter()
        .find_map(|v| v.by_seq.get(&lcba))
        .map(|e| e.op_name().to_string())
        .unwrap_or_default();
    let status = if mismatch.is_some() {
        "mismatch"
    } else if hang {
        "hang"
    } else {
        "healthy"
    };
    Group {
        pg: pg.to_string(),
        desc: desc.to_string(),
        ranks,
        members_from,
        no_dump,
        front,
        behind,
        mismatch,
        last_completed_by_all: (lcba > 0).then_some((lcba, lcba_op)),
        status,
    }
}

/// One rank's view of the group `pg`: its collectives by sequence number, and the furthest it
/// entered (its last recorded entry or the group's status).
fn view<'a>(pg: &str, d: &'a Dump) -> View<'a> {
    let by_seq: BTreeMap<i64, &Entry> = d
        .entries
        .iter()
        .filter(|e| e.pg == pg && !e.is_p2p && e.seq > 0)
        .map(|e| (e.seq, e))
        .collect();
    // pg_status is keyed by the rank's own id of the group (an entry's pg_id).
    let id = d
        .entries
        .iter()
        .find(|e| e.pg == pg)
        .map(|e| e.pg_id.as_str());
    let id = id.or((pg == "0").then_some("0"));
    let status = id.and_then(|i| d.pg_status.get(i)).map_or(-1, |s| s[0]);
    let entered = by_seq.keys().next_back().copied().unwrap_or(0).max(status);
    View {
        dump: d,
        by_seq,
        entered,
    }
}

/// A rank that never entered the front collective: where it stopped and how long before.
fn behind(v: &View, front_entry: Option<&Entry>) -> Behind {
    let last = v
        .dump
        .entries
        .iter()
        .max_by_key(|e| (e.time_created_ns, e.record_id));
    let idle_s = match (last, front_entry) {
        (Some(l), Some(f)) if l.time_created_ns > 0 && f.time_created_ns > 0 => {
            Some((f.time_created_ns - l.time_created_ns) as f64 / 1e9)
        }
        _ => None,
    };
    Behind {
        rank: v.dump.rank,
        entered: v.entered,
        last: last.map(place),
        blocked_in: None,
        idle_s,
        frames: last.map(|l| l.frames.clone()).unwrap_or_default(),
    }
}

/// The last collective every rank finished (NCCL states) or entered (gloo), before any cut-off.
fn completed_by_all(views: &[View]) -> i64 {
    views
        .iter()
        .map(|v| {
            let nccl_states = v
                .by_seq
                .values()
                .any(|e| e.state == "started" || completed(e));
            if nccl_states {
                v.by_seq
                    .values()
                    .filter(|e| completed(e))
                    .map(|e| e.seq)
                    .max()
                    .unwrap_or(0)
            } else {
                v.entered
            }
        })
        .min()
        .unwrap_or(0)
}

/// Marks behind ranks whose last operation is a collective still waiting on others.
fn follow_blocks(groups: &mut [Group]) {
    let pending: BTreeMap<(String, i64), bool> = groups
        .iter()
        .filter_map(|g| {
            g.front
                .as_ref()
                .map(|f| ((g.pg.clone(), f.seq), g.status != "healthy"))
        })
        .collect();
    for g in groups.iter_mut() {
        for b in &mut g.behind {
            if let Some(l) = &b.last {
                let waits = l.state != "completed"
                    && pending
                        .get(&(l.pg.clone(), l.seq))
                        .copied()
                        .unwrap_or(false);
                if waits && l.pg != g.pg {
                    b.blocked_in = Some(l.clone());
                }
            }
        }
    }
}

/// What the dumps prove about a rank that never entered the front collective.
fn missing_detail(g: &Group, front: &Collective, b: &Behind, groups: &[Group]) -> String {
    let gap = front.seq - b.entered;
    let last = match &b.last {
        Some(l) => format!(
            "its last operation was {} #{} in group {}{}{}",
            l.op,
            l.seq,
            l.pg,
            if l.state.is_empty() {
                String::new()
            } else {
                format!(" ({})", l.state)
            },
            b.idle_s
                .filter(|s| *s >= 0.5)
                .map(|s| format!(", {s:.1} s before the others entered #{}", front.seq))
                .unwrap_or_default()
        ),
        None => "it recorded no operation".to_string(),
    };
    let mut detail = format!(
        "never entered collective #{} ({}) of group {}{}; {last}",
        front.seq,
        front.op,
        g.pg,
        if gap > 1 {
            format!(" nor the {} before it", gap - 1)
        } else {
            String::new()
        },
    );
    if let Some(l) = &b.last {
        let lone = groups
            .iter()
            .find(|x| x.pg == l.pg && x.pg != g.pg)
            .is_some_and(|x| x.members_from == "entries" && x.ranks.len() == 1);
        if lone {
            detail.push_str(&format!(
                "; no other rank recorded group {}, so it may wait there for a member that never \
                 entered (these dumps do not list that group's members)",
                l.pg
            ));
        }
    }
    detail
}

fn culprits(groups: &[Group], dumps: &[Dump]) -> Vec<Culprit> {
    let host_of = |r: u32| {
        dumps
            .iter()
            .find(|d| d.rank == r)
            .and_then(|d| d.host.clone())
    };
    let mut out: Vec<Culprit> = Vec::new();
    let mut seen: BTreeSet<(u32, &'static str)> = BTreeSet::new();
    for g in groups {
        let base = |rank: u32, kind: Kind, seq: i64, op: &str, waiting: Vec<u32>| Culprit {
            rank,
            kind,
            pg: g.pg.clone(),
            pg_desc: g.desc.clone(),
            seq,
            op: op.to_string(),
            waiting,
            host: host_of(rank),
            pid: None,
            device: None,
            last: None,
            idle_s: None,
            frames: Vec::new(),
            detail: String::new(),
        };
        if let Some(m) = &g.mismatch {
            for side in m.sides.iter().skip(1) {
                for &r in &side.ranks {
                    if seen.insert((r, "mismatch")) {
                        let mut c = base(
                            r,
                            Kind::Mismatch,
                            m.seq,
                            &side.value,
                            m.sides[0].ranks.clone(),
                        );
                        c.detail = format!(
                            "entered collective #{} of group {} with {} {} where rank{} {} entered it with {}",
                            m.seq,
                            g.pg,
                            m.field,
                            side.value,
                            if m.sides[0].ranks.len() > 1 { "s" } else { "" },
                            list(&m.sides[0].ranks),
                            m.sides[0].value
                        );
                        out.push(c);
                    }
                }
            }
        }
        let Some(front) = &g.front else { continue };
        for b in g.behind.iter().filter(|b| b.blocked_in.is_none()) {
            if !seen.insert((b.rank, "missing")) {
                continue;
            }
            let mut c = base(
                b.rank,
                Kind::Missing,
                front.seq,
                &front.op,
                front.entered_by.clone(),
            );
            c.last = b.last.clone();
            c.idle_s = b.idle_s;
            c.frames = b.frames.clone();
            c.detail = missing_detail(g, front, b, groups);
            out.push(c);
        }
        if g.status != "healthy" {
            for &r in &g.no_dump {
                if seen.insert((r, "no-dump")) {
                    let mut c = base(
                        r,
                        Kind::NoDump,
                        front.seq,
                        &front.op,
                        front.entered_by.clone(),
                    );
                    c.detail = format!(
                        "left no dump while rank{} {} wait{} in collective #{} ({}) of group {}: likely dead \
                         (killed, out of memory, crashed) before the others timed out",
                        if front.entered_by.len() > 1 { "s" } else { "" },
                        list(&front.entered_by),
                        if front.entered_by.len() > 1 { "" } else { "s" },
                        front.seq,
                        front.op,
                        g.pg
                    );
                    out.push(c);
                }
            }
        }
    }
    out
}

/// "0, 1, 3" (at most 12, then how many more).
pub fn list(ranks: &[u32]) -> String {
    let mut s: Vec<String> = ranks.iter().take(12).map(u32::to_string).collect();
    if ranks.len() > 12 {
        s.push(format!("and {} more", ranks.len() - 12));
    }
    s.join(", ")
}

/// Judges a set of dumps. `world_hint` is the job's size when known elsewhere (a log, RAS);
/// else the largest rank seen, or the default group's configured ranks.
pub fn judge(dumps: &[Dump], world_hint: Option<u32>) -> Verdict {
    let max_rank = dumps.iter().map(|d| d.rank + 1).max().unwrap_or(0);
    let cfg_max = dumps
        .iter()
        .flat_map(|d| d.pg_config.values())
        .flat_map(|c| c.ranks.iter().map(|r| r + 1))
        .max()
        .unwrap_or(0);
    let world = max_rank.max(cfg_max).max(world_hint.unwrap_or(0));
    let mut pgs: BTreeMap<String, String> = BTreeMap::new();
    for d in dumps {
        for e in &d.entries {
            pgs.entry(e.pg.clone()).or_insert_with(|| e.pg_desc.clone());
        }
    }
    let mut groups: Vec<Group> = pgs
        .iter()
        .map(|(pg, desc)| judge_group(pg, desc, dumps, world))
        .collect();
    groups.sort_by_key(|g| (g.pg.parse::<u64>().unwrap_or(u64::MAX), g.pg.clone()));
    follow_blocks(&mut groups);
    let culprits = culprits(&groups, dumps);
    let dumped: Vec<u32> = dumps
        .iter()
        .map(|d| d.rank)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let no_dump: Vec<u32> = (0..world).filter(|r| !dumped.contains(r)).collect();
    let healthy = groups.iter().all(|g| g.status == "healthy") && culprits.is_empty();
    Verdict {
        world_size: world,
        dumped,
        no_dump,
        groups,
        culprits,
        healthy,
    }
}

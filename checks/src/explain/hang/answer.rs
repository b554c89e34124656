//! The hang's answer, as for logs: each culprit the dumps, RAS and the log name together (the
//! log's hosts and RAS's host, pid and GPU fill in what a dump lacks), with its likely causes in
//! order, each with its finding id, the node, the preflight command that confirms it there and
//! the fix. A watchdog timeout with no dumps says what it proves and how the next run leaves them.

use super::dump::{Dump, Frame, Unread};
use super::ras::{Ras, RasRank};
use super::verdict::{self, Kind, Verdict, list};
use crate::explain::JobSeen;
use crate::explain::catalog;
use serde::Serialize;
use std::collections::BTreeMap;

/// What the log says that the dumps need: hosts by rank, the watchdog's collective, the launch.
#[derive(Clone, Debug, Default)]
pub struct LogHints {
    pub hosts: BTreeMap<u32, String>,
    pub watchdog: Option<Watchdog>,
    pub job: JobSeen,
}

/// `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=N, OpType=..., Timeout(ms)=...)`.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Watchdog {
    pub rank: Option<u32>,
    pub seq: Option<i64>,
    pub op: Option<String>,
    pub timeout_ms: Option<u64>,
    /// Ranks whose log says it (kept lines).
    pub ranks: Vec<u32>,
}

/// One likely cause. `id` is a finding id of the catalog, or None for the job's own code.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub id: Option<&'static str>,
    pub why: String,
    pub node: String,
    pub confirm: String,
    pub fix: String,
}

/// A rank that stopped the job, with every source's evidence.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Culprit {
    pub rank: Option<u32>,
    /// "missing", "no-dump", "mismatch", "ras-behind", "ras-dead", "ras-unresponsive".
    pub kind: &'static str,
    pub node: String,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub gpu: Option<String>,
    /// What each source says about it.
    pub evidence: Vec<String>,
    pub frames: Vec<Frame>,
    pub causes: Vec<Cause>,
}

/// One dump as read (without its entries).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct DumpSeen {
    pub file: String,
    pub rank: u32,
    pub host: Option<String>,
    pub version: String,
    pub backend: String,
    pub entries: usize,
    pub entries_dropped: usize,
}

/// The whole answer about a hang.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Hang {
    pub dumps: Vec<DumpSeen>,
    pub unread: Vec<Unread>,
    pub verdict: Option<Verdict>,
    pub ras: Option<Ras>,
    /// Where RAS's output came from: a file, "-", or `host:port`.
    pub ras_source: Option<String>,
    pub watchdog: Option<Watchdog>,
    pub culprits: Vec<Culprit>,
    /// Every source says the job is healthy.
    pub healthy: bool,
    /// One line: where to start.
    pub summary: String,
    /// The variables that make the next run leave dumps, when none were given.
    pub next_run: Vec<String>,
}

/// What makes torch leave Flight Recorder dumps when the watchdog fires.
pub const NEXT_RUN: &[&str] = &[
    "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (torch < 2.7; TORCH_FR_BUFFER_SIZE=2000 from 2.7): record the last 2000 collectives",
    "TORCH_NCCL_DUMP_ON_TIMEOUT=1: every rank dumps when one rank's watchdog fires",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/shared/fr/trace_ (TORCH_FR_DUMP_TEMP_FILE from 2.7): files <prefix><rank> on a disk you can read afterwards",
    "TORCH_NCCL_ENABLE_MONITORING=1 and TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=600: a rank stuck in CUDA still dumps before it is killed",
];

fn fix_of(id: &str) -> String {
    catalog::get(id).map_or_else(String::new, |e| e.fix.to_string())
}

fn cause(id: &'static str, why: &str, node: &str, confirm: String) -> Cause {
    Cause {
        id: Some(id),
        why: why.to_string(),
        node: node.to_string(),
        confirm,
        fix: fix_of(id),
    }
}

/// `preflight cluster` with the job's flags as the log shows them.
fn cluster_cmd(job: &JobSeen) -> String {
    let nnodes = job
        .nnodes
        .as_deref()
        .map(|n| n.rsplit(':').next().unwrap_or(n).to_string())
        .filter(|n| n.parse::<u32>().is_ok())
        .unwrap_or_else(|| "<nodes>".into());
    let mut c = format!("preflight cluster --nnodes {nnodes}");
    match (&job.master_addr, &job.rdzv_endpoint) {
        (Some(a), _) => c.push_str(&format!(
            " --master-addr {a} --master-port {}",
            job.master_port.unwrap_or(29500)
        )),
        (None, Some(e)) => c.push_str(&format!(" --rdzv-endpoint {e}")),
        _ => c.push_str(" --master-addr <rank 0's address> --master-port 29500"),
    }
    if let Some(n) = job
        .nproc_per_node
        .as_deref()
        .filter(|n| n.parse::<u32>().is_ok())
    {
        c.push_str(&format!(" --nproc-per-node {n}"));
    }
    c
}

fn code_cause(why: &str, node: &str, confirm: &str, fix: &str) -> Cause {
    Cause {
        id: None,
        why: why.to_string(),
        node: node.to_string(),
        confirm: confirm.to_string(),
        fix: fix.to_string(),
    }
}

/// The causes of a kind of culprit, most likely first.
fn causes(kind: &str, node: &str, job: &JobSeen) -> Vec<Cause> {
    let check = "preflight check".to_string();
    let gemm = "preflight check --gemm".to_string();
    match kind {
        "missing" | "ras-behind" => vec![
            code_cause(
                "the code took another path on this rank: a collective under `if rank == ...`, an early `break`/`continue`, an exception caught and ignored, or a data loader that ran out first",
                node,
                "compare where it last called a collective (its frames) with where the others wait",
                "make every rank of the group call the same collectives in the same order",
            ),
            cause(
                crate::gpu::ids::COMPUTE_SLOW.as_str(),
                "a slow or throttled GPU makes this rank arrive late at every collective (a straggler)",
                node,
                gemm,
            ),
            cause(
                crate::gpu::ids::XID.as_str(),
                "a GPU fault (Xid) stops this rank's kernels while its process lives",
                node,
                check.clone(),
            ),
            cause(
                crate::link::ids::SLOW.as_str(),
                "this node's links are slow, so it is always last",
                node,
                cluster_cmd(job),
            ),
        ],
        "no-dump" | "ras-dead" => vec![
            code_cause(
                "the process died: killed by the out-of-memory killer or the scheduler, or crashed (torchrun's log shows its exitcode or signal)",
                node,
                "dmesg -T | grep -i -E 'killed process|out of memory'",
                "rerun with more host memory per rank, or fewer data-loader workers; read the rank's own traceback",
            ),
            cause(
                crate::gpu::ids::XID.as_str(),
                "a GPU fault (Xid 79: fell off the bus, 48: double-bit ECC) kills the process",
                node,
                check,
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                "the node dropped off the network, so its rank's dump (if any) never arrived",
                node,
                cluster_cmd(job),
            ),
        ],
        "ras-unresponsive" => vec![
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                "NCCL's RAS could not reach this process over the network",
                node,
                cluster_cmd(job),
            ),
            cause(
                crate::firewall::ids::RULES.as_str(),
                "a filter drops NCCL's high ports to this node",
                node,
                check,
            ),
        ],
        _ => vec![code_cause(
            "the ranks called different collectives, or the same one with different sizes or dtypes, at this sequence number: a shape that depends on the rank's data, or a collective skipped on some ranks",
            node,
            "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: torch then checks every collective's op and shapes across ranks and names the first difference",
            "make every rank call the same collective with the same sizes and dtypes (pad variable-length tensors, or all_gather their sizes first)",
        )],
    }
}

fn node_name(rank: Option<u32>, host: &Option<String>) -> String {
    match (host, rank) {
        (Some(h), _) => h.clone(),
        (None, Some(r)) => format!("rank {r}'s node"),
        (None, None) => "the node RAS names".into(),
    }
}

/// RAS's name for a global rank, when its communicator spans the whole world.
fn ras_rank(ras: Option<&Ras>, rank: u32, world: u32) -> Option<&RasRank> {
    let ras = ras?;
    ras.comms
        .iter()
        .filter(|c| c.size.is_none_or(|s| s == world))
        .flat_map(|c| {
            c.missing
                .iter()
                .chain(c.counts.iter().flat_map(|g| g.ranks.iter()))
        })
        .find(|r| r.rank == Some(rank) && (r.host.is_some() || r.pid.is_some()))
}

fn from_dumps(v: &Verdict, ras: Option<&Ras>, log: &LogHints, unread: &[Unread]) -> Vec<Culprit> {
    v.culprits
        .iter()
        .map(|c| {
            let rr = ras_rank(ras, c.rank, v.world_size);
            let host = c
                .host
                .clone()
                .or_else(|| rr.and_then(|r| r.host.clone()))
                .or_else(|| log.hosts.get(&c.rank).cloned());
            let kind = match c.kind {
                Kind::Missing => "missing",
                Kind::NoDump => "no-dump",
                Kind::Mismatch => "mismatch",
            };
            let node = node_name(Some(c.rank), &host);
            let mut evidence = vec![format!("dumps: rank {} {}", c.rank, c.detail)];
            if let Some(r) = rr {
                evidence.push(format!(
                    "RAS: rank {} is process {} on {} managing GPU {}",
                    c.rank,
                    r.pid.map_or("?".into(), |p| p.to_string()),
                    r.host.as_deref().unwrap_or("?"),
                    r.gpu.as_deref().unwrap_or("?")
                ));
            }
            if let Some(h) = log.hosts.get(&c.rank) {
                evidence.push(format!("log: rank {} ran on {h}", c.rank));
            }
            for u in unread.iter().filter(|u| u.rank == Some(c.rank)) {
                evidence.push(format!("its file {} was not judged: {}", u.file, u.why));
            }
            Culprit {
                rank: Some(c.rank),
                kind,
                causes: causes(kind, &node, &log.job),
                node,
                host,
                pid: c.pid.or(rr.and_then(|r| r.pid)),
                gpu: c.device.clone().or(rr.and_then(|r| r.gpu.clone())),
                evidence,
                frames: c.frames.clone(),
            }
        })
        .collect()
}

fn from_ras(ras: &Ras, have: &[Culprit], log: &LogHints) -> Vec<Culprit> {
    let mut out: Vec<Culprit> = Vec::new();
    let known = |r: &RasRank, out: &[Culprit]| {
        have.iter().chain(out.iter()).any(|c| {
            (r.rank.is_some() && c.rank == r.rank)
                || (r.pid.is_some() && c.pid == r.pid && c.host == r.host)
        })
    };
    let push = |r: &RasRank, kind: &'static str, line: String, out: &mut Vec<Culprit>| {
        if known(r, out) {
            if let Some(c) = out
                .iter_mut()
                .find(|c| c.rank.is_some() && c.rank == r.rank)
            {
                c.evidence.push(line);
            }
            return;
        }
        let host = r
            .host
            .clone()
            .or_else(|| r.rank.and_then(|n| log.hosts.get(&n).cloned()));
        let node = node_name(r.rank, &host);
        out.push(Culprit {
            rank: r.rank,
            kind,
            causes: causes(kind, &node, &log.job),
            node,
            host,
            pid: r.pid,
            gpu: r.gpu.clone(),
            evidence: vec![line],
            frames: Vec::new(),
        });
    };
    let proc_line = |what: &str, r: &RasRank| {
        format!(
            "RAS: process {} on {} managing GPU {} {what}",
            r.pid.map_or("?".into(), |p| p.to_string()),
            r.host.as_deref().unwrap_or("?"),
            r.gpu.as_deref().unwrap_or("?")
        )
    };
    for r in &ras.dead {
        push(
            r,
            "ras-dead",
            proc_line("is considered dead (unreachable over RAS's network)", r),
            &mut out,
        );
    }
    for r in &ras.unresponsive {
        push(
            r,
            "ras-unresponsive",
            proc_line("did not answer RAS", r),
            &mut out,
        );
    }
    for b in &ras.behind {
        if b.ranks.is_empty() {
            let node = format!("the {} ranks RAS did not list", b.count);
            out.push(Culprit {
                rank: None,
                kind: "ras-behind",
                causes: causes("ras-behind", &node, &log.job),
                node,
                host: None,
                pid: None,
                gpu: None,
                evidence: vec![format!(
                    "RAS: {} ranks of communicator {} launched {} {} operations where others launched {}; RAS names \
                     only the smaller group (here the ranks ahead, which wait for these): ask it `VERBOSE STATUS` \
                     (`preflight explain --ras HOST:28028` does) to name them",
                    b.count,
                    b.comm,
                    b.launched,
                    if b.func.is_empty() { "collective" } else { &b.func },
                    b.ahead_at
                )],
                frames: Vec::new(),
            });
        }
        for r in &b.ranks {
            let func = if b.func.is_empty() {
                "collective".to_string()
            } else {
                b.func.clone()
            };
            let line = format!(
                "RAS: rank {} of communicator {} launched {} {func} operations where others launched {}",
                r.rank.map_or("?".into(), |n| n.to_string()),
                b.comm,
                b.launched,
                b.ahead_at
            );
            push(r, "ras-behind", line, &mut out);
        }
    }
    out
}

/// Judges the dumps, RAS and the log's hints together.
pub fn answer(
    dumps: &[Dump],
    unread: Vec<Unread>,
    ras: Option<(Ras, String)>,
    log: &LogHints,
) -> Hang {
    let world_hint = ras
        .as_ref()
        .and_then(|(r, _)| r.comms.iter().filter_map(|c| c.size).max());
    let verdict = (!dumps.is_empty()).then(|| verdict::judge(dumps, world_hint));
    let ras_ref = ras.as_ref().map(|(r, _)| r);
    let mut culprits = verdict
        .as_ref()
        .map(|v| from_dumps(v, ras_ref, log, &unread))
        .unwrap_or_default();
    if let Some(r) = ras_ref {
        let more = from_ras(r, &culprits, log);
        culprits.extend(more);
    }
    let healthy = culprits.is_empty()
        && verdict.as_ref().is_none_or(|v| v.healthy)
        && ras_ref.is_none_or(|r| {
            r.comms
                .iter()
                .all(|c| c.errors.is_empty() && c.missing.is_empty())
        })
        && (verdict.is_some() || ras_ref.is_some());
    let summary = summary(verdict.as_ref(), &culprits, healthy, log);
    Hang {
        dumps: dumps
            .iter()
            .map(|d| DumpSeen {
                file: d.file.clone(),
                rank: d.rank,
                host: d.host.clone(),
                version: d.version.clone(),
                backend: d.backend.clone(),
                entries: d.entries.len(),
                entries_dropped: d.entries_dropped,
            })
            .collect(),
        unread,
        next_run: if dumps.is_empty() {
            NEXT_RUN.iter().map(|s| s.to_string()).collect()
        } else {
            Vec::new()
        },
        verdict,
        ras_source: ras.as_ref().map(|(_, s)| s.clone()),
        ras: ras.map(|(r, _)| r),
        watchdog: log.watchdog.clone(),
        culprits,
        healthy,
        summary,
    }
}

fn summary(v: Option<&Verdict>, culprits: &[Culprit], healthy: bool, log: &LogHints) -> String {
    if healthy {
        let last: Vec<String> = v
            .map(|v| {
                v.groups
                    .iter()
                    .filter_map(|g| {
                        g.last_completed_by_all
                            .as_ref()
                            .map(|(s, op)| format!("#{s} ({op}) in group {}", g.pg))
                    })
                    .collect()
            })
            .unwrap_or_default();
        return format!(
            "healthy: every rank entered and completed the same collectives{}",
            if last.is_empty() {
                String::new()
            } else {
                format!("; the last: {}", last.join(", "))
            }
        );
    }
    match culprits.first() {
        Some(c) => {
            let ranks: Vec<u32> = culprits.iter().filter(|x| x.kind == c.kind).filter_map(|x| x.rank).collect();
            let what = match c.kind {
                "missing" => "never entered the collective the others wait in",
                "no-dump" => "left no dump while the others wait: likely dead",
                "mismatch" => "entered a different collective than the others",
                "ras-behind" => "is behind in collective counts (RAS)",
                "ras-dead" => "is dead (RAS)",
                _ => "did not answer RAS",
            };
            if ranks.is_empty() {
                format!("{} {what}", c.node)
            } else {
                format!("rank{} {} ({}) {what}", if ranks.len() > 1 { "s" } else { "" }, list(&ranks), c.node)
            }
        }
        None if v.is_none() && log.watchdog.is_some() => {
            "a watchdog timeout and no dumps: which rank stopped the job is not in the log; set the variables below and rerun".into()
        }
        None => "nothing to judge: no dump or RAS status was read".into(),
    }
}

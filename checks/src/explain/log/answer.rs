//! What a scan means: for each error found, its likely causes in order, each with its finding
//! id, what in the text points to it, the node concerned, the preflight command that confirms
//! it there (with the job's own flags when the log shows them) and the finding's fix.

use super::signatures::{self, Scope, Signature, Tier, When};
use super::signatures_sources;
use super::{Found, Hit, JobSeen, Scan, Unmatched};
use crate::explain::catalog;
use serde::Serialize;
use std::collections::BTreeMap;

/// The master port torchrun uses when none is given.
const DEFAULT_MASTER_PORT: u16 = 29500;

/// One error found and what to do about it.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Explained {
    pub signature: &'static str,
    /// The root cause among the errors found (the lowest tier, then the earliest).
    pub decisive: bool,
    /// The earliest error in the log.
    pub first: bool,
    pub tier: Tier,
    /// Lines this signature matched in all.
    pub count: u64,
    pub line_no: u64,
    pub line: String,
    pub host: Option<String>,
    pub rank: Option<u32>,
    pub device: Option<u32>,
    pub values: BTreeMap<String, String>,
    /// The other kept lines of this signature: where else it was seen.
    pub also: Vec<Seen>,
    pub proves: &'static str,
    pub suggests: &'static str,
    pub source: &'static str,
    pub causes: Vec<CauseOut>,
}

/// Another line of the same error.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub line_no: u64,
    pub host: Option<String>,
    pub rank: Option<u32>,
}

/// One likely cause, ready to confirm.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct CauseOut {
    /// A finding id of the catalog.
    pub id: &'static str,
    pub why: String,
    /// Where to look: a host or address, or "every node".
    pub node: String,
    /// The preflight command that confirms it there.
    pub confirm: String,
    /// The finding's fix, from the catalog.
    pub fix: &'static str,
}

/// The whole answer.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub lines_read: u64,
    pub bytes_read: u64,
    pub lines_cut: u64,
    /// Decisive first, then by tier and line.
    pub errors: Vec<Explained>,
    pub unmatched: Vec<Unmatched>,
    pub unmatched_count: u64,
    pub job: JobSeen,
}

/// Explains a scan.
pub fn explain(scan: &Scan) -> Answer {
    let decisive = scan.decisive().map(|(f, _)| f.signature);
    let first = scan.first().map(|(f, _)| f.signature);
    let mut errors: Vec<Explained> = scan
        .found
        .iter()
        .filter_map(|f| {
            let sig = signatures::get(f.signature)?;
            // The line that says most: one naming a loopback address, else the first.
            let hit = f
                .hits
                .iter()
                .find(|h| {
                    h.values
                        .get("addr")
                        .is_some_and(|a| signatures::is_loopback(a))
                })
                .or(f.hits.first())?;
            Some(explain_one(
                sig,
                f,
                hit,
                &scan.job,
                Some(f.signature) == decisive,
                Some(f.signature) == first,
            ))
        })
        .collect();
    errors.sort_by_key(|e| (!e.decisive, e.tier, e.line_no));
    Answer {
        lines_read: scan.lines_read,
        bytes_read: scan.bytes_read,
        lines_cut: scan.lines_cut,
        errors,
        unmatched: scan.unmatched.clone(),
        unmatched_count: scan.unmatched_count,
        job: scan.job.clone(),
    }
}

fn explain_one(
    sig: &Signature,
    f: &Found,
    hit: &Hit,
    job: &JobSeen,
    decisive: bool,
    first: bool,
) -> Explained {
    let addr = hit.values.get("addr").map(String::as_str);
    let loopback = addr.is_some_and(signatures::is_loopback);
    let errno: Option<u32> = hit.values.get("errno").and_then(|e| e.parse().ok());
    let causes = sig
        .causes
        .iter()
        .filter(|c| match c.when {
            When::Always => true,
            When::Loopback => loopback,
            When::NotLoopback => !loopback,
            When::Errno(n) => errno == Some(n),
            When::LinkLocal => addr.is_some_and(signatures::is_link_local),
        })
        .map(|c| {
            let node = node_for(c.scope, c.id, sig, hit, job, loopback);
            CauseOut {
                id: c.id,
                why: why(c.why, sig, hit),
                confirm: confirm(c.scope, c.id, sig, hit, job),
                node,
                fix: catalog::get(c.id)
                    .map(|e| e.fix)
                    .or_else(|| signatures_sources::job(c.id).map(|j| j.fix))
                    .unwrap_or(""),
            }
        })
        .collect::<Vec<_>>();
    let mut causes = causes;
    if sig.id == "c10d.watchdog-timeout"
        && let Some(why) = super::watchdog::mismatch(&f.hits)
    {
        let job = signatures_sources::job("job.mismatch");
        causes.insert(
            0,
            CauseOut {
                id: "job.mismatch",
                why,
                node: "every rank of the job".to_string(),
                confirm: "rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL (torch checks each collective's shapes across ranks), or with Flight Recorder dumps (TORCH_NCCL_DUMP_ON_TIMEOUT=1) and `preflight explain --dumps DIR`".to_string(),
                fix: job.map(|j| j.fix).unwrap_or(""),
            },
        );
    }
    Explained {
        signature: sig.id,
        decisive,
        first,
        tier: sig.tier,
        count: f.count,
        line_no: hit.line_no,
        line: hit.line.clone(),
        host: hit.host.clone(),
        rank: hit.rank,
        device: hit.device,
        values: hit.values.clone(),
        also: f
            .hits
            .iter()
            .skip(1)
            .map(|h| Seen {
                line_no: h.line_no,
                host: h.host.clone(),
                rank: h.rank,
            })
            .collect(),
        proves: sig.proves,
        suggests: sig.suggests,
        source: sig.source,
        causes,
    }
}

/// The cause's reason with the values that point to it.
fn why(base: &str, sig: &Signature, hit: &Hit) -> String {
    let v = &hit.values;
    let mut s = base.to_string();
    let mut facts = Vec::new();
    if let Some(a) = v.get("addr") {
        match v.get("port") {
            Some(p) => facts.push(format!("the text names {}", crate::infra::host_port(a, p))),
            None => facts.push(format!("the text names {a}")),
        }
    } else if let Some(p) = v.get("port") {
        facts.push(format!("port {p}"));
    }
    if let Some(e) = v.get("errno") {
        if let Some((_, t)) = signatures::errno_of(&hit.line) {
            facts.push(format!("errno {e} ({t})"));
        }
    }
    if sig.id == "nccl.ib-completion-error" && v.get("status").map(String::as_str) == Some("12") {
        facts.push("status 12 = retry counter exceeded".into());
    }
    if !facts.is_empty() {
        s.push_str(" (");
        s.push_str(&facts.join(", "));
        s.push(')');
    }
    s
}

/// The node that printed the line, named as well as the text allows.
fn reporter(hit: &Hit) -> String {
    match (&hit.host, hit.rank) {
        (Some(h), _) => h.clone(),
        (None, Some(r)) => format!("rank {r}'s node"),
        (None, None) => format!("the node that printed line {}", hit.line_no),
    }
}

fn node_for(
    scope: Scope,
    id: &str,
    sig: &Signature,
    hit: &Hit,
    job: &JobSeen,
    loopback: bool,
) -> String {
    match scope {
        Scope::Reporter => reporter(hit),
        Scope::Cluster => "every node".into(),
        Scope::Target => {
            let addr = hit
                .values
                .get("addr")
                .filter(|a| !signatures::is_loopback(a));
            match addr {
                Some(a) => a.clone(),
                // The loopback address was advertised by the master: its name is the job's.
                None if loopback || id == crate::sys::ids::HOSTNAME_LOOPBACK.as_str() => job
                    .master_addr
                    .clone()
                    .filter(|a| !signatures::is_loopback(a))
                    .unwrap_or_else(|| "the master (rank 0)".into()),
                None if sig.id.starts_with("c10d.") || sig.id.starts_with("elastic.") => job
                    .master_addr
                    .clone()
                    .unwrap_or_else(|| "the master (rank 0)".into()),
                None => "the peer".into(),
            }
        }
    }
}

/// The master port to check: the one the message names for c10d's own errors, else the
/// job's, else torchrun's default.
fn master_port(sig: &Signature, hit: &Hit, job: &JobSeen) -> u16 {
    let named = hit.values.get("port").and_then(|p| p.parse::<u16>().ok());
    let c10d = sig.id.starts_with("c10d.") || sig.id.starts_with("elastic.");
    match (c10d, named, job.master_port) {
        (true, Some(p), _) => p,
        (_, _, Some(p)) => p,
        _ => DEFAULT_MASTER_PORT,
    }
}

/// The preflight command that confirms a cause, with the job's flags where the log shows them.
fn confirm(scope: Scope, id: &str, sig: &Signature, hit: &Hit, job: &JobSeen) -> String {
    match id {
        "job.cuda-error" => {
            return "preflight check --gemm (a GPU that passes it points at the job's code; the rank's traceback above names the kernel)".into();
        }
        "job.mismatch" => {
            return "no node check confirms it: rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL, which compares each collective's shapes across ranks".into();
        }
        _ => {}
    }
    let port = master_port(sig, hit, job);
    let nproc = job
        .nproc_per_node
        .as_deref()
        .filter(|n| n.parse::<u32>().is_ok());
    let gpu = id.starts_with("gpu.") || id == crate::rendezvous::ids::DUPLICATE_HOST.as_str();
    match scope {
        Scope::Reporter | Scope::Target
            if id != crate::rendezvous::ids::DUPLICATE_HOST.as_str() =>
        {
            let mut c = format!("preflight check --master-port {port}");
            if let (true, Some(n)) = (gpu, nproc) {
                c.push_str(&format!(" --nproc-per-node {n}"));
            }
            c
        }
        _ => {
            let nnodes = job
                .nnodes
                .as_deref()
                .map(|n| n.rsplit(':').next().unwrap_or(n).to_string())
                .filter(|n| n.parse::<u32>().is_ok())
                .unwrap_or_else(|| "<nodes>".into());
            let mut c = format!("preflight cluster --nnodes {nnodes}");
            let target = hit
                .values
                .get("addr")
                .filter(|a| !signatures::is_loopback(a) && sig.id.starts_with("c10d."));
            match (&job.master_addr, target, &job.rdzv_endpoint) {
                (Some(a), _, _) => c.push_str(&format!(" --master-addr {a} --master-port {port}")),
                (None, Some(a), _) => {
                    c.push_str(&format!(" --master-addr {a} --master-port {port}"))
                }
                (None, None, Some(e)) => c.push_str(&format!(" --rdzv-endpoint {e}")),
                _ => c.push_str(&format!(
                    " --master-addr <rank 0's address> --master-port {port}"
                )),
            }
            if let Some(n) = nproc {
                c.push_str(&format!(" --nproc-per-node {n}"));
            }
            c
        }
    }
}

/// The `preflight explain --log --format json` document.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Explanation {
    /// "preflight.explain.v1"
    pub schema: &'static str,
    /// The file read, or "-" for standard input.
    pub log: String,
    #[serde(flatten)]
    pub answer: Answer,
    /// What NCCL's INFO lines say about the network it chose; None when the log has none.
    pub nccl: Option<NcclEvidence>,
    /// `--dumps`/`--ras`: the hang judged across ranks (absent for a log alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang: Option<Box<crate::explain::hang::answer::Hang>>,
}

/// The JSON `schema` of [`Explanation`].
pub const EXPLAIN_SCHEMA: &str = "preflight.explain.v1";

/// The interfaces and transports NCCL chose, from its `NCCL_DEBUG=INFO` lines, and how they
/// compare with what preflight would advise.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NcclEvidence {
    pub version: Option<String>,
    /// "IB", "Socket", or a plugin's name; empty when the log names none.
    pub transport: String,
    /// IB ports or socket interfaces NCCL said it uses.
    pub devices: Vec<String>,
    pub oob_interface: Option<String>,
    /// How channels connected ranks: "NET/IB", "NET/Socket", "P2P/IPC", "SHM".
    pub paths: Vec<String>,
    /// GPUDirect RDMA was used on a channel (`via NET/IB/0/GDRDMA`).
    pub gdrdma: bool,
    pub ib_no_device: bool,
    /// "NET/Socket eth0", "NET/IB mlx5_0:1".
    pub summary: String,
    /// Where NCCL's choice differs from preflight's advice, each with the finding id to check.
    pub notes: Vec<NcclNote>,
}

/// One difference between NCCL's choice and the advice.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct NcclNote {
    pub id: &'static str,
    pub text: String,
}

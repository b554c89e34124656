//! A node's side of the per-rail NCCL pair tests (issue 34): `RailStart` starts the rank-0
//! child of every (peer, rail) pair this node leads and answers with their unique ids;
//! `RailRun` runs every child of the round at once (rank 0 continues, rank 1 starts and joins
//! with the id that came through the coordinator), each under the worker's watchdog, and
//! answers with each side's result.

use crate::measure::nccl::rail::{RailChild, rail_job, rail_result};
use crate::measure::nccl::{self, NcclError, Worker};
use crate::transport::wire::{Msg, RailId, RailOrder, RailSide};
use preflight_checks::model::NodeFacts;
use std::collections::BTreeMap;
use std::time::Duration;

/// Children one order may hold: a node runs at most one per rail at a time.
pub const MAX_CHILDREN: usize = 64;
/// How long a rank-0 child may take to print its unique id (CUDA and NCCL load first).
const ID_TIMEOUT: Duration = Duration::from_secs(60);

/// The rank-0 children this node started, by (peer, rail), until `RailRun` continues them.
pub type Held = BTreeMap<(u32, u32), Worker>;

fn child_of(o: &RailOrder) -> RailChild {
    RailChild {
        rail: o.rail,
        gpu: o.gpu,
        hca: o.hca.clone(),
        port: o.port,
    }
}

/// Starts one child; `test_net` (a test seam) replaces `NCCL_NET=IB`.
fn start_child(
    facts: &NodeFacts,
    o: &RailOrder,
    test_net: Option<&str>,
) -> Result<Worker, NcclError> {
    let lib = nccl::available(facts).map_err(NcclError::LibraryMissing)?;
    let timeout = Duration::from_millis(o.timeout_ms.clamp(1000, 600_000));
    let mut job = rail_job(&child_of(o), o.first_rank, &o.env, timeout, Some(lib), None);
    if let Some(net) = test_net.filter(|v| !v.is_empty()) {
        job.env.insert("NCCL_NET".into(), net.to_string());
    }
    nccl::start(&job)
}

/// `RailStart`: the rank-0 child of every listed pair, its unique id within [`ID_TIMEOUT`]; the
/// children of an earlier round still held are stopped first. The children are spawned on this
/// (the agent's) thread, which lives as long as they do: a child's parent-death signal follows
/// the thread that spawned it. Only the waits run on threads of their own.
pub fn start(
    held: &mut Held,
    facts: &NodeFacts,
    children: &[RailOrder],
    test_net: Option<&str>,
) -> Msg {
    held.clear();
    let children = &children[..children.len().min(MAX_CHILDREN)];
    let mut workers: Vec<Result<Worker, NcclError>> = children
        .iter()
        .map(|o| start_child(facts, o, test_net))
        .collect();
    let got: Vec<Result<String, NcclError>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter_mut()
            .zip(children)
            .map(|(w, o)| {
                let wait = ID_TIMEOUT.min(Duration::from_millis(o.timeout_ms.max(1000)));
                s.spawn(move || match w {
                    Ok(w) => w.unique_id(wait),
                    Err(e) => Err(e.clone()),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(NcclError::Usage("the unique id's reader panicked".into()))
                })
            })
            .collect()
    });
    let mut ids = Vec::new();
    for ((o, w), id) in children.iter().zip(workers).zip(got) {
        match (w, id) {
            (Ok(w), Ok(id)) => {
                held.insert((o.peer, o.rail), w);
                ids.push(RailId {
                    peer: o.peer,
                    rail: o.rail,
                    id: Some(id),
                    error: None,
                });
            }
            (_, Err(e)) => ids.push(RailId {
                peer: o.peer,
                rail: o.rail,
                id: None,
                error: Some(e.to_string()),
            }),
            (Err(e), Ok(_)) => ids.push(RailId {
                peer: o.peer,
                rail: o.rail,
                id: None,
                error: Some(e.to_string()),
            }),
        }
    }
    Msg::RailIds { ids }
}

/// One child of `RailRun` to its end.
fn run_child(worker: Result<Worker, NcclError>, o: &RailOrder, test_net: Option<&str>) -> RailSide {
    let outcome = worker.and_then(|mut w| {
        w.give_id(&o.id)?;
        w.finish()
    });
    let (r, _) = rail_result(0, 1, o.rail, 0, &outcome, test_net);
    RailSide {
        peer: o.peer,
        rail: o.rail,
        gbps: r.gbps,
        error: r.error,
    }
}

/// `RailRun`: every listed child at once (spawned on this thread, see [`start`]), one thread
/// each to wait for it; answers when all ended (each within its watchdog's timeout).
pub fn run(
    held: &mut Held,
    facts: &NodeFacts,
    children: &[RailOrder],
    test_net: Option<&str>,
) -> Msg {
    let children = &children[..children.len().min(MAX_CHILDREN)];
    let work: Vec<(Result<Worker, NcclError>, &RailOrder)> = children
        .iter()
        .map(|o| {
            let w = if o.first_rank == 0 {
                held.remove(&(o.peer, o.rail)).ok_or_else(|| {
                    NcclError::Usage(
                        "this node holds no rank-0 child for this pair (RailStart failed or was not sent)"
                            .into(),
                    )
                })
            } else {
                start_child(facts, o, test_net)
            };
            (w, o)
        })
        .collect();
    held.clear();
    let sides = std::thread::scope(|s| {
        let handles: Vec<_> = work
            .into_iter()
            .map(|(w, o)| (o, s.spawn(move || run_child(w, o, test_net))))
            .collect();
        handles
            .into_iter()
            .map(|(o, h)| {
                h.join().unwrap_or_else(|_| RailSide {
                    peer: o.peer,
                    rail: o.rail,
                    gbps: None,
                    error: Some("the child's runner panicked".into()),
                })
            })
            .collect()
    });
    Msg::RailDone { sides }
}

//! A node's side of the NCCL all-reduce: starts the watchdog-guarded worker child, hands the
//! unique id between it and the coordinator, and turns its outcome into the reply.

use crate::measure::nccl::{self, NcclJob, NcclOutcome, Worker};
use crate::transport::wire::{Msg, NcclOrder};
use preflight_checks::model::NodeFacts;
use std::time::Duration;

/// How long the worker that makes the unique id may take to print it (CUDA and NCCL load first).
const ID_TIMEOUT: Duration = Duration::from_secs(60);

fn job(facts: &NodeFacts, order: &NcclOrder) -> Result<NcclJob, String> {
    let lib = nccl::available(facts)?;
    let o = bounded(order);
    Ok(NcclJob {
        nranks: o.nranks,
        first_rank: o.first_rank,
        gpus: o.gpus,
        sizes: o.sizes.clone(),
        warmup: o.warmup,
        iters: o.iters,
        env: o.env.clone(),
        timeout: Duration::from_millis(o.timeout_ms),
        lib: Some(lib),
        program: None,
    })
}

/// `NcclStart`: this node hosts NCCL rank 0; start its worker and answer with the unique id.
pub fn start(slot: &mut Option<Worker>, facts: &NodeFacts, order: &NcclOrder) -> Msg {
    *slot = None;
    let job = match job(facts, order) {
        Ok(j) => j,
        Err(error) => return Msg::Failed { error },
    };
    let mut worker = match nccl::start(&job) {
        Ok(w) => w,
        Err(e) => {
            return Msg::Failed {
                error: e.to_string(),
            };
        }
    };
    match worker.unique_id(ID_TIMEOUT) {
        Ok(id) => {
            *slot = Some(worker);
            Msg::NcclId { id }
        }
        Err(e) => Msg::Failed {
            error: e.to_string(),
        },
    }
}

/// `NcclRun`: join with the unique id (starting the worker unless `NcclStart` did) and run every size.
pub fn run_nccl(slot: &mut Option<Worker>, facts: &NodeFacts, order: &NcclOrder, id: &str) -> Msg {
    let worker = match slot.take() {
        Some(w) => Ok(w),
        None => job(facts, order).and_then(|j| nccl::start(&j).map_err(|e| e.to_string())),
    };
    let outcome = worker.and_then(|mut w| {
        w.give_id(id).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())
    });
    match outcome {
        Ok(o) => done(o, &order.env),
        Err(error) => Msg::NcclDone {
            rows: Vec::new(),
            net: None,
            net_mismatch: None,
            error: Some(error),
        },
    }
}

fn done(o: NcclOutcome, env: &std::collections::BTreeMap<String, String>) -> Msg {
    let net_mismatch = o
        .net_used
        .as_ref()
        .and_then(|n| nccl::differs_from_advice(n, env));
    Msg::NcclDone {
        rows: o.rows,
        net: o.net,
        net_mismatch,
        error: None,
    }
}

/// The NCCL order's fields, checked (the coordinator is trusted only after the handshake, but
/// still never trusted to size things without bounds).
pub fn bounded(order: &NcclOrder) -> NcclOrder {
    NcclOrder {
        warmup: order.warmup.min(100),
        iters: order.iters.clamp(1, 1000),
        timeout_ms: order.timeout_ms.clamp(1000, 3_600_000),
        ..order.clone()
    }
}

//! The NCCL all-reduce on the coordinator: one worker child per node drives its GPUs; the node
//! hosting NCCL rank 0 makes the unique id, the coordinator hands it to every node, and each
//! node's rows come back per size.

use super::rows::{Ask, fail, index_of, merge_rows, merged_env};
use crate::runtime::job::AllreducePlan;
use crate::runtime::members::{JoinedNode, Step, Wait, send_orders};
use crate::transport::events::Events;
use crate::transport::wire::{Msg, NcclOrder, RankRow};
use preflight_checks::model::{CollectiveResult, Recommendation};
use std::collections::BTreeMap;

const PHASE: &str = "the NCCL all-reduce";

/// NCCL: one child per node drives its GPUs; the node hosting NCCL rank 0 makes the unique id,
/// the coordinator hands it to every node.
pub(super) fn nccl_run(
    members: &mut [JoinedNode],
    rec: &Recommendation,
    overrides: &BTreeMap<String, String>,
    mut res: CollectiveResult,
    plan: &AllreducePlan,
    events: &Events,
) -> CollectiveResult {
    let order = res.order.clone();
    let orders = nccl_orders(members, rec, overrides, &mut res, plan);
    if res.error.is_some() {
        return res;
    }
    let Some(first) = order.first().copied() else {
        res.error = Some("no node to run on".into());
        return res;
    };
    let Some(id) = unique_id(members, &orders, first, &mut res, plan) else {
        return res;
    };
    // 2. Every node joins with the id and runs the sizes.
    let asked = send_orders(members, PHASE, |m| {
        orders.get(&m.rank).map(|o| Msg::NcclRun {
            order: o.clone(),
            id: id.clone(),
        })
    });
    let mut per_rank: BTreeMap<u32, Vec<RankRow>> = BTreeMap::new();
    let ask = Ask {
        phase: PHASE,
        wait: Wait {
            limit: plan.limit(),
            silence: plan.limit(),
        },
        is_final: |m| matches!(m, Msg::NcclDone { .. } | Msg::Failed { .. }),
        lost: "stopped answering during the NCCL all-reduce",
    };
    ask.gather(members, &asked, &mut res, |m, msg, res| match msg {
        Msg::NcclDone {
            rows,
            net,
            net_mismatch,
            error,
        } => {
            if let Some(e) = error {
                fail(res, m.rank, &e);
            }
            if res.net.is_none() {
                res.net = net;
            }
            if res.net_mismatch.is_none() {
                res.net_mismatch = net_mismatch.map(|w| format!("rank {}: {w}", m.rank));
            }
            per_rank.insert(m.rank, rows);
            events.step();
            Step::Done
        }
        Msg::Failed { error } => {
            fail(res, m.rank, &error);
            Step::Done
        }
        _ => Step::Unexpected,
    });
    let nranks = res.ranks;
    merge_rows(&mut res, &order, &per_rank, nranks);
    res
}

/// Each alive node's order, its NCCL ranks numbered on from the previous node's GPUs; a node
/// that cannot run NCCL is noted on `res`. Sets the result's ranks to the GPUs in all.
fn nccl_orders(
    members: &[JoinedNode],
    rec: &Recommendation,
    overrides: &BTreeMap<String, String>,
    res: &mut CollectiveResult,
    plan: &AllreducePlan,
) -> BTreeMap<u32, NcclOrder> {
    let mut orders: BTreeMap<u32, NcclOrder> = BTreeMap::new();
    let mut next = 0u32;
    for r in res.order.clone() {
        let Some(i) = index_of(members, r) else {
            continue;
        };
        if let Some(why) = crate::measure::nccl::unready(&members[i].facts) {
            fail(res, r, &format!("cannot run NCCL: {why}"));
            continue;
        }
        let gpus = preflight_checks::visible_devices::visible_gpu_count(&members[i].facts);
        orders.insert(
            r,
            NcclOrder {
                nranks: 0,
                first_rank: next,
                gpus,
                sizes: plan.sizes.clone(),
                warmup: plan.warmup,
                iters: plan.iters,
                env: merged_env(&rec.env, rec.node_env.get(&r.to_string()), overrides),
                timeout_ms: plan.limit().as_millis() as u64,
            },
        );
        next += gpus;
    }
    if res.error.is_none() {
        for o in orders.values_mut() {
            o.nranks = next;
        }
        res.ranks = next;
    }
    orders
}

/// Step 1: the unique id from `first`, the node hosting NCCL rank 0 (`None`, noted on `res`,
/// when it sent none).
fn unique_id(
    members: &mut [JoinedNode],
    orders: &BTreeMap<u32, NcclOrder>,
    first: u32,
    res: &mut CollectiveResult,
    plan: &AllreducePlan,
) -> Option<String> {
    let asked = send_orders(members, PHASE, |m| {
        (m.rank == first).then(|| Msg::NcclStart {
            order: orders[&first].clone(),
        })
    });
    let mut id = None;
    let ask = Ask {
        phase: PHASE,
        wait: Wait::within(plan.step_timeout),
        is_final: |m| matches!(m, Msg::NcclId { .. } | Msg::Failed { .. }),
        lost: "stopped answering while starting NCCL",
    };
    ask.gather(members, &asked, res, |m, msg, res| match msg {
        Msg::NcclId { id: got } => {
            id = Some(got);
            Step::Done
        }
        Msg::Failed { error } => {
            fail(res, m.rank, &error);
            Step::Done
        }
        _ => Step::Unexpected,
    });
    if id.is_none() && res.error.is_none() {
        fail(res, first, "did not send NCCL's unique id");
    }
    id
}

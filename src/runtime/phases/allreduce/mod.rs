//! The all-reduce phase on the coordinator: picks TCP (`tcp`) or NCCL (`nccl_run`), hands every
//! node its part, merges the nodes' timings into nccl-tests-style rows (`rows`: the slowest
//! node's time per size). Each node's side is `node` (the ring) and `nccl` (the worker child);
//! `intra` is the one-node NCCL all-reduce of `check --thorough`.

pub mod intra;
pub mod nccl;
mod nccl_run;
pub mod node;
mod rows;
mod tcp;

use rows::merged_env;
pub use rows::row;
pub use tcp::working_ring;

use super::ctx::{Lap, Outcome, Phase, PhaseCtx};
use crate::runtime::advice;
use crate::runtime::job::{AllreduceMode, AllreducePlan};
use crate::runtime::members::JoinedNode;
use crate::transport::events::Events;
use preflight_checks::model::{CollectiveResult, NodeFacts, Recommendation};
use preflight_checks::networks::{self, NetworkEval};
use std::collections::BTreeMap;

/// The all-reduce phase: the first advice, then the all-reduce it asks for.
pub struct Allreduce;

impl Phase for Allreduce {
    fn name(&self) -> &'static str {
        "all-reduce"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        let run = ctx.run;
        run.events.step();
        let seen = advice::seen(&ctx.members);
        let recommendation = advice::advise(
            &seen,
            &preflight_checks::model::Links::borrowed(&ctx.links),
            run,
            BTreeMap::new(),
            None,
        );
        let evals = {
            let nodes = advice::alive_or_joined(&seen);
            let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
            networks::evaluate(&networks::discover(&nodes, &ctx.links), &ctx.links, &ranks)
        };
        let plan = &run.job.allreduce;
        let outcome =
            measure_allreduce(&mut ctx.members, &evals, &recommendation, plan, &run.events);
        ctx.found.preferred = preferred_overrides(&outcome.results, &plan.compare_env);
        ctx.found.recommendation = Some(recommendation);
        ctx.found.traffic.allreduce = outcome;
        Lap::Timed
    }
}

/// The transport `--allreduce` resolves to for these nodes, or why none runs.
pub fn transport(mode: AllreduceMode, nodes: &[(u32, &NodeFacts)]) -> Result<&'static str, String> {
    match mode {
        AllreduceMode::Off => Err("not measured (--allreduce off)".into()),
        AllreduceMode::Tcp => Ok("tcp"),
        AllreduceMode::Nccl => Ok("nccl"),
        AllreduceMode::Auto => {
            if !nodes.is_empty()
                && nodes
                    .iter()
                    .all(|(_, f)| crate::measure::nccl::unready(f).is_none())
            {
                Ok("nccl")
            } else {
                Ok("tcp")
            }
        }
    }
}

/// Runs the all-reduce the plan asks for, with the advised environment and, with
/// `--compare-env`, a second time with those variables changed.
fn measure_allreduce(
    members: &mut [JoinedNode],
    evals: &[NetworkEval],
    rec: &Recommendation,
    plan: &AllreducePlan,
    events: &Events,
) -> Outcome {
    let alive: Vec<(u32, &NodeFacts)> = members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, &m.facts))
        .collect();
    let transport = match transport(plan.mode, &alive) {
        Ok(t) => t,
        Err(why) => {
            return Outcome {
                not_run: Some(why),
                ..Default::default()
            };
        }
    };
    let alive_ranks: Vec<u32> = alive.iter().map(|(r, _)| *r).collect();
    // No network connects every pair: one failed pair among n² does not skip the all-reduce;
    // it runs (TCP) over a ring of links that worked, on the network closest to complete.
    let mut ring_note = None;
    let mut ring_order = None;
    let chosen = match preflight_checks::networks::choose(evals) {
        Some(c) => c,
        None => {
            let candidate = evals
                .iter()
                .filter(|e| {
                    alive_ranks
                        .iter()
                        .all(|r| e.network.members.contains_key(r))
                })
                .max_by_key(|e| e.pairs_ok);
            let ring = candidate.and_then(|e| working_ring(e, &alive_ranks).map(|o| (e, o)));
            match (transport, ring) {
                ("tcp", Some((e, order))) => {
                    ring_note = Some(format!(
                        "the all-reduce ran over a ring of links that connected on {} ({} of {} ordered pairs did not: they are left out of the ring; see link.unreachable)",
                        e.network.id,
                        e.pairs_total - e.pairs_ok,
                        e.pairs_total
                    ));
                    ring_order = Some(order);
                    e
                }
                _ => {
                    return Outcome {
                        not_run: Some(
                            "not measured: no network connects every node, and no ring of working links covers them all (see link.unreachable)".into(),
                        ),
                        ..Default::default()
                    };
                }
            }
        }
    };
    let mut configs = vec![("advice", BTreeMap::new())];
    if !plan.compare_env.is_empty() {
        configs.push(("compare", plan.compare_env.clone()));
    }
    let mut results = Vec::new();
    let mut notes: Vec<String> = ring_note.into_iter().collect();
    for (config, overrides) in configs {
        let net = if transport == "tcp" && config == "compare" {
            match tcp_compare_network(evals, &overrides) {
                Ok(net) => net,
                Err(note) => {
                    notes.push(note);
                    continue;
                }
            }
        } else {
            chosen
        };
        let env = merged_env(&rec.env, None, &overrides);
        let mut base = base_result(transport, net, members, env, config);
        if let (Some(order), true) = (&ring_order, std::ptr::eq(net, chosen)) {
            base.order = order.clone();
        }
        events.phase(format!("{transport} all-reduce ({config})"));
        events.log(format!(
            "coordinator: {transport} all-reduce ({config}) starts on {} nodes, {} sizes",
            base.order.len(),
            plan.sizes.len()
        ));
        let result = if transport == "tcp" {
            tcp::tcp_ring(members, base, plan, events)
        } else {
            nccl_run::nccl_run(members, rec, &overrides, base, plan, events)
        };
        events.log(format!(
            "coordinator: {} all-reduce ({config}) done: {} sizes{}",
            transport,
            result.rows.len(),
            result
                .error
                .as_ref()
                .map(|e| format!(", error: {e}"))
                .unwrap_or_default()
        ));
        results.push(result);
    }
    Outcome {
        results,
        not_run: None,
        notes,
    }
}

/// The TCP ring follows only `NCCL_SOCKET_IFNAME`: with `--compare-env` naming it, the network
/// whose interfaces it selects on every node; otherwise there is nothing to compare.
fn tcp_compare_network<'a>(
    evals: &'a [NetworkEval],
    overrides: &BTreeMap<String, String>,
) -> Result<&'a NetworkEval, String> {
    let Some(value) = overrides.get("NCCL_SOCKET_IFNAME") else {
        return Err(
            "--compare-env was not measured: the TCP ring changes only with NCCL_SOCKET_IFNAME; the other variables apply to --allreduce nccl"
                .into(),
        );
    };
    let spec = preflight_checks::ifname::IfnameSpec::parse(value);
    evals
        .iter()
        .filter(|e| e.fully_connected)
        .find(|e| e.network.members.values().all(|m| spec.matches(&m.interface)))
        .ok_or_else(|| {
            format!(
                "--compare-env NCCL_SOCKET_IFNAME={value} was not measured: it selects no network that connects every node"
            )
        })
}

fn base_result(
    transport: &str,
    chosen: &NetworkEval,
    members: &[JoinedNode],
    env: BTreeMap<String, String>,
    config: &str,
) -> CollectiveResult {
    let order: Vec<u32> = members
        .iter()
        .filter(|m| m.alive && chosen.network.members.contains_key(&m.rank))
        .map(|m| m.rank)
        .collect();
    let mut names: Vec<String> = chosen
        .network
        .members
        .values()
        .map(|m| m.interface.clone())
        .collect();
    names.sort();
    names.dedup();
    CollectiveResult {
        op: "allreduce".into(),
        transport: transport.into(),
        ranks: order.len() as u32,
        env,
        addresses: order
            .iter()
            .filter_map(|r| {
                let m = chosen.network.members.get(r)?;
                Some((r.to_string(), m.address.to_string()))
            })
            .collect(),
        order,
        network: Some(format!("{} ({})", chosen.network.id, names.join("/"))),
        config: config.into(),
        ..Default::default()
    }
}

/// With `--compare-env`: when the compared setting was faster at the largest common size,
/// returns its overrides and a reason citing both numbers.
pub fn preferred_overrides(
    results: &[CollectiveResult],
    compare_env: &BTreeMap<String, String>,
) -> (Option<BTreeMap<String, String>>, Option<String>) {
    let find = |c: &str| results.iter().find(|r| r.config == c && r.error.is_none());
    let (Some(advice), Some(compare)) = (find("advice"), find("compare")) else {
        return (None, None);
    };
    let biggest = |r: &CollectiveResult| {
        preflight_checks::collective::large_row(r).map(|x| (x.bytes, x.busbw_gb_s))
    };
    let (Some((ab, abw)), Some((cb, cbw))) = (biggest(advice), biggest(compare)) else {
        return (None, None);
    };
    if ab != cb {
        return (None, None);
    }
    let changed = compare_env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let size = preflight_checks::collective::human_bytes(ab);
    if cbw > abw * 1.05 && compare.rows.iter().all(|r| r.wrong == 0) {
        (
            Some(compare_env.clone()),
            Some(format!(
                "{changed}: the {} all-reduce measured {cbw:.3} GB/s busbw at {size} with it against {abw:.3} GB/s with the first advice, so the advice uses it",
                compare.transport
            )),
        )
    } else {
        (
            None,
            Some(format!(
                "kept the advice: the {} all-reduce measured {abw:.3} GB/s busbw at {size} with it against {cbw:.3} GB/s with {changed} (--compare-env)",
                advice.transport
            )),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_picks_nccl_only_when_every_node_can() {
        let mut gpu = NodeFacts::default();
        gpu.gpu.gpus.push(Default::default());
        gpu.nccl.library = Some("/usr/lib/libnccl.so.2".into());
        let cpu = NodeFacts::default();
        assert_eq!(
            transport(AllreduceMode::Auto, &[(0, &gpu), (1, &gpu)]),
            Ok("nccl")
        );
        assert_eq!(
            transport(AllreduceMode::Auto, &[(0, &gpu), (1, &cpu)]),
            Ok("tcp")
        );
        assert_eq!(transport(AllreduceMode::Tcp, &[(0, &gpu)]), Ok("tcp"));
        assert!(transport(AllreduceMode::Off, &[(0, &gpu)]).is_err());
    }

    fn result(config: &str, busbw_time_us: f64) -> CollectiveResult {
        CollectiveResult {
            transport: "nccl".into(),
            config: config.into(),
            ranks: 2,
            rows: vec![row(256 << 20, busbw_time_us, 2, 0)],
            ..Default::default()
        }
    }

    #[test]
    fn compare_env_wins_only_when_faster_and_both_numbers_are_cited() {
        let cmp = BTreeMap::from([("NCCL_IB_DISABLE".to_string(), "1".to_string())]);
        let (over, why) = preferred_overrides(
            &[result("advice", 100_000.0), result("compare", 50_000.0)],
            &cmp,
        );
        assert_eq!(over, Some(cmp.clone()));
        let why = why.unwrap();
        assert!(why.contains("5.369") && why.contains("2.684"), "{why}");
        let (over, why) = preferred_overrides(
            &[result("advice", 50_000.0), result("compare", 100_000.0)],
            &cmp,
        );
        assert_eq!(over, None);
        assert!(why.unwrap().starts_with("kept the advice"));
        assert_eq!(
            preferred_overrides(&[result("advice", 1.0)], &cmp),
            (None, None)
        );
    }
}

//! The per-rail NCCL pair tests on the coordinator (issue 34): in the rounds the throughput
//! schedule has (ring plus k matchings), each matched pair of nodes runs one 2-rank NCCL job
//! per rail at once on the two nodes. Per round: `RailStart` to the rank-0 sides, their unique
//! ids back, `RailRun` to both sides with the ids, each side's result back; the results are
//! localised (`preflight_checks::rails::localise`) and the suspects retested against
//! known-good partners. Then the RDMA counters' second snapshot (`ib.counters-grew`).
//!
//! Every alive node gets every round's two orders (empty when it has no part), so none waits
//! for its next order longer than one step, and every step's wait is bounded by `--timeout`.
//! Per node: O(rounds x rails) children, never one per other node.

pub mod counters;
pub mod node;
pub mod pairs;

use super::ctx::{Lap, Phase, PhaseCtx, RailOutcome};
use crate::measure::nccl::rail::RailChild;
use crate::runtime::job::AllreduceMode;
use crate::runtime::members::{JoinedNode, Step, Wait, gather, send_orders};
use crate::transport::events::Events;
use crate::transport::wire::{Msg, RailOrder, RailSide};
use pairs::{combine, rail_rounds};
use preflight_checks::model::{NodeFacts, Recommendation};
use preflight_checks::rails::localise::{RailResult, localise, retest_plan, rounds};
use preflight_checks::rails::map_rails;
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest one per-rail child may run (CUDA and NCCL start-up, then 12 iterations of 256 MiB).
pub const RAIL_CHILD_TIMEOUT: Duration = Duration::from_secs(90);
/// Longest a rank-0 child may take to hand out its unique id.
const RAIL_ID_TIMEOUT: Duration = Duration::from_secs(60);
/// Retest rounds at most (each holds one child per node and rail).
const MAX_RETEST_ROUNDS: usize = 6;

/// The per-rail NCCL pair tests, with the advice the all-reduce ran with.
pub struct Rails;

impl Phase for Rails {
    fn name(&self) -> &'static str {
        "per-rail tests"
    }

    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap {
        let run = ctx.run;
        let plan = RailPlan {
            mode: run.job.allreduce.mode,
            matchings: run.job.timing.matchings,
            seed: run.nnodes() as u64,
            timeout: run.join_timeout(),
        };
        let none = Recommendation::default();
        let rec = ctx.found.recommendation.as_ref().unwrap_or(&none);
        let rails = measure_rails(&mut ctx.members, rec, &plan, &run.events);
        let ran = rails.not_run.is_none();
        ctx.found.traffic.rails.outcome = rails;
        if ran { Lap::Timed } else { Lap::Untimed }
    }
}

/// What the per-rail tests need from the run.
#[derive(Clone, Debug)]
pub struct RailPlan {
    pub mode: AllreduceMode,
    /// Random matchings beyond the ring (the throughput schedule's k).
    pub matchings: u32,
    pub seed: u64,
    /// `--timeout`: no step waits longer than it (plus a margin).
    pub timeout: Duration,
}

/// Why a node cannot take part, or its rails (GPU r with its closest ACTIVE HCA port).
pub fn node_rails(facts: &NodeFacts) -> Result<Vec<RailChild>, String> {
    if facts.ib.devices.is_empty() {
        return Err("no InfiniBand/RoCE devices".into());
    }
    if let Some(why) = crate::measure::nccl::unready(facts) {
        return Err(format!("cannot run NCCL: {why}"));
    }
    let rails: Vec<RailChild> = map_rails(&facts.ib)
        .into_iter()
        .filter_map(|r| {
            let gpu = r.gpu?;
            let active = facts
                .ib
                .devices
                .iter()
                .find(|d| d.name == r.hca)
                .and_then(|d| d.ports.iter().find(|p| p.port == r.port))
                .is_some_and(|p| p.is_active());
            active.then(|| RailChild {
                rail: r.index,
                gpu,
                hca: r.hca.clone(),
                port: r.port,
            })
        })
        .collect();
    if rails.is_empty() {
        return Err("no rail pairs a GPU with an ACTIVE HCA port".into());
    }
    Ok(rails)
}

/// Each taking part node's rails, by rank.
pub type RailsByRank = BTreeMap<u32, Vec<RailChild>>;

/// The nodes that run the tests with their rails, and those left out with why.
pub fn eligible(nodes: &[(u32, &NodeFacts)]) -> (RailsByRank, Vec<(u32, String)>) {
    let mut rails = BTreeMap::new();
    let mut skipped = Vec::new();
    for (rank, f) in nodes {
        match node_rails(f) {
            Ok(r) => {
                rails.insert(*rank, r);
            }
            Err(why) => skipped.push((*rank, why)),
        }
    }
    (rails, skipped)
}

/// Runs the per-rail pair tests over the alive members, with the advice's environment.
fn measure_rails(
    members: &mut [JoinedNode],
    rec: &Recommendation,
    plan: &RailPlan,
    events: &Events,
) -> RailOutcome {
    if matches!(plan.mode, AllreduceMode::Off | AllreduceMode::Tcp) {
        return RailOutcome {
            not_run: Some(
                "not run: the per-rail tests run NCCL, and --allreduce is off or tcp".into(),
            ),
            ..Default::default()
        };
    }
    let alive: Vec<(u32, &NodeFacts)> = members
        .iter()
        .filter(|m| m.alive)
        .map(|m| (m.rank, &m.facts))
        .collect();
    let (rails, skipped) = eligible(&alive);
    if rails.len() < 2 {
        return RailOutcome {
            not_run: Some(format!(
                "not run: {} node(s) have GPUs with RDMA rails and NCCL, and a pair test needs two{}",
                rails.len(),
                skipped
                    .first()
                    .map(|(r, why)| format!(" (rank {r}: {why})"))
                    .unwrap_or_default()
            )),
            skipped,
            ..Default::default()
        };
    }
    let child_timeout = RAIL_CHILD_TIMEOUT.min(plan.timeout.max(Duration::from_secs(5)));
    let run = Round {
        rails: &rails,
        rec,
        child_timeout,
        step_limit: plan.timeout + Duration::from_secs(5),
    };
    events.phase("per-rail NCCL pair tests");
    let schedule = rail_rounds(&rails, plan.matchings, plan.seed);
    events.log(format!(
        "coordinator: per-rail NCCL pair tests on {} nodes, {} rounds",
        rails.len(),
        schedule.len()
    ));
    let mut results = Vec::new();
    for pairs in &schedule {
        results.extend(run.round(members, pairs, 0));
    }
    let mut verdict = localise(&results);
    if !verdict.clean() {
        let retest = rounds(&retest_plan(&results, &verdict));
        for pairs in retest.iter().take(MAX_RETEST_ROUNDS) {
            results.extend(run.round(members, pairs, 1));
        }
        verdict = localise(&results);
    }
    events.log(format!(
        "coordinator: per-rail NCCL pair tests done: {} judged, {} bad, {} part(s) blamed",
        verdict.judged,
        verdict.bad,
        verdict.blames.len()
    ));
    RailOutcome {
        results,
        verdict: Some(verdict),
        not_run: None,
        skipped,
    }
}

/// Per (node, peer, rail).
type ByPair<T> = BTreeMap<(u32, u32, u32), T>;

/// What every round shares.
struct Round<'a> {
    rails: &'a RailsByRank,
    rec: &'a Recommendation,
    child_timeout: Duration,
    step_limit: Duration,
}

impl Round<'_> {
    fn side(&self, me: u32, peer: u32, rail: u32, first_rank: u32) -> Option<RailOrder> {
        let c = self.rails.get(&me)?.iter().find(|c| c.rail == rail)?;
        let mut env = self.rec.env.clone();
        if let Some(own) = self.rec.node_env.get(&me.to_string()) {
            env.extend(own.clone());
        }
        Some(RailOrder {
            peer,
            rail,
            gpu: c.gpu,
            hca: c.hca.clone(),
            port: c.port,
            first_rank,
            id: String::new(),
            env,
            timeout_ms: self.child_timeout.as_millis() as u64,
        })
    }

    /// One round: every (a, b, rail) at once on the nodes; a result per (a, b, rail).
    fn round(
        &self,
        members: &mut [JoinedNode],
        pairs: &[(u32, u32, u32)],
        round: u32,
    ) -> Vec<RailResult> {
        let mut firsts: BTreeMap<u32, Vec<RailOrder>> = BTreeMap::new();
        let mut seconds: BTreeMap<u32, Vec<RailOrder>> = BTreeMap::new();
        let mut errors: BTreeMap<(u32, u32, u32), String> = BTreeMap::new();
        for &(a, b, rail) in pairs {
            match (self.side(a, b, rail, 0), self.side(b, a, rail, 1)) {
                (Some(x), Some(y)) => {
                    firsts.entry(a).or_default().push(x);
                    seconds.entry(b).or_default().push(y);
                }
                _ => {
                    errors.insert((a, b, rail), format!("rail {rail} is missing on one side"));
                }
            }
        }
        // 1. The rank-0 children start and hand out their unique ids.
        let (ids, mut gone) = self.unique_ids(members, &firsts, &mut errors);
        // 2. Both sides of every pair with an id run.
        let run = with_ids(&firsts, &seconds, &ids);
        let (sides, lost) = self.run_sides(members, &run);
        gone.extend(lost);
        let answers = Answers {
            errors: &errors,
            sides: &sides,
            gone: &gone,
            round,
        };
        pairs.iter().map(|&pair| answers.result(pair)).collect()
    }

    /// `RailStart` to every alive node (empty for a node with no rank-0 side): the unique ids by
    /// (node, peer, rail), failures noted in `errors`; and the ranks lost meanwhile.
    fn unique_ids(
        &self,
        members: &mut [JoinedNode],
        firsts: &BTreeMap<u32, Vec<RailOrder>>,
        errors: &mut BTreeMap<(u32, u32, u32), String>,
    ) -> (ByPair<String>, Vec<u32>) {
        let asked = send_orders(members, "the per-rail tests", |m| {
            Some(Msg::RailStart {
                children: firsts.get(&m.rank).cloned().unwrap_or_default(),
            })
        });
        let mut ids: BTreeMap<(u32, u32, u32), String> = BTreeMap::new();
        let lost = gather(
            members,
            &asked,
            "the per-rail tests",
            Wait::within(
                self.step_limit
                    .min(RAIL_ID_TIMEOUT + Duration::from_secs(5)),
            ),
            |m| matches!(m, Msg::RailIds { .. }),
            |m, msg| match msg {
                Msg::RailIds { ids: got } => {
                    for id in got {
                        let key = (m.rank, id.peer, id.rail);
                        match (id.id, id.error) {
                            (Some(hex), _) => {
                                ids.insert(key, hex);
                            }
                            (None, e) => {
                                errors.insert(key, e.unwrap_or_else(|| "no unique id".into()));
                            }
                        }
                    }
                    Step::Done
                }
                _ => Step::Unexpected,
            },
        );
        (ids, lost.iter().map(|&i| members[i].rank).collect())
    }

    /// `RailRun` to every alive node: each side's result by (node, peer, rail), and the ranks
    /// lost meanwhile.
    fn run_sides(
        &self,
        members: &mut [JoinedNode],
        run: &BTreeMap<u32, Vec<RailOrder>>,
    ) -> (ByPair<RailSide>, Vec<u32>) {
        let asked = send_orders(members, "the per-rail tests", |m| {
            Some(Msg::RailRun {
                children: run.get(&m.rank).cloned().unwrap_or_default(),
            })
        });
        let mut sides: BTreeMap<(u32, u32, u32), RailSide> = BTreeMap::new();
        let lost = gather(
            members,
            &asked,
            "the per-rail tests",
            Wait::within(self.step_limit),
            |m| matches!(m, Msg::RailDone { .. }),
            |m, msg| match msg {
                Msg::RailDone { sides: got } => {
                    for s in got {
                        sides.insert((m.rank, s.peer, s.rail), s);
                    }
                    Step::Done
                }
                _ => Step::Unexpected,
            },
        );
        (sides, lost.iter().map(|&i| members[i].rank).collect())
    }
}

/// Both sides' orders of every pair whose rank-0 side sent its unique id, with the id.
fn with_ids(
    firsts: &BTreeMap<u32, Vec<RailOrder>>,
    seconds: &BTreeMap<u32, Vec<RailOrder>>,
    ids: &BTreeMap<(u32, u32, u32), String>,
) -> BTreeMap<u32, Vec<RailOrder>> {
    let mut run: BTreeMap<u32, Vec<RailOrder>> = BTreeMap::new();
    for (a, list) in firsts {
        for o in list {
            let Some(id) = ids.get(&(*a, o.peer, o.rail)) else {
                continue;
            };
            let mut x = o.clone();
            x.id = id.clone();
            run.entry(*a).or_default().push(x);
            if let Some(y) = seconds
                .get(&o.peer)
                .and_then(|l| l.iter().find(|y| y.peer == *a && y.rail == o.rail))
            {
                let mut y = y.clone();
                y.id = id.clone();
                run.entry(o.peer).or_default().push(y);
            }
        }
    }
    run
}

/// What one round heard: the failures before a child ran, each side's result, the ranks lost.
struct Answers<'a> {
    errors: &'a BTreeMap<(u32, u32, u32), String>,
    sides: &'a BTreeMap<(u32, u32, u32), RailSide>,
    gone: &'a [u32],
    round: u32,
}

impl Answers<'_> {
    /// The pair's result from its two sides (`rail_pairs::combine`).
    fn result(&self, (a, b, rail): (u32, u32, u32)) -> RailResult {
        let one = |me: u32, peer: u32| -> RailResult {
            let failed = |error: String| RailResult {
                a,
                b,
                rail,
                gbps: None,
                error: Some(error),
                round: self.round,
            };
            if let Some(e) = self
                .errors
                .get(&(me, peer, rail))
                .or(self.errors.get(&(a, b, rail)))
            {
                return failed(e.clone());
            }
            match self.sides.get(&(me, peer, rail)) {
                Some(s) => RailResult {
                    a,
                    b,
                    rail,
                    gbps: s.gbps,
                    error: s.error.clone(),
                    round: self.round,
                },
                None if self.gone.contains(&me) => {
                    failed(format!("rank {me} stopped answering during the test"))
                }
                None => failed(format!("rank {me} sent no result for this pair")),
            }
        };
        combine([one(a, b), one(b, a)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Gpu, GpuPciPath, IbDevice, IbPort, RdmaPci};

    /// GPU g beside HCA `hcas[g]` (one PCIe switch each), ports in `states`.
    fn node(hcas: &[&str], states: &[&str], gpus: bool, nccl: bool) -> NodeFacts {
        let mut f = NodeFacts::default();
        for (g, (hca, state)) in hcas.iter().zip(states).enumerate() {
            let sw = format!("0000:{:02x}:00.0", 0x10 * (g + 1));
            f.ib.devices.push(IbDevice {
                name: hca.to_string(),
                ports: vec![IbPort {
                    port: 1,
                    state: state.to_string(),
                    ..Default::default()
                }],
                pci: Some(RdmaPci {
                    bdf: format!("0000:{:02x}:00.0", 0x10 * (g + 1) + 2),
                    path: vec![sw.clone(), format!("0000:{:02x}:00.0", 0x10 * (g + 1) + 2)],
                    root: Some("pci0000:00".into()),
                    ..Default::default()
                }),
                ..Default::default()
            });
            if gpus {
                f.gpu.gpus.push(Gpu {
                    index: g as u32,
                    ..Default::default()
                });
                f.ib.gpu_pci_paths.push(GpuPciPath {
                    gpu: g as u32,
                    bdf: format!("0000:{:02x}:00.0", 0x10 * (g + 1) + 1),
                    path: vec![sw, format!("0000:{:02x}:00.0", 0x10 * (g + 1) + 1)],
                    root: Some("pci0000:00".into()),
                    ..Default::default()
                });
            }
        }
        if nccl {
            f.nccl.library = Some("/usr/lib/libnccl.so.2".into());
        }
        f
    }

    #[test]
    fn rails_are_gpus_with_their_closest_active_port_and_others_skip_with_the_reason() {
        let ok = node(&["mlx5_1", "mlx5_0"], &["ACTIVE", "ACTIVE"], true, true);
        let rails = node_rails(&ok).expect("rails");
        assert_eq!(
            rails,
            vec![
                RailChild {
                    rail: 0,
                    gpu: 0,
                    hca: "mlx5_1".into(),
                    port: 1
                },
                RailChild {
                    rail: 1,
                    gpu: 1,
                    hca: "mlx5_0".into(),
                    port: 1
                },
            ]
        );
        // A port down is ib.port-down's: its rail is not paired.
        let down = node(&["mlx5_1", "mlx5_0"], &["ACTIVE", "DOWN"], true, true);
        assert_eq!(node_rails(&down).expect("rails").len(), 1);
        let no_ib = NodeFacts::default();
        let no_gpu = node(&["mlx5_0"], &["ACTIVE"], false, true);
        let no_nccl = node(&["mlx5_0"], &["ACTIVE"], true, false);
        let all_down = node(&["mlx5_0"], &["DOWN"], true, true);
        let nodes = [
            (0, &ok),
            (1, &no_ib),
            (2, &no_gpu),
            (3, &no_nccl),
            (4, &all_down),
        ];
        let (rails, skipped) = eligible(&nodes);
        assert_eq!(rails.keys().copied().collect::<Vec<_>>(), vec![0]);
        let why: Vec<(u32, &str)> = skipped.iter().map(|(r, w)| (*r, w.as_str())).collect();
        assert_eq!(why[0], (1, "no InfiniBand/RoCE devices"));
        assert!(
            why[1].1.starts_with("cannot run NCCL: no GPU visible"),
            "{why:?}"
        );
        assert!(
            why[2].1.starts_with("cannot run NCCL: no libnccl found"),
            "{why:?}"
        );
        assert_eq!(why[3], (4, "no rail pairs a GPU with an ACTIVE HCA port"));
    }
}

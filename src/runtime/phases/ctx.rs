//! The phase interface: one [`Phase`] per measurement, run by the coordinator in order over one
//! [`PhaseCtx`] (the rendezvous with its job, the admitted nodes, the links, and what the phases
//! found so far, which later phases and the verdict read).

use crate::runtime::members::JoinedNode;
use crate::runtime::rendezvous::Rendezvous;
use preflight_checks::cluster::Refusal;
use preflight_checks::model::{CollectiveResult, IbFacts, LinkResult, Recommendation, SecondPass};
use preflight_checks::rails::localise::{RailResult, RailVerdict};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One step of the coordinator's run.
pub trait Phase {
    /// Its name: its lap in the report's `measurement.phases` when timed.
    fn name(&self) -> &'static str;
    /// Runs it over the alive members; says how its time counts.
    fn run(&mut self, ctx: &mut PhaseCtx) -> Lap;
}

/// How a phase's time counts in `measurement.phases`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lap {
    /// The nodes are in: the measured phases (and the progress steps) begin now.
    Begin,
    /// A lap under the phase's name.
    Timed,
    /// Nothing recorded (it did not run, or its time belongs to the next lap).
    Untimed,
}

/// What every phase works on.
pub struct PhaseCtx<'a> {
    pub run: &'a Rendezvous,
    pub members: Vec<JoinedNode>,
    /// Nodes turned away at the join.
    pub refused: Vec<Refusal>,
    /// Every link, in `members::links` order (from the connectivity phase on).
    pub links: Vec<LinkResult>,
    pub found: Found,
}

impl<'a> PhaseCtx<'a> {
    pub fn new(run: &'a Rendezvous) -> PhaseCtx<'a> {
        PhaseCtx {
            run,
            members: Vec::new(),
            refused: Vec::new(),
            links: Vec::new(),
            found: Found::default(),
        }
    }

    /// [`bounded`] by this run's `--timeout`.
    pub fn bounded(&self, natural: Duration) -> Duration {
        bounded(self.run, natural)
    }
}

/// A phase's natural limit, but never past `--timeout` + 5 s: a node waiting for its next order
/// gives up at `--timeout` + 10 s (see the agent), so every phase must end before that.
pub fn bounded(run: &Rendezvous, natural: Duration) -> Duration {
    natural.min(run.join_timeout() + Duration::from_secs(5))
}

/// What the phases found, for the later phases and the verdict.
#[derive(Default)]
pub struct Found {
    /// The second pass against a known-good partner.
    pub second: Vec<SecondPass>,
    /// The idle test's connections held silent since the connectivity phase.
    pub idle: Option<IdleHold>,
    pub bulk: BulkDone,
    /// The advice the all-reduce and the per-rail tests ran with.
    pub recommendation: Option<Recommendation>,
    /// With `--compare-env`: the overrides that won, and why either way.
    pub preferred: (Option<BTreeMap<String, String>>, Option<String>),
    pub traffic: Traffic,
}

/// What the throughput phase did: the schedule's name, the rounds run, and the ordered pairs
/// measured again (from, to, the address of `to`).
#[derive(Default)]
pub struct BulkDone {
    pub schedule: String,
    pub rounds: u32,
    pub retested: Vec<(u32, u32, String)>,
}

/// The test under way: when the silence began and how long it is to last.
pub struct IdleHold {
    pub(super) since: Instant,
    pub(super) idle: Duration,
    pub(super) asked: Vec<usize>,
}

/// The results, or why nothing was measured.
#[derive(Default)]
pub struct Outcome {
    pub results: Vec<CollectiveResult>,
    pub not_run: Option<String>,
    /// What the run chose not to measure, and why (for the recommendation's reasons).
    pub notes: Vec<String>,
}

/// What the per-rail tests found, or why they did not run.
#[derive(Clone, Debug, Default)]
pub struct RailOutcome {
    pub results: Vec<RailResult>,
    pub verdict: Option<RailVerdict>,
    pub not_run: Option<String>,
    /// Nodes left out, with why.
    pub skipped: Vec<(u32, String)>,
}

/// What the traffic phases after the links measured: the all-reduce, the per-rail tests.
#[derive(Default)]
pub struct Traffic {
    pub allreduce: Outcome,
    pub rails: RailReport,
}

/// What the per-rail NCCL pair tests and the counters' second snapshot found (issue 34).
#[derive(Default)]
pub struct RailReport {
    pub outcome: RailOutcome,
    /// Each node's RDMA facts with the counters read after the traffic phases.
    pub counters_after: BTreeMap<u32, IbFacts>,
}

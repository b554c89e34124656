//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[entry(
    HEALTHY_SET,
    "fail",
    "the cluster fails, and even its healthy set (the nodes that joined, pass their own \
         checks and connect with each other) is smaller than --min-nodes (the MIN of an \
         elastic --nnodes=MIN:MAX) or rounds to nothing under --nodes-multiple-of",
    "Without its failing nodes the cluster could still train, but not at the size the job \
         needs: starting it would fail again at the rendezvous (too few nodes) or with a \
         parallel layout that does not divide the node count.",
    "Fix the findings the summary names as costing the most nodes (each excluded node \
         lists its finding ids in recommendation.healthy_set.excluded), or lower --min-nodes \
         / --nodes-multiple-of, then rerun preflight on every node.",
)
.node(Action::DrainAndRepair)];

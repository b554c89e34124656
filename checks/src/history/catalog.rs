//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        LEMON,
        "warn",
        "a lemon: this node's history names it by one of the rules (the same node problem in 3 \
         of its last 10 runs while the other nodes passed; one GPU's XID in 5 bursts within \
         24 h; a link fault in 2 runs with different partners; left out of the healthy set in \
         more than a third of its runs)",
        "An intermittent node passes most checks and fails the jobs that land on it now and \
         then: each failure looks like bad luck, and the job restarts onto it again. Meta's \
         study of its research clusters (arXiv 2410.21680) found such lemon nodes among the \
         costliest faults; NVIDIA NVSentinel drains a GPU whose XID comes in 5 bursts a day.",
        "Take the node out of service and repair it, escalating past what did not help (the \
         evidence names the rule, the finding and the runs): `scontrol update \
         NodeName=<node> State=DRAIN Reason=\"preflight: [node_problem] lemon\"`, then \
         `preflight history` on the node for every run that named it.",
    )
    .node(Action::DrainAndRepair),
    entry(
        STORE,
        "warn",
        "this node's history store could not be read or written (unwritable, or corrupt and \
         set aside): this run is not remembered, and lemons cannot be named",
        "Without its history a node that fails now and then is judged by this run alone; the \
         check itself is not affected.",
        "Make the store's folder writable (`install -d -m 0755 /var/lib/preflight` as root), \
         or give another with `--history PATH` (or `PREFLIGHT_HISTORY=PATH`); a corrupt file \
         was renamed `*.corrupt-<time>` beside it and a new one started.",
    )
    .user(Action::FixConfig),
];

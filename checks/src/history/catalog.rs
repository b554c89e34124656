//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        LEMON,
        "warn",
        "a lemon: a fault that comes and goes, named by one of the rules (the same node \
         problem in 3 of its last 10 runs and gone in a run between, while the other nodes \
         passed; one GPU's XID in 5 bursts within 24 h; a link fault that moves with the node \
         or stays with a pair; left out of the healthy set in more than a third of its runs). \
         A fault in every run since it appeared stands: its own finding says since when",
        "An intermittent node passes most checks and fails the jobs that land on it now and \
         then: each failure looks like bad luck, and the job restarts onto it again. Meta's \
         study of its research clusters (arXiv 2410.21680) found such lemon nodes among the \
         costliest faults; NVIDIA NVSentinel drains a GPU whose XID comes in 5 bursts a day. \
         A fault that never went away is not intermittent: its own finding and fix stand.",
        "Follow the lemon's action, which depends on the kind of fault: hardware (a GPU, a \
         NIC or rail, a link that moves with the node) escalates past what did not help \
         towards a repair and a replacement, with `scontrol update NodeName=<node> \
         State=DRAIN Reason=\"preflight: [node_problem] lemon\"`; a configuration fault \
         (a file, a sysctl, a service, a process) that keeps coming back means the fix did not \
         hold: find what restores it (a configuration manager, the image, a cron job). \
         `preflight history` on the node lists every run that named it.",
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

//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[entry(
    IN_USE,
    "fail",
    "the master port is held; evidence names pid and command",
    "torchrun's rendezvous store binds the master port on rank 0; if a crashed run still \
         holds it, torchrun exits with `failed to bind to [::]:29500 (errno: 98 - Address \
         already in use)`. Warns when this user may not bind the port (below 1024), `error` \
         when the bind test could not run. A port a running Slurm job holds (its process is \
         in the job's cgroup, or slurmd lists it) is that job's, not a leftover: outside a job \
         it warns as the user's problem and never drains; another job on the node fails, as \
         the user's problem, and must launch on another port.",
    "Stop the leftover process (`ss -ltnp 'sport = :29500'`, then `kill <pid>`; as root \
         when the holder is another user's), or launch every node on the free port preflight \
         suggests: `torchrun --master-port=<free> ...`.",
)
.node(Action::RestartJob)];

//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[entry(
    LIBRARY,
    "pass / warn / skip",
    "which libnccl the job will load and its version; none found, unloadable, or several \
         versions (skip on a node with no GPU when none is expected)",
    "The job uses whichever libnccl.so.2 the loader finds first. None found means PyTorch \
         may have no NCCL (`Distributed package doesn't have NCCL built in`); one that cannot \
         load fails the same way; several versions on a node mean nodes can end up on \
         different NCCL releases, whose mismatch hangs init.",
    "Check what PyTorch really loads: \
         `python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'`; \
         install the wheel matching torch's CUDA (`pip install nvidia-nccl-cu12`); `ldd <lib>` \
         for a library that cannot load; remove stale copies from LD_LIBRARY_PATH and confirm \
         at start-up with `export NCCL_DEBUG=VERSION`.",
)
.user(Action::FixConfig)];

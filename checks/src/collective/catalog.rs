//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        BUSBW,
        "warn / fail",
        "all-reduce bus bandwidth of the largest message under `--min-busbw` (fail) or under half of the slowest ring link's pairwise throughput (warn)",
        "Large-message all-reduce bus bandwidth (nccl-tests' busbw) under `--min-busbw` or under \
         half of what the slowest link in the ring measured pairwise means the collectives, and so the \
         training step, will be slow with these settings, even if every link looks fine.",
        "Use the environment preflight recommends (`NCCL_SOCKET_IFNAME`, `NCCL_IB_DISABLE`, \
         `NCCL_IB_HCA`), check link.slow and ib.* findings, and compare transports with \
         `preflight cluster --compare-env`; run with `NCCL_DEBUG=INFO` to see which network NCCL \
         picked.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        WRONG,
        "fail",
        "all-reduce returned wrong values",
        "The all-reduce result differed from the exact expected sum: data is corrupted in \
         flight or in memory (a faulty NIC, GPU, driver or NCCL build). Training would silently \
         diverge or produce NaNs.",
        "Rerun to see whether it repeats on the same ranks; run nccl-tests' \
         `all_reduce_perf -c 1` between those nodes, check `dmesg` and \
         `nvidia-smi -q -d ECC,PAGE_RETIREMENT`, and take the faulty node out of the job.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        NET,
        "warn",
        "NCCL used a different network than advised",
        "NCCL's own log (`NET/IB` or `NET/Socket : Using [0]eth0`) showed it picked another \
         transport or interface than the one preflight measured and recommended, so its \
         numbers and the job's speed are not what the advice promised.",
        "Export the recommended environment on every node before launching (preflight prints \
         it: `NCCL_SOCKET_IFNAME`, `NCCL_IB_DISABLE`, `NCCL_IB_HCA`), and check NCCL's choice \
         with `NCCL_DEBUG=INFO` (look for `NET/` lines).",
    )
    .user(Action::FixConfig),
    entry(
        ERROR,
        "error",
        "the all-reduce could not run",
        "The measured all-reduce did not complete: the NCCL child process hung (killed by the \
         watchdog), aborted, could not load libnccl or CUDA, or a ring connection failed. A \
         real job would fail or hang the same way.",
        "Read the error in the finding's evidence; rerun with `NCCL_DEBUG=INFO`; check \
         nccl.library and gpu.* findings on each node, and fall back to TCP with \
         `--allreduce tcp` to tell the network from the GPU stack.",
    )
    .user(Action::RestartJob),
];

//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        HOSTNAME_LOOPBACK,
        "warn",
        "this host's name resolves to a loopback address (Debian's 127.0.1.1), so the master \
         would advertise loopback",
        "torchrun's master advertises the address its hostname resolves to. Debian and Ubuntu \
         put `127.0.1.1 <hostname>` in /etc/hosts, so peers are told to connect to loopback and \
         get `Connection refused`, or the rendezvous times out. Also fires when the hostname \
         does not resolve at all.",
        "Map the hostname to the node's cluster address in /etc/hosts (or DNS) and take it off \
         its loopback line: on Debian and Ubuntu that is the `127.0.1.1 <hostname>` line \
         (comment it out); where the name sits on the `127.0.0.1 localhost <hostname>` line, \
         remove only the name. Then `echo '<addr> <hostname>' >> /etc/hosts`; or pass \
         `--master-addr=<IP>` instead of a name. `preflight check` (and this entry, below) \
         print this host's own line and the exact commands. Check with \
         `getent hosts $(hostname)`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        SHM,
        "warn",
        "/dev/shm smaller than 1 GiB",
        "NCCL's shared-memory transport and DataLoader workers allocate in /dev/shm; Docker's \
         default 64 MiB gives `posix_fallocate failed: No space left on device` or `Bus error`. \
         `error` when its size cannot be read.",
        "Docker: `docker run --shm-size=16g ...` (or `--ipc=host`); Kubernetes: mount an \
         `emptyDir: {medium: Memory, sizeLimit: 16Gi}` volume at /dev/shm; bare host: \
         `mount -o remount,size=16G /dev/shm`.",
    )
    .user(Action::FixConfig),
    entry(
        MEMLOCK,
        "warn",
        "memlock limit is not unlimited while RDMA devices exist",
        "InfiniBand/RoCE registers (pins) memory; with a small RLIMIT_MEMLOCK NCCL fails with \
         `ibv_reg_mr failed` / `Cannot allocate memory`, or falls back to sockets. Skipped on \
         nodes without RDMA devices.",
        "Make the limit unlimited for the job: `ulimit -l unlimited` in the launching shell; \
         `* soft memlock unlimited` and `* hard memlock unlimited` in \
         /etc/security/limits.conf; `docker run --ulimit memlock=-1:-1 ...`; \
         `LimitMEMLOCK=infinity` for systemd services.",
    )
    .node(Action::DrainAndRepair),
];

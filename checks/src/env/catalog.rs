//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        SOCKET_IFNAME,
        "fail / warn",
        "`NCCL_SOCKET_IFNAME` / `GLOO_SOCKET_IFNAME` match no interface, only down or virtual \
         ones, or more than intended; or select a network measured slower than the best",
        "NCCL and Gloo pick their socket interface from these variables (NCCL: comma list of \
         prefixes, `^` excludes, `=` exact; Gloo: exact names). A value matching nothing gives \
         `Bootstrap : no socket interface found`; one matching docker0/veth or a down interface \
         hangs `ncclCommInitRank`; a prefix like `bond0` also matches `bond0.100`. Unset, it \
         warns when NCCL's own pick would include a virtual interface or one without a routable \
         address.",
        "Set the variable to the cluster-facing interface, exactly when a prefix matches more: \
         `export NCCL_SOCKET_IFNAME==bond0` and `export GLOO_SOCKET_IFNAME=bond0` (check names \
         with `ip -br addr show`). `preflight cluster` prints the value that worked on every \
         node.",
    )
    .user(Action::FixConfig),
    entry(
        IB_DISABLE,
        "warn",
        "`NCCL_IB_DISABLE` contradicts the InfiniBand state found, or is not a number",
        "NCCL reads the value with strtoll: garbage reads as 0 and leaves IB enabled. \
         `NCCL_IB_DISABLE=1` with ACTIVE ports leaves the fabric unused and the job on TCP; `0` \
         where no port is ACTIVE makes NCCL try IB where it cannot work. `error` when the IB \
         state could not be read.",
        "Unset it to let NCCL use ACTIVE IB ports (`unset NCCL_IB_DISABLE`), or set exactly `1` \
         on every node to use TCP (`export NCCL_IB_DISABLE=1`), consistently across the \
         cluster (see ib.partial).",
    )
    .user(Action::FixConfig),
    entry(
        MASTER,
        "warn",
        "`MASTER_ADDR` is loopback, or `MASTER_PORT` is invalid or differs from `--master-port`",
        "With `MASTER_ADDR` empty, loopback (127.0.0.1, localhost), 0.0.0.0 or with whitespace, \
         ranks on other nodes cannot reach the master and wait for the rendezvous timeout. A \
         `MASTER_PORT` that is not a port, or differs from the one preflight checked, sends the \
         job to a port nobody tested.",
        "Set rank 0's address on the cluster network and the port preflight checked: \
         `export MASTER_ADDR=<rank 0 IP>` and `export MASTER_PORT=29500` (or rerun preflight \
         with `--master-port=$MASTER_PORT`).",
    )
    .user(Action::FixConfig),
];

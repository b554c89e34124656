//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        NO_INTERFACE,
        "fail",
        "no usable non-loopback interface with an address",
        "No interface is up with a non-loopback, routable address, so no other node can reach \
         this one: NCCL reports `Bootstrap : no socket interface found` and torchrun's \
         rendezvous times out. `error` when the interfaces could not be listed at all.",
        "Bring the cluster-facing interface up and give it an address (DHCP or static), then \
         rerun: `ip -br addr show`, `ip link set <if> up`, `dhclient <if>` or \
         `ip addr add <addr>/<prefix> dev <if>`.",
    )
    .node(Action::DrainAndRepair),
    entry(
        ARP_FLUX,
        "warn",
        "two or more up interfaces with addresses in one IPv4 subnet, `arp_ignore` 0 and no per-interface `ip rule`: replies leave by the wrong NIC",
        "Linux answers ARP for every local address on every NIC and routes replies out of the \
         first interface of the subnet, so peers learn the wrong MAC and traffic leaves by the \
         wrong NIC (ARP flux): NCCL paths turn asymmetric, and a filtered or down NIC hangs \
         connections that seem to use another (NVIDIA/nccl #601, #1269).",
        "Set `net.ipv4.conf.all.arp_ignore=1` and `arp_announce=2` (`sysctl -w`, and a file \
         under /etc/sysctl.d/), and give each NIC its own routing table: \
         `ip rule add from <addr> table <n>` and `ip route add <subnet> dev <if> src <addr> table <n>`; \
         or put the NICs in different subnets.",
    )
    .node(Action::DrainAndRepair),
    entry(
        NCCL_AUTO_PICK,
        "warn",
        "NCCL_SOCKET_IFNAME is unset and NCCL would pick, besides the right NIC, one the peers cannot reach or use (link-local, shared address, no route, wireless, BMC)",
        "Without NCCL_SOCKET_IFNAME NCCL takes every `ib*` interface, else every interface but \
         `docker*`, `lo*` and `virbr*`, and uses all of them: its first pick carries the \
         bootstrap, the others carry socket traffic too. A link-local address that every node \
         holds (a BMC's USB NIC at 169.254.0.2, a cloud's metadata link), a second port with no \
         route, a wireless or management NIC hangs `ncclCommInitRank` or the first collective \
         (aws-samples/aws-do-eks #54, uccl-project/uccl #1034).",
        "Set NCCL_SOCKET_IFNAME to the interface the report advises on every node (the launch \
         commands carry it): `export NCCL_SOCKET_IFNAME=<if>`; or exclude the bad one while \
         keeping NCCL's own exclusions: `export NCCL_SOCKET_IFNAME=^docker,lo,virbr,<bad-if>`.",
    )
    .user(Action::FixConfig),
];

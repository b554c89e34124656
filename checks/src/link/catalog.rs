//! What each of this concern's finding ids means, why it matters and how to fix it
//! (`preflight explain ID`, README's table).

use super::ids::*;
use crate::core::{Action, Entry, entry};

/// This concern's entries.
pub static ENTRIES: &[Entry] = &[
    entry(
        NAT,
        "fail",
        "a node's join reached rank 0 from an address none of its interfaces hold: it sits \
         behind NAT (a container on a bridge network, a VM with a private address of another \
         VPC), so the address NCCL and gloo advertise for it cannot be reached",
        "Outgoing connections from a node behind NAT work (rendezvous included), so every node \
         joins; then NCCL and gloo advertise the node's own, private address and its peers \
         cannot connect to it: `Connection timed out` / `No route to host` in the bootstrap, \
         gloo's `Timed out waiting ... for recv`, a watchdog timeout. Publishing only the \
         master port (`-p 29500:29500`) is not enough: NCCL and gloo listen on random ports.",
        "Run the job in the host's network namespace: Docker `--network=host`, Kubernetes \
         `hostNetwork: true` (with `dnsPolicy: ClusterFirstWithHostNet`), or give the node an \
         address the other nodes reach directly (same VPC, peering without NAT). The finding \
         names the address rank 0 saw and the addresses the node holds (`ip -br addr`).",
    )
    .user(Action::FixConfig),
    entry(
        UNREACHABLE,
        "fail",
        "a pair cannot connect on the chosen network; timeout (filtered) told from refused",
        "NCCL connects every pair of ranks on random high ports. A pair that times out is \
         filtered by a firewall (`Call to connect timeout`, then a watchdog timeout after \
         600 s); refused means a REJECT rule or nothing listening; no route means the \
         addresses are on different networks. Also fails when no network connects every node.",
        "On the node that filters, accept every connection from the cluster's subnet (opening \
         only the master port is not enough): `sudo ufw allow from <subnet>` or \
         `sudo iptables -I INPUT -s <subnet> -j ACCEPT`; when the sender's OUTPUT rules drop \
         its own connections, fix the sender instead (`sudo iptables -I OUTPUT -d <subnet> -j \
         ACCEPT`); when neither node's rules explain a one-way failure, the finding gives the \
         `nc` commands that tell the sender, the receiver and a firewall between them apart; \
         for no route, check `ip route get <addr>`. The finding names the node and the exact \
         command.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        INTERCEPTED,
        "fail",
        "connections were accepted but never authenticated as the peer they dialled: a nat \
         REDIRECT/DNAT rule of a node (named), or something between the nodes, answers in the \
         peer's place (a service-mesh sidecar, a transparent proxy)",
        "A sidecar or transparent proxy that takes the job's TCP connections lets the connect \
         succeed and then cannot carry NCCL's or gloo's protocol: the bootstrap hangs or \
         fails (`Connection reset by peer`, `Socket Timeout`, gloo's `Connection closed by \
         peer`) although no firewall drops anything. Told apart from a slow peer: the same \
         listener completed the other nodes' handshakes in time, or what answered is not \
         preflight.",
        "Exclude the job's traffic from the mesh: Istio's pod annotations \
         `traffic.sidecar.istio.io/excludeOutboundIPRanges: <cluster subnet>` (or \
         `excludeOutboundPorts` / `excludeInboundPorts`), or no sidecar for the job's pods \
         (`sidecar.istio.io/inject: \"false\"`); or delete the node's rule the finding names \
         (`iptables -t nat -D ...`, `iptables-save -t nat` to see them).",
    )
    .node(Action::DrainAndRepair),
    entry(
        IDLE_TIMEOUT,
        "fail",
        "connections between two nodes carried data when opened and no longer after a silence \
         (`--idle-test`): a stateful firewall or NAT between them, or a node's own short \
         conntrack timeout, forgets idle connections",
        "NCCL keeps its sockets open and silent between collectives and sends no keepalives, so \
         a device that expires idle connections (a firewall's or NAT's established timeout, \
         `nf_conntrack_tcp_timeout_established` set short) breaks them while the job computes, \
         checkpoints or evaluates: the next collective hangs until the watchdog fires \
         (`Call to recv ... failed : Connection timed out`, `Connection reset by peer`, \
         nccl#1619). Every connect and the bandwidth tests pass: only a pause shows it.",
        "Raise the established-connection (idle) timeout of the firewall or NAT between the \
         nodes above the job's longest pause, or keep the job's traffic out of its connection \
         tracking; on a Linux box in between (or a node whose own timeout the finding names): \
         `sysctl -w net.netfilter.nf_conntrack_tcp_timeout_established=432000` (the kernel's \
         default), made permanent in /etc/sysctl.d.",
    )
    .node(Action::DrainAndRepair),
    entry(
        MTU_BLACKHOLE,
        "fail",
        "a connection was established but a large message stalled, and the largest \
         don't-fragment packet that passed is below the interfaces' MTU",
        "Both hosts at a jumbo MTU (9000) with a switch or link between them at 1500: the \
         handshake and small messages pass, large frames are dropped without an ICMP answer, \
         so TCP stalls. The job joins, then dies in its first large transfer (gloo: `Timed \
         out waiting 25000ms for recv operation`, NCCL: a watchdog timeout). preflight probes \
         the path with don't-fragment packets from both ends when a transfer stalls.",
        "Set the interface MTU on the nodes to what the path carries (`sudo ip link set dev \
         <if> mtu 1500`, and persist it), or raise the switch's MTU to the interfaces'.",
    )
    .node(Action::DrainAndRepair),
    entry(
        MTU_MISMATCH,
        "warn",
        "MTU differs on the network chosen for NCCL",
        "When interfaces disagree on MTU (or a switch in between carries less than the \
         interfaces), small messages pass and large ones are dropped: NCCL init succeeds and \
         the first big all-reduce hangs.",
        "Set one MTU on every node's interface on that network (what most nodes have): \
         `ip link set dev <if> mtu <mtu>`, and persist it (netplan `mtu:`, \
         `nmcli connection modify <conn> 802-3-ethernet.mtu <mtu>`, or MTU= in ifcfg); or raise \
         the switches' MTU.",
    )
    .node(Action::DrainAndRepair),
    entry(
        DEGRADED,
        "warn",
        "a faster network works on some nodes only; the job falls back to a slower one",
        "The advice uses the fastest network that connects every node. When a faster one (by \
         measured throughput on the pairs that work, else rated speed) is broken by one node (its \
         NIC down or without carrier, no address, filtered, no route), the job still runs, on the \
         slower network: the finding names the node, the interface and why, with both speeds.",
        "Repair the named interface on the named node (`ip link set dev <if> up`, `ethtool <if>`, \
         the firewall command given) and rerun; the advice then moves to the faster network.",
    )
    .node(Action::DrainAndRepair),
    entry(
        SLOW,
        "warn",
        "a node (sending, receiving or both), a pair, one direction, a cut between two groups (a rack uplink) or the whole link is far below the cluster's reference throughput or its rated speed",
        "A ring or tree all-reduce runs at the pace of its slowest link. Each pair is judged \
         against a reference the slow part cannot move (the upper quartile of the measured \
         pairs), half the rated speed of a NIC one TCP stream can fill (up to 25 Gbit/s) and \
         `--min-link-gbit`; suspects are measured again against known-fast partners before \
         they are named, and the smallest part that explains the slow pairs is named: a node \
         slow with every healthy partner, two groups slow only between each other (a rack \
         uplink, a spine port, a routed hop), a pair, or one direction of a path. With two \
         nodes there is no third partner: the link is judged against the rated speed and the \
         other networks measured.",
        "Check the named part: a node's NIC (`ethtool <if>`, `ethtool -S <if>`, `tc qdisc show \
         dev <if>`), a pair's path (`tracepath -n <addr>` from both ends), a cut's uplink \
         (the switch ports between the groups, `ip route get <addr>`); rerun with `--thorough` \
         to confirm.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
    entry(
        LATENCY,
        "warn",
        "a node (or the path between two groups) whose round-trip times stand far above the cluster's",
        "NCCL's small messages and every step's synchronisation wait on round trips: a node \
         whose median RTT to its partners is above 2.1 times the cluster's reference (the \
         lower quartile of the pairs' RTTs) and at least 1 ms above it holds every collective \
         back. Its causes are the node's own: CPU power states or load, interrupt moderation, \
         a queue in its path.",
        "Check the node's load and CPU governor, `ethtool -c <if>` (interrupt coalescing) and \
         `tc qdisc show dev <if>`; for a cut, trace the route between the groups.",
    )
    .node(Action::DrainAndRepair)
    .hardware(),
];

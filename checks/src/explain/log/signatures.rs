//! The error messages preflight recognises, each read from the format string in its source
//! (the `source` field says which repository, file and version), with what the message proves,
//! what it only suggests, and the finding ids that would confirm a cause, in order.

use std::collections::BTreeMap;

/// How close to the root cause a message is: the decisive error is the lowest tier seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Names the cause itself (no interface, port held, duplicate GPU, /dev/shm full).
    Cause,
    /// A connection that failed: a filter, a dead or absent peer, a wrong address.
    Connection,
    /// The consequence seen elsewhere: a watchdog timeout, a backend error, a task exit.
    Consequence,
}

/// Where a cause is to be confirmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The node that printed the line.
    Reporter,
    /// The host or address the message names (the master, the peer).
    Target,
    /// Every node of the job.
    Cluster,
}

/// When a cause applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Always,
    /// The address in the message is loopback (127.x, ::1, localhost).
    Loopback,
    /// The address in the message is not loopback.
    NotLoopback,
    /// The message's errno is this one.
    Errno(u32),
    /// The address in the message is IPv6 link-local (fe80::), which needs its interface.
    LinkLocal,
}

/// One likely cause of a message: a finding id and what in the text points to it.
#[derive(Clone, Copy, Debug)]
pub struct Cause {
    pub id: &'static str,
    pub why: &'static str,
    pub scope: Scope,
    pub when: When,
}

pub(super) const fn cause(id: &'static str, scope: Scope, why: &'static str) -> Cause {
    Cause {
        id,
        why,
        scope,
        when: When::Always,
    }
}

pub(super) const fn cause_if(
    id: &'static str,
    scope: Scope,
    when: When,
    why: &'static str,
) -> Cause {
    Cause {
        id,
        why,
        scope,
        when,
    }
}

/// Values pulled out of a message: `host`, `port`, `addr`, `errno`, `rank`, `device`, ...
pub type Values = BTreeMap<&'static str, String>;

/// One known error message.
#[derive(Clone, Copy)]
pub struct Signature {
    /// Stable id, `origin.name`.
    pub id: &'static str,
    /// A line matches when it holds any of these.
    pub needles: &'static [&'static str],
    /// ... and every one of these.
    pub requires: &'static [&'static str],
    /// ... and one of these within the last few lines (or on the line): `TCPStore(` before
    /// a bare `Connection reset by peer`. Empty: no condition.
    pub near: &'static [&'static str],
    /// Repository, file and version the format string was read from.
    pub source: &'static str,
    pub proves: &'static str,
    pub suggests: &'static str,
    pub tier: Tier,
    pub causes: &'static [Cause],
    /// Pulls the values out of the message.
    pub extract: fn(&str, &mut Values),
}

impl std::fmt::Debug for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id)
    }
}

use Scope::{Cluster, Reporter, Target};

/// The signatures written first, each read from its source's format string.
pub(super) static BASE: &[Signature] = &[
    Signature {
        id: "nccl.no-socket-interface",
        needles: &[
            "Bootstrap : no socket interface found",
            "NET/Socket : no interface found",
            "NET/Socket : No usable listening interface found",
        ],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/bootstrap.cc:114 WARN(\"Bootstrap : no socket interface found\"), \
                 :108 \"NET/Socket : No usable listening interface found\"; src/transport/net_socket.cc:60 \
                 \"NET/Socket : no interface found\" (same in v2.21.5-1)",
        proves: "NCCL found no interface it may use on this node: none matches NCCL_SOCKET_IFNAME, or none is up with an address",
        suggests: "NCCL_SOCKET_IFNAME names an interface this node lacks (bond0 on one node, eno1 on another)",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Reporter,
                "NCCL_SOCKET_IFNAME (or NCCL_OOB_NET_IFNAME) matches no interface on the node that printed it",
            ),
            cause(
                crate::net::ids::NO_INTERFACE.as_str(),
                Reporter,
                "no interface is up with a non-loopback address on that node",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "nccl.duplicate-gpu",
        needles: &["Duplicate GPU detected : rank"],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/init.cc:904 WARN(\"Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx\")",
        proves: "two ranks of one host (same NCCL host hash) opened the same GPU",
        suggests: "CUDA_VISIBLE_DEVICES or the rank-to-GPU mapping gives two processes one device, more processes than GPUs, or two hosts share one NCCL identity",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::gpu::ids::VISIBLE_DEVICES.as_str(),
                Reporter,
                "both ranks saw the same device: CUDA_VISIBLE_DEVICES or torch.cuda.set_device(local_rank) is wrong",
            ),
            cause(
                crate::gpu::ids::COUNT.as_str(),
                Reporter,
                "fewer GPUs than processes on that node (--nproc-per-node too high)",
            ),
            cause(
                crate::rendezvous::ids::DUPLICATE_HOST.as_str(),
                Cluster,
                "two machines with one NCCL identity (hostname + boot_id, or NCCL_HOSTID) look like one host",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "Duplicate GPU detected : rank ") {
                put(v, "rank", number(r));
                if let Some(r2) = after(r, " and rank ") {
                    put(v, "peer_rank", number(r2));
                }
            }
            put(v, "device", after(m, "CUDA device ").map(first_word));
        },
    },
    Signature {
        id: "nccl.shm-full",
        needles: &[
            "Call to posix_fallocate failed",
            "Error: failed to extend /dev/shm",
            "failed to extend /dev/shm",
            "Error while creating shared memory segment",
        ],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/misc/shmutils.cc:87 WARN(\"Error: failed to extend %s to %ld bytes, error: %s (%d)\"); \
                 v2.11.4-1 src/include/shm.h:28 SYSCHECK(shm_allocate(..), \"posix_fallocate\") with src/include/checks.h \
                 WARN(\"Call to \" name \" failed : %s\"); v2.4.8-1..v2.12.12-1 misc/shmutils.cc:69 and \
                 v2.24.3-1..v2.29.7-1 misc/shmutils.cc:132 WARN(\"Error while %s shared memory segment %s (size %ld)..\") \
                 with %s = \"creating\" (the segment's creation failed: what posix_fallocate or the extend reported)",
        proves: "NCCL could not grow a shared-memory segment in /dev/shm on this node",
        suggests: "/dev/shm is too small (a container's 64 MiB default) or filled by segments of dead runs",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::sys::ids::SHM.as_str(),
                Reporter,
                "the shared-memory file system is too small for NCCL's segments",
            ),
            cause(
                crate::sys::scale::ids::STALE_NCCL.as_str(),
                Reporter,
                "nccl-* segments left by killed runs fill /dev/shm",
            ),
        ],
        extract: |m, v| {
            put(v, "path", after(m, "extend ").map(first_word));
            put(v, "bytes", after(m, " to ").and_then(number));
        },
    },
    Signature {
        id: "nccl.nvls-bind",
        needles: &["Failed to bind NVLink SHARP (NVLS) Multicast memory"],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/transport/nvls.cc:285 WARN(\"Failed to bind NVLink SHARP (NVLS) Multicast memory of size %ld : CUDA error %d '%s'...\")",
        proves: "the CUDA driver refused NVLink multicast memory on this node",
        suggests: "the fabric manager or the NVSwitches are not in a working state",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::gpu::ids::FABRIC_MANAGER.as_str(),
                Reporter,
                "NVLS needs a running fabric manager with the NVSwitches configured",
            ),
            cause(
                crate::gpu::ids::NVLINK.as_str(),
                Reporter,
                "an NVLink down on one GPU breaks the multicast group",
            ),
        ],
        extract: |m, v| {
            put(v, "cuda_error", after(m, "CUDA error ").and_then(number));
        },
    },
    Signature {
        id: "cuda.system-not-ready",
        needles: &["system not yet initialized"],
        requires: &[],
        near: &[],
        source: "CUDA runtime error string of cudaErrorSystemNotReady (802) (closed source; the text as CUDA's \
                 cudaGetErrorString returns it, not read from a repository)",
        proves: "the CUDA driver reports the system not ready on this node",
        suggests: "an NVSwitch system whose fabric manager is stopped or failed",
        tier: Tier::Cause,
        causes: &[cause(
            crate::gpu::ids::FABRIC_MANAGER.as_str(),
            Reporter,
            "CUDA returns error 802 until nvidia-fabricmanager has configured the NVSwitches",
        )],
        extract: |_, _| {},
    },
    Signature {
        id: "cuda.invalid-device-ordinal",
        needles: &["invalid device ordinal"],
        requires: &[],
        near: &[],
        source: "CUDA runtime error string of cudaErrorInvalidDevice (101) (closed source; the text as cudaGetErrorString returns it, not read from a repository)",
        proves: "a process asked for a GPU index this node does not show it",
        suggests: "more processes per node than visible GPUs, or CUDA_VISIBLE_DEVICES narrower than the job assumes",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::gpu::ids::COUNT.as_str(),
                Reporter,
                "fewer visible GPUs than --nproc-per-node",
            ),
            cause(
                crate::gpu::ids::VISIBLE_DEVICES.as_str(),
                Reporter,
                "CUDA_VISIBLE_DEVICES hides the GPU the rank asked for",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "gloo.family-mismatch",
        needles: &["ss1.ss_family == ss2.ss_family"],
        requires: &[],
        near: &[],
        source: "facebookincubator/gloo cc441984 (2025-05-16) gloo/transport/tcp/device.cc:285 GLOO_ENFORCE_EQ(ss1.ss_family, ss2.ss_family); \
                 gloo/common/logging.h MakeString(x, \" vs \", y), gloo/common/logging.cc \"[enforce fail at \"",
        proves: "two gloo endpoints have different address families (2 = IPv4, 10 = IPv6)",
        suggests: "the ranks chose different interfaces: one resolved or picked an IPv6 address, another IPv4",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Cluster,
                "GLOO_SOCKET_IFNAME unset or naming different interfaces lets each rank pick its own address family",
            ),
            cause(
                crate::rendezvous::ids::MASTER_RESOLUTION.as_str(),
                Cluster,
                "the master's name resolves to IPv6 on some nodes and IPv4 on others",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "ss1.ss_family == ss2.ss_family. ") {
                put(
                    v,
                    "family",
                    Some(r.trim().to_string()).filter(|s| !s.is_empty()),
                );
            }
        },
    },
    Signature {
        id: "c10d.address-in-use",
        needles: &[
            "Address already in use",
            "address already in use",
            "EADDRINUSE",
        ],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch 056b6f38 torch/csrc/distributed/c10d/socket.cpp SocketListenOp: \"The server socket has failed to listen on any local \
                 network address.\" + \"The server socket has failed to bind to {} {}.\" (errno text from getSocketError); NVIDIA/nccl v2.28.9-1 \
                 src/misc/socket.cc:413 SYSCHECK(bind(..), \"bind\") with src/include/checks.h WARN(\"Call to \" name \" failed: %s\")",
        proves: "a process could not listen on a port of this node because another socket holds it (errno 98)",
        suggests: "a crashed or still-running job keeps the master port (or two jobs share one port on a node)",
        tier: Tier::Cause,
        causes: &[cause(
            crate::ports::ids::IN_USE.as_str(),
            Reporter,
            "the port is held on the node that printed it; the finding names the pid and command",
        )],
        extract: |m, v| {
            put(
                v,
                "port",
                port_after_colon(m).or_else(|| after(m, "port: ").and_then(number)),
            );
        },
    },
    Signature {
        id: "errno.cannot-assign-address",
        needles: &["Cannot assign requested address"],
        requires: &[],
        near: &[],
        source: "strerror(EADDRNOTAVAIL = 99) as printed by NVIDIA/nccl v2.28.9-1 src/include/checks.h WARN(\"Call to \" name \" failed: %s\") \
                 and src/misc/socket.cc:596 \"%s: connect to %s failed : %s\", and by pytorch/pytorch 056b6f38 socket.cpp \"... {} {}.\" with the socket error",
        proves: "a bind or connect used a local address this node does not have",
        suggests: "a master address or interface that belongs to another node (the hostname or MASTER_ADDR resolves to someone else's address here)",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Reporter,
                "the interface NCCL or Gloo was told to use has no such address on this node",
            ),
            cause(
                crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
                Reporter,
                "this node's hostname resolves to an address it does not own",
            ),
            cause(
                crate::rendezvous::ids::MASTER_RESOLUTION.as_str(),
                Cluster,
                "the master's name resolves differently on different nodes",
            ),
        ],
        extract: |m, v| {
            put(v, "port", port_after_colon(m));
        },
    },
    Signature {
        id: "errno.too-many-open-files",
        needles: &["Too many open files"],
        requires: &[],
        near: &[],
        source: "strerror(EMFILE = 24) as printed by NVIDIA/nccl v2.28.9-1 src/include/checks.h WARN(\"Call to \" name \" failed: %s\") \
                 and src/misc/socket.cc:458 \"socketTryAccept: Accept failed: %s\"",
        proves: "a process reached its open-file limit (sockets count as files)",
        suggests: "RLIMIT_NOFILE too low for the job's size: NCCL opens sockets per peer and channel",
        tier: Tier::Cause,
        causes: &[cause(
            crate::sys::scale::ids::NOFILE.as_str(),
            Reporter,
            "the soft open-file limit is below what the job's world size needs",
        )],
        extract: |_, _| {},
    },
    Signature {
        id: "nccl.ib-memory-registration",
        needles: &["ibv_reg_mr"],
        requires: &["failed"],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/misc/ibvwrap.cc:66 WARN(\"Call to \" name \" failed with error %s errno %d\") for \"ibv_reg_mr\" / \"ibv_reg_mr_iova2\"",
        proves: "the HCA refused to register (pin) memory on this node",
        suggests: "the memlock limit is too low for RDMA (ENOMEM / Cannot allocate memory)",
        tier: Tier::Cause,
        causes: &[cause(
            crate::sys::ids::MEMLOCK.as_str(),
            Reporter,
            "RDMA pins buffers; a finite RLIMIT_MEMLOCK refuses the registration",
        )],
        extract: |_, _| {},
    },
    Signature {
        id: "nccl.ib-completion-error",
        needles: &["Got completion from peer"],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/transport/net_ib.cc:2543 WARN(\"NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d) ...\"); \
                 v2.21.5-1 src/transport/net_ib.cc:1909 WARN(\"NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d (%s)...\")",
        proves: "an RDMA operation to that peer failed on the fabric; status 12 (IBV_WC_RETRY_EXC_ERR) means the peer's HCA never acknowledged",
        suggests: "a port down or flapping on either end, a RoCE GID or VLAN that does not route, or InfiniBand usable on some nodes only",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::rdma::ids::PORT_DOWN.as_str(),
                Reporter,
                "a port of this node's HCA is not ACTIVE (or the peer's: check both ends)",
            ),
            cause(
                crate::rdma::ids::GID_INDEX.as_str(),
                Reporter,
                "on RoCE, a GID index that is link-local or RoCE v1 does not route between nodes",
            ),
            cause(
                crate::rdma::ids::PARTIAL.as_str(),
                Cluster,
                "InfiniBand works on some nodes only",
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "the pair cannot reach each other on the fabric",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "Got completion from peer ") {
                let peer = first_word(r);
                let (addr, port) = split_angle(&peer);
                put(v, "addr", Some(addr));
                put(v, "port", port);
            }
            if let Some(r) = after(m, "status=") {
                // `status=12` (2.21) or `status=transport retry counter exceeded(12)` (2.28).
                let digits = if r.starts_with(|c: char| c.is_ascii_digit()) {
                    number(r)
                } else {
                    r.find('(').and_then(|i| number(&r[i + 1..]))
                };
                put(v, "status", digits);
            }
            put(v, "hca", after(m, " hca ").map(first_word));
        },
    },
    Signature {
        id: "nccl.ibv-modify-qp",
        needles: &["ibv_modify_qp failed with"],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/misc/ibvwrap.cc:307 WARN(\"Call to ibv_modify_qp failed with %d %s, %s\")",
        proves: "a queue pair to a peer could not be brought up; 110 (ETIMEDOUT) means no path to the peer's GID",
        suggests: "a RoCE GID index or address family that does not route, a port down, or InfiniBand on some nodes only",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::rdma::ids::GID_INDEX.as_str(),
                Reporter,
                "the GID NCCL uses is not routable between the nodes (RoCE)",
            ),
            cause(
                crate::rdma::ids::PORT_DOWN.as_str(),
                Reporter,
                "a port is not ACTIVE on one end",
            ),
            cause(
                crate::rdma::ids::PARTIAL.as_str(),
                Cluster,
                "InfiniBand works on some nodes only",
            ),
        ],
        extract: |m, v| {
            put(
                v,
                "errno",
                after(m, "ibv_modify_qp failed with ").and_then(number),
            );
        },
    },
    Signature {
        id: "c10d.connect-timeout",
        needles: &["The client socket has timed out after"],
        requires: &["while trying to connect to ("],
        near: &[],
        source: "pytorch/pytorch 056b6f38 torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::throwTimeoutError: \
                 \"The client socket has timed out after {} while trying to connect to ({}, {}).\"",
        proves: "nothing accepted a connection at (host, port) within the timeout: packets were dropped by a filter, or no process listened there, or the host is down; the text does not say which",
        suggests: "a firewall dropping the master port, a master that never started or crashed first, or a master address the workers cannot reach",
        tier: Tier::Connection,
        causes: &[
            cause_if(
                crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
                Target,
                When::Loopback,
                "the address is loopback: the worker was told to reach the master on itself",
            ),
            cause_if(
                crate::firewall::ids::RULES.as_str(),
                Target,
                When::NotLoopback,
                "a filter on the master drops the port (a timeout, not a refusal, means dropped)",
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "the worker cannot reach the master's address at all on that network",
            ),
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "the master (rank 0) never started listening or died before the others joined",
            ),
        ],
        extract: |m, v| {
            put(v, "timeout", after(m, "timed out after ").map(first_word));
            host_port_paren(m, "connect to (", v);
        },
    },
    Signature {
        id: "c10d.connect-failed",
        needles: &["The client socket has failed to connect to"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch 056b6f38 torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::run: \"The client socket has failed to connect to any \
                 network address of ({}, {}).\" and tryConnect: \"The client socket has failed to connect to {} {}.\"",
        proves: "every address of (host, port) refused or failed the connection",
        suggests: "refused: no process listens there (wrong master address, loopback, master not started) or a REJECT rule",
        tier: Tier::Connection,
        causes: &[
            cause_if(
                crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
                Target,
                When::Loopback,
                "the address is loopback: the master advertised 127.0.1.1 or localhost",
            ),
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "the master is not listening on that port (not started, or died first)",
            ),
            cause_if(
                crate::firewall::ids::RULES.as_str(),
                Target,
                When::NotLoopback,
                "a REJECT rule on the master answers with a refusal",
            ),
            cause(
                crate::rendezvous::ids::MASTER_RESOLUTION.as_str(),
                Cluster,
                "the master's name resolves to an address where it does not listen",
            ),
        ],
        extract: |m, v| {
            host_port_paren(m, "network address of (", v);
            if !v.contains_key("addr") {
                // tryConnect's `connect to [host]:port` / `host:port`.
                if let Some(w) = after(m, "failed to connect to ").map(first_word) {
                    if let Some((h, p)) = w.rsplit_once(':') {
                        put(v, "addr", Some(h.trim_matches(['[', ']']).to_string()));
                        put(v, "port", number(p));
                    }
                }
            }
        },
    },
    Signature {
        id: "c10d.listen-failed",
        needles: &["The server socket has failed to listen on any local network address"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch 056b6f38 torch/csrc/distributed/c10d/socket.cpp SocketListenOp::run: \"The server socket has failed to listen on any local network address.\"",
        proves: "the TCPStore (master) could not listen on its port on this node",
        suggests: "the port is held by another process, or the address does not belong to this node",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::ports::ids::IN_USE.as_str(),
                Reporter,
                "another process holds the master port on this node",
            ),
            cause(
                crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
                Reporter,
                "the master address does not belong to this node",
            ),
        ],
        extract: |m, v| {
            put(
                v,
                "port",
                port_after_colon(m).or_else(|| after(m, "port: ").and_then(number)),
            );
        },
    },
    Signature {
        id: "gloo.connect-full-mesh",
        needles: &["Gloo connectFullMesh failed"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupGloo.cpp c10::str(\"Gloo connectFullMesh failed with \", err) \
                 (read in a vendored copy found by code search; pytorch/pytorch itself is too large to fetch here); the inner text from \
                 facebookincubator/gloo cc441984 gloo/transport/tcp/pair.cc",
        proves: "gloo could not connect every pair of ranks",
        suggests: "a rank advertised an address the others cannot reach (loopback from /etc/hosts, a virtual interface) or a filter",
        tier: Tier::Connection,
        causes: &[
            cause_if(
                crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
                Target,
                When::Loopback,
                "a rank advertised a loopback address (its hostname resolves to 127.x)",
            ),
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Cluster,
                "GLOO_SOCKET_IFNAME unset or wrong: gloo used an interface the others cannot reach",
            ),
            cause_if(
                crate::firewall::ids::RULES.as_str(),
                Target,
                When::NotLoopback,
                "a filter drops gloo's ports between the nodes",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "remote=[") {
                put(v, "addr", r.split(']').next().map(str::to_string));
                put(v, "port", after(r, "]:").and_then(number));
            }
        },
    },
    Signature {
        id: "gloo.no-interface",
        needles: &["Unable to find address for: "],
        requires: &[],
        near: &[],
        source: "facebookincubator/gloo e6d509b5..70dc3602 gloo/transport/tcp/device.cc:84 \
                 GLOO_ENFORCE(ifa != nullptr, \"Unable to find address for: \", iface), \
                 gloo/transport/uv/device.cc:154, :165 (the same text)",
        proves: "gloo found no interface of that exact name with an address on this node: GLOO_SOCKET_IFNAME (or the interface torch gave gloo) names one it lacks",
        suggests: "GLOO_SOCKET_IFNAME names an interface this node lacks (bond0 on one node, eno1 on another), or one that is down",
        tier: Tier::Cause,
        causes: &[cause(
            crate::env::ids::SOCKET_IFNAME.as_str(),
            Reporter,
            "GLOO_SOCKET_IFNAME names no interface with an address on the node that printed it (gloo takes exact names, no prefixes)",
        )],
        extract: |m, v| {
            put(
                v,
                "interface",
                after(m, "Unable to find address for: ").map(first_word),
            );
        },
    },
    Signature {
        id: "gloo.peer-closed",
        needles: &[
            "Connection closed by peer [",
            "Read timeout [",
            "] Read error [",
            "timed out connecting: ",
        ],
        requires: &[],
        near: &[],
        source: "facebookincubator/gloo cc441984 gloo/transport/tcp/pair.cc:544 GLOO_ERROR_MSG(\"Connection closed by peer \", peer_.str()), \
                 :520 \"Read timeout \", gloo/transport/tcp/helpers.h:208 \"timed out connecting: \"",
        proves: "a gloo peer closed its connection or did not answer in time",
        suggests: "the peer process died (look for its own first error) or the path between them drops packets",
        tier: Tier::Connection,
        causes: &[
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "the peer rank died or never joined; its own log holds the first error",
            ),
            cause(
                crate::firewall::ids::RULES.as_str(),
                Target,
                "a filter between the nodes drops gloo's connections",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "[") {
                let inner = r.split(']').next().unwrap_or("");
                put(v, "addr", Some(inner.to_string()).filter(|s| !s.is_empty()));
                put(v, "port", after(r, "]:").and_then(number));
            }
        },
    },
    Signature {
        id: "nccl.connect-failed",
        needles: &[
            "exceeded error retry count",
            "socketStartConnect: Connect to",
            "socketPollConnect to",
            "exceeded timeouts (",
        ],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/misc/socket.cc:582 WARN(\"%s: connect to %s returned %s, exceeded error retry count after %d attempts\"), \
                 :596 \"%s: connect to %s failed : %s\", :622 \"socketPollConnect to %s failed with error %s\"; v2.21.5-1 :476/:484 \
                 \"socketStartConnect: exceeded timeouts (%d)\", \"socketStartConnect: Connect to %s failed : %s\"",
        proves: "NCCL could not open a TCP connection to a peer's address and port (bootstrap or the socket transport's random high ports)",
        suggests: "timed out: a filter drops the high ports or the address is not reachable; refused: nothing listens (the peer died)",
        tier: Tier::Connection,
        causes: &[
            cause_if(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Cluster,
                When::LinkLocal,
                "the address is IPv6 link-local (fe80::): NCCL chose an interface whose only address is valid on its own link; set NCCL_SOCKET_IFNAME to the routed one",
            ),
            cause(
                crate::firewall::ids::RULES.as_str(),
                Target,
                "a filter allows the master port but drops NCCL's random high ports",
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "the pair cannot reach each other on the interface NCCL chose",
            ),
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Cluster,
                "NCCL_SOCKET_IFNAME lets NCCL pick an interface the peer cannot reach (docker0, a management NIC)",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "onnect to ") {
                let (addr, port) = split_angle(&first_word(r));
                put(v, "addr", Some(addr));
                put(v, "port", port);
            }
        },
    },
    Signature {
        id: "nccl.remote-closed",
        needles: &["Connection closed by remote peer"],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.28.9-1 src/misc/socket.cc:71 WARN(\"socketProgress: Connection closed by remote peer %s\") (v2.21.5-1 :50)",
        proves: "a peer closed NCCL's socket: that process ended or aborted first",
        suggests: "look for the peer's own first error; a peer killed by the OOM killer or a failing rank shows up like this everywhere else",
        tier: Tier::Connection,
        causes: &[
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "the peer at that address died or left; its own log holds the first error",
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "a path that drops connections between the two nodes",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "closed by remote peer ") {
                let w = first_word(r);
                let (addr, port) = split_angle(&w);
                put(v, "addr", Some(addr));
                put(v, "port", port);
            }
        },
    },
    Signature {
        id: "elastic.rendezvous-connection",
        needles: &[
            "The connection to the C10d store has failed",
            "RendezvousConnectionError",
        ],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py raise RendezvousConnectionError(\"The connection \
                 to the C10d store has failed. See inner exception for details.\") (read in copies found by code search)",
        proves: "torchrun's c10d rendezvous could not reach its store at --rdzv-endpoint",
        suggests: "the inner exception (usually a client socket timeout or refusal) names the address",
        tier: Tier::Consequence,
        causes: &[
            cause(
                crate::firewall::ids::RULES.as_str(),
                Target,
                "a filter drops the rendezvous endpoint's port",
            ),
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "the node hosting the endpoint is not up or not listening",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "c10d.watchdog-timeout",
        needles: &["Watchdog caught collective operation timeout"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: \"[Rank \", rank_, \"] \", \"Watchdog caught collective operation \
                 timeout: \", work, \" ran for \", .., \" milliseconds before timing out.\" (read in a copy found by code search)",
        proves: "one or more ranks did not enter collective SeqNum N of this process group within the timeout: a straggler, a dead rank, a mismatched collective or the network",
        suggests: "a second error on some rank (a crash, a killed process, NCCL WARN) names the cause; without one, Flight Recorder dumps do: rerun with TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_FR_BUFFER_SIZE=2000 (TORCH_NCCL_TRACE_BUFFER_SIZE before torch 2.7) and TORCH_FR_DUMP_TEMP_FILE=/shared/fr/trace_ (TORCH_NCCL_DEBUG_INFO_TEMP_FILE), then `preflight explain --dumps /shared/fr`",
        tier: Tier::Consequence,
        causes: &[
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "a rank died or stalled and the others wait for it (the dumps name it)",
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "a pair of nodes cannot reach each other on the interface NCCL uses",
            ),
            cause(
                crate::firewall::ids::RULES.as_str(),
                Cluster,
                "a filter allows the master port but drops NCCL's high ports: init passes, collectives hang",
            ),
        ],
        extract: |m, v| {
            put(v, "rank", after(m, "[Rank ").and_then(number));
            put(v, "seq", after(m, "SeqNum=").and_then(number));
            put(
                v,
                "op",
                after(m, "OpType=").map(|r| r.split([',', ')']).next().unwrap_or("").to_string()),
            );
            put(v, "timeout_ms", after(m, "Timeout(ms)=").and_then(number));
            put(v, "numel", after(m, "NumelIn=").and_then(number));
            // `[PG ID 0 PG GUID 0(default_pg) Rank 7]` (torch 2.4+) or `[PG 0 (default_pg) Rank 7]`.
            put(
                v,
                "pg",
                after(m, "[PG ID ")
                    .or_else(|| after(m, "[PG "))
                    .and_then(number),
            );
        },
    },
    Signature {
        id: "c10d.nccl-error",
        needles: &[
            "NCCL error in:",
            "DistBackendError",
            "ncclSystemError",
            "ncclRemoteError",
            "unhandled system error",
            "remote process exited or there was a network error",
        ],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch torch/csrc/distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK: \"NCCL error in: \", __FILE__, \":\", __LINE__, \", \", \
                 ncclGetErrorWithVersion(..) and NVIDIA/nccl v2.28.9-1 src/misc/argcheck.cc / ncclGetErrorString (\"unhandled system error\", \
                 \"remote process exited or there was a network error\") (PyTorch text read in copies found by code search)",
        proves: "an NCCL call failed on this rank; the NCCL WARN lines before it hold the cause",
        suggests: "set NCCL_DEBUG=WARN (or INFO) to see the cause if no NCCL WARN line is in the log",
        tier: Tier::Consequence,
        causes: &[
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "a network error between nodes is the most common reason",
            ),
            cause(
                crate::firewall::ids::RULES.as_str(),
                Cluster,
                "a filter on NCCL's high ports",
            ),
        ],
        extract: |m, v| {
            for e in [
                "ncclSystemError",
                "ncclRemoteError",
                "ncclInternalError",
                "ncclInvalidUsage",
                "ncclUnhandledCudaError",
            ] {
                if m.contains(e) {
                    put(v, "nccl_result", Some(e.to_string()));
                    break;
                }
            }
        },
    },
    Signature {
        id: "elastic.rendezvous-timeout",
        needles: &["RendezvousTimeoutError"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch torch/distributed/elastic/rendezvous/api.py class RendezvousTimeoutError (the exception's name; its message \
                 was not read)",
        proves: "torchrun's rendezvous did not gather --nnodes nodes within its timeout",
        suggests: "a node never started or cannot reach the endpoint",
        tier: Tier::Consequence,
        causes: &[cause(
            crate::rendezvous::ids::RENDEZVOUS.as_str(),
            Cluster,
            "ranks that never joined, by rank and host",
        )],
        extract: |_, _| {},
    },
    Signature {
        id: "slurm.task-exit",
        needles: &["srun: error: "],
        requires: &[": task", "xit"],
        near: &[],
        source: "SchedMD/slurm src/srun/launch.c _task_finish: error(\"%s: task %s: Exited with exit code %d\") (the file at 03d38544 was found \
                 and read in part; this line's shape is srun's as printed, not read there)",
        proves: "a task of the job exited with an error on that node",
        suggests: "it is usually the first rank to fail; its own output (above) holds the cause",
        tier: Tier::Consequence,
        causes: &[cause(
            crate::rendezvous::ids::RENDEZVOUS.as_str(),
            Cluster,
            "the others then wait for (or lose) that rank",
        )],
        extract: |m, v| {
            if let Some(r) = after(m, "srun: error: ") {
                put(
                    v,
                    "host",
                    Some(r.split(':').next().unwrap_or("").trim().to_string())
                        .filter(|s| !s.is_empty()),
                );
                put(
                    v,
                    "task",
                    after(r, "task ").map(|t| t.split(':').next().unwrap_or("").trim().to_string()),
                );
            }
            put(v, "exit_code", after(m, "exit code ").and_then(number));
        },
    },
];

/// A signature by id.
pub fn get(id: &str) -> Option<&'static Signature> {
    super::SIGNATURES.iter().find(|s| s.id == id).copied()
}

pub(super) fn put(v: &mut Values, key: &'static str, value: Option<String>) {
    if let Some(x) = value.filter(|x| !x.is_empty()) {
        v.insert(key, x.chars().take(120).collect());
    }
}

/// The text after `marker`.
pub(super) fn after<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    s.find(marker).map(|i| &s[i + marker.len()..])
}

/// Leading decimal digits.
pub(super) fn number(s: &str) -> Option<String> {
    let d: String = s
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!d.is_empty()).then_some(d)
}

/// Up to the first space, without trailing punctuation.
pub(super) fn first_word(s: &str) -> String {
    s.split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches(['.', ',', ';', '\''])
        .trim_start_matches('\'')
        .to_string()
}

/// `10.0.0.2<55321>` to ("10.0.0.2", Some("55321")).
pub(super) fn split_angle(w: &str) -> (String, Option<String>) {
    match w.split_once('<') {
        Some((a, p)) => (a.to_string(), number(p)),
        None => (w.to_string(), None),
    }
}

/// `(host, port)` after `marker`.
pub(super) fn host_port_paren(m: &str, marker: &str, v: &mut Values) {
    if let Some(r) = after(m, marker) {
        let inner = r.split(')').next().unwrap_or("");
        let mut it = inner.split(',');
        put(v, "addr", it.next().map(|h| h.trim().to_string()));
        put(v, "port", it.next().and_then(number));
    }
}

/// The port of the first `host:port` / `[::]:port` in the text.
pub(super) fn port_after_colon(m: &str) -> Option<String> {
    let b = m.as_bytes();
    for (i, _) in m.match_indices(':') {
        let prev = if i > 0 { b[i - 1] } else { b' ' };
        if !(prev == b']' || prev.is_ascii_digit() || prev.is_ascii_alphabetic()) {
            continue;
        }
        // `socket.cpp:436` is a source line, not a port.
        let word = m[..i].rsplit([' ', '(', '[', '/']).next().unwrap_or("");
        if [".cpp", ".cc", ".c", ".h", ".hpp", ".py", ".rs"]
            .iter()
            .any(|x| word.ends_with(x))
        {
            continue;
        }
        let digits = number(&m[i + 1..])?;
        if digits.len() >= 2 && digits.len() <= 5 && !m[i + 1..].starts_with(' ') {
            if let Ok(p) = digits.parse::<u32>() {
                if (1..=65535).contains(&p) {
                    return Some(digits);
                }
            }
        }
    }
    None
}

/// True when an address names this machine's loopback.
pub fn is_loopback(addr: &str) -> bool {
    let a = addr.trim().trim_start_matches('[').trim_end_matches(']');
    a.starts_with("127.")
        || a == "::1"
        || a.eq_ignore_ascii_case("localhost")
        || a == "::ffff:127.0.0.1"
}

/// True when an address is IPv6 link-local (`fe80::...`, often with `%interface`).
pub fn is_link_local(addr: &str) -> bool {
    let a = addr.trim().trim_start_matches('[').to_ascii_lowercase();
    a.starts_with("fe80:")
}

/// errno from `errno: 98 -` or from strerror's text.
pub fn errno_of(m: &str) -> Option<(u32, &'static str)> {
    const KNOWN: &[(u32, &str)] = &[
        (98, "Address already in use"),
        (99, "Cannot assign requested address"),
        (111, "Connection refused"),
        (110, "Connection timed out"),
        (113, "No route to host"),
        (101, "Network is unreachable"),
        (104, "Connection reset by peer"),
        (24, "Too many open files"),
        (103, "Software caused connection abort"),
        (97, "Address family not supported by protocol"),
        (32, "Broken pipe"),
        (19, "No such device"),
        (28, "No space left on device"),
        (12, "Cannot allocate memory"),
    ];
    if let Some(r) = after(m, "errno: ") {
        if let Some(n) = number(r).and_then(|d| d.parse::<u32>().ok()) {
            if let Some((_, t)) = KNOWN.iter().find(|(k, _)| *k == n) {
                return Some((n, t));
            }
        }
    }
    KNOWN
        .iter()
        .find(|(_, t)| m.contains(t) || m.contains(&t.to_ascii_lowercase()))
        .map(|(n, t)| (*n, *t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::catalog;

    #[test]
    fn every_cause_is_a_catalog_id_and_every_source_is_named() {
        let mut ids = std::collections::BTreeSet::new();
        for s in super::super::SIGNATURES.iter() {
            assert!(ids.insert(s.id), "duplicate signature {}", s.id);
            assert!(!s.causes.is_empty(), "{} has no cause", s.id);
            assert!(
                s.source.contains('/') || s.source.contains("closed source"),
                "{}: source names no file",
                s.id
            );
            for c in s.causes {
                assert!(
                    catalog::get(c.id).is_some()
                        || super::super::signatures_sources::job(c.id).is_some(),
                    "{}: {} is not in the catalog",
                    s.id,
                    c.id
                );
            }
        }
    }

    fn values(id: &str, m: &str) -> Values {
        let mut v = Values::new();
        (get(id).unwrap().extract)(m, &mut v);
        v
    }

    #[test]
    fn values_come_out_of_the_messages() {
        let v = values(
            "c10d.connect-timeout",
            "The client socket has timed out after 900000ms while trying to connect to (10.0.0.1, 29500).",
        );
        assert_eq!(v["addr"], "10.0.0.1");
        assert_eq!(v["port"], "29500");
        assert_eq!(v["timeout"], "900000ms");
        let v = values(
            "nccl.duplicate-gpu",
            "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 1000",
        );
        assert_eq!(
            (
                v["rank"].as_str(),
                v["peer_rank"].as_str(),
                v["device"].as_str()
            ),
            ("0", "1", "1000")
        );
        let v = values(
            "nccl.ib-completion-error",
            "NET/IB: Got completion from peer 10.0.0.2<44321> with status=transport retry counter exceeded(12) opcode=RDMA_WRITE(1) hca mlx5_0",
        );
        assert_eq!(
            (
                v["addr"].as_str(),
                v["port"].as_str(),
                v["status"].as_str(),
                v["hca"].as_str()
            ),
            ("10.0.0.2", "44321", "12", "mlx5_0")
        );
        let v = values(
            "c10d.address-in-use",
            "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
        );
        assert_eq!(v["port"], "29500");
        let v = values(
            "gloo.connect-full-mesh",
            "Gloo connectFullMesh failed with [pair.cc:144] Connection refused, remote=[127.0.1.1]:17308",
        );
        assert_eq!(
            (v["addr"].as_str(), v["port"].as_str()),
            ("127.0.1.1", "17308")
        );
        let v = values(
            "slurm.task-exit",
            "srun: error: node7: task 3: Exited with exit code 1",
        );
        assert_eq!(
            (
                v["host"].as_str(),
                v["task"].as_str(),
                v["exit_code"].as_str()
            ),
            ("node7", "3", "1")
        );
        assert_eq!(
            errno_of("(errno: 98 - Address already in use)"),
            Some((98, "Address already in use"))
        );
        assert!(is_loopback("127.0.1.1") && is_loopback("[::1]") && !is_loopback("10.0.0.1"));
    }
}

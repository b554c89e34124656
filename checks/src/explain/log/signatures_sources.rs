//! The signatures the source inventory added (`sources/inventory.tsv`, made by
//! `scripts/explain-sources/extract.py`): CUDA's error strings by cause, the job's own faults,
//! c10d's name-resolution warning and store errors (and the store's somaxconn warning, gloo's
//! unresolved host name), NCCL's socket-family check, and the errno
//! read by the call that failed. Their patterns come from the format strings (`generated.rs`);
//! the needles here catch what no source read prints (torch 1.x, Python wrappers, plugins).

use super::signatures::{
    Cause, Scope, Signature, Tier, Values, When, after, cause, cause_if, first_word, number, put,
    split_angle,
};
use Scope::{Cluster, Reporter, Target};

/// A cause that is the job itself, not a node: its id, what it means, how to fix it.
#[derive(Debug)]
pub struct JobCause {
    pub id: &'static str,
    pub meaning: &'static str,
    pub fix: &'static str,
}

/// The job's own faults the scanner names.
pub static JOB: &[JobCause] = &[
    JobCause {
        id: "job.cuda-error",
        meaning: "the job's own CUDA error (an illegal access, a device-side assert, out of memory): its code or its sizes, not the node",
        fix: "Rerun the failing rank with CUDA_LAUNCH_BLOCKING=1 (and TORCH_USE_CUDA_DSA builds for asserts) to get the kernel that failed; for out of memory lower the batch or enable activation checkpointing. `preflight check --gemm` on that node tells a sick GPU from a code fault.",
    },
    JobCause {
        id: "job.mismatch",
        meaning: "the ranks called different collectives, or the same one with different sizes or dtypes: the job's code path differs between ranks",
        fix: "Make every rank issue the same collectives in the same order with the same shapes (no rank-dependent branches around them); run with TORCH_DISTRIBUTED_DEBUG=DETAIL to have torch check each collective's shapes across ranks.",
    },
];

/// The job cause with this id.
pub fn job(id: &str) -> Option<&'static JobCause> {
    JOB.iter().find(|j| j.id == id)
}

const fn job_cause(id: &'static str, why: &'static str) -> Cause {
    cause(id, Reporter, why)
}

/// `(host, port)` after "addresses of (".
fn gai(m: &str, v: &mut Values) {
    if let Some(r) = after(m, "addresses of (") {
        let inner = r.split(')').next().unwrap_or("");
        let mut it = inner.split(',');
        put(v, "host", it.next().map(|h| h.trim().to_string()));
        put(v, "port", it.next().and_then(number));
    }
    put(
        v,
        "gai_error",
        after(m, "gai error: ").map(|r| r.trim_end_matches(['.', ')']).to_string()),
    );
}

/// Tried before the base signatures: a line that matches one of these and a base one is this.
pub static FIRST: &[Signature] = &[
    Signature {
        id: "errno.bind-in-use-ephemeral",
        needles: &["Address already in use"],
        requires: &["Call to bind failed"],
        near: &[],
        source: "NVIDIA/nccl v2.4.8-1..v2.29.7-1 SYSCHECK(bind(..), \"bind\") -> WARN(\"Call to bind failed: %s\") with strerror(EADDRINUSE) (include/socket.h, misc/socket.cc)",
        proves: "NCCL's own bind failed with EADDRINUSE; NCCL's listening sockets bind port 0, so the kernel found no free ephemeral port",
        suggests: "local ports exhausted: thousands of sockets per node (all-to-all at scale, many communicators), or a narrow ip_local_port_range; not the master port",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::sys::scale::ids::PORT_RANGE.as_str(),
                Reporter,
                "NCCL binds port 0: EADDRINUSE there means the ephemeral range is used up",
            ),
            cause(
                crate::ports::ids::IN_USE.as_str(),
                Reporter,
                "only when NCCL_COMM_ID fixes the bootstrap root's port: another process holds it",
            ),
        ],
        extract: |_, v| {
            v.insert("errno", "98".into());
        },
    },
    Signature {
        id: "errno.connect-cannot-assign",
        needles: &["Cannot assign requested address"],
        requires: &["onnect"],
        near: &[],
        source: "strerror(EADDRNOTAVAIL = 99) read by connect: NVIDIA/nccl misc/socket.cc \"%s: connect to %s failed : %s\" and pytorch/pytorch 056b6f38 socket.cpp \"The client socket has failed to connect to %s %s.\"",
        proves: "a connect found no local address and port to send from (EADDRNOTAVAIL on connect)",
        suggests: "the node ran out of local (ephemeral) ports: sockets in TIME_WAIT from many short connections, or a narrow ip_local_port_range",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::sys::scale::ids::PORT_RANGE.as_str(),
                Reporter,
                "connect picks a free local port from ip_local_port_range; none was left",
            ),
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Reporter,
                "a source address forced on an interface that lacks it",
            ),
        ],
        extract: |m, v| {
            v.insert("errno", "99".into());
            put(v, "call", Some("connect".into()));
            if let Some(r) = after(m, "onnect to ") {
                let (addr, port) = split_angle(&first_word(r));
                put(v, "addr", Some(addr.trim_matches(['[', ']']).to_string()));
                put(v, "port", port);
            }
        },
    },
    Signature {
        id: "nccl.socket-family",
        needles: &[
            "is neither AF_INET(",
            "Socket creation failed : Address family not supported",
        ],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.18.3-1..v2.29.7-1 misc/socket.cc WARN(\"ncclSocketInit: connecting to address %s with family %d is neither AF_INET(%d) nor AF_INET6(%d)\"); v2.4.8-1 include/socket.h \"Socket creation failed : %s\" with strerror(EAFNOSUPPORT)",
        proves: "NCCL was handed a socket address of no family: the interface or address it was told to use was never found",
        suggests: "NCCL_SOCKET_IFNAME names an interface this node lacks, or no interface has an address of the family NCCL looks for",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Reporter,
                "NCCL_SOCKET_IFNAME (or NCCL_OOB_NET_IFNAME) matches no interface here: the address stays empty (family 0 or garbage)",
            ),
            cause(
                crate::net::ids::NO_INTERFACE.as_str(),
                Reporter,
                "no interface is up with an address NCCL may use",
            ),
        ],
        extract: |m, v| put(v, "family", after(m, "with family ").and_then(number)),
    },
    Signature {
        id: "cuda.ecc",
        needles: &[
            "uncorrectable ECC error",
            "CUDA_ERROR_ECC_UNCORRECTABLE",
            "cudaErrorECCUncorrectable",
        ],
        requires: &[],
        near: &[],
        source: "CUDA runtime 13.0 cudaGetErrorString(214) cudaErrorECCUncorrectable \"uncorrectable ECC error encountered\" (read through nvidia/cu13/lib/libcudart.so.13); cuda.h CUDA_ERROR_ECC_UNCORRECTABLE",
        proves: "the GPU reported an uncorrectable memory error: its memory returned wrong data",
        suggests: "a failing GPU (or one that needs a row remap and a reset); the job on it cannot continue",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::gpu::ids::ECC.as_str(),
                Reporter,
                "uncorrectable ECC errors on that node's GPU",
            ),
            cause(
                crate::gpu::ids::ROW_REMAP.as_str(),
                Reporter,
                "a pending or failed row remapping: the GPU needs a reset",
            ),
            cause(
                crate::gpu::ids::XID.as_str(),
                Reporter,
                "the kernel log's XID 48/63/64/94/95 names the GPU",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "cuda.nvlink-error",
        needles: &[
            "uncorrectable NVLink error",
            "CUDA_ERROR_NVLINK_UNCORRECTABLE",
            "cudaErrorNvlinkUncorrectable",
        ],
        requires: &[],
        near: &[],
        source: "CUDA runtime 13.0 cudaGetErrorString(220) cudaErrorNvlinkUncorrectable (read through nvidia/cu13/lib/libcudart.so.13); cuda.h CUDA_ERROR_NVLINK_UNCORRECTABLE",
        proves: "an NVLink between GPUs of this node failed during the job",
        suggests: "a degraded NVLink or NVSwitch; XID 74 in the kernel log names the GPU",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::gpu::ids::NVLINK.as_str(),
                Reporter,
                "a link down or erroring on one of that node's GPUs",
            ),
            cause(
                crate::gpu::ids::XID.as_str(),
                Reporter,
                "XID 74 (NVLink error) in the kernel log",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "cuda.peer-access",
        needles: &[
            // cudaGetErrorString(217) without its last letter, so a paste cut there still matches.
            "peer access is not supported between these two device",
            "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
            "cudaErrorPeerAccessUnsupported",
        ],
        requires: &[],
        near: &[],
        source: "CUDA runtime 13.0 cudaGetErrorString(217) cudaErrorPeerAccessUnsupported (read through nvidia/cu13/lib/libcudart.so.13); NVIDIA/nccl v2.4.8-1 transport/p2p.cc WARN(\"failed to open CUDA IPC handle : %d %s\")",
        proves: "CUDA refused peer-to-peer access between two GPUs of this node",
        suggests: "PCIe ACS or an IOMMU between the GPUs blocks P2P, the GPUs do not support it (consumer cards), or a VM hides it; NCCL_P2P_DISABLE=1 works around it slowly",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::gpu::ids::PCIE_ACS.as_str(),
                Reporter,
                "ACS source validation on the bridges between the GPUs blocks peer traffic",
            ),
            cause(
                crate::gpu::ids::NVLINK.as_str(),
                Reporter,
                "no NVLink between the pair, so P2P would go over a PCIe path that refuses it",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "cuda.busy-unavailable",
        needles: &[
            "busy or unavailable",
            "CUDA_ERROR_DEVICE_UNAVAILABLE",
            "cudaErrorDevicesUnavailable",
        ],
        requires: &[],
        near: &[],
        source: "CUDA runtime 13.0 cudaGetErrorString(46) cudaErrorDevicesUnavailable \"CUDA-capable device(s) is/are busy or unavailable\" (read through nvidia/cu13/lib/libcudart.so.13; torch 1.x printed \"all CUDA-capable devices are busy or unavailable\")",
        proves: "the GPU would not take another context: it is held by another process in exclusive mode, or it is unavailable",
        suggests: "a process left from an earlier run holds the GPU (EXCLUSIVE_PROCESS compute mode), two ranks share one GPU, or the GPU fell off the bus",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::gpu::ids::IN_USE.as_str(),
                Reporter,
                "another process holds the GPU",
            ),
            cause(
                crate::gpu::ids::VISIBLE_DEVICES.as_str(),
                Reporter,
                "two ranks were given the same device",
            ),
            cause(
                crate::gpu::ids::XID.as_str(),
                Reporter,
                "a GPU that fell off the bus (XID 79) is unavailable",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "cuda.job-error",
        needles: &[
            "CUDA out of memory",
            "device-side assert triggered",
            "an illegal memory access was encountered",
        ],
        requires: &[],
        near: &[],
        source: "CUDA runtime 13.0 cudaGetErrorString of the job's own errors (1, 2, 700, 701, 702, 710, 715, 716, 719, ...; read through nvidia/cu13/lib/libcudart.so.13); torch's \"CUDA out of memory\"",
        proves: "a CUDA call or kernel of the job failed with an error of the job's own making (memory, assert, argument)",
        suggests: "the job itself: its code, its sizes or its memory budget; a node fault is unlikely unless `preflight check --gemm` fails there",
        tier: Tier::Cause,
        causes: &[
            job_cause(
                "job.cuda-error",
                "the rank's own CUDA error; the others then lose it",
            ),
            cause(
                crate::gpu::ids::COMPUTE_WRONG.as_str(),
                Reporter,
                "only if it recurs on one node alone: a GPU that computes wrong or faults",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "nccl.message-truncated",
        needles: &[
            "Mismatched collective",
            "Detected mismatch between collectives",
        ],
        requires: &[],
        near: &[],
        source: "NVIDIA/nccl v2.4.8-1..v2.29.7-1 WARN(\"Message truncated : received %d bytes instead of %d\") and NET/Socket's \"message truncated : receiving %d bytes instead of %d\"; torch's TORCH_DISTRIBUTED_DEBUG=DETAIL \"Detected mismatch between collectives\"",
        proves: "a rank received more bytes than it posted for: the two sides of a collective disagree on its size",
        suggests: "the ranks called different collectives or the same one with different sizes (rank-dependent code); rarely, different NCCL settings (NCCL_PROTO, buffer sizes) between ranks",
        tier: Tier::Cause,
        causes: &[
            job_cause(
                "job.mismatch",
                "mismatched collectives: the job's code path differs between ranks",
            ),
            cause(
                crate::rendezvous::ids::VERSIONS.as_str(),
                Cluster,
                "different NCCL versions or settings between nodes",
            ),
        ],
        extract: |m, v| {
            put(v, "received", after(m, "received ").and_then(number));
            put(v, "expected", after(m, "instead of ").and_then(number));
        },
    },
    Signature {
        id: "c10d.gai-error",
        needles: &["cannot be retrieved (gai error:"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch 056b6f38 torch/csrc/distributed/c10d/socket.cpp SocketConnectOp::tryConnect recordError(\"The {}network addresses of ({}, {}) cannot be retrieved (gai error: {} - {}).\") and SocketListenOp::tryListen \"The local {}network addresses cannot be retrieved (gai error: {} - {}).\"",
        proves: "getaddrinfo could not resolve the store's host name for that address family",
        suggests: "the master's name does not resolve here (for IPv6 alone it is often harmless when the IPv4 lookup then works)",
        tier: Tier::Connection,
        causes: &[
            cause(
                crate::rendezvous::ids::MASTER_RESOLUTION.as_str(),
                Cluster,
                "the master's name does not resolve (or resolves differently) on this node",
            ),
            cause(
                crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
                Reporter,
                "the host's own name is missing from /etc/hosts and DNS",
            ),
        ],
        extract: gai,
    },
    Signature {
        id: "c10d.store-host-not-found",
        needles: &[
            "host not found: Name or service not known",
            "Name or service not known",
        ],
        requires: &[],
        near: &[
            "TCPStore",
            "host not found",
            "rendezvous",
            "init_process_group",
        ],
        source: "torch 1.x c10d tcputil \"host not found: \" + gai_strerror, raised as ValueError/RuntimeError under TCPStore( (seen in pytorch/elastic#31); gai_strerror(EAI_NONAME) \"Name or service not known\"",
        proves: "the store's host name does not resolve on this node",
        suggests: "MASTER_ADDR or the rendezvous endpoint is a name this node's resolver does not know (a pod or container name, a short name without the domain)",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::rendezvous::ids::MASTER_RESOLUTION.as_str(),
                Cluster,
                "the master's name resolves on some nodes and not others",
            ),
            cause(
                crate::rendezvous::ids::FQDN.as_str(),
                Cluster,
                "a short host name that only resolves with the right search domain",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "c10d.store-reset",
        needles: &["Connection reset by peer"],
        requires: &[],
        near: &[
            "TCPStore(",
            "TCPStore::TCPStore",
            "_create_c10d_store",
            "TCP client failed to connect/validate",
        ],
        source: "strerror(ECONNRESET) right after TCPStore( (pytorch/pytorch torch/distributed/rendezvous.py _create_c10d_store, c10d TCPStore.cpp \"TCP client failed to connect/validate to host %s:%s - retrying ...\")",
        proves: "the master's store reset this rank's connection while the ranks were connecting to it",
        suggests: "the master's listen backlog overflowed: more ranks connected at once than somaxconn allows, and the kernel reset the excess",
        tier: Tier::Connection,
        causes: &[
            cause(
                crate::sys::scale::ids::LISTEN_BACKLOG.as_str(),
                Target,
                "somaxconn or tcp_max_syn_backlog below the world size on the master",
            ),
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "the master died while the ranks connected",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "to host ") {
                let w = first_word(r);
                if let Some((h, p)) = w.rsplit_once(':') {
                    put(v, "addr", Some(h.to_string()));
                    put(v, "port", number(p));
                }
            }
        },
    },
    Signature {
        id: "c10d.store-peer-gone",
        needles: &[
            "recvValue failed on SocketImpl",
            "sendBytes failed",
            "recvBytes failed",
        ],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp C10D_WARNING(\"recvValue failed on {}: {}\") (the shape as printed by torch 2.4+, quoted in pytorch/pytorch#129985)",
        proves: "the store connection broke after it was made: the store's host (rank 0) closed it",
        suggests: "rank 0 died or exited (its own log holds the first error); every other rank then fails on the store",
        tier: Tier::Connection,
        causes: &[
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "the store's host process ended first",
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "a path that drops established connections",
            ),
        ],
        extract: |m, v| {
            if let Some(r) = after(m, "remote=") {
                let w = r.split([')', ',']).next().unwrap_or("");
                if let Some((h, p)) = w.rsplit_once(':') {
                    put(v, "addr", Some(h.trim_matches(['[', ']']).to_string()));
                    put(v, "port", number(p));
                }
            }
        },
    },
    Signature {
        id: "c10d.connect-timeout-legacy",
        needles: &["connect() timed out", "Socket Timeout"],
        requires: &[],
        near: &[],
        source: "torch 1.x c10d Utils/TCPStore: \"connect() timed out.\" and gloo's \"Socket Timeout\" (the shapes as printed, quoted in pytorch/pytorch issues; torch 1.x's sources were not read)",
        proves: "nothing accepted the store connection within the timeout",
        suggests: "the master never started its store (wrong rank 0, rank and world size disagree), a filter drops the port, or the address is unreachable",
        tier: Tier::Connection,
        causes: &[
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "rank 0 never started its store or died before the others joined",
            ),
            cause_if(
                crate::firewall::ids::RULES.as_str(),
                Target,
                When::NotLoopback,
                "a filter drops the master port",
            ),
            cause(
                crate::link::ids::UNREACHABLE.as_str(),
                Cluster,
                "the master's address is not reachable from this node",
            ),
        ],
        extract: |_, _| {},
    },
    Signature {
        id: "c10d.somaxconn-low",
        needles: &["but somaxconn is"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch 00321a02 torch/csrc/distributed/c10d/TCPStore.cpp TCPStore::TCPStore C10D_WARNING(\"Starting store with {} workers but somaxconn is {}.This might cause instability during bootstrap, consider increasing it.\")",
        proves: "the node hosting the store accepts fewer pending connections (net.core.somaxconn) than the store expects workers",
        suggests: "when the ranks connect at once, the connections past the backlog are reset (Connection reset by peer after TCPStore) or time out",
        tier: Tier::Cause,
        causes: &[cause(
            crate::sys::scale::ids::LISTEN_BACKLOG.as_str(),
            Reporter,
            "net.core.somaxconn below the world size on the node hosting the store",
        )],
        extract: |m, v| {
            put(v, "workers", after(m, "store with ").and_then(number));
            put(v, "somaxconn", after(m, "somaxconn is ").and_then(number));
        },
    },
    Signature {
        id: "gloo.hostname-unresolved",
        needles: &["Unable to resolve hostname to a (local) address"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch 0069b729 torch/csrc/distributed/c10d/ProcessGroupGloo.cpp createDefaultDevice TORCH_WARN_ONCE(\"Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME.\") and createDeviceForHostname TORCH_CHECK(\"Cannot resolve \", hostname, \" to a (local) address\")",
        proves: "gloo found no address of this node that the host's own name resolves to",
        suggests: "gloo then binds the loopback address (127.0.0.1), which the other nodes cannot reach: their connections to this rank fail or hang",
        tier: Tier::Cause,
        causes: &[
            cause(
                crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
                Reporter,
                "the host's own name is missing from /etc/hosts and DNS, or maps to a loopback address",
            ),
            cause(
                crate::env::ids::SOCKET_IFNAME.as_str(),
                Reporter,
                "GLOO_SOCKET_IFNAME is unset or names no interface, so gloo falls back to the host name",
            ),
        ],
        extract: |m, v| {
            put(
                v,
                "host",
                after(m, "Cannot resolve ")
                    .map(|r| r.split(" to a (local)").next().unwrap_or("").to_string()),
            );
        },
    },
    Signature {
        id: "c10d.store-barrier-timeout",
        needles: &["Timed out initializing process group in store based barrier"],
        requires: &[],
        near: &[],
        source: "pytorch/pytorch torch/distributed/distributed_c10d.py _store_based_barrier: \"Timed out initializing process group in store based barrier on rank: {}, for key: {} (world_size={}, worker_count={}, timeout={})\" (the shape as printed)",
        proves: "fewer ranks than the world size reached the store (worker_count of world_size)",
        suggests: "a rank never started or died before init; worker_count above world_size means two jobs share one master port",
        tier: Tier::Consequence,
        causes: &[
            cause(
                crate::rendezvous::ids::RENDEZVOUS.as_str(),
                Cluster,
                "ranks that never joined, by rank and host",
            ),
            cause(
                crate::ports::ids::IN_USE.as_str(),
                Target,
                "another job's ranks on the same master port inflate worker_count",
            ),
        ],
        extract: |m, v| {
            put(v, "world_size", after(m, "world_size=").and_then(number));
            put(
                v,
                "worker_count",
                after(m, "worker_count=").and_then(number),
            );
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_causes_are_not_finding_ids_and_are_described() {
        for j in JOB {
            assert!(j.id.starts_with("job."));
            assert!(crate::explain::catalog::get(j.id).is_none());
            assert!(!j.fix.is_empty() && !j.meaning.is_empty());
        }
        assert!(job("job.mismatch").is_some() && job(crate::ports::ids::IN_USE.as_str()).is_none());
    }
}

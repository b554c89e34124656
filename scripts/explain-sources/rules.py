"""Maps each format string of the inventory to what it can mean.

`classify(source, format)` returns (mapping, group, why):
  mapping  `sig:ID`      a signature of the scanner (its causes are finding ids),
           `job:WHAT`    the job itself (its own CUDA error, mismatched collectives, API usage),
           `errno:CALL`  a system call's failure whose cause depends on the errno in the text
                         (the scanner's errno-by-call signatures decide it),
           `cuda:CODE`   a CUDA call's failure whose text is a cudaGetErrorString (mapped there),
           `unmapped`    nothing a node check can confirm; `why` says why.
The first rule whose regex matches wins, per source; the last rule of each source is its
default. `write_outputs` writes the inventory, the Rust table and the guide's page."""
import os
import re
from collections import Counter, OrderedDict

R = re.compile


def rule(rx, mapping, group, why="", flags=0):
    return (R(rx, flags), mapping, group, why)


NCCL = [
    rule(r"no socket interface found|no interface found|No usable listening interface|no NCCL_SOCKET_IFNAME", "sig:nccl.no-socket-interface", "interfaces"),
    rule(r"neither AF_INET|Address family not supported|ncclSocketInit: .*family", "sig:nccl.socket-family", "interfaces"),
    rule(r"Duplicate GPU detected", "sig:nccl.duplicate-gpu", "GPU assignment"),
    rule(r"attaching to shared memory|attach to shared memory", "unmapped", "shared memory", "a segment another rank created is gone (removed by a cleanup such as systemd's RemoveIPC, or the ranks do not share /dev/shm): no node check reads that"),
    rule(r"/dev/shm|posix_fallocate|failed to extend|creating shared memory segment|shm_open|ftruncate", "sig:nccl.shm-full", "shared memory"),
    rule(r"NVLS|NVLink SHARP|[Mm]ulticast", "sig:nccl.nvls-bind", "NVLink / NVLS"),
    rule(r"reg_mr|reg_dmabuf_mr", "sig:nccl.ib-memory-registration", "RDMA memory registration"),
    rule(r"Got completion", "sig:nccl.ib-completion-error", "RDMA fabric"),
    rule(r"ibv_modify_qp", "sig:nccl.ibv-modify-qp", "RDMA fabric"),
    rule(r"^Call to (bind|connect|accept|listen|socket|getsockname|setsockopt|recv|send|poll)\b", "errno:socket", "sockets (errno by call)"),
    rule(r"[Aa]ccept failed|socketTryAccept", "errno:accept", "sockets (errno by call)"),
    rule(r"connect to %s (failed|returned)|Connect to %s|socketPollConnect|exceeded error retry|exceeded timeouts|Connect to .* failed", "sig:nccl.connect-failed", "sockets"),
    rule(r"closed by remote peer|Connection closed by|Connection reset", "sig:nccl.remote-closed", "sockets"),
    rule(r"[Mm]essage truncated|truncated", "job:mismatch", "mismatched collectives"),
    rule(r"Cuda failure|CUDA error|Cuda API error|cuda failure|CUDA failure|CUDA IPC|cudaIpc|IPC handle", "cuda:code", "CUDA"),
    rule(r"^Call to (ibv_|mlx5)", "errno:verbs", "RDMA verbs (errno by call)"),
    rule(r"^Call to ", "errno:other", "system calls (errno by call)"),
    rule(r"invalid (root|type|reduction|argument|usage|pointer|operation|count)|is not a valid pointer|argument is NULL|mismatchs? with NCCL device|should not be called|unknown to this communicator|[Ii]nvalid .*(comm|rank|size)|must be|not supported for|revoked|aborted", "job:usage", "API usage"),
    rule(r"[Oo]ut of memory|[Aa]llocation failed|[Ff]ailed to (CUDA )?(c|m)alloc|cuMem.*fail", "job:oom", "memory allocation"),
    rule(r"NCCL_[A-Z_]+|environment|[Ee]nv var", "unmapped", "settings", "a setting's value rejected; the text names the variable"),
    rule(r"[Pp]lugin|dlopen|libnccl-net|ncclNet|collNet|CollNet", "unmapped", "network plugin", "a net or collective plugin's own load or ABI error: no node check reads plugins"),
    rule(r"TOPO|[Tt]opology|XML|xml|graph|[Gg]raph|PCI|NUMA|busId|[Rr]ing \d|[Rr]ing %d|[Tt]ree|paths|NVML|nvml", "unmapped", "topology", "topology detection from sysfs and NVML: NCCL's own model of the node"),
    rule(r"[Pp]roxy|[Pp]rogress", "unmapped", "proxy", "the proxy thread's report of a failure whose cause is the WARN before it"),
    rule(r"[Bb]ootstrap|[Ss]ocket|[Nn]et/|NET/", "unmapped", "sockets", "a protocol or state check of NCCL's own sockets (wrong magic, unexpected size): a peer's bug or a foreign connection"),
    rule(r".", "unmapped", "internal", "an internal consistency check of NCCL: a bug to report, not a node's fault"),
]

GLOO = [
    rule(r"Unable to find address for: ", "sig:gloo.no-interface", "interfaces"),
    rule(r"ss_family", "sig:gloo.family-mismatch", "interfaces"),
    rule(r"[Cc]onnection closed by peer|[Rr]ead timeout|[Rr]ead error|[Ww]rite error|[Cc]onnection reset|[Tt]imed out|[Ss]ocket closed|closed", "sig:gloo.peer-closed", "sockets"),
    rule(r"failed to connect|[Cc]onnect timeout|Error connecting to|connect: |[Cc]onnection refused", "sig:gloo.connect-full-mesh", "sockets"),
    rule(r"getaddrinfo|gai_strerror|[Hh]ostname|resolve", "sig:c10d.gai-error", "name resolution"),
    rule(r"nbytes|[Ss]ize|[Cc]ount|[Ll]ength|[Ee]lements", "job:usage", "API usage"),
    rule(r"(bind|listen|accept|socket|setsockopt|getsockname|poll|epoll)", "errno:socket", "sockets (errno by call)"),
    rule(r"ibv_|[Vv]erbs|[Ii]nfiniband", "unmapped", "verbs transport", "gloo's ibverbs transport is not the one torch uses"),
    rule(r"CUDA|cuda", "cuda:code", "CUDA"),
    rule(r".", "unmapped", "internal", "an internal invariant or API check of gloo: the caller's code, no node cause"),
]

CUDA = [
    rule(r"ECC|Ecc", "sig:cuda.ecc", "GPU memory errors"),
    rule(r"[Nn][Vv][Ll]ink|NVLINK", "sig:cuda.nvlink-error", "NVLink"),
    rule(r"peer access is not supported|peer access has not been enabled|PeerAccessUnsupported|PeerAccessNotEnabled|PEER_ACCESS_UNSUPPORTED|PEER_ACCESS_NOT_ENABLED|P2P", "sig:cuda.peer-access", "peer access"),
    rule(r"busy or unavailable|DevicesUnavailable|DEVICE_UNAVAILABLE|DeviceUnavailable|exclusive-process|[Dd]evice is in use|DEVICE_BUSY", "sig:cuda.busy-unavailable", "GPU held"),
    rule(r"system not yet initialized|SystemNotReady|SYSTEM_NOT_READY", "sig:cuda.system-not-ready", "fabric manager"),
    rule(r"[Mm]ulticast|MULTICAST|NVLS", "sig:nccl.nvls-bind", "NVLink / NVLS"),
    rule(r"invalid device ordinal|InvalidDevice$|INVALID_DEVICE$|no CUDA-capable device|NoDevice|NO_DEVICE", "sig:cuda.invalid-device-ordinal", "GPU count"),
    rule(r"[Oo]ut of memory|MemoryAllocation|OUT_OF_MEMORY|illegal memory access|IllegalAddress|ILLEGAL_ADDRESS|device-side assert|Assert|ASSERT|misaligned|Misaligned|MISALIGNED|illegal instruction|IllegalInstruction|ILLEGAL_INSTRUCTION|launch failure|LaunchFailure|LAUNCH_FAILED|too many resources|LaunchOutOfResources|OUT_OF_RESOURCES|launch timed out|LaunchTimeout|LAUNCH_TIMEOUT|[Hh]ardware stack error|HardwareStackError|HARDWARE_STACK_ERROR|invalid program counter|InvalidPc|INVALID_PC|invalid argument|InvalidValue|INVALID_VALUE", "job:cuda-error", "the job's CUDA error"),
    rule(r".", "unmapped", "CUDA API", "a CUDA API usage, install or driver error that no node check confirms (driver too old, no kernel image, profiler, graphs, ...)"),
]

ELASTIC = [
    rule(r"host not found|[Nn]ame or service not known|cannot resolve", "sig:c10d.store-host-not-found", "name resolution"),
    rule(r"RendezvousConnectionError|[Cc]onnection to", "sig:elastic.rendezvous-connection", "rendezvous connection"),
    rule(r"RendezvousTimeoutError|[Tt]imed out|[Tt]imeout", "sig:elastic.rendezvous-timeout", "rendezvous timeout"),
    rule(r"RendezvousClosedError|closed", "unmapped", "rendezvous closed", "another agent closed the rendezvous (a consequence of its own failure)"),
    rule(r"ValueError|must be|is not a valid|[Ii]nvalid|should be|expected|not supported|unknown|does not", "unmapped", "launch arguments", "a launch argument rejected; `preflight torchrun` checks the launch line (launch.* findings)"),
    rule(r".", "unmapped", "rendezvous state", "the rendezvous' own state machine"),
]

# c10d: its headers (an installed torch) and its .cpp files (c10d-*.tsv or a checkout). The
# texts with a node-level cause go to the scanner's signatures; the checks of the caller's
# arguments to the job; the rest stays unmapped with the reason.
C10D_USAGE = (r"[Mm]ust |[Ii]nvalid|[Ii]ncorrect|not supported|does not support|doesn't support|only support"
              r"|only allowed|only available|only works|can only be called|[Rr]equires|Cannot use|Unhandled ReduceOp"
              r"|Expected list|[Uu]nsupported|should|has to be|takes a single|[Nn]ot implemented|already registered"
              r"|no effect|Could not retrieve or create the backend|No backend type|name not set|No device\(s\)"
              r"|without storage|wait_tensor|Split ranks|split group|needs to be completed|does not support list"
              r"|unexpected param|does not implement|missing implementation|does not yet support|Only ProcessGroupp?NCCL supports"
              r"|no support for")
C10D = [
    rule(r"gai error", "sig:c10d.gai-error", "name resolution"),
    rule(r"resolve hostname to a \(local\) address|Cannot resolve %s to a \(local\) address", "sig:gloo.hostname-unresolved", "name resolution"),
    rule(r"but somaxconn is", "sig:c10d.somaxconn-low", "store listen backlog"),
    rule(r"failed to listen on any local", "sig:c10d.listen-failed", "store listen"),
    rule(r"failed to bind|failed to listen on", "errno:bind", "store listen (errno by call)"),
    rule(r"failed to connect to any network address", "sig:c10d.connect-failed", "store connect"),
    rule(r"failed to connect to", "errno:connect", "store connect (errno by call)"),
    rule(r"timed out after .* while trying to connect", "sig:c10d.connect-timeout", "store connect"),
    rule(r"[Ff]ailed to accept", "errno:accept", "store accept (errno by call)"),
    rule(r"^Socket Timeout$", "sig:c10d.connect-timeout-legacy", "store wait"),
    rule(r"seconds waiting for clients\. .* clients joined", "sig:c10d.store-barrier-timeout", "store wait"),
    rule(r"Watchdog caught collective operation timeout|timed out in blocking wait", "sig:c10d.watchdog-timeout", "watchdog"),
    rule(r"in monitoredBarrier|pass monitoredBarrier|reached monitoredBarrier|Monitored Barrier encountered",
         "sig:c10d.watchdog-timeout", "monitored barrier"),
    rule(r"Connection was likely closed\. Did the remote server shutdown or crash", "sig:c10d.store-peer-gone", "store connection"),
    rule(r"retrieving ncclUniqueId from \[0\] via c10d key-value store", "sig:c10d.store-peer-gone", "store (NCCL id exchange)"),
    rule(r"no GPUs found", "sig:cuda.invalid-device-ordinal", "GPU count"),
    rule(r"ncclUnhandledCudaError", "cuda:code", "CUDA"),
    rule(r"ncclInvalidArgument|ncclInvalidUsage", "job:usage", "API usage"),
    rule(r"^Last error|Unknown NCCL error|ncclInternalError", "unmapped", "NCCL detail",
         "NCCL's own last WARN (read by the scanner on its own line) or an internal check of NCCL"),
    rule(r"[Ee]xperimental non-blocking|TORCH_NCCL_NONBLOCKING_TIMEOUT|nonblocking communicator mode", "unmapped", "settings",
         "a note on a setting; the text names the variable"),
    rule(r"ncclSystemError|ncclRemoteError|NCCL error|NCCL communicator was aborted|NCCL communicator encountered error"
         r"|Health check failure|NCCL timeout in communicator initialization|, NCCL version %s", "sig:c10d.nccl-error", "NCCL"),
    rule(r"Some NCCL operations have failed or timed out|To avoid data inconsistency|terminated with exception"
         r"|Process Group (shutdown|destroyed)|Aborting all communicators", "unmapped", "consequence",
         "printed after another error (a watchdog timeout, an NCCL error): that error names the cause"),
    rule(r"monitor thread timeout|no heartbeat|watchdog heartbeat|nccl_trace|DESYNC_DEBUG|NCCLPG debug info", "unmapped", "watchdog",
         "the watchdog stuck in a CUDA or NCCL call, or its debug dump: the log's other errors (or the GPU's Xid) explain it"),
    rule(r"[Mm]ismatch between collectives|Collectives differ|Op type: |Tensor Tensor |Sparse dimensions do not match",
         "job:mismatch", "mismatched collectives"),
    rule(r"Failed to open existing socket|getsockname failed|Failed to listen on socket initialized from fd", "errno:other",
         "store socket (errno by call)"),
    rule(r"^(open\(%s\)|flock|lseek|read|write): %s$", "errno:other", "file store (errno by call)"),
    rule(r"Timeout waiting for key|^Wait timeout$", "unmapped", "file and hash store",
         "FileStore's init file is not on a filesystem every node shares, or a rank never wrote its key: no node check reads the init_method path"),
    rule(r"response (is )?expected|Unexpected query type|Unexpected poll revent|read past end of buffer|Invalid (string|payload) size"
         r"|Too many keys|lacks processBuf|onConnect callback missing|control pipe|uv loop|uv async|loop cleanup|uv_async_send"
         r"|addr parsing|port number of the socket|LibUV|libuv|listen fd|to client failed|read callback|processing client message"
         r"|address of the client|no-delay|hostname of the client|not listening for connections", "unmapped", "store protocol",
         "the store server's own state or protocol check (a client of another version or protocol on the master port, a libuv failure)"),
    rule(r"likely a timeout|socket %s timed out after|has timed out, will retry|^Operation timed out!$", "unmapped", "store wait",
         "a wait or connect attempt ran out of time and is retried or reported again: the final error after it is mapped"),
    rule(C10D_USAGE, "job:usage", "API usage"),
    rule(r".", "unmapped", "internal", "an internal assertion of c10d or a call torch does not implement: a torch bug, no node cause"),
]

# errno by the call that failed: what each errno means there (the scanner's errno signatures).
ERRNO_MAPPED = {
    "EADDRINUSE": "bind: port.in-use (a fixed port) or sys.port-range (NCCL's own port 0)",
    "EADDRNOTAVAIL": "connect: sys.port-range (local ports exhausted); bind: env.socket-ifname (the address is not this node's)",
    "ECONNREFUSED": "connect: nothing listens (cluster.rendezvous, firewall.rules REJECT)",
    "ETIMEDOUT": "connect: dropped (firewall.rules, link.unreachable); ibv_modify_qp: no path to the GID",
    "EHOSTUNREACH": "connect: link.unreachable",
    "ENETUNREACH": "connect: link.unreachable; ibv_modify_qp: ib.gid-index",
    "ECONNRESET": "recv after TCPStore(: sys.listen-backlog; later: the peer died (cluster.rendezvous)",
    "ECONNABORTED": "connect: link.unreachable",
    "EPIPE": "send: the peer died (cluster.rendezvous)",
    "EMFILE": "accept/socket: sys.nofile",
    "ENFILE": "accept/socket: sys.nofile",
    "ENOSPC": "posix_fallocate on /dev/shm: sys.shm",
    "ENOMEM": "ibv_reg_mr: sys.memlock",
    "EAFNOSUPPORT": "socket: nccl.socket-family (no interface of that family)",
    "ENODEV": "ibv_*: ib.port-down",
}


def classify(source, fmt):
    if source == "errno":
        return ("errno:table", "errno", "") if fmt_errno_name(fmt) in ERRNO_MAPPED else (
            "unmapped", "errno", "not an errno the calls of a distributed job report with a node-level cause")
    table = {"nccl": NCCL, "gloo": GLOO, "cuda": CUDA, "torch-elastic": ELASTIC, "c10d": C10D}[source]
    for rx, mapping, group, why in table:
        if rx.search(fmt):
            return mapping, group, why
    return "unmapped", "internal", "no rule"


_ERRNO_BY_TEXT = {}


def fmt_errno_name(text):
    if not _ERRNO_BY_TEXT:
        import errno as e
        for code, name in e.errorcode.items():
            _ERRNO_BY_TEXT.setdefault(os.strerror(code), name)
    return _ERRNO_BY_TEXT.get(text, "")


CONV = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcspn%]|%lu|%zu|%ld|%lx|%llu|%lld|%PRI\w+")


def pieces(fmt):
    """The literal pieces between printf conversions, trimmed, non-empty."""
    out = []
    for p in CONV.split(fmt):
        p = p.replace("%%", "%")
        if p.strip():
            out.append(p)
    return out


def kind_of(mapping):
    if mapping.startswith("job:"):
        return "job"
    if mapping == "unmapped":
        return "unmapped"
    return "finding"


def rust_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def version_span(row, versions):
    vs = row["versions"]
    all_v = versions[row["source"]]
    if len(all_v) == 1 or len(vs) == 1:
        return vs[0]
    if len(vs) == len(all_v):
        return f"{vs[0]}..{vs[-1]} (all {len(all_v)})"
    return f"{vs[0]}..{vs[-1]} ({len(vs)} of {len(all_v)})"


MIN_ANCHOR = 10

# The job's own faults that the scanner still names (with "the job itself" as the cause).
JOB_SIGNATURES = {
    ("cuda", "job:cuda-error"): "cuda.job-error",
    ("nccl", "job:mismatch"): "nccl.message-truncated",
}


def write_outputs(root, rows, versions):
    inv_dir = os.path.join(root, "checks", "src", "explain", "log", "sources")
    os.makedirs(inv_dir, exist_ok=True)
    with open(os.path.join(inv_dir, "inventory.tsv"), "w", encoding="utf-8") as f:
        f.write("# Generated by scripts/explain-sources/extract.py: every error format string read, one a line.\n")
        f.write("source\tversions\twhere\tkind\tgroup\tmapping\twhy\tformat\n")
        for r in rows:
            f.write("\t".join([r["source"], version_span(r, versions), r["where"], r["kind"], r["group"],
                               r["map"], r["why"], r["format"].replace("\t", " ")]) + "\n")
    patterns, seen, short = [], set(), Counter()
    for r in rows:
        sig = JOB_SIGNATURES.get((r["source"], r["map"]))
        if r["map"].startswith("sig:"):
            sig = r["map"][4:]
        if not sig:
            continue
        ps = pieces(r["format"])
        if not ps or max(len(p.strip()) for p in ps) < MIN_ANCHOR:
            short[r["source"]] += 1
            continue
        key = (sig, tuple(ps))
        if key in seen:
            continue
        seen.add(key)
        ctx = r["source"] == "cuda" and r["kind"] == "runtime error string"
        patterns.append((sig, ps, f"{r['source']} {version_span(r, versions)} {r['where']}", ctx))
    cov = OrderedDict()
    per_version = OrderedDict((s, OrderedDict((v, Counter()) for v in vs)) for s, vs in versions.items())
    reasons = Counter()
    for r in rows:
        c = cov.setdefault(r["source"], Counter())
        c["formats"] += 1
        c[kind_of(r["map"])] += 1
        for v in r["versions"]:
            pv = per_version[r["source"]][v]
            pv["formats"] += 1
            pv[kind_of(r["map"])] += 1
        if r["map"] == "unmapped":
            reasons[(r["source"], r["group"], r["why"])] += 1
    out = ["//! Generated by scripts/explain-sources/extract.py from the sources it read (see",
           "//! sources/inventory.tsv): the scanner's patterns, one per mapped format string, and the",
           "//! coverage `preflight explain --coverage` prints. Do not edit; run the script again.", "",
           "use super::coverage::{LeftOut, Pattern, SourceCoverage, VersionCoverage};", "",
           "/// Format strings mapped to a signature, as literal pieces between their conversions.",
           "pub static PATTERNS: &[Pattern] = &["]
    for sig, ps, src, ctx in patterns:
        context = '&["CUDA", "cuda", "Cuda"]' if ctx else "&[]"
        out.append(f"    Pattern {{ signature: {rust_str(sig)}, pieces: &[{', '.join(rust_str(p) for p in ps)}], context: {context}, source: {rust_str(src)} }},")
    out += ["];", "", "/// Every source read: its versions, format strings, and where they went.",
            "pub static SOURCES: &[SourceCoverage] = &["]
    names = {"nccl": "NVIDIA/nccl src/ (WARN formats, check-macro expansions, ncclGetErrorString)",
             "gloo": "pytorch/gloo gloo/ (enforce, throw and IO error messages)",
             "cuda": "CUDA runtime (cudaGetErrorString and cudaGetErrorName of every code) and driver (cuda.h CUresult names)",
             "torch-elastic": "torch.distributed rendezvous and elastic rendezvous (raised exceptions)",
             "c10d": "torch c10d (checks, throws and warnings of its headers and of its .cpp files)",
             "errno": "errno (strerror of every code, read by the call that failed)"}
    for s, c in cov.items():
        out.append(f"    SourceCoverage {{ source: {rust_str(s)}, what: {rust_str(names[s])}, versions: &[{', '.join(rust_str(v) for v in versions[s])}], "
                   f"formats: {c['formats']}, to_finding: {c['finding']}, to_job: {c['job']}, unmapped: {c['unmapped']}, patterns: {sum(1 for p in patterns if p[2].startswith(s + ' '))}, too_short: {short[s]} }},")
    out += ["];", "", "/// Every version read of each source: the format strings it has and where they went.",
            "pub static VERSIONS: &[VersionCoverage] = &["]
    for s, vs in per_version.items():
        for v, c in vs.items():
            out.append(f"    VersionCoverage {{ source: {rust_str(s)}, version: {rust_str(v)}, formats: {c['formats']}, "
                       f"to_finding: {c['finding']}, to_job: {c['job']}, unmapped: {c['unmapped']} }},")
    out += ["];", "", "/// What was left unmapped, by source and group, with the reason and the count.",
            "pub static LEFT_OUT: &[LeftOut] = &["]
    for (s, g, why), n in sorted(reasons.items(), key=lambda x: (x[0][0], -x[1])):
        out.append(f"    LeftOut {{ source: {rust_str(s)}, group: {rust_str(g)}, why: {rust_str(why)}, count: {n} }},")
    out += ["];", ""]
    rs = os.path.join(root, "checks", "src", "explain", "log", "generated_signatures.rs")
    with open(rs, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    import subprocess
    subprocess.run(["rustfmt", "--edition", "2024", rs], check=False)
    md = ["# Explain: coverage of the error texts", "",
          "Generated by `scripts/explain-sources/extract.py`; `preflight explain --coverage` prints the same.",
          "Every error format string of these sources was read, grouped by the cause it can have and",
          "mapped to a finding (through a scanner signature, or by the errno or CUDA error it carries),",
          "to the job itself (its own CUDA error, mismatched collectives, API usage), or left unmapped",
          "with the reason. `preflight explain --coverage --format json` prints the full list (its",
          "`formats`); in a checkout it is `checks/src/explain/log/sources/inventory.tsv`.", "",
          "| source | versions read | format strings | to a finding | to the job | unmapped | scanner patterns |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for s, c in cov.items():
        vs = versions[s]
        vtxt = ", ".join(vs) if len(vs) <= 3 else f"{vs[0]} ... {vs[-1]} ({len(vs)}: {', '.join(vs)})"
        md.append(f"| {names[s]} | {vtxt} | {c['formats']} | {c['finding']} | {c['job']} | {c['unmapped']} | "
                  f"{sum(1 for p in patterns if p[2].startswith(s + ' '))} |")
    md += ["", "Per version read (a format string found in several versions counts in each):", "",
           "| source | version | format strings | to a finding | to the job | unmapped |",
           "| --- | --- | ---: | ---: | ---: | ---: |"]
    for s, vs in per_version.items():
        for v, c in vs.items():
            md.append(f"| {s} | {v} | {c['formats']} | {c['finding']} | {c['job']} | {c['unmapped']} |")
    md += ["", "Left unmapped, and why:", "", "| source | group | count | why |", "| --- | --- | ---: | --- |"]
    for (s, g, why), n in sorted(reasons.items(), key=lambda x: (x[0][0], -x[1])):
        md.append(f"| {s} | {g} | {n} | {why} |")
    md.append("")
    with open(os.path.join(root, "docs", "src", "explain-coverage.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    print(f"{len(rows)} format strings, {len(patterns)} patterns", flush=True)
    for s, c in cov.items():
        print(f"  {s:14} formats {c['formats']:5}  finding {c['finding']:5}  job {c['job']:4}  unmapped {c['unmapped']:5}")
        for v, pv in per_version[s].items():
            print(f"    {v:28} formats {pv['formats']:5}  finding {pv['finding']:5}  job {pv['job']:4}  unmapped {pv['unmapped']:5}")

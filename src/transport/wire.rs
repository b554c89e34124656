//! The wire protocol: length-prefixed JSON frames with a hard size cap, and the messages they carry.
//!
//! The protocol carries data, never commands to run.

use preflight_checks::budget::{Budget, Exceeded, Scanner};
use preflight_checks::cluster::RefusalKind;
use preflight_checks::model::{LinkResult, NodeFacts, Report};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::io::{self, Read, Write};

/// One node's result for one message size, as the ring, the NCCL worker and the wire carry it.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RankRow {
    pub bytes: u64,
    /// Mean time of one all-reduce on this node (the slowest local GPU for NCCL), microseconds.
    pub time_us: f64,
    /// Elements that differed from the exact expected sum after the last iteration.
    pub wrong: u64,
}

/// Protocol version; both ends must agree.
pub const PROTO: u32 = 1;
/// The rank a node claims in its hello when it has none yet (torchrun's c10d rendezvous without
/// a node rank): the coordinator answers with [`Msg::Assigned`] before the join message. An older
/// coordinator, which cannot assign ranks, refuses it as out of range, so the protocol stays 1.
pub const UNASSIGNED_RANK: u32 = u32::MAX;
/// Magic string in every challenge, so a wrong service is told apart from a wrong secret.
pub const MAGIC: &str = "preflight";
/// Largest frame accepted after authentication, as sent (compressed when large).
pub const MAX_FRAME: usize = 32 << 20;
/// Largest frame before authentication: challenge, hello, welcome and reject are tiny.
pub const HANDSHAKE_FRAME: usize = 4 << 10;
/// Largest message once decompressed (a report of thousands of nodes, trimmed per node).
pub const MAX_MESSAGE: usize = 512 << 20;
/// What a data listener reads from a prober (`PingReq`, `BulkReq`) and a prober from the
/// listener (`BulkResult`): a few numbers, never compressed.
pub const REQUEST: Budget = Budget {
    what: "a data request",
    bytes: 512,
    values: 16,
    items: 8,
    string: 32,
    depth: 2,
    paths: &[],
};

/// Most network interfaces one node may report in its join.
pub const JOIN_INTERFACES: usize = 256;
/// Most addresses (IPv4 or IPv6) on one interface in a join.
pub const JOIN_ADDRESSES_PER_INTERFACE: usize = 64;

/// A join message: a node's facts and listeners, about 4 KiB per interface (a big node's
/// whole join is ~100 KiB). Interfaces, their addresses and the listeners are counted while
/// the message is read, before anything is parsed.
pub const JOIN: Budget = Budget {
    what: "a join message",
    bytes: 1 << 20,
    values: 64 << 10,
    items: 4096,
    string: 64 << 10,
    depth: 16,
    paths: &[
        ("facts.net.interfaces", JOIN_INTERFACES),
        ("facts.net.interfaces[].ipv4", JOIN_ADDRESSES_PER_INTERFACE),
        ("facts.net.interfaces[].ipv6", JOIN_ADDRESSES_PER_INTERFACE),
        ("listeners", 64),
    ],
};

/// Most candidate addresses (data listeners) one node may offer.
const LISTENERS_PER_NODE: usize = 64;
/// Bytes of one link result as JSON, with room to spare (~250 in practice).
const LINK_BYTES: usize = 512;

/// A node's answer to an order (`ProbeDone`, `BulkDone`, `MtuDone`, ring and NCCL rows): at
/// most one link per listener of every peer, so it grows with `nnodes`.
pub fn reply_budget(nnodes: usize) -> Budget {
    let bytes = (64 << 10) + nnodes.saturating_mul(LISTENERS_PER_NODE * LINK_BYTES);
    // Items and values follow the links an honest answer can hold, not its bytes: a list of
    // millions of empty `{}` links fits the bytes but not these.
    let items = nnodes.saturating_mul(LISTENERS_PER_NODE) + 64;
    Budget {
        what: "an answer",
        depth: 16,
        items,
        values: items.saturating_mul(VALUES_PER_LINK),
        ..Budget::of_bytes("an answer", bytes.min(MAX_FRAME))
    }
}

/// JSON values one link result takes (its keys count too), with room to spare (~30).
const VALUES_PER_LINK: usize = 48;

/// What a node reads from rank 0 (orders and the final report): the report holds every
/// node's facts (at most a join each) and the links between every pair.
pub fn order_budget(nnodes: u32) -> Budget {
    let n = nnodes as usize;
    let bytes = (1usize << 20)
        .saturating_add(n.saturating_mul(JOIN.bytes))
        .saturating_add(n.saturating_mul(n).saturating_mul(4 * LINK_BYTES));
    Budget {
        depth: 32,
        ..Budget::of_bytes("a message from rank 0", bytes.min(MAX_MESSAGE))
    }
}

/// Messages larger than this are sent deflated.
const COMPRESS_ABOVE: usize = 64 << 10;
/// The length word's top bit: the body is deflated.
const DEFLATED: u32 = 1 << 31;

/// A data listener one node offers to its peers: one per candidate address.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Listener {
    pub interface: String,
    pub address: String,
    pub port: u16,
}

/// A peer to measure: its rank and its listeners.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Peer {
    pub rank: u32,
    pub listeners: Vec<Listener>,
}

/// One bulk or MTU measurement to make: towards `rank` at `listener`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Target {
    pub rank: u32,
    pub listener: Listener,
}

/// Where this node sits in the TCP ring, and what to run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RingOrder {
    pub pos: u32,
    pub n: u32,
    pub left_rank: u32,
    pub right_rank: u32,
    pub right_address: String,
    pub right_port: u16,
    pub sizes: Vec<u64>,
    pub streams: u32,
    pub warmup: u32,
    pub iters: u32,
    pub timeout_ms: u64,
}

/// This node's part of the NCCL all-reduce.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct NcclOrder {
    pub nranks: u32,
    pub first_rank: u32,
    pub gpus: u32,
    pub sizes: Vec<u64>,
    pub warmup: u32,
    pub iters: u32,
    pub env: std::collections::BTreeMap<String, String>,
    pub timeout_ms: u64,
}

/// One child of the per-rail NCCL pair test (issue 34) a node runs: its side of the 2-rank job
/// between this node and `peer` on rail `rail`, pinned to the rail's GPU and HCA port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RailOrder {
    pub peer: u32,
    pub rail: u32,
    pub gpu: u32,
    pub hca: String,
    pub port: u32,
    /// 0: this node makes the unique id; 1: it joins with `id`.
    pub first_rank: u32,
    /// NCCL's unique id from the rank-0 side (empty in `RailStart`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The job's environment (the bootstrap's socket settings); the rail pinning goes on top.
    pub env: std::collections::BTreeMap<String, String>,
    pub timeout_ms: u64,
}

/// The unique id one rank-0 child made, or why it could not.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RailId {
    pub peer: u32,
    pub rail: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One side's result of a per-rail pair test: Gbit/s when it passed over NET/IB, else why not.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RailSide {
    pub peer: u32,
    pub rail: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The error counters of one RDMA port in a snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct PortCounters {
    pub device: String,
    pub port: u32,
    #[serde(default)]
    pub counters: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    pub hw_counters: std::collections::BTreeMap<String, u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    // --- handshake (control and data connections alike) ---
    Challenge {
        magic: String,
        proto: u32,
        nonce: String,
    },
    Hello {
        proto: u32,
        rank: u32,
        nnodes: u32,
        nonce: String,
        mac: String,
    },
    Welcome {
        rank: u32,
        mac: String,
    },
    Reject {
        reason: String,
        /// Why, for the refused node's own report (absent from older releases).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<RefusalKind>,
    },
    // --- control: agent <-> coordinator ---
    /// The rank the coordinator assigned a node that said hello with [`UNASSIGNED_RANK`].
    Assigned {
        rank: u32,
    },
    Join {
        facts: Box<NodeFacts>,
        listeners: Vec<Listener>,
        /// The node asks for the whole report (`--full-report`): above 64 nodes the others get
        /// a copy without the other nodes' facts and the links.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        whole_report: bool,
    },
    Probe {
        peers: Vec<Peer>,
        pings: u32,
        connect_timeout_ms: u64,
        /// Every address of every admitted node: the only ones data listeners serve.
        #[serde(default)]
        admitted: Vec<String>,
        /// Under c10d: rank 0's FQDN, for each node to resolve (`cluster.fqdn`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolve: Option<String>,
        /// How long this node may go on starting connects (ms), sending [`Msg::ProbeProgress`]
        /// while it does; links not started by then are reported not tried. Absent: the
        /// budget its own work gives (`runtime::probe_budget`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_ms: Option<u64>,
    },
    /// Progress of a node's connectivity test: `done` of its links have a result (sent about
    /// once a second before `ProbeDone`, so the coordinator tells a busy node from a hung one).
    ProbeProgress {
        done: u32,
    },
    ProbeDone {
        links: Vec<LinkResult>,
        /// What this node resolved the probe's `resolve` name to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolved: Option<preflight_checks::model::NameLookup>,
    },
    Bulk {
        targets: Vec<Target>,
        duration_ms: u64,
    },
    BulkDone {
        links: Vec<LinkResult>,
    },
    Mtu {
        targets: Vec<Target>,
        max_mtu: u32,
    },
    MtuDone {
        links: Vec<LinkResult>,
    },
    Report {
        report: Box<Report>,
    },
    // --- control: the idle test (`link.idle-timeout`) ---
    /// Open `streams` connections to each target, see each answer once, then hold them silent
    /// (for about `idle_ms`) until [`Msg::IdleCheck`]; an empty target list only tells the node
    /// how long the next order may take.
    IdleOpen {
        targets: Vec<Target>,
        streams: u32,
        idle_ms: u64,
    },
    /// How many connections the node holds.
    IdleHeld {
        held: u32,
    },
    /// Use every held connection again and wait up to `answer_ms` for each answer.
    IdleCheck {
        answer_ms: u64,
    },
    IdleDone {
        test: preflight_checks::model::IdleTest,
    },
    // --- control: all-reduce ---
    /// Open a ring listener on `address` (this node's address on the chosen network).
    RingListen {
        address: String,
    },
    RingReady {
        port: u16,
    },
    /// Run the TCP ring all-reduce: connect to the right neighbour, accept the left one.
    Ring {
        order: RingOrder,
    },
    /// Progress: one size done on this node (sent before `RingDone`).
    RingRow {
        row: RankRow,
    },
    RingDone {
        rows: Vec<RankRow>,
        error: Option<String>,
    },
    /// Start the NCCL child on the node that hosts NCCL rank 0; it answers with the unique id.
    NcclStart {
        order: NcclOrder,
    },
    NcclId {
        id: String,
    },
    /// Start (or continue) the NCCL child with the job's unique id and run the all-reduce.
    NcclRun {
        order: NcclOrder,
        id: String,
    },
    NcclDone {
        rows: Vec<RankRow>,
        net: Option<String>,
        net_mismatch: Option<String>,
        error: Option<String>,
    },
    // --- control: per-rail NCCL pair tests and the counters' second snapshot ---
    /// Start the rank-0 child of each listed (peer, rail) pair; the node answers with `RailIds`.
    RailStart {
        children: Vec<RailOrder>,
    },
    RailIds {
        ids: Vec<RailId>,
    },
    /// Run each listed child (rank 0 continues with its id, rank 1 starts and joins); the node
    /// answers with `RailDone` once every child ended.
    RailRun {
        children: Vec<RailOrder>,
    },
    RailDone {
        sides: Vec<RailSide>,
    },
    /// Read the RDMA ports' error counters again (after the traffic phases).
    CountersSnapshot,
    Counters {
        ports: Vec<PortCounters>,
    },
    /// A step of the all-reduce could not start on this node.
    Failed {
        error: String,
    },
    // --- data: prober -> peer listener ---
    PingReq {
        count: u32,
    },
    BulkReq {
        duration_ms: u64,
    },
    BulkResult {
        bytes: u64,
        elapsed_us: u64,
    },
    /// Echo each byte sent on this connection, however long it stays silent in between (up to
    /// about `idle_ms` plus a margin): the idle test's listener side.
    IdleReq {
        idle_ms: u64,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("connection closed by peer")]
    Closed,
    #[error("timed out waiting for the peer")]
    Timeout,
    #[error("a frame of {len} bytes exceeds the {cap}-byte cap")]
    TooLarge { len: usize, cap: usize },
    /// The message crossed its budget (size, counts, lengths) while it was read.
    #[error("{0}")]
    OverBudget(Exceeded),
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The coordinator turned this node away after the handshake (`Msg::Reject`).
    #[error("rejected by the coordinator: {reason}")]
    Rejected {
        reason: String,
        kind: Option<RefusalKind>,
    },
    #[error("{0}")]
    Io(io::Error),
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => WireError::Timeout,
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => WireError::Closed,
            _ => WireError::Io(e),
        }
    }
}

/// Writes one frame: u32 big-endian length (top bit: deflated), then the JSON body.
pub fn write_msg<W: Write, T: Serialize>(w: &mut W, msg: &T) -> Result<(), WireError> {
    write_frame(w, &encode_msg(msg)?)
}

/// One message as the bytes of its frame (serialised and, when large, deflated once), to be
/// sent to many peers with [`write_frame`].
/// A `report` message that borrows its report: the bytes of `Msg::Report` without a copy of the
/// report (at a thousand nodes, megabytes of facts).
#[derive(Serialize)]
#[serde(tag = "type", rename = "report")]
pub struct ReportRef<'a> {
    pub report: &'a Report,
}

pub fn encode_msg<T: Serialize>(msg: &T) -> Result<Vec<u8>, WireError> {
    let json = serde_json::to_vec(msg).map_err(|e| WireError::Malformed(e.to_string()))?;
    if json.len() > MAX_MESSAGE {
        return Err(WireError::TooLarge {
            len: json.len(),
            cap: MAX_MESSAGE,
        });
    }
    let (body, flag) = if json.len() > COMPRESS_ABOVE {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&json)?;
        (z.finish()?, DEFLATED)
    } else {
        (json, 0)
    };
    if body.len() > MAX_FRAME {
        return Err(WireError::TooLarge {
            len: body.len(),
            cap: MAX_FRAME,
        });
    }
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend_from_slice(&(body.len() as u32 | flag).to_be_bytes());
    buf.extend_from_slice(&body);
    Ok(buf)
}

/// Writes a frame made by [`encode_msg`].
pub fn write_frame<W: Write>(w: &mut W, frame: &[u8]) -> Result<(), WireError> {
    w.write_all(frame)?;
    w.flush()?;
    Ok(())
}

/// Reads one message of up to [`MAX_MESSAGE`] bytes (a report); the caller sets the read timeout.
pub fn read_msg<R: Read, T: DeserializeOwned>(r: &mut R) -> Result<T, WireError> {
    read_frame(r, &Budget::of_bytes("a message", MAX_MESSAGE))
}

/// Reads one message of at most `max` bytes, compressed or not. A larger declared length is
/// refused before anything is allocated, and a deflated body may not grow past `max`.
pub fn read_msg_capped<R: Read, T: DeserializeOwned>(
    r: &mut R,
    max: usize,
) -> Result<T, WireError> {
    read_frame(r, &Budget::of_bytes("a message", max.min(MAX_MESSAGE)))
}

/// The body length a frame's 4-byte header declares (the compression flag masked off), for a
/// reader that assembles frames itself (an event loop) before decoding them with
/// [`read_msg_capped`].
pub fn frame_body_len(header: [u8; 4]) -> usize {
    (u32::from_be_bytes(header) & !DEFLATED) as usize
}

/// Reads one message within `budget`: its bytes (after inflation), values, items, strings and
/// depth are counted as they arrive (while inflating), and the read stops at the first limit
/// crossed, before anything is parsed.
pub fn read_msg_budget<R: Read, T: DeserializeOwned>(
    r: &mut R,
    budget: &Budget,
) -> Result<T, WireError> {
    read_frame(r, budget)
}

/// Size of each step of reading and inflating.
const STEP: usize = 16 << 10;

fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R, budget: &Budget) -> Result<T, WireError> {
    let frame_cap = budget.bytes.min(MAX_FRAME);
    let mut word = [0u8; 4];
    r.read_exact(&mut word)?;
    let word = u32::from_be_bytes(word);
    let deflated = word & DEFLATED != 0;
    let len = (word & !DEFLATED) as usize;
    if len > frame_cap {
        return Err(WireError::TooLarge {
            len,
            cap: frame_cap,
        });
    }
    if deflated && budget.bytes <= COMPRESS_ABOVE {
        return Err(WireError::Malformed(
            "a compressed frame where only small ones are allowed".into(),
        ));
    }
    let mut scanner = Scanner::new(budget.clone());
    let mut step = vec![0u8; STEP];
    // Grown as bytes arrive: a declared length reserves nothing the peer did not send.
    let mut body = Vec::with_capacity(len.min(64 << 10));
    let mut frame = r.by_ref().take(len as u64);
    if deflated {
        // The compressed bytes are at most the frame cap; the inflated ones are counted
        // against the budget step by step, so a bomb stops at the budget, not at its size.
        let mut packed = Vec::with_capacity(len.min(64 << 10));
        frame.read_to_end(&mut packed)?;
        if packed.len() < len {
            return Err(WireError::Closed);
        }
        let mut z = flate2::read::DeflateDecoder::new(packed.as_slice());
        loop {
            let n = z
                .read(&mut step)
                .map_err(|e| WireError::Malformed(format!("bad compressed frame: {e}")))?;
            if n == 0 {
                break;
            }
            scanner.feed(&step[..n]).map_err(WireError::OverBudget)?;
            body.extend_from_slice(&step[..n]);
        }
    } else {
        loop {
            let n = match frame.read(&mut step) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                break;
            }
            scanner.feed(&step[..n]).map_err(WireError::OverBudget)?;
            body.extend_from_slice(&step[..n]);
        }
        if body.len() < len {
            return Err(WireError::Closed);
        }
    }
    serde_json::from_slice(&body).map_err(|e| WireError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_message() {
        let mut buf = Vec::new();
        write_msg(&mut buf, &Msg::PingReq { count: 7 }).unwrap();
        let back: Msg = read_msg(&mut buf.as_slice()).unwrap();
        assert_eq!(back, Msg::PingReq { count: 7 });
    }

    #[test]
    fn a_borrowed_report_encodes_as_the_report_message() {
        let report = crate::report::ReportBuilder::new(preflight_checks::model::Mode::Cluster)
            .links(vec![LinkResult {
                from: 1,
                address: "10.200.0.2".into(),
                ..Default::default()
            }])
            .build();
        let owned = encode_msg(&Msg::Report {
            report: Box::new(report.clone()),
        })
        .unwrap();
        assert_eq!(encode_msg(&ReportRef { report: &report }).unwrap(), owned);
        let back: Msg = read_msg(&mut owned.as_slice()).unwrap();
        assert_eq!(
            back,
            Msg::Report {
                report: Box::new(report)
            }
        );
    }

    #[test]
    fn rejects_oversized_length_without_allocating() {
        let mut buf = (u32::MAX).to_be_bytes().to_vec();
        buf.extend_from_slice(b"xx");
        let r: Result<Msg, _> = read_msg(&mut buf.as_slice());
        assert!(matches!(r, Err(WireError::TooLarge { .. })));
    }

    #[test]
    fn garbage_is_malformed_and_truncation_is_closed() {
        let mut buf = 5u32.to_be_bytes().to_vec();
        buf.extend_from_slice(b"hello");
        let r: Result<Msg, _> = read_msg(&mut buf.as_slice());
        assert!(matches!(r, Err(WireError::Malformed(_))));
        let short = 50u32.to_be_bytes().to_vec();
        let r: Result<Msg, _> = read_msg(&mut short.as_slice());
        assert!(matches!(r, Err(WireError::Closed)));
    }

    /// A frame as a hostile peer would build it: `json` deflated when `deflate`.
    fn frame(json: &[u8], deflate: bool) -> Vec<u8> {
        let (body, flag) = if deflate {
            let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
            z.write_all(json).unwrap();
            (z.finish().unwrap(), DEFLATED)
        } else {
            (json.to_vec(), 0)
        };
        let mut out = (body.len() as u32 | flag).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn a_decompression_bomb_stops_at_the_budget_while_inflating() {
        // 64 MiB of spaces deflate to ~64 KiB; the data listener's budget is 512 bytes and
        // refuses the compressed frame outright, the join's budget stops inflating at 1 MiB.
        let bomb = frame(&vec![b' '; 64 << 20], true);
        assert!(bomb.len() < 300 << 10, "{}", bomb.len());
        let r: Result<Msg, _> = read_msg_budget(&mut bomb.as_slice(), &REQUEST);
        assert!(matches!(r, Err(WireError::TooLarge { .. })), "{r:?}");
        let started = std::time::Instant::now();
        let r: Result<Msg, _> = read_msg_budget(&mut bomb.as_slice(), &JOIN);
        match r {
            Err(WireError::OverBudget(e)) => assert_eq!(e.limit, "bytes", "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // A small compressed frame under the request budget is refused too: requests are bytes.
        let small = frame(br#"{"type":"ping_req","count":1}"#, true);
        let r: Result<Msg, _> = read_msg_budget(&mut small.as_slice(), &REQUEST);
        assert!(matches!(r, Err(WireError::Malformed(_))), "{r:?}");
    }

    #[test]
    fn a_join_of_a_million_empty_interfaces_is_refused_before_parsing() {
        let mut json = br#"{"type":"join","listeners":[],"facts":{"net":{"interfaces":["#.to_vec();
        json.extend_from_slice(&b"{},".repeat(300_000));
        json.extend_from_slice(b"{}]}}}");
        for deflate in [false, true] {
            let f = frame(&json, deflate);
            let r: Result<Msg, _> = read_msg_budget(&mut f.as_slice(), &JOIN);
            match r {
                Err(WireError::OverBudget(e)) => {
                    assert_eq!((e.limit, e.cap), ("items", JOIN_INTERFACES), "{e}");
                    assert!(e.to_string().contains("at facts.net.interfaces"), "{e}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn honest_messages_fit_their_budgets() {
        use preflight_checks::model::{IfAddr, Interface, LinkResult};
        let iface = Interface {
            name: "eth0".into(),
            ipv4: vec![IfAddr {
                addr: "10.0.0.1".parse().unwrap(),
                prefix: 24,
            }],
            ..Default::default()
        };
        let mut facts = NodeFacts {
            hostname: "gpu01".into(),
            ..Default::default()
        };
        facts.net.interfaces = vec![iface; 64];
        let join = Msg::Join {
            facts: Box::new(facts),
            listeners: vec![
                Listener {
                    interface: "eth0".into(),
                    address: "10.0.0.1".into(),
                    port: 4000
                };
                8
            ],
            whole_report: false,
        };
        let mut buf = Vec::new();
        write_msg(&mut buf, &join).unwrap();
        assert_eq!(
            read_msg_budget::<_, Msg>(&mut buf.as_slice(), &JOIN).unwrap(),
            join
        );
        // A probe answer of 1000 peers with 4 addresses each fits the budget of 1000 nodes.
        let link = LinkResult {
            address: "10.0.0.1".into(),
            interface: "eth0".into(),
            rtt_us: Some(12.5),
            ..Default::default()
        };
        let done = Msg::ProbeDone {
            links: vec![link; 4000],
            resolved: None,
        };
        let mut buf = Vec::new();
        write_msg(&mut buf, &done).unwrap();
        assert_eq!(
            read_msg_budget::<_, Msg>(&mut buf.as_slice(), &reply_budget(1000)).unwrap(),
            done
        );
        assert!(read_msg_budget::<_, Msg>(&mut buf.as_slice(), &reply_budget(2)).is_err());
        // Millions of empty links fit the bytes of 256 nodes' answer but not its items: the
        // scan refuses them before anything is parsed.
        let mut body = b"{\"type\":\"probe_done\",\"links\":[".to_vec();
        for i in 0..2_000_000 {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(b"{}");
        }
        body.extend_from_slice(b"]}");
        let e = preflight_checks::budget::scan(&body, &reply_budget(256)).unwrap_err();
        assert_eq!(e.limit, "items", "{e}");
        assert_eq!(e.path, "links");
        for m in [
            Msg::PingReq { count: 10_000 },
            Msg::BulkReq {
                duration_ms: 30_000,
            },
            Msg::BulkResult {
                bytes: u64::MAX,
                elapsed_us: u64::MAX,
            },
        ] {
            let mut buf = Vec::new();
            write_msg(&mut buf, &m).unwrap();
            assert_eq!(
                read_msg_budget::<_, Msg>(&mut buf.as_slice(), &REQUEST).unwrap(),
                m
            );
        }
    }

    proptest::proptest! {
        /// Whatever bytes follow a length word, a budgeted read ends with a message or an
        /// error, never a panic, and never takes more than the budget's bytes from the body.
        #[test]
        fn any_bytes_end_in_a_bounded_read(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048), deflate in proptest::prelude::any::<bool>()) {
            let f = frame(&body, deflate);
            let _ = read_msg_budget::<_, Msg>(&mut f.as_slice(), &REQUEST);
            let _ = read_msg_budget::<_, Msg>(&mut f.as_slice(), &JOIN);
        }
    }
}

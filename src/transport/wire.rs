//! The wire protocol: length-prefixed JSON frames with a hard size cap, and the messages they carry.
//!
//! The protocol carries data, never commands to run.

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
    },
    Probe {
        peers: Vec<Peer>,
        pings: u32,
        connect_timeout_ms: u64,
        /// Every address of every admitted node: the only ones data listeners serve.
        #[serde(default)]
        admitted: Vec<String>,
    },
    ProbeDone {
        links: Vec<LinkResult>,
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
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("connection closed by peer")]
    Closed,
    #[error("timed out waiting for the peer")]
    Timeout,
    #[error("a frame of {len} bytes exceeds the {cap}-byte cap")]
    TooLarge { len: usize, cap: usize },
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
    read_frame(r, MAX_FRAME, MAX_MESSAGE)
}

/// Reads one message of at most `max` bytes, compressed or not. A larger declared length is
/// refused before anything is allocated, and a deflated body may not grow past `max`.
pub fn read_msg_capped<R: Read, T: DeserializeOwned>(
    r: &mut R,
    max: usize,
) -> Result<T, WireError> {
    read_frame(r, max.min(MAX_FRAME), max.min(MAX_MESSAGE))
}

/// The body length a frame's 4-byte header declares (the compression flag masked off), for a
/// reader that assembles frames itself (an event loop) before decoding them with
/// [`read_msg_capped`].
pub fn frame_body_len(header: [u8; 4]) -> usize {
    (u32::from_be_bytes(header) & !DEFLATED) as usize
}

fn read_frame<R: Read, T: DeserializeOwned>(
    r: &mut R,
    frame_cap: usize,
    message_cap: usize,
) -> Result<T, WireError> {
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
    // Grown as bytes arrive: a declared length reserves nothing the peer did not send.
    let mut body = Vec::with_capacity(len.min(64 << 10));
    r.by_ref().take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(WireError::Closed);
    }
    if deflated {
        if message_cap <= COMPRESS_ABOVE {
            return Err(WireError::Malformed(
                "a compressed frame where only small ones are allowed".into(),
            ));
        }
        let mut json = Vec::new();
        flate2::read::DeflateDecoder::new(body.as_slice())
            .take(message_cap as u64 + 1)
            .read_to_end(&mut json)
            .map_err(|e| WireError::Malformed(format!("bad compressed frame: {e}")))?;
        if json.len() > message_cap {
            return Err(WireError::TooLarge {
                len: json.len(),
                cap: message_cap,
            });
        }
        body = json;
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
}

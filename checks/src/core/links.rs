//! What the pairwise tests measured: one record per ordered pair and address, and the phases' times.

use super::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LinkOutcome {
    Ok,
    Refused,
    Timeout,
    Unreachable,
    #[default]
    Error,
    /// The peer reported values that cannot be (negative, not finite, far above the link's
    /// rated speed, an MTU outside 68-65535): not a measurement, and never `ok`.
    Invalid,
}

impl LinkOutcome {
    /// The word the report writes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkOutcome::Ok => "ok",
            LinkOutcome::Refused => "refused",
            LinkOutcome::Timeout => "timeout",
            LinkOutcome::Unreachable => "unreachable",
            LinkOutcome::Error => "error",
            LinkOutcome::Invalid => "invalid",
        }
    }
}

/// One ordered pair's measurement on one address.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct LinkResult {
    pub from: u32,
    pub to: u32,
    /// Interface of `to` that owns `address`.
    #[schemars(with = "String")]
    pub interface: Label,
    #[schemars(with = "String")]
    pub address: Label,
    pub port: u16,
    pub result: LinkOutcome,
    // Microseconds, and Gbit/s below: 4 bytes each in memory (a thousand nodes hold a million
    // links), written to JSON as any number; one past f32's range reads as infinite (and the
    // coordinator's sense check calls it a lie) rather than failing the whole message.
    #[schemars(with = "Option<f64>")]
    #[serde(deserialize_with = "any_number_f32")]
    pub rtt_us: Option<f32>,
    #[schemars(with = "Option<f64>")]
    #[serde(deserialize_with = "any_number_f32")]
    pub rtt_p99_us: Option<f32>,
    #[schemars(with = "Option<f64>")]
    #[serde(deserialize_with = "any_number_f32")]
    pub throughput_gbit_s: Option<f32>,
    pub mtu: Option<u32>,
    #[schemars(with = "Option<String>")]
    pub error: Option<Label>,
    /// The connection was established but a large transfer on it made no progress (a
    /// write stalled): with `mtu` below the interfaces' MTU, an MTU black hole.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stalled: bool,
    /// Attempts beyond the first before this result (a refused or reset connect is retried
    /// with backoff; a link is called failed only after a retry).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub retries: u32,
    /// The TCP connection was accepted, then the preflight handshake failed: how (absent when
    /// the connect itself failed, or the handshake passed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handshake: Option<HandshakeFailure>,
}

/// How a handshake failed on a connection that was accepted.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum HandshakeFailure {
    /// Nothing was sent back within the handshake's time.
    Silent,
    /// The connection was closed or reset before the handshake ended.
    Closed,
    /// An answer came that is not the dialled peer's preflight (other bytes, or another rank).
    Stranger,
}

impl HandshakeFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            HandshakeFailure::Silent => "silent",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::Stranger => "stranger",
        }
    }
}

/// A JSON number (or null) as an f32: out of range is infinite, never an error.
fn any_number_f32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f32>, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.map(|v| v as f32))
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// How the measurements were run: what a reader needs to trust a verdict at any size.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct Measurement {
    /// Ordered pairs × addresses connected and authenticated.
    pub links_total: u64,
    /// Of those, how many needed a retry before their result (ok or not).
    pub links_retried: u64,
    /// Connects one node had in flight at most (the pacing window).
    pub connect_window: u32,
    /// "all pairs" (small clusters) or "ring + K random matchings".
    pub throughput_schedule: String,
    /// Throughput rounds per network (each round: disjoint pairs, both directions at once).
    pub throughput_rounds: u32,
    /// Nodes that failed with many peers, tested again against a partner whose links all worked.
    pub second_pass: Vec<SecondPass>,
    /// Seconds each phase took, in order.
    pub phases: Vec<PhaseTime>,
}

/// One node re-tested against a partner whose every link worked.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct SecondPass {
    pub node: u32,
    pub partner: u32,
    /// The address tested (the node's, on the network where it failed).
    pub address: String,
    /// Peers it failed with in the first pass.
    pub failed_peers: u32,
    /// node -> partner and partner -> node in the second pass.
    pub outbound: LinkOutcome,
    pub inbound: LinkOutcome,
    /// "node": the node fails with a known-good partner too, so the node is the fault;
    /// "links": it works with the partner, so the first pass's failures are its links'.
    pub verdict: String,
}

/// One phase's wall time.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(default)]
pub struct PhaseTime {
    pub phase: String,
    pub seconds: f64,
}

//! InfiniBand port error counters: widths (the PortCounters attribute's 4, 8 and 16-bit fields
//! saturate at 2^k-1 instead of wrapping), the thresholds health checkers use, and the growth
//! between two snapshots. A saturated counter is reported as saturated, never differenced.
//!
//! Thresholds: NVIDIA NVSentinel's NIC health monitor treats any `link_downed`,
//! `excessive_buffer_overrun_errors` or `local_link_integrity_errors` as fatal and bounds
//! `link_error_recovery` at 5; `symbol_error` and `port_rcv_errors` use the IBTA bit-error budget
//! of 120 per hour that NVSentinel cites (here: 120 since the counters were last cleared).

use std::collections::BTreeMap;

/// One error counter the rail checks judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSpec {
    /// File name under `counters/`.
    pub name: &'static str,
    /// Width of the PortCounters field; the value saturates at 2^bits-1.
    pub bits: u32,
    /// At or above this since the counters were cleared, the port is suspect.
    pub threshold: u64,
    /// What it means, for the finding.
    pub meaning: &'static str,
}

pub const ERROR_COUNTERS: &[CounterSpec] = &[
    CounterSpec {
        name: "symbol_error",
        bits: 16,
        threshold: 120,
        meaning: "bit errors on the wire (cable, transceiver)",
    },
    CounterSpec {
        name: "link_error_recovery",
        bits: 8,
        threshold: 5,
        meaning: "the link retrained",
    },
    CounterSpec {
        name: "link_downed",
        bits: 8,
        threshold: 1,
        meaning: "the link went down (a flap)",
    },
    CounterSpec {
        name: "port_rcv_errors",
        bits: 16,
        threshold: 120,
        meaning: "malformed packets received",
    },
    CounterSpec {
        name: "excessive_buffer_overrun_errors",
        bits: 4,
        threshold: 1,
        meaning: "the receive buffer overran (lossless flow control broken)",
    },
    CounterSpec {
        name: "local_link_integrity_errors",
        bits: 4,
        threshold: 1,
        meaning: "physical errors beyond the port's limit",
    },
];

/// 64-bit `hw_counters` whose growth during a run means lost or retried RDMA traffic.
pub const GROWTH_HW_COUNTERS: &[&str] = &[
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "req_transport_retries_exceeded",
];

pub fn spec(name: &str) -> Option<&'static CounterSpec> {
    ERROR_COUNTERS.iter().find(|c| c.name == name)
}

/// The largest value a counter of this width holds.
pub fn max_value(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// What one counter shows in one snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Level {
    Below,
    Over { value: u64, threshold: u64 },
    Saturated { max: u64 },
}

pub fn level(spec: &CounterSpec, value: u64) -> Level {
    let max = max_value(spec.bits);
    if value >= max {
        Level::Saturated { max }
    } else if value >= spec.threshold {
        Level::Over {
            value,
            threshold: spec.threshold,
        }
    } else {
        Level::Below
    }
}

/// How one counter moved between two snapshots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Growth {
    /// It grew by this much.
    Grew { by: u64, before: u64, after: u64 },
    /// It reached its maximum during the run: how much it grew is unknown.
    SaturatedDuring { before: u64, max: u64 },
    /// Saturated already before the run: growth cannot be seen (clear the counters).
    SaturatedBefore { max: u64 },
    /// Lower after than before: the counters were cleared between the snapshots.
    Cleared { before: u64, after: u64 },
}

/// Growth of one counter of `bits` width (64 for the hw counters); None when unchanged.
pub fn growth(bits: u32, before: u64, after: u64) -> Option<Growth> {
    let max = max_value(bits);
    if bits < 64 && before >= max {
        return Some(Growth::SaturatedBefore { max });
    }
    if bits < 64 && after >= max {
        return Some(Growth::SaturatedDuring { before, max });
    }
    match after.cmp(&before) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Less => Some(Growth::Cleared { before, after }),
        std::cmp::Ordering::Greater => Some(Growth::Grew {
            by: after - before,
            before,
            after,
        }),
    }
}

/// Growth of every judged counter of one port between two snapshots, by counter name.
pub fn port_growth(
    before: (&BTreeMap<String, u64>, &BTreeMap<String, u64>),
    after: (&BTreeMap<String, u64>, &BTreeMap<String, u64>),
) -> BTreeMap<String, Growth> {
    let mut out = BTreeMap::new();
    for spec in ERROR_COUNTERS {
        if let (Some(b), Some(a)) = (before.0.get(spec.name), after.0.get(spec.name))
            && let Some(g) = growth(spec.bits, *b, *a)
        {
            out.insert(spec.name.to_string(), g);
        }
    }
    for name in GROWTH_HW_COUNTERS {
        if let (Some(b), Some(a)) = (before.1.get(*name), after.1.get(*name))
            && let Some(g) = growth(64, *b, *a)
        {
            out.insert(name.to_string(), g);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_counters_saturate_at_their_width() {
        let s = spec("symbol_error").unwrap();
        assert_eq!(level(s, 0), Level::Below);
        assert_eq!(
            level(s, 500),
            Level::Over {
                value: 500,
                threshold: 120
            }
        );
        assert_eq!(level(s, 65535), Level::Saturated { max: 65535 });
        let l = spec("local_link_integrity_errors").unwrap();
        assert_eq!(level(l, 15), Level::Saturated { max: 15 });
        assert_eq!(
            level(spec("link_downed").unwrap(), 255),
            Level::Saturated { max: 255 }
        );
    }

    #[test]
    fn growth_is_never_a_difference_of_a_saturated_counter() {
        assert_eq!(growth(8, 3, 3), None);
        assert_eq!(
            growth(8, 3, 5),
            Some(Growth::Grew {
                by: 2,
                before: 3,
                after: 5
            })
        );
        assert_eq!(
            growth(8, 250, 255),
            Some(Growth::SaturatedDuring {
                before: 250,
                max: 255
            })
        );
        assert_eq!(growth(4, 15, 15), Some(Growth::SaturatedBefore { max: 15 }));
        assert_eq!(
            growth(16, 9, 0),
            Some(Growth::Cleared {
                before: 9,
                after: 0
            })
        );
        assert_eq!(
            growth(64, u64::MAX - 1, u64::MAX),
            Some(Growth::Grew {
                by: 1,
                before: u64::MAX - 1,
                after: u64::MAX
            })
        );
    }
}

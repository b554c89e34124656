//! How long the connectivity phase may take and how many round trips each link gets, from the
//! cluster's size: what the coordinator orders and each node's budget agree on.

/// The connectivity phase's budget for one node with `targets` listeners to reach: the dial
/// window's waves of connect, handshake and pings, plus room for one timed-out connect and
/// handshake and the retries' backoff. It grows with the node's own work (linearly in the
/// cluster's size), never with the square of it.
pub fn probe_budget(
    connect_timeout: std::time::Duration,
    pings: u32,
    targets: usize,
) -> std::time::Duration {
    use std::time::Duration;
    let waves = targets.div_ceil(super::dial::CONNECT_WINDOW) as u32;
    // A wave is the window's connects, handshakes and pings at once: 150 ms leaves room for a
    // busy node (measured: 256 agents on 2 cores needed about 20 s for 255 targets each).
    let per_wave = Duration::from_millis(150) + Duration::from_millis(2) * pings;
    // A timed-out connect and its retry, which waits twice as long (see `dial::open`).
    connect_timeout * 3
        + crate::transport::auth::HANDSHAKE_TIMEOUT * 2
        + Duration::from_millis(700)
        + per_wave * waves
}

/// Round trips each link gets in the connectivity phase when a node has `targets` listeners to
/// reach: `pings` (the mode's) while the node has few peers, then fewer, down to [`MIN_PINGS`],
/// so one node's part stays about [`PING_LINKS`] links' worth of pings at any size. Every pair is still
/// connected and authenticated; the ring and the random matchings measure throughput apart.
pub fn pings_per_link(pings: u32, targets: usize) -> u32 {
    let share = (pings as usize).saturating_mul(PING_LINKS) / targets.max(1);
    (share.min(pings as usize) as u32).max(MIN_PINGS.min(pings))
}

/// Links' worth of pings a node sends in the connectivity phase (see [`pings_per_link`]).
pub const PING_LINKS: usize = 64;
/// Fewest round trips a link's RTT is measured with.
pub const MIN_PINGS: u32 = 5;

/// How often a probing node tells the coordinator how far it got ([`crate::transport::wire::Msg::ProbeProgress`]).
pub const PROBE_PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// A probing node silent this long (no progress, no answer) is given up on: twenty missed
/// progress reports, room for a node starved of CPU for a while.
pub const PROBE_SILENCE: std::time::Duration = std::time::Duration::from_secs(20);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_per_link_shrink_with_the_peers_but_not_below_the_floor() {
        // --quick (20 pings): unchanged up to 64 peers, then fewer, the floor from 256.
        assert_eq!(pings_per_link(20, 63), 20);
        assert_eq!(pings_per_link(20, 100), 12);
        assert_eq!(pings_per_link(20, 255), 5);
        assert_eq!(pings_per_link(20, 4095), MIN_PINGS);
        // --thorough (200) keeps more at every size.
        assert_eq!(pings_per_link(200, 1023), 12);
        // Never more than asked, and a node with no peers is no special case.
        assert_eq!(pings_per_link(3, 4095), 3);
        assert_eq!(pings_per_link(20, 0), 20);
        // A node's total stays about PING_LINKS links' worth.
        for targets in [128usize, 512, 1000, 2000] {
            assert!(
                pings_per_link(50, targets) as usize * targets
                    <= 50 * PING_LINKS + targets * MIN_PINGS as usize
            );
        }
    }
}

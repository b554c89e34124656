//! The links between nodes: pairs that cannot connect, networks some node breaks, MTU, slow
//! and high-latency pairs (the fail-slow model), NAT, interception and idle timeouts.

pub mod attribution;
pub mod catalog;
pub mod degraded;
pub mod fail_slow;
pub mod idle_timeout;
pub mod ids;
pub mod intercepted;
pub mod latency;
pub mod mtu;
pub mod mtu_blackhole;
pub mod nat;
pub mod slow;
pub mod unreachable;
pub mod verdict;
pub mod vertex_cover;

pub use slow::{SLOW_SHARE, throughput_samples};

use crate::core::{ClusterInput, Finding};

/// The links' judgments, in report order; NAT and interception then point the link failures
/// they explain at their cause.
pub fn check_cluster(input: &ClusterInput) -> Vec<Finding> {
    let mut out = unreachable::unreachable_links(input);
    out.extend(degraded::degraded_networks(input));
    out.extend(crate::env::ifname_choice::slower_ifname(input));
    out.push(mtu::mtu_mismatch(input));
    out.push(mtu_blackhole::mtu_blackhole(input));
    out.extend(slow::slow_links(input));
    out.extend(latency::high_latency(input));
    out.extend(nat::nat(input));
    out.extend(intercepted::intercepted(input));
    out.extend(idle_timeout::idle_timeout(input));
    nat::point_symptoms(input, &mut out);
    intercepted::point_symptoms(&mut out);
    out
}

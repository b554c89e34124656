//! Rank 0's FQDN as this node's resolver gives it (`cluster.fqdn`): the addresses in the
//! resolver's order with where each came from (an `/etc/hosts` line, DNS), and, when the first
//! is not an address this node knows as rank 0's, one connect to it on the master port bounded
//! by the run's connect timeout: a TCPStore client dials the list in order and waits on the
//! first address for its whole connect timeout.

use crate::measure::tcp;
use preflight_checks::model::{FirstDial, LinkOutcome, NameLookup, NodeFacts};
use preflight_checks::probe;
use preflight_checks::root::Root;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The shortest wait given to the first address (as the join gives each of its attempts).
const MIN_WAIT: Duration = Duration::from_secs(2);

/// `name` resolved here, traced, with the first address dialled on `port` unless it is one of
/// `rank0` (addresses this node knows as rank 0's) or a loopback address on rank 0 itself.
pub(crate) fn lookup(
    root: &Root,
    name: &str,
    rank0: &[IpAddr],
    own_rank: u32,
    port: u16,
    timeout: Duration,
) -> NameLookup {
    let mut l = probe::sys::lookup_traced(root, name);
    let Some(first) = l.addresses.first().copied() else {
        return l;
    };
    if rank0.contains(&first) || (own_rank == 0 && first.is_loopback()) {
        return l;
    }
    let wait = timeout.max(MIN_WAIT);
    let (result, error) = match tcp::connect(SocketAddr::new(first, port), wait) {
        Ok(_) => (LinkOutcome::Ok, String::new()),
        Err((outcome, e)) => (outcome, e),
    };
    l.first_dial = Some(FirstDial {
        address: first.to_string(),
        port,
        result: result.as_str().to_string(),
        error,
        timeout_s: wait.as_secs_f64(),
    });
    l
}

/// The addresses this node knows as rank 0's: its listeners in the probe order, the address
/// this node joined through, and, on rank 0, its own interface addresses.
pub(crate) fn known_rank0(
    listeners: impl Iterator<Item = IpAddr>,
    joined_via: Option<&str>,
    own: Option<&[IpAddr]>,
) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = listeners.collect();
    if let Some(ip) = joined_via.and_then(|v| v.parse::<SocketAddr>().ok()) {
        out.push(ip.ip());
    }
    out.extend(own.unwrap_or_default());
    out
}

/// Every address of this node's interfaces.
pub(crate) fn own_addrs(facts: &NodeFacts) -> Vec<IpAddr> {
    facts
        .net
        .interfaces
        .iter()
        .flat_map(|i| i.ipv4.iter().chain(&i.ipv6).map(|a| a.addr))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_0s_addresses_come_from_its_listeners_the_join_and_its_own_interfaces() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let k = known_rank0(
            [ip("10.0.0.1")].into_iter(),
            Some("10.1.0.1:29500"),
            Some(&[ip("10.2.0.1")]),
        );
        assert_eq!(k, [ip("10.0.0.1"), ip("10.1.0.1"), ip("10.2.0.1")]);
        assert_eq!(
            known_rank0(std::iter::empty(), Some("[fd00::1]:29500"), None),
            [ip("fd00::1")]
        );
    }

    #[test]
    fn an_ip_is_not_dialled_when_it_is_rank_0s() {
        let root = Root::system();
        let l = lookup(
            &root,
            "127.0.0.1",
            &["127.0.0.1".parse().unwrap()],
            1,
            1,
            Duration::from_millis(10),
        );
        assert_eq!(l.addresses.len(), 1, "{l:?}");
        assert!(l.first_dial.is_none(), "{l:?}");
        // Loopback first on rank 0 itself: its own workers reach it there.
        let l = lookup(&root, "127.0.0.1", &[], 0, 1, Duration::from_millis(10));
        assert!(l.first_dial.is_none(), "{l:?}");
    }
}

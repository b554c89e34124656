//! Who may start a handshake with a listener: a cap on handshakes in flight (unauthenticated
//! connections) and, once known, the addresses allowed to connect at all.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// Handshakes one listener runs at once; more connections are closed at once.
pub const MAX_PENDING_HANDSHAKES: usize = 32;

/// Why a connection was turned away before its handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turned {
    /// Too many handshakes in flight.
    Busy,
    /// The address is not one of the admitted nodes'.
    NotAdmitted(IpAddr),
}

impl std::fmt::Display for Turned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Turned::Busy => write!(
                f,
                "{MAX_PENDING_HANDSHAKES} handshakes already in flight; connection closed"
            ),
            Turned::NotAdmitted(ip) => write!(f, "{ip} is not an address of an admitted node"),
        }
    }
}

/// Shared by a listener's accept loop and whoever learns which peers are admitted.
#[derive(Clone, Debug, Default)]
pub struct Gate {
    pending: Arc<AtomicUsize>,
    /// None: any address may try (the handshake still decides); Some: only these.
    allowed: Arc<RwLock<Option<BTreeSet<IpAddr>>>>,
}

/// Held while one handshake runs; dropping it frees the slot.
#[derive(Debug)]
pub struct Pass(Arc<AtomicUsize>);

impl Drop for Pass {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    /// Any address may try.
    pub fn open() -> Gate {
        Gate::default()
    }

    /// Nobody until [`Gate::allow`] names the admitted addresses.
    pub fn closed() -> Gate {
        let g = Gate::default();
        g.allow(std::iter::empty());
        g
    }

    /// From now on only `addrs` may connect.
    pub fn allow(&self, addrs: impl IntoIterator<Item = IpAddr>) {
        let set: BTreeSet<IpAddr> = addrs.into_iter().map(canonical).collect();
        if let Ok(mut a) = self.allowed.write() {
            *a = Some(set);
        }
    }

    /// A slot for `peer`'s handshake, or why not.
    pub fn enter(&self, peer: IpAddr) -> Result<Pass, Turned> {
        let peer = canonical(peer);
        let allowed = self
            .allowed
            .read()
            .map(|a| a.as_ref().is_none_or(|s| s.contains(&peer)))
            .unwrap_or(false);
        if !allowed {
            return Err(Turned::NotAdmitted(peer));
        }
        let before = self.pending.fetch_add(1, Ordering::SeqCst);
        let pass = Pass(self.pending.clone());
        if before >= MAX_PENDING_HANDSHAKES {
            return Err(Turned::Busy);
        }
        Ok(pass)
    }

    /// Handshakes in flight now.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }
}

/// IPv4-mapped IPv6 addresses (a dual-stack listener's view of IPv4 peers) as plain IPv4.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_and_freed() {
        let g = Gate::open();
        let ip: IpAddr = "10.200.0.1".parse().unwrap();
        let passes: Vec<Pass> = (0..MAX_PENDING_HANDSHAKES)
            .map(|_| g.enter(ip).unwrap())
            .collect();
        assert_eq!(g.enter(ip).unwrap_err(), Turned::Busy);
        assert_eq!(g.pending(), MAX_PENDING_HANDSHAKES);
        drop(passes);
        assert_eq!(g.pending(), 0);
        assert!(g.enter(ip).is_ok());
    }

    #[test]
    fn only_admitted_addresses_pass_once_named() {
        let g = Gate::closed();
        let a: IpAddr = "10.200.0.1".parse().unwrap();
        assert_eq!(g.enter(a).unwrap_err(), Turned::NotAdmitted(a));
        g.allow([a]);
        assert!(g.enter(a).is_ok());
        // A dual-stack listener sees IPv4 peers as mapped IPv6.
        assert!(g.enter("::ffff:10.200.0.1".parse().unwrap()).is_ok());
        assert!(g.enter("10.200.0.2".parse().unwrap()).is_err());
    }
}

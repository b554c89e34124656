//! Who may start a handshake with a listener: a cap on handshakes in flight (unauthenticated
//! connections) sized to the cluster, a cap on connections served at once, and, once known, the
//! addresses allowed to connect at all. A listener at its cap stops accepting, so further
//! connections wait in the kernel's listen backlog (sized by [`backlog_for`]) instead of being
//! closed: the cluster's own members are never turned away by a limit meant for strangers.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// Handshakes a listener runs at once beyond the cluster's own nodes (strangers, retries).
pub const HANDSHAKE_MARGIN: usize = 32;
/// Connections a data listener serves at once (threads); more wait in the listen backlog.
pub const MAX_SERVED: usize = 64;

/// Pre-authentication capacity for a cluster of `nnodes`: every other node at once, plus a margin.
pub fn handshakes_for(nnodes: u32) -> usize {
    nnodes as usize + HANDSHAKE_MARGIN
}

/// The listen backlog for a cluster of `nnodes`: room for every node to connect at once (the
/// kernel caps it at `net.core.somaxconn`).
pub fn backlog_for(nnodes: u32) -> i32 {
    (nnodes as i64 * 2 + 128).clamp(128, 65535) as i32
}

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
            Turned::Busy => write!(f, "too many handshakes already in flight"),
            Turned::NotAdmitted(ip) => write!(f, "{ip} is not an address of an admitted node"),
        }
    }
}

/// Which addresses may connect.
#[derive(Clone, Debug, Default)]
enum Allow {
    /// Any address may try (the handshake still decides).
    #[default]
    Any,
    /// Not known yet: connections wait for [`Gate::allow`] (see [`Gate::settle`]).
    Pending,
    /// Only these.
    Only(BTreeSet<IpAddr>),
}

/// Shared by a listener's accept loop and whoever learns which peers are admitted.
#[derive(Clone, Debug)]
pub struct Gate {
    pending: Arc<AtomicUsize>,
    served: Arc<AtomicUsize>,
    /// Handshakes allowed at once.
    cap: usize,
    allowed: Arc<RwLock<Allow>>,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            pending: Arc::default(),
            served: Arc::default(),
            cap: HANDSHAKE_MARGIN,
            allowed: Arc::default(),
        }
    }
}

/// Held while one connection is served; dropping it frees the slot.
#[derive(Debug)]
pub struct Served(Arc<AtomicUsize>);

impl Drop for Served {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
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

    /// The same gate with room for a cluster of `nnodes` handshaking at once.
    pub fn sized_for(mut self, nnodes: u32) -> Gate {
        self.cap = handshakes_for(nnodes);
        self
    }

    /// Handshakes allowed at once.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Whether a listener may accept one more connection now: a handshake slot and a serving
    /// slot are free. When not, the listener leaves the connection in its backlog.
    pub fn has_room(&self) -> bool {
        self.pending.load(Ordering::SeqCst) < self.cap
            && self.served.load(Ordering::SeqCst) < MAX_SERVED
    }

    /// A serving slot (counted until dropped, authenticated or not).
    pub fn serve(&self) -> Served {
        self.served.fetch_add(1, Ordering::SeqCst);
        Served(self.served.clone())
    }

    /// Nobody is admitted until [`Gate::allow`] names the addresses; until then connections
    /// may take a slot and wait for the list ([`Gate::settle`]).
    pub fn pending() -> Gate {
        let g = Gate::default();
        if let Ok(mut a) = g.allowed.write() {
            *a = Allow::Pending;
        }
        g
    }

    /// From now on only `addrs` may connect.
    pub fn allow(&self, addrs: impl IntoIterator<Item = IpAddr>) {
        let set: BTreeSet<IpAddr> = addrs.into_iter().map(canonical).collect();
        if let Ok(mut a) = self.allowed.write() {
            *a = Allow::Only(set);
        }
    }

    /// Whether `peer` may connect now (no slot taken); false while the list is pending.
    pub fn admits(&self, peer: IpAddr) -> bool {
        let peer = canonical(peer);
        match self.allowed.read().as_deref() {
            Ok(Allow::Any) => true,
            Ok(Allow::Only(set)) => set.contains(&peer),
            _ => false,
        }
    }

    /// Waits (at most `wait`) for a pending list, then says whether `peer` is on it. A peer
    /// may connect a moment before this node hears who is admitted.
    pub fn settle(&self, peer: IpAddr, wait: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + wait;
        while matches!(self.allowed.read().as_deref(), Ok(Allow::Pending))
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        self.admits(peer)
    }

    /// Whether `peer` is known not to be admitted (a pending list refuses nobody yet).
    fn refuses(&self, peer: IpAddr) -> bool {
        let peer = canonical(peer);
        matches!(self.allowed.read().as_deref(), Ok(Allow::Only(set)) if !set.contains(&peer))
    }

    /// A slot for `peer`'s handshake, or why not.
    pub fn enter(&self, peer: IpAddr) -> Result<Pass, Turned> {
        if self.refuses(peer) {
            return Err(Turned::NotAdmitted(canonical(peer)));
        }
        let before = self.pending.fetch_add(1, Ordering::SeqCst);
        let pass = Pass(self.pending.clone());
        if before >= self.cap {
            return Err(Turned::Busy);
        }
        Ok(pass)
    }

    /// Handshakes in flight now.
    pub fn in_flight(&self) -> usize {
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
        let passes: Vec<Pass> = (0..HANDSHAKE_MARGIN)
            .map(|_| g.enter(ip).unwrap())
            .collect();
        assert!(!g.has_room());
        assert_eq!(g.enter(ip).unwrap_err(), Turned::Busy);
        assert_eq!(g.in_flight(), HANDSHAKE_MARGIN);
        drop(passes);
        assert_eq!(g.in_flight(), 0);
        assert!(g.enter(ip).is_ok());
    }

    #[test]
    fn capacity_follows_the_cluster() {
        let g = Gate::open().sized_for(1024);
        assert_eq!(g.capacity(), 1024 + HANDSHAKE_MARGIN);
        let ip: IpAddr = "10.200.0.1".parse().unwrap();
        let passes: Vec<Pass> = (0..1024).map(|_| g.enter(ip).unwrap()).collect();
        assert!(g.has_room());
        drop(passes);
        let served: Vec<Served> = (0..MAX_SERVED).map(|_| g.serve()).collect();
        assert!(!g.has_room(), "serving slots are capped too");
        drop(served);
        assert!(g.has_room());
        assert!(backlog_for(4096) >= 4096 * 2);
    }

    #[test]
    fn only_admitted_addresses_pass_once_named() {
        let g = Gate::pending();
        let a: IpAddr = "10.200.0.1".parse().unwrap();
        // Pending: a slot, but not admitted until the list comes (settle waits for it).
        assert!(g.enter(a).is_ok());
        assert!(!g.admits(a));
        let t = std::time::Instant::now();
        assert!(!g.settle(a, std::time::Duration::from_millis(50)));
        assert!(t.elapsed() >= std::time::Duration::from_millis(50));
        let g2 = g.clone();
        let later = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            g2.allow([a]);
        });
        assert!(g.settle(a, std::time::Duration::from_secs(5)));
        later.join().unwrap();
        assert_eq!(
            g.enter("10.200.0.9".parse().unwrap()).unwrap_err(),
            Turned::NotAdmitted("10.200.0.9".parse().unwrap())
        );
        assert!(g.enter(a).is_ok());
        // A dual-stack listener sees IPv4 peers as mapped IPv6.
        assert!(g.enter("::ffff:10.200.0.1".parse().unwrap()).is_ok());
        assert!(g.enter("10.200.0.2".parse().unwrap()).is_err());
    }
}

//! Dialing peers at scale: a bounded window of connects in flight per node (a fixed pool of
//! threads, never one per peer), peers taken in rank order from this node's own (i dials i+1,
//! i+2, ...) so no listener sees a storm, and a refused, reset or stalled attempt retried with
//! backoff before a link is called failed.

use crate::measure::tcp;
use crate::transport::auth::{self, AuthError, Secret};
use crate::transport::wire::{Listener, WireError};
use preflight_checks::model::{HandshakeFailure, LinkOutcome};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Connects one node has in flight at once.
pub const CONNECT_WINDOW: usize = 32;
/// Attempts at most for a refused, reset or closed connection (a busy or restarting listener).
const ATTEMPTS_REFUSED: u32 = 3;
/// Attempts at most for a connect or handshake that timed out (a filter costs the full timeout).
const ATTEMPTS_TIMEOUT: u32 = 2;

/// Runs `f` over `items` with at most `window` running at once on a fixed pool of threads,
/// keeping the order of `items` in the results. Every item is run; none is dropped.
pub fn paced<T: Sync, R: Send>(items: &[T], window: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let workers = window.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if let Ok(mut o) = out.lock() {
                        o[i] = Some(r);
                    }
                }
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

/// Connects a node starts with in flight; [`Pacer`] grows it to [`CONNECT_WINDOW`].
pub const START_WINDOW: usize = 4;
/// A connect and handshake slower than this is a sign of a loaded peer or fabric: the window
/// halves, as TCP's does on loss.
pub const SLOW_OPEN: Duration = Duration::from_millis(250);

/// How many connects one node has in flight, adapted to how fast they complete (additive
/// increase, multiplicative decrease): it grows from [`START_WINDOW`] by one per fast open up to
/// [`CONNECT_WINDOW`] and halves on a slow or failed one. On a fabric of idle nodes it reaches
/// the full window within a few dozen connects; where the peers are busy (many agents on few
/// cores, a loaded fabric) it keeps the handshakes within their time instead of piling up
/// thousands of them at once.
pub struct Pacer {
    state: Mutex<(f64, usize)>,
    freed: std::sync::Condvar,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer {
            state: Mutex::new((START_WINDOW as f64, 0)),
            freed: std::sync::Condvar::new(),
        }
    }
}

impl Pacer {
    /// Waits for room in the window and holds a place in it until the [`Slot`] is dropped.
    pub fn enter(&self) -> Slot<'_> {
        if let Ok(mut st) = self.state.lock() {
            while st.1 >= (st.0 as usize).max(1) {
                // Woken by the slot that frees room (one waiter per freed place, never a
                // herd); the timeout only guards against a lost wakeup.
                match self.freed.wait_timeout(st, Duration::from_secs(1)) {
                    Ok((g, _)) => st = g,
                    Err(_) => return Slot(self, None),
                }
            }
            st.1 += 1;
        }
        Slot(self, None)
    }

    /// The window now (connects allowed in flight).
    #[cfg(test)]
    pub fn window(&self) -> usize {
        self.state.lock().map_or(1, |st| st.0 as usize)
    }
}

/// A place in the [`Pacer`]'s window; [`Slot::opened`] says how the connect went, and dropping
/// it frees the place (the window unchanged when nothing was said).
pub struct Slot<'a>(&'a Pacer, Option<bool>);

impl Slot<'_> {
    /// The connect and handshake took `took`; `ok` when it opened at the first attempt.
    pub fn opened(&mut self, took: Duration, ok: bool) {
        self.1 = Some(ok && took < SLOW_OPEN);
    }

    /// How an attempt to open a link went, as a sign of load: opened (fast or not), a peer too
    /// busy to start its handshake (slow), or a failure that says nothing of load (a filter's
    /// timeout, a refusal: the window stays).
    pub fn after(&mut self, took: Duration, opened: &Result<TcpStream, Failed>, retries: u32) {
        match opened {
            Ok(_) => self.opened(took, retries == 0),
            Err(f) if f.busy => self.1 = Some(false),
            Err(_) => {}
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let Ok(mut st) = self.0.state.lock() else {
            return;
        };
        st.1 = st.1.saturating_sub(1);
        let before = st.0 as usize;
        match self.1 {
            Some(true) => st.0 = (st.0 + 1.0).min(CONNECT_WINDOW as f64),
            Some(false) => st.0 = (st.0 / 2.0).max(1.0),
            None => {}
        }
        // The place freed, and one more when the window grew.
        self.0.freed.notify_one();
        if st.0 as usize > before {
            self.0.freed.notify_one();
        }
    }
}

/// The distance from `me` to `rank` going up the ring of `nnodes`: the order this node dials in.
pub fn ring_offset(me: u32, rank: u32, nnodes: u32) -> u32 {
    let n = nnodes.max(1);
    (rank % n + n - me % n) % n
}

/// Why an attempt failed, and whether another attempt may help.
#[derive(Debug)]
pub struct Failed {
    pub outcome: LinkOutcome,
    pub error: String,
    retry: Retry,
    /// The peer accepted but was too slow to hold its side of the handshake: a sign of load.
    busy: bool,
    /// The connection was accepted and the handshake failed: how.
    pub handshake: Option<HandshakeFailure>,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Retry {
    /// Refused, reset, closed before the handshake: a busy listener; retry soon.
    Soon,
    /// A connect or handshake timeout: one more try.
    Once,
    /// The answer will not change (wrong secret, wrong node, bad address).
    Never,
}

impl Failed {
    fn max_attempts(&self) -> u32 {
        match self.retry {
            Retry::Soon => ATTEMPTS_REFUSED,
            Retry::Once => ATTEMPTS_TIMEOUT,
            Retry::Never => 1,
        }
    }
}

/// One connect and handshake to rank `rank`'s listener `l`.
pub fn open_once(
    my_rank: u32,
    nnodes: u32,
    rank: u32,
    l: &Listener,
    timeout: Duration,
    secret: &Secret,
) -> Result<TcpStream, Failed> {
    let never = |outcome, error| Failed {
        outcome,
        error,
        retry: Retry::Never,
        busy: false,
        handshake: None,
    };
    let ip: IpAddr = l
        .address
        .parse()
        .map_err(|_| never(LinkOutcome::Error, format!("bad address {}", l.address)))?;
    let mut s = tcp::connect(SocketAddr::new(ip, l.port), timeout).map_err(|(outcome, e)| {
        let retry = match outcome {
            LinkOutcome::Refused => Retry::Soon,
            LinkOutcome::Timeout => Retry::Once,
            _ => Retry::Never,
        };
        Failed {
            outcome,
            error: e,
            retry,
            busy: false,
            handshake: None,
        }
    })?;
    match auth::connect(&mut s, secret, my_rank, nnodes, Some(rank)) {
        Ok(_) => Ok(s),
        Err(AuthError::WrongPeer { got, .. }) if got == my_rank => Err(never(
            LinkOutcome::Error,
            format!(
                "{} is also an address of this node: the connection reached this node itself, not rank {rank}",
                l.address
            ),
        )),
        Err(AuthError::WrongPeer { got, .. }) => Err(Failed {
            outcome: LinkOutcome::Error,
            error: format!(
                "the connection to {} was answered by rank {got}, not rank {rank}: something sends it elsewhere",
                l.address
            ),
            retry: Retry::Never,
            busy: false,
            handshake: Some(HandshakeFailure::Stranger),
        }),
        Err(e) => Err(classify_handshake(e)),
    }
}

/// A failed handshake after the TCP connect: a listener that is only slow (busy, its backlog
/// full) is a timeout or a closed connection to retry, never "not preflight".
fn classify_handshake(e: AuthError) -> Failed {
    match e {
        AuthError::NotPreflight(why) if why.contains("sent nothing") => Failed {
            outcome: LinkOutcome::Timeout,
            error: format!(
                "the connection was accepted but the handshake did not start within {} s (the peer is busy, or a middlebox passes the connect only)",
                auth::HANDSHAKE_TIMEOUT.as_secs()
            ),
            retry: Retry::Once,
            busy: true,
            handshake: Some(HandshakeFailure::Silent),
        },
        AuthError::Wire(WireError::Closed) | AuthError::Wire(WireError::Io(_)) => Failed {
            outcome: LinkOutcome::Refused,
            error: format!("{e} during the handshake (a listener at its limit, or restarting)"),
            retry: Retry::Soon,
            busy: true,
            handshake: Some(HandshakeFailure::Closed),
        },
        AuthError::Wire(WireError::Timeout) => Failed {
            outcome: LinkOutcome::Timeout,
            error: format!("{e} during the handshake"),
            retry: Retry::Once,
            busy: true,
            handshake: Some(HandshakeFailure::Silent),
        },
        AuthError::NotPreflight(why) => Failed {
            outcome: LinkOutcome::Error,
            error: format!("the connection was accepted but what answered is not preflight: {why}"),
            retry: Retry::Never,
            busy: false,
            handshake: Some(HandshakeFailure::Stranger),
        },
        // Another secret, another version, a refusal: the peer is preflight, not a stranger.
        other => Failed {
            outcome: LinkOutcome::Error,
            error: other.to_string(),
            retry: Retry::Never,
            busy: false,
            handshake: None,
        },
    }
}

/// Connects with retries: a refused or reset attempt is retried with backoff, a timeout once,
/// none past `until`. Returns the stream or the last failure, and how many retries it took.
pub fn open(
    my_rank: u32,
    nnodes: u32,
    rank: u32,
    l: &Listener,
    timeout: Duration,
    secret: &Secret,
    until: Instant,
) -> (Result<TcpStream, Failed>, u32) {
    let mut retries = 0u32;
    loop {
        // A retry waits twice as long: a connect that timed out on a busy node gets the time a
        // loaded peer needs, a filtered one still fails within the phase.
        let wait = if retries == 0 { timeout } else { timeout * 2 };
        match open_once(my_rank, nnodes, rank, l, wait, secret) {
            Ok(s) => return (Ok(s), retries),
            Err(f) => {
                let backoff = backoff(retries, my_rank ^ rank);
                let room = Instant::now() + backoff + timeout * 2 < until;
                if retries + 1 >= f.max_attempts() || !room {
                    return (Err(f), retries);
                }
                std::thread::sleep(backoff);
                retries += 1;
            }
        }
    }
}

/// 100 ms, 200 ms, 400 ms ... with a little spread so retries from many nodes do not align.
fn backoff(retries: u32, salt: u32) -> Duration {
    let base = 100u64 << retries.min(5);
    let spread = (salt as u64).wrapping_mul(2654435761) % 50;
    Duration::from_millis(base + spread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn paced_runs_every_item_in_order_within_the_window() {
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let items: Vec<usize> = (0..200).collect();
        let out = paced(&items, 8, |i| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(1));
            running.fetch_sub(1, Ordering::SeqCst);
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(peak.load(Ordering::SeqCst) <= 8);
        assert!(paced::<usize, usize>(&[], 8, |i| *i).is_empty());
    }

    #[test]
    fn the_window_grows_on_fast_opens_and_halves_on_slow_ones() {
        let p = Pacer::default();
        let open = |took: Duration, ok: bool| p.enter().opened(took, ok);
        assert_eq!(p.window(), START_WINDOW);
        for _ in 0..100 {
            open(Duration::from_millis(1), true);
        }
        assert_eq!(p.window(), CONNECT_WINDOW);
        open(SLOW_OPEN * 2, true);
        assert_eq!(p.window(), CONNECT_WINDOW / 2);
        open(Duration::from_millis(1), false);
        assert_eq!(p.window(), CONNECT_WINDOW / 4);
        drop(p.enter());
        assert_eq!(p.window(), CONNECT_WINDOW / 4, "a slot given back unused");
        for _ in 0..20 {
            open(Duration::from_secs(5), false);
        }
        assert_eq!(p.window(), 1, "never below one");
        // Workers past the window wait: with a window of one, two never run at once.
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let items: Vec<u32> = (0..8).collect();
        paced(&items, 8, |_| {
            let mut slot = p.enter();
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            running.fetch_sub(1, Ordering::SeqCst);
            slot.opened(SLOW_OPEN * 2, true);
        });
        assert_eq!(peak.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn each_node_starts_with_its_ring_successor() {
        assert_eq!(ring_offset(3, 4, 8), 1);
        assert_eq!(ring_offset(7, 0, 8), 1);
        assert_eq!(ring_offset(0, 7, 8), 7);
        // Node i's k-th dial goes to i+k: at any step every listener gets one dialer.
        for k in 1..8 {
            let targets: std::collections::BTreeSet<u32> = (0..8).map(|i| (i + k) % 8).collect();
            assert_eq!(targets.len(), 8);
        }
    }

    #[test]
    fn a_refused_peer_is_retried_then_reported_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let listener = Listener {
            interface: "lo".into(),
            address: "127.0.0.1".into(),
            port,
        };
        let t = Instant::now();
        let (r, retries) = open(
            0,
            2,
            1,
            &listener,
            Duration::from_millis(300),
            &Secret::token("t"),
            Instant::now() + Duration::from_secs(10),
        );
        let f = r.unwrap_err();
        assert_eq!(f.outcome, LinkOutcome::Refused);
        assert_eq!(retries, ATTEMPTS_REFUSED - 1);
        assert!(t.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn a_listener_that_never_starts_the_handshake_is_a_timeout_not_a_stranger() {
        let f = classify_handshake(AuthError::NotPreflight(
            "it accepted the connection but sent nothing".into(),
        ));
        assert_eq!(f.outcome, LinkOutcome::Timeout);
        assert!(!f.error.contains("not preflight"), "{}", f.error);
        let f = classify_handshake(AuthError::Wire(WireError::Closed));
        assert_eq!(f.retry, Retry::Soon);
    }
}

//! Ring connection setup: `streams` authenticated sockets to the right neighbour and from the left one.
//!
//! After the HMAC handshake the connecting side sends a 16-byte hello (magic, stream index, ring
//! size, stream count); from then on the sockets carry raw float32 bytes only.

use super::{RingError, RingPeers};
use crate::transport::auth::{self, Secret};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HELLO_MAGIC: [u8; 4] = *b"PFRH";
/// Longest a single connect attempt may take before retrying.
const CONNECT_ATTEMPT: Duration = Duration::from_secs(1);
/// Pause between connect attempts while the neighbour is not listening yet.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Most connections the listener looks at before giving up on strangers.
const MAX_ACCEPTS: usize = 256;

/// The sockets of one ring member: `send[j]` goes to the right neighbour, `recv[j]` comes from the left.
pub struct Links {
    pub send: Vec<TcpStream>,
    pub recv: Vec<TcpStream>,
}

/// Connects to the right and accepts from the left at the same time, both bounded by `timeout`.
pub fn establish(
    listener: TcpListener,
    peers: &RingPeers,
    streams: usize,
    timeout: Duration,
    secret: &Secret,
) -> Result<Links, RingError> {
    let deadline = Instant::now() + timeout;
    let gave_up = AtomicBool::new(false);
    let (send, recv) = std::thread::scope(|s| {
        let right = s.spawn(|| {
            let r = connect_right(peers, streams, deadline, timeout, secret);
            gave_up.store(r.is_err(), Ordering::Release);
            r
        });
        let left = accept_left(
            listener, peers, streams, deadline, timeout, secret, &gave_up,
        );
        let right = right
            .join()
            .unwrap_or_else(|_| Err(RingError::Internal("the connecting thread panicked".into())));
        (right, left)
    });
    let (send, recv) = match (send, recv) {
        (Ok(send), Ok(recv)) => (send, recv),
        // A refusal on our listener (wrong secret, wrong rank) explains more than a refused connect.
        (Err(RingError::Connect { .. }), Err(e)) if refused_someone(&e) => return Err(e),
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    for s in send.iter().chain(&recv) {
        tune(s, timeout).map_err(|e| RingError::Internal(format!("socket options: {e}")))?;
    }
    Ok(Links { send, recv })
}

fn refused_someone(e: &RingError) -> bool {
    matches!(e, RingError::LeftMissing { refused, .. } if !refused.is_empty())
}

fn tune(s: &TcpStream, timeout: Duration) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))
}

fn connect_right(
    peers: &RingPeers,
    streams: usize,
    deadline: Instant,
    timeout: Duration,
    secret: &Secret,
) -> Result<Vec<TcpStream>, RingError> {
    (0..streams)
        .map(|j| {
            let mut s = connect_until(peers, deadline, timeout)?;
            auth::connect(
                &mut s,
                secret,
                peers.my_rank,
                peers.nnodes,
                Some(peers.right_rank),
            )
            .map_err(|e| RingError::Auth {
                side: "right",
                rank: peers.right_rank,
                addr: peers.right,
                reason: e.to_string(),
            })?;
            let hello = hello_bytes(j, peers.n, streams);
            s.set_write_timeout(Some(remaining(deadline).max(Duration::from_millis(100))))
                .and_then(|_| s.write_all(&hello))
                .map_err(|e| RingError::Connect {
                    rank: peers.right_rank,
                    addr: peers.right,
                    waited_s: timeout.as_secs_f64(),
                    reason: format!("sending the stream hello failed: {e}"),
                })?;
            Ok(s)
        })
        .collect()
}

/// Retries until the neighbour listens or the deadline passes (it may start later than us).
fn connect_until(
    peers: &RingPeers,
    deadline: Instant,
    timeout: Duration,
) -> Result<TcpStream, RingError> {
    loop {
        let left = remaining(deadline);
        let attempt = left.min(CONNECT_ATTEMPT).max(Duration::from_millis(10));
        let err = match TcpStream::connect_timeout(&peers.right, attempt) {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        if remaining(deadline) <= RETRY_PAUSE {
            return Err(RingError::Connect {
                rank: peers.right_rank,
                addr: peers.right,
                waited_s: timeout.as_secs_f64(),
                reason: err.to_string(),
            });
        }
        std::thread::sleep(RETRY_PAUSE);
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

pub(super) fn hello_bytes(stream: usize, n: usize, streams: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&HELLO_MAGIC);
    b[4..8].copy_from_slice(&(stream as u32).to_le_bytes());
    b[8..12].copy_from_slice(&(n as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(streams as u32).to_le_bytes());
    b
}

/// What one accepted connection turned out to be.
enum Arrival {
    Stream(usize, TcpStream),
    Refused(String),
}

#[allow(clippy::too_many_arguments)]
fn accept_left(
    listener: TcpListener,
    peers: &RingPeers,
    streams: usize,
    deadline: Instant,
    timeout: Duration,
    secret: &Secret,
    gave_up: &AtomicBool,
) -> Result<Vec<TcpStream>, RingError> {
    let missing = |got: usize, refused: &[String]| RingError::LeftMissing {
        rank: peers.left_rank,
        got,
        want: streams,
        waited_s: timeout.as_secs_f64(),
        refused: refused.join("; "),
    };
    listener
        .set_nonblocking(true)
        .map_err(|e| RingError::Internal(format!("listener: {e}")))?;
    let (tx, rx) = mpsc::channel();
    let mut slots: Vec<Option<TcpStream>> = (0..streams).map(|_| None).collect();
    let mut refused: Vec<String> = Vec::new();
    let mut accepted = 0usize;
    loop {
        let got = slots.iter().filter(|s| s.is_some()).count();
        if got == streams {
            return Ok(slots.into_iter().flatten().collect());
        }
        // The connecting side's error is the one reported when it gave up first.
        if remaining(deadline).is_zero() || gave_up.load(Ordering::Acquire) {
            return Err(missing(got, &refused));
        }
        while let Ok(arrival) = rx.try_recv() {
            match arrival {
                Arrival::Stream(j, s) if slots[j].is_none() => slots[j] = Some(s),
                Arrival::Stream(j, _) => refused.push(format!("stream {j} connected twice")),
                Arrival::Refused(why) => refused.push(why),
            }
        }
        match listener.accept() {
            Ok((_, from)) if !peers.admitted.admits(from.ip()) => {
                refused.push(format!("{from} is not an admitted node"));
            }
            Ok((s, from)) if accepted < MAX_ACCEPTS => {
                accepted += 1;
                let (tx, secret) = (tx.clone(), secret.clone());
                let (my_rank, left_rank, n) = (peers.my_rank, peers.left_rank, peers.n);
                let spawned = std::thread::Builder::new()
                    .name("ring-accept".into())
                    .spawn(move || {
                        let a = vet(s, from, &secret, my_rank, left_rank, n, streams, deadline);
                        let _ = tx.send(a);
                    });
                if let Err(e) = spawned {
                    refused.push(format!("could not start a thread for {from}: {e}"));
                }
            }
            Ok(_) => std::thread::sleep(RETRY_PAUSE),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => {
                refused.push(format!("accept failed: {e}"));
                std::thread::sleep(RETRY_PAUSE);
            }
        }
    }
}

/// Authenticates one accepted connection and reads its hello; anything unexpected is refused.
#[allow(clippy::too_many_arguments)]
fn vet(
    mut s: TcpStream,
    from: SocketAddr,
    secret: &Secret,
    my_rank: u32,
    left_rank: u32,
    n: usize,
    streams: usize,
    deadline: Instant,
) -> Arrival {
    if s.set_nonblocking(false).is_err() {
        return Arrival::Refused(format!("{from}: socket error"));
    }
    let info = match auth::accept(&mut s, secret, my_rank) {
        Ok(i) => i,
        Err(e) => return Arrival::Refused(format!("{from} failed the handshake: {e}")),
    };
    if info.rank != left_rank {
        return Arrival::Refused(format!(
            "{from} is rank {}, not the left neighbour rank {left_rank}",
            info.rank
        ));
    }
    let mut b = [0u8; 16];
    let wait = remaining(deadline).max(Duration::from_millis(100));
    if let Err(e) = s
        .set_read_timeout(Some(wait))
        .and_then(|_| s.read_exact(&mut b))
    {
        return Arrival::Refused(format!(
            "rank {left_rank} at {from} sent no stream hello: {e}"
        ));
    }
    let field = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
    if b[..4] != HELLO_MAGIC || field(4) >= streams || field(8) != n || field(12) != streams {
        return Arrival::Refused(format!(
            "rank {left_rank} at {from} runs a different ring (stream {} of {}, {} ranks; we expect {streams} streams, {n} ranks): run the same preflight version and options on every node",
            field(4),
            field(12),
            field(8)
        ));
    }
    Arrival::Stream(field(4), s)
}

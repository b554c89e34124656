//! TCP between nodes: classified connects, ping-pong RTT, bulk throughput, and the listener that serves them.

use crate::transport::auth::{self, Secret};
use crate::transport::events::Events;
use crate::transport::gate::{Gate, Pass};
use crate::transport::wire::{Msg, REQUEST, read_msg_budget, write_msg};
use preflight_checks::model::LinkOutcome;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Size of each write in a bulk transfer.
const CHUNK: usize = 1 << 20;
/// Longest bulk transfer a listener accepts.
const MAX_BULK: Duration = Duration::from_secs(30);
/// Most ping-pong rounds a listener serves per request.
const MAX_PINGS: u32 = 10_000;

/// Connects within `timeout` and tells refused / timeout / unreachable / error apart.
pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, (LinkOutcome, String)> {
    match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => {
            s.set_nodelay(true).ok();
            Ok(s)
        }
        Err(e) => Err((classify(&e), e.to_string())),
    }
}

/// The largest TCP segment the control connections (join, orders, the report) use: it fits
/// a 1280-byte path (IPv6's minimum MTU; IPv4 headers are smaller), so a switch that carries
/// less than the interfaces' jumbo MTU (an MTU black hole) cannot stall the join or the report.
pub const CONTROL_MSS: libc::c_int = 1220;

/// Caps the segments a socket sends and advertises (`TCP_MAXSEG`); set before `connect` or
/// `listen` (accepted sockets inherit it). Best effort: an error leaves the kernel's choice.
pub fn clamp_mss<S: std::os::fd::AsRawFd>(sock: &S, mss: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            &mss as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// [`connect`] for a control connection: segments clamped to [`CONTROL_MSS`] before the
/// handshake, so both ends send only segments that fit a 1280-byte path.
pub fn connect_control(
    addr: SocketAddr,
    timeout: Duration,
) -> Result<TcpStream, (LinkOutcome, String)> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(|e| (LinkOutcome::Error, e.to_string()))?;
    let _ = clamp_mss(&sock, CONTROL_MSS);
    match sock.connect_timeout(&addr.into(), timeout) {
        Ok(()) => {
            let s = TcpStream::from(sock);
            s.set_nodelay(true).ok();
            Ok(s)
        }
        Err(e) => Err((classify(&e), e.to_string())),
    }
}

/// Maps a connect error to the link outcome a user can act on.
pub fn classify(e: &io::Error) -> LinkOutcome {
    match e.kind() {
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset => LinkOutcome::Refused,
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => LinkOutcome::Timeout,
        io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
            LinkOutcome::Unreachable
        }
        _ => match e.raw_os_error() {
            Some(libc::EHOSTUNREACH) | Some(libc::ENETUNREACH) | Some(libc::EADDRNOTAVAIL) => {
                LinkOutcome::Unreachable
            }
            Some(libc::ETIMEDOUT) => LinkOutcome::Timeout,
            Some(libc::ECONNREFUSED) => LinkOutcome::Refused,
            _ => LinkOutcome::Error,
        },
    }
}

/// Client side of a ping-pong: `count` one-byte round trips; returns each RTT in microseconds.
pub fn ping(stream: &mut TcpStream, count: u32, timeout: Duration) -> io::Result<Vec<f64>> {
    stream.set_read_timeout(Some(timeout))?;
    write_msg(stream, &Msg::PingReq { count }).map_err(io::Error::other)?;
    let mut rtts = Vec::with_capacity(count as usize);
    let mut b = [0u8; 1];
    for i in 0..count {
        let t = Instant::now();
        stream.write_all(&[i as u8])?;
        stream.read_exact(&mut b)?;
        rtts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(rtts)
}

/// Client side of a bulk transfer: send for `duration`, then read what the receiver counted.
/// Returns Gbit/s as measured by the receiver (first byte to end of stream).
pub fn bulk(stream: &mut TcpStream, duration: Duration, timeout: Duration) -> io::Result<f64> {
    stream.set_write_timeout(Some(timeout))?;
    stream.set_read_timeout(Some(timeout))?;
    write_msg(
        stream,
        &Msg::BulkReq {
            duration_ms: duration.as_millis() as u64,
        },
    )
    .map_err(io::Error::other)?;
    let buf = vec![0x5au8; CHUNK];
    let start = Instant::now();
    while start.elapsed() < duration {
        stream.write_all(&buf)?;
    }
    stream.shutdown(Shutdown::Write)?;
    match read_msg_budget(stream, &REQUEST) {
        Ok(Msg::BulkResult { bytes, elapsed_us }) if elapsed_us > 0 => {
            Ok(bytes as f64 * 8.0 / (elapsed_us as f64 * 1e3))
        }
        Ok(_) => Err(io::Error::other("peer sent no bulk result")),
        Err(e) => Err(io::Error::other(e.to_string())),
    }
}

/// Binds `addr` with a listen backlog of `backlog` connections (the kernel caps it at
/// `net.core.somaxconn`): connections a busy listener has not accepted yet wait there.
pub fn bind_listener(addr: SocketAddr, backlog: usize) -> io::Result<TcpListener> {
    let domain = socket2::Domain::for_address(addr);
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(backlog.clamp(128, 65535) as i32)?;
    Ok(s.into())
}

/// The least listen backlog of a data listener (the kernel caps it at `net.core.somaxconn`).
const DATA_BACKLOG: usize = 4096;

/// A data listener: accepts authenticated peers and serves ping and bulk requests until stopped.
pub struct DataServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DataServer {
    /// Binds `ip:0` (a random high port, as NCCL does) and serves in the background.
    /// Only `admitted` peers may start a handshake, a capped number at once.
    pub fn start(
        ip: std::net::IpAddr,
        secret: Secret,
        my_rank: u32,
        events: Events,
        admitted: Gate,
    ) -> io::Result<DataServer> {
        // Connections past the handshakes served at once wait in the kernel's backlog (they
        // cost no memory of ours there): a deep one, so a busy node delays its peers' connects
        // instead of dropping their SYNs into a timeout.
        let listener = bind_listener(
            SocketAddr::new(ip, 0),
            admitted.capacity().max(DATA_BACKLOG),
        )?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("data-{addr}"))
            .spawn(move || accept_loop(listener, secret, my_rank, stop2, events, admitted))?;
        Ok(DataServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for DataServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    secret: Secret,
    my_rank: u32,
    stop: Arc<AtomicBool>,
    events: Events,
    admitted: Gate,
) {
    while !stop.load(Ordering::SeqCst) {
        // At capacity the next connection waits in the backlog: a member is never closed on.
        if !admitted.has_room() {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        match listener.accept() {
            Ok((stream, peer)) => {
                let pass = match admitted.enter(peer.ip()) {
                    Ok(pass) => pass,
                    Err(_) => continue,
                };
                let served = admitted.serve();
                let secret = secret.clone();
                let events = events.clone();
                let admitted = admitted.clone();
                let _ = std::thread::Builder::new()
                    .name("data-conn".into())
                    .spawn(move || {
                        let _served = served;
                        if let Err(e) = serve(stream, &secret, my_rank, pass, &admitted) {
                            events.log(format!("data connection from {peer}: {e}"));
                        }
                    });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_readable(&listener, Duration::from_millis(100))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Sleeps until `listener` has a connection to accept, or `at_most` (so the loop sees `stop`):
/// a peer's connect is taken at once, and an idle listener costs ten wakeups a second.
fn wait_readable(listener: &TcpListener, at_most: Duration) {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `fd` is one valid pollfd, exclusively borrowed for the call.
    let ready = unsafe { libc::poll(&mut fd, 1, at_most.as_millis() as libc::c_int) };
    if ready < 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Serves one connection: authenticate, then one request.
fn serve(
    mut stream: TcpStream,
    secret: &Secret,
    my_rank: u32,
    pass: Pass,
    admitted: &Gate,
) -> Result<(), String> {
    let peer = stream.peer_addr().map_err(|e| e.to_string())?;
    if !admitted.settle(peer.ip(), auth::HANDSHAKE_TIMEOUT) {
        return Err(format!("dropped: {} is not an admitted node", peer.ip()));
    }
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_nodelay(true).ok();
    auth::accept(&mut stream, secret, my_rank).map_err(|e| format!("dropped: {e}"))?;
    drop(pass);
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    match read_msg_budget::<_, Msg>(&mut stream, &REQUEST).map_err(|e| e.to_string())? {
        Msg::PingReq { count } => {
            let mut b = [0u8; 1];
            for _ in 0..count.min(MAX_PINGS) {
                stream.read_exact(&mut b).map_err(|e| e.to_string())?;
                stream.write_all(&b).map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        Msg::BulkReq { duration_ms } => {
            let limit = Duration::from_millis(duration_ms).min(MAX_BULK) + Duration::from_secs(5);
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buf = vec![0u8; CHUNK];
            let mut bytes = 0u64;
            let mut first: Option<Instant> = None;
            loop {
                let n = stream.read(&mut buf).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                let t0 = *first.get_or_insert_with(Instant::now);
                bytes += n as u64;
                if t0.elapsed() > limit {
                    return Err("bulk sender exceeded its announced duration".into());
                }
            }
            let elapsed_us = first.map(|t| t.elapsed().as_micros() as u64).unwrap_or(0);
            write_msg(&mut stream, &Msg::BulkResult { bytes, elapsed_us })
                .map_err(|e| e.to_string())
        }
        Msg::IdleReq { idle_ms } => super::idle::serve(&mut stream, idle_ms),
        other => Err(format!("unexpected request {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_is_told_apart() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = connect(addr, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.0, LinkOutcome::Refused);
    }

    #[test]
    fn ping_and_bulk_through_an_authenticated_listener() {
        let secret = Secret::token("t");
        let srv = DataServer::start(
            "127.0.0.1".parse().unwrap(),
            secret.clone(),
            1,
            Events::none(),
            Gate::open(),
        )
        .unwrap();
        let mut s = connect(srv.addr, Duration::from_secs(1)).unwrap();
        assert_eq!(auth::connect(&mut s, &secret, 0, 2, Some(1)).unwrap(), 1);
        let rtts = ping(&mut s, 20, Duration::from_secs(2)).unwrap();
        assert_eq!(rtts.len(), 20);
        let mut s = connect(srv.addr, Duration::from_secs(1)).unwrap();
        auth::connect(&mut s, &secret, 0, 2, Some(1)).unwrap();
        let gbit = bulk(&mut s, Duration::from_millis(100), Duration::from_secs(5)).unwrap();
        assert!(gbit > 0.01, "loopback throughput {gbit} Gbit/s");
    }

    /// A peer that knows the secret but is not an admitted node gets nothing: the listener
    /// closes before the challenge, and serves it once the coordinator admits its address.
    #[test]
    fn only_admitted_nodes_are_served() {
        let secret = Secret::token("t");
        let gate = Gate::pending();
        let srv = DataServer::start(
            "127.0.0.1".parse().unwrap(),
            secret.clone(),
            1,
            Events::none(),
            gate.clone(),
        )
        .unwrap();
        gate.allow(["10.200.9.9".parse().unwrap()]);
        let started = std::time::Instant::now();
        let mut s = connect(srv.addr, Duration::from_secs(1)).unwrap();
        let e = auth::connect(&mut s, &secret, 0, 2, Some(1)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "{e}");
        gate.allow(["127.0.0.1".parse().unwrap()]);
        let mut s = connect(srv.addr, Duration::from_secs(1)).unwrap();
        assert_eq!(auth::connect(&mut s, &secret, 0, 2, Some(1)).unwrap(), 1);
    }

    #[test]
    fn wrong_rank_on_the_listener_is_detected() {
        let secret = Secret::token("t");
        let srv = DataServer::start(
            "127.0.0.1".parse().unwrap(),
            secret.clone(),
            3,
            Events::none(),
            Gate::open(),
        )
        .unwrap();
        let mut s = connect(srv.addr, Duration::from_secs(1)).unwrap();
        let r = auth::connect(&mut s, &secret, 0, 4, Some(1));
        assert!(matches!(
            r,
            Err(auth::AuthError::WrongPeer {
                expected: 1,
                got: 3
            })
        ));
    }
}

//! Path MTU between two nodes: don't-fragment UDP probes to the peer's echo, largest size that comes back.
//!
//! Unprivileged: `IP_MTU_DISCOVER = IP_PMTUDISC_DO` sets DF, and the peer echoes a short
//! acknowledgement (never the whole datagram) only for datagrams tagged with the job secret.

use crate::transport::auth::Secret;
use crate::transport::gate::Gate;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const MAGIC: &[u8; 8] = b"pfmtu\0\0\x01";

/// IP + UDP header bytes and the smallest MTU the family guarantees.
fn family_sizes(peer: &SocketAddr) -> (usize, u32) {
    if peer.is_ipv6() {
        (48, 1280)
    } else {
        (28, 576)
    }
}

/// Echo server on a UDP port: answers tagged probes with their received length.
pub struct EchoServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EchoServer {
    /// Binds UDP on `ip:port` (the same port as the TCP data listener).
    /// Only `admitted` peers get an answer.
    pub fn start(ip: IpAddr, port: u16, secret: &Secret, admitted: Gate) -> io::Result<EchoServer> {
        let sock = UdpSocket::bind(SocketAddr::new(ip, port))?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        room_for_bursts(&sock);
        let addr = sock.local_addr()?;
        let tag = secret.udp_tag();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mtu-{addr}"))
            .spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop2.load(Ordering::SeqCst) {
                    if let Ok((n, from)) = sock.recv_from(&mut buf)
                        && n >= 28
                        && &buf[..8] == MAGIC
                        && buf[8..24] == tag
                        && admitted.admits(from.ip())
                    {
                        let mut ack = [0u8; 32];
                        ack[..28].copy_from_slice(&buf[..28]);
                        ack[28..32].copy_from_slice(&(n as u32).to_be_bytes());
                        let _ = sock.send_to(&ack, from);
                    }
                }
            })?;
        Ok(EchoServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bytes of datagrams an echo server can hold while it answers: a window of peers' full-size
/// tries at once (32 x 3 x 9000 bytes, with the kernel's overhead) without a drop that would
/// read as a narrow path.
const ECHO_RCVBUF: libc::c_int = 4 << 20;

/// Raises the socket's receive buffer: past `net.core.rmem_max` where this process may
/// (`SO_RCVBUFFORCE`, root), else up to it. Best effort: the default still works, with less room.
fn room_for_bursts(sock: &UdpSocket) {
    let set = |opt: libc::c_int| {
        // SAFETY: a valid socket and a c_int option value of the size given.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&ECHO_RCVBUF as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SO_RCVBUFFORCE) != 0 {
        set(libc::SO_RCVBUF);
    }
}

fn set_dont_fragment(sock: &UdpSocket, v6: bool) -> io::Result<()> {
    let (val, level, name) = if v6 {
        (
            libc::IPV6_PMTUDISC_DO,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
        )
    } else {
        (
            libc::IP_PMTUDISC_DO,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
        )
    };
    let val: libc::c_int = val;
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            &val as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Datagrams sent for one size before it counts as not passing.
const ATTEMPTS: u32 = 3;

/// How long one try waits for its echo: 150 ms, or four times the slowest echo seen so far
/// on this path (a loaded peer answers in tens of milliseconds; up to 2 s).
struct Patience(Duration);

impl Patience {
    fn new() -> Patience {
        Patience(Duration::from_millis(150))
    }

    fn saw(&mut self, rtt: Duration) {
        self.0 = self.0.max(rtt * 4).min(Duration::from_secs(2));
    }
}

/// Whether a DF datagram of `mtu` bytes on the wire reaches the peer ([`ATTEMPTS`] tries).
/// The echo of any try of this size counts, however late within the tries.
fn probe(
    sock: &UdpSocket,
    tag: &[u8; 16],
    headers: usize,
    mtu: u32,
    seq: u32,
    patience: &mut Patience,
) -> io::Result<bool> {
    let size = (mtu as usize).saturating_sub(headers).max(28);
    let mut pkt = vec![0u8; size];
    pkt[..8].copy_from_slice(MAGIC);
    pkt[8..24].copy_from_slice(tag);
    let mut ack = [0u8; 64];
    // Three tries: on a loaded node an echo can take tens of milliseconds, and a size that only
    // lost a datagram (or was answered late) must not read as a smaller path.
    let first = std::time::Instant::now();
    for attempt in 0..ATTEMPTS {
        let id = seq * ATTEMPTS + attempt;
        pkt[24..28].copy_from_slice(&id.to_be_bytes());
        match sock.send(&pkt) {
            Ok(_) => {}
            // The local route already knows the path is smaller.
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => return Ok(false),
            Err(e) => return Err(e),
        }
        let sent = std::time::Instant::now();
        let deadline = sent + patience.0;
        while let Some(left) = deadline
            .checked_duration_since(std::time::Instant::now())
            .filter(|l| !l.is_zero())
        {
            // Sleep until an echo or the try's end, not in short polls: thousands of probes
            // at once on a busy host would spend the time waking up.
            sock.set_read_timeout(Some(left))?;
            match sock.recv(&mut ack) {
                Ok(n) if n >= 32 => {
                    let echoed = u32::from_be_bytes([ack[24], ack[25], ack[26], ack[27]]);
                    if echoed / ATTEMPTS != seq {
                        continue;
                    }
                    // The echo of this try, or of an earlier one answered late.
                    let tried = if echoed == id { sent } else { first };
                    patience.saw(tried.elapsed());
                    let got = u32::from_be_bytes([ack[28], ack[29], ack[30], ack[31]]);
                    return Ok(got as usize == size);
                }
                Ok(_) => continue,
                // The socket's read timeout is shorter than the attempt: wait out the attempt.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                // ICMP errors surface on the next recv of a connected socket.
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => return Ok(false),
                Err(_) => break,
            }
        }
    }
    Ok(false)
}

/// The largest MTU (bytes on the wire, IP header included) that reaches `peer` from `local`,
/// searched between the family's minimum (576, or 1280 on IPv6) and `max_mtu`. None when not even the smallest probe is echoed.
pub fn path_mtu(
    local: IpAddr,
    peer: SocketAddr,
    max_mtu: u32,
    secret: &Secret,
) -> io::Result<Option<u32>> {
    let sock = UdpSocket::bind(SocketAddr::new(local, 0))?;
    sock.connect(peer)?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))?;
    set_dont_fragment(&sock, peer.is_ipv6())?;
    let (headers, min_mtu) = family_sizes(&peer);
    let tag = secret.udp_tag();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut patience = Patience::new();
    if probe(&sock, &tag, headers, max_mtu, next(), &mut patience)? {
        return Ok(Some(max_mtu));
    }
    if !probe(&sock, &tag, headers, min_mtu, next(), &mut patience)? {
        return Ok(None);
    }
    // Binary search: lo passes, hi fails. At most ~14 probes.
    let (mut lo, mut hi) = (min_mtu, max_mtu.max(min_mtu));
    while hi - lo > 8 {
        let mid = lo + (hi - lo) / 2;
        if probe(&sock, &tag, headers, mid, next(), &mut patience)? {
            lo = mid
        } else {
            hi = mid
        }
    }
    // A narrower path is a claim against the interfaces: the full size is tried once more before
    // it is made (a real black hole drops it again; a loaded peer answers it now).
    if probe(&sock, &tag, headers, max_mtu, next(), &mut patience)? {
        return Ok(Some(max_mtu));
    }
    Ok(Some(lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_path_mtu_reaches_the_requested_size() {
        let secret = Secret::token("t");
        let echo =
            EchoServer::start("127.0.0.1".parse().unwrap(), 0, &secret, Gate::open()).unwrap();
        let mtu = path_mtu("127.0.0.1".parse().unwrap(), echo.addr, 9000, &secret).unwrap();
        assert_eq!(mtu, Some(9000));
    }

    #[test]
    fn the_echo_socket_has_room_for_a_windows_bursts() {
        let rcvbuf = |s: &UdpSocket| {
            let mut v: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: a valid socket, a c_int out value and its size.
            let rc = unsafe {
                libc::getsockopt(
                    s.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUF,
                    (&mut v as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            assert_eq!(rc, 0);
            v
        };
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        room_for_bursts(&echo);
        // The kernel doubles what it is given; root may pass rmem_max.
        if unsafe { libc::geteuid() } == 0 {
            assert!(rcvbuf(&echo) >= ECHO_RCVBUF, "{}", rcvbuf(&echo));
        }
        assert!(rcvbuf(&echo) >= rcvbuf(&plain));
    }

    #[test]
    fn untagged_datagrams_get_no_answer() {
        let secret = Secret::token("t");
        let echo =
            EchoServer::start("127.0.0.1".parse().unwrap(), 0, &secret, Gate::open()).unwrap();
        let other = Secret::token("other");
        let mtu = path_mtu("127.0.0.1".parse().unwrap(), echo.addr, 1500, &other).unwrap();
        assert_eq!(mtu, None);
    }
}

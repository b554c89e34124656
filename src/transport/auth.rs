//! Mutual HMAC challenge: both ends prove they know the job's secret before anything else is served.
//!
//! The server (coordinator or data listener) sends a nonce; the client answers with
//! HMAC(secret, server nonce) and its own nonce; the server answers with
//! HMAC(secret, client nonce). Neither side serves or sends data before the proof checks out.

use super::wire::{HANDSHAKE_FRAME, MAGIC, Msg, PROTO, WireError, read_msg_capped, write_msg};
use hmac::{Hmac, Mac};
use preflight_checks::cluster::RefusalKind;
use sha2::Sha256;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

type HmacSha256 = Hmac<Sha256>;

/// How long the whole handshake may take, however the peer paces its bytes.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A stream whose every read and write must finish by one instant: a peer sending one byte
/// a second cannot stretch the handshake past its deadline.
struct ByDeadline<'a> {
    stream: &'a TcpStream,
    until: Instant,
}

impl ByDeadline<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "handshake deadline",
            ))
        } else {
            Ok(left)
        }
    }
}

impl Read for ByDeadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        (&mut &*self.stream).read(buf)
    }
}

impl Write for ByDeadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        (&mut &*self.stream).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&mut &*self.stream).flush()
    }
}

/// The job's shared secret.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Where the job's secret came from, in the order they are tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// `--token`, `PREFLIGHT_TOKEN` or `--token-file FILE` (named).
    Token(String),
    /// A job id (`--rdzv-id`, `SLURM_JOB_ID`, `TORCHELASTIC_RUN_ID`) with the master endpoint.
    JobId(String),
    /// None: the key is the master endpoint alone, which anyone who can reach it can compute.
    EndpointOnly,
}

impl SecretSource {
    /// Whether the secret keeps strangers out.
    pub fn is_secret(&self) -> bool {
        !matches!(self, SecretSource::EndpointOnly)
    }

    /// The source in words, for reports.
    pub fn describe(&self) -> String {
        match self {
            SecretSource::Token(from) => format!("the token from {from}"),
            SecretSource::JobId(from) => format!("the job id from {from} with the master endpoint"),
            SecretSource::EndpointOnly => "the master endpoint alone (no secret)".to_string(),
        }
    }
}

impl Secret {
    /// The secret a token gives.
    pub fn token(t: &str) -> Secret {
        Secret(format!("token:{t}").into_bytes())
    }

    /// A token when given (`from` names it), else derived from the job id and the master
    /// endpoint; with neither, from the endpoint alone (see [`SecretSource::EndpointOnly`]).
    pub fn derive(
        token: Option<(&str, &str)>,
        job_id: Option<(&str, &str)>,
        master: &str,
        port: u16,
    ) -> (Secret, SecretSource) {
        match (token, job_id) {
            (Some((t, from)), _) => (Secret::token(t), SecretSource::Token(from.to_string())),
            (None, Some((id, from))) => (
                Secret(format!("job:{id}|{master}:{port}").into_bytes()),
                SecretSource::JobId(from.to_string()),
            ),
            (None, None) => (
                Secret(format!("job:|{master}:{port}").into_bytes()),
                SecretSource::EndpointOnly,
            ),
        }
    }

    fn mac(&self, role: &str, nonce: &str, rank: u32) -> String {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        m.update(format!("preflight/{PROTO}|{role}|{nonce}|{rank}").as_bytes());
        hex(&m.finalize().into_bytes())
    }

    fn verify(&self, role: &str, nonce: &str, rank: u32, mac_hex: &str) -> bool {
        let Some(bytes) = unhex(mac_hex) else {
            return false;
        };
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        m.update(format!("preflight/{PROTO}|{role}|{nonce}|{rank}").as_bytes());
        m.verify_slice(&bytes).is_ok()
    }

    /// A short tag for UDP echo datagrams (not a per-message MAC: it only keeps strangers from using the echo).
    pub fn udp_tag(&self) -> [u8; 16] {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        m.update(b"preflight/udp-echo");
        let full = m.finalize().into_bytes();
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&full[..16]);
        tag
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 256 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// 16 random bytes, hex.
pub fn nonce() -> String {
    let mut b = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok();
    if !ok {
        // Fall back to time and pid; still unique per connection.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b[..8].copy_from_slice(&(t as u64).to_le_bytes());
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    hex(&b)
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("the peer is not preflight (no valid challenge): {0}")]
    NotPreflight(String),
    #[error(
        "protocol version {theirs} differs from ours ({PROTO}); run the same preflight version on every node"
    )]
    Version { theirs: u32, rank: Option<u32> },
    #[error(
        "a node claiming rank {rank} of {nnodes} does not know the job secret (check --token / PREFLIGHT_TOKEN / --token-file / --rdzv-id on every node)"
    )]
    ClientBadProof { rank: u32, nnodes: u32 },
    #[error(
        "the peer does not know the job secret (check --token / PREFLIGHT_TOKEN / --rdzv-id on every node)"
    )]
    BadProof,
    #[error("rejected by the peer: {0}")]
    Rejected(String, Option<RefusalKind>),
    #[error("expected rank {expected}, reached rank {got}")]
    WrongPeer { expected: u32, got: u32 },
    #[error("{0}")]
    Wire(#[from] WireError),
}

/// What the server learned about an authenticated client.
#[derive(Debug, Clone, Copy)]
pub struct ClientInfo {
    pub rank: u32,
    pub nnodes: u32,
}

/// Server side: challenge, check the proof, prove ourselves. On failure the peer gets a `Reject` and nothing else.
pub fn accept(
    stream: &mut TcpStream,
    secret: &Secret,
    my_rank: u32,
) -> Result<ClientInfo, AuthError> {
    let stream = &mut ByDeadline {
        stream,
        until: Instant::now() + HANDSHAKE_TIMEOUT,
    };
    let server_nonce = nonce();
    write_msg(
        stream,
        &Msg::Challenge {
            magic: MAGIC.into(),
            proto: PROTO,
            nonce: server_nonce.clone(),
        },
    )?;
    let hello: Msg = read_msg_capped(stream, HANDSHAKE_FRAME)?;
    let Msg::Hello {
        proto,
        rank,
        nnodes,
        nonce: client_nonce,
        mac,
    } = hello
    else {
        let _ = write_msg(
            stream,
            &Msg::Reject {
                reason: "expected hello".into(),
                kind: None,
            },
        );
        return Err(AuthError::NotPreflight(
            "first message was not a hello".into(),
        ));
    };
    if proto != PROTO {
        let _ = write_msg(
            stream,
            &Msg::Reject {
                reason: format!("protocol {proto} != {PROTO}"),
                kind: Some(RefusalKind::Version),
            },
        );
        return Err(AuthError::Version {
            theirs: proto,
            rank: Some(rank),
        });
    }
    if !secret.verify("client", &server_nonce, rank, &mac) {
        let _ = write_msg(
            stream,
            &Msg::Reject {
                reason: "bad proof of the job secret: this node was started with another secret than the one it connected to (--token, PREFLIGHT_TOKEN, --token-file, --rdzv-id or the job id differ)".into(),
                kind: Some(RefusalKind::Secret),
            },
        );
        return Err(AuthError::ClientBadProof { rank, nnodes });
    }
    let proof = secret.mac("server", &client_nonce, my_rank);
    write_msg(
        stream,
        &Msg::Welcome {
            rank: my_rank,
            mac: proof,
        },
    )?;
    Ok(ClientInfo { rank, nnodes })
}

/// Client side: answer the challenge, check the server's proof (and its rank when `expect` is given).
pub fn connect(
    stream: &mut TcpStream,
    secret: &Secret,
    my_rank: u32,
    nnodes: u32,
    expect: Option<u32>,
) -> Result<u32, AuthError> {
    let stream = &mut ByDeadline {
        stream,
        until: Instant::now() + HANDSHAKE_TIMEOUT,
    };
    let first: Msg = read_msg_capped(stream, HANDSHAKE_FRAME).map_err(|e| match e {
        WireError::Timeout => {
            AuthError::NotPreflight("it accepted the connection but sent nothing".into())
        }
        WireError::Malformed(m) => AuthError::NotPreflight(format!("it sent something else ({m})")),
        WireError::TooLarge { .. } => AuthError::NotPreflight("it sent something else".into()),
        other => AuthError::Wire(other),
    })?;
    let Msg::Challenge {
        magic,
        proto,
        nonce: server_nonce,
    } = first
    else {
        return Err(AuthError::NotPreflight(
            "first message was not a challenge".into(),
        ));
    };
    if magic != MAGIC {
        return Err(AuthError::NotPreflight(format!("magic {magic:?}")));
    }
    if proto != PROTO {
        return Err(AuthError::Version {
            theirs: proto,
            rank: None,
        });
    }
    let client_nonce = nonce();
    let mac = secret.mac("client", &server_nonce, my_rank);
    write_msg(
        stream,
        &Msg::Hello {
            proto: PROTO,
            rank: my_rank,
            nnodes,
            nonce: client_nonce.clone(),
            mac,
        },
    )?;
    match read_msg_capped(stream, HANDSHAKE_FRAME)? {
        Msg::Welcome { rank, mac } => {
            if !secret.verify("server", &client_nonce, rank, &mac) {
                return Err(AuthError::BadProof);
            }
            if let Some(e) = expect.filter(|e| *e != rank) {
                return Err(AuthError::WrongPeer {
                    expected: e,
                    got: rank,
                });
            }
            Ok(rank)
        }
        Msg::Reject { reason, kind } => Err(AuthError::Rejected(reason, kind)),
        _ => Err(AuthError::NotPreflight("unexpected answer to hello".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair(
        server_secret: Secret,
        client_secret: Secret,
    ) -> (Result<ClientInfo, AuthError>, Result<u32, AuthError>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            accept(&mut s, &server_secret, 0)
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let client = connect(&mut c, &client_secret, 2, 3, Some(0));
        (h.join().unwrap(), client)
    }

    #[test]
    fn same_secret_authenticates_both_ways() {
        let s = Secret::token("t");
        let (srv, cli) = pair(s.clone(), s);
        assert_eq!(srv.unwrap().rank, 2);
        assert_eq!(cli.unwrap(), 0);
    }

    #[test]
    fn wrong_secret_is_rejected_by_the_server() {
        let (srv, cli) = pair(Secret::token("a"), Secret::token("b"));
        assert!(matches!(
            srv,
            Err(AuthError::ClientBadProof { rank: 2, nnodes: 3 })
        ));
        assert!(matches!(cli, Err(AuthError::Rejected(..))));
    }

    #[test]
    fn garbage_client_is_dropped() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            accept(&mut s, &Secret::token("t"), 0)
        });
        let mut c = TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut c, b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(h.join().unwrap().is_err());
    }

    #[test]
    fn silent_server_is_not_preflight() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        let _keep = l.accept().unwrap();
        let t = std::time::Instant::now();
        let r = connect(&mut c, &Secret::token("t"), 1, 2, Some(0));
        assert!(matches!(r, Err(AuthError::NotPreflight(_))));
        assert!(t.elapsed() < HANDSHAKE_TIMEOUT + Duration::from_secs(2));
    }
}

//! Waiting for many nodes at once: one `poll` loop over every node asked, one deadline; no
//! thread per node, so a thousand nodes cost rank 0 one thread here.
//!
//! A node that stays silent longer than `silence` or that has not finished by the phase's
//! `limit` is lost; its socket is shut down. So a stopped or hung node costs the others at most
//! `silence`, never a wait per node in turn.

use super::joined::JoinedNode;
use crate::transport::wire::{Msg, WireError, frame_body_len, read_msg_budget, reply_budget};
use preflight_checks::budget::Budget;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How long a phase may wait: in all, and for any one node's next message.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    pub limit: Duration,
    pub silence: Duration,
}

impl Wait {
    /// Both bounds the same: a phase of one question and one answer.
    pub fn within(limit: Duration) -> Wait {
        Wait {
            limit,
            silence: limit,
        }
    }
}

/// What the phase made of one message.
pub enum Step {
    /// More messages follow from this node.
    More,
    /// This node is done with the phase.
    Done,
    /// The message does not belong here: the node is lost.
    Unexpected,
}

/// One node's frame being assembled: the header first, then exactly the body it declares (never
/// a byte more, so what follows the final answer stays in the socket for the next phase).
struct Partial {
    buf: Vec<u8>,
    need: usize,
    last: Instant,
}

impl Partial {
    fn new() -> Partial {
        Partial {
            buf: Vec::new(),
            need: 4,
            last: Instant::now(),
        }
    }
}

/// What reading from one node came to.
enum Read {
    /// Nothing more now.
    Idle,
    Frame(Vec<u8>),
    Failed(WireError),
}

/// Reads what `stream` has, up to the end of the current frame.
fn read_some(stream: &mut TcpStream, p: &mut Partial, cap: usize) -> Read {
    let mut chunk = [0u8; 64 << 10];
    loop {
        let want = (p.need - p.buf.len()).min(chunk.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Read::Failed(WireError::Closed),
            Ok(n) => {
                p.last = Instant::now();
                p.buf.extend_from_slice(&chunk[..n]);
                if p.buf.len() < p.need {
                    continue;
                }
                if p.need == 4 {
                    let header = [p.buf[0], p.buf[1], p.buf[2], p.buf[3]];
                    let len = frame_body_len(header);
                    if len > cap {
                        return Read::Failed(WireError::TooLarge { len, cap });
                    }
                    p.need = 4 + len;
                    if len > 0 {
                        continue;
                    }
                }
                let frame = std::mem::take(&mut p.buf);
                p.need = 4;
                return Read::Frame(frame);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Read::Idle,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Read::Failed(e.into()),
        }
    }
}

/// Reads every asked node's messages at once, on this thread (one `poll` over all their
/// sockets: no thread per node), until each is done, lost, or the phase's limit passes. A
/// node's reading stops after the message `is_final` accepts (the protocol is request and
/// answer: nothing else comes until the next order). `handle` sees each message in arrival
/// order. Returns the indices of the nodes lost here.
pub fn gather(
    members: &mut [JoinedNode],
    asked: &[usize],
    phase: &str,
    wait: Wait,
    is_final: fn(&Msg) -> bool,
    mut handle: impl FnMut(&mut JoinedNode, Msg) -> Step,
) -> Vec<usize> {
    let deadline = Instant::now() + wait.limit;
    let budget: Budget = reply_budget(members.len().max(asked.len()));
    let mut pending: BTreeMap<usize, Partial> = BTreeMap::new();
    let mut lost = Vec::new();
    for &i in asked {
        if members[i].stream.set_nonblocking(true).is_ok() {
            pending.insert(i, Partial::new());
        } else {
            lose(
                &mut members[i],
                phase,
                "could not start reading its answers",
            );
            lost.push(i);
        }
    }
    let mut finished: Vec<(usize, Result<(), String>)> = Vec::new();
    while !pending.is_empty() && Instant::now() < deadline {
        let order: Vec<usize> = pending.keys().copied().collect();
        let mut fds: Vec<libc::pollfd> = order
            .iter()
            .map(|i| libc::pollfd {
                fd: members[*i].stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let left = deadline.saturating_duration_since(Instant::now());
        let tick = left.min(Duration::from_millis(200)).as_millis() as libc::c_int;
        // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd entries.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, tick) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        for (slot, i) in fds.iter().zip(order) {
            let Some(p) = pending.get_mut(&i) else {
                continue;
            };
            if slot.revents == 0 {
                if p.last.elapsed() > wait.silence {
                    let why = format!("sent nothing for {} s", wait.silence.as_secs());
                    finished.push((i, Err(why)));
                }
                continue;
            }
            loop {
                match read_some(&mut members[i].stream, p, budget.bytes) {
                    Read::Idle => break,
                    Read::Failed(e) => {
                        finished.push((i, Err(e.to_string())));
                        break;
                    }
                    Read::Frame(frame) => {
                        let msg = read_msg_budget::<_, Msg>(&mut frame.as_slice(), &budget);
                        let done = match msg {
                            Err(e) => Some(Err(e.to_string())),
                            Ok(msg) => {
                                let last = is_final(&msg);
                                match handle(&mut members[i], msg) {
                                    Step::More if !last => None,
                                    Step::More | Step::Done => Some(Ok(())),
                                    Step::Unexpected => {
                                        Some(Err("answered out of protocol".to_string()))
                                    }
                                }
                            }
                        };
                        if let Some(d) = done {
                            finished.push((i, d));
                            break;
                        }
                    }
                }
            }
        }
        for (i, result) in finished.drain(..) {
            if pending.remove(&i).is_none() {
                continue;
            }
            members[i].stream.set_nonblocking(false).ok();
            if let Err(why) = result {
                lose(&mut members[i], phase, &why);
                lost.push(i);
            }
        }
    }
    for (i, _) in pending {
        members[i].stream.set_nonblocking(false).ok();
        let why = format!("did not finish within {} s", wait.limit.as_secs());
        lose(&mut members[i], phase, &why);
        lost.push(i);
    }
    lost
}

/// Marks a node lost (logged after the phase) and shuts its socket so no reader waits on it.
pub fn lose(m: &mut JoinedNode, phase: &str, why: &str) {
    if m.alive {
        m.lost = Some(format!("during {phase}: {why}"));
    }
    m.alive = false;
    let _ = m.stream.shutdown(Shutdown::Both);
}

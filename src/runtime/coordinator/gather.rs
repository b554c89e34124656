//! Waiting for many nodes at once: one reader thread per node asked, one channel, one deadline.
//!
//! A node that stays silent longer than `silence` (its socket read times out) or that has not
//! finished by the phase's `limit` is lost; its socket is shut down so its reader ends. So a
//! stopped or hung node costs the others at most `silence`, never a wait per node in turn.

use super::JoinedNode;
use crate::transport::wire::{Msg, WireError, read_msg_budget, reply_budget};
use std::collections::BTreeSet;
use std::net::Shutdown;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a phase may wait: in all, and for any one node's next message.
#[derive(Clone, Copy, Debug)]
pub(in crate::runtime) struct Wait {
    pub limit: Duration,
    pub silence: Duration,
}

impl Wait {
    /// Both bounds the same: a phase of one question and one answer.
    pub(in crate::runtime) fn within(limit: Duration) -> Wait {
        Wait {
            limit,
            silence: limit,
        }
    }
}

/// What the phase made of one message.
pub(in crate::runtime) enum Step {
    /// More messages follow from this node.
    More,
    /// This node is done with the phase.
    Done,
    /// The message does not belong here: the node is lost.
    Unexpected,
}

/// Reads every asked node's messages concurrently until each is done, lost, or the phase's
/// limit passes. A node's reader stops after the message `is_final` accepts (the protocol is
/// request and answer: nothing else comes until the next order). `handle` sees each message
/// on the calling thread, in arrival order. Returns the indices of the nodes lost here.
pub(in crate::runtime) fn gather(
    members: &mut [JoinedNode],
    asked: &[usize],
    phase: &str,
    wait: Wait,
    is_final: fn(&Msg) -> bool,
    mut handle: impl FnMut(&mut JoinedNode, Msg) -> Step,
) -> Vec<usize> {
    let deadline = Instant::now() + wait.limit;
    let (tx, rx) = mpsc::channel::<(usize, Result<Msg, WireError>)>();
    let mut pending: BTreeSet<usize> = BTreeSet::new();
    let nodes = members.len().max(asked.len());
    for &i in asked {
        let m = &members[i];
        let Ok(mut stream) = m.stream.try_clone() else {
            continue;
        };
        stream.set_read_timeout(Some(wait.silence)).ok();
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("gather-{}", m.rank))
            .spawn(move || {
                loop {
                    let got = read_msg_budget::<_, Msg>(&mut stream, &reply_budget(nodes));
                    let stop = got.as_ref().map_or(true, is_final);
                    if tx.send((i, got)).is_err() || stop {
                        break;
                    }
                }
            });
        if spawned.is_ok() {
            pending.insert(i);
        }
    }
    drop(tx);
    let mut lost = Vec::new();
    for &i in asked.iter().filter(|i| !pending.contains(i)) {
        lose(
            &mut members[i],
            phase,
            "could not start reading its answers",
        );
        lost.push(i);
    }
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((i, got)) = rx.recv_timeout(left) else {
            break;
        };
        if !pending.contains(&i) {
            continue;
        }
        let m = &mut members[i];
        match got {
            Ok(msg) => match handle(m, msg) {
                Step::More => {}
                Step::Done => {
                    pending.remove(&i);
                }
                Step::Unexpected => {
                    pending.remove(&i);
                    lose(m, phase, "answered out of protocol");
                    lost.push(i);
                }
            },
            Err(WireError::Timeout) => {
                pending.remove(&i);
                let why = format!("sent nothing for {} s", wait.silence.as_secs());
                lose(m, phase, &why);
                lost.push(i);
            }
            Err(e) => {
                pending.remove(&i);
                lose(m, phase, &e.to_string());
                lost.push(i);
            }
        }
    }
    for i in pending {
        let why = format!("did not finish within {} s", wait.limit.as_secs());
        lose(&mut members[i], phase, &why);
        lost.push(i);
    }
    lost
}

/// Marks a node lost (logged after the phase) and shuts its socket so no reader waits on it.
pub(in crate::runtime) fn lose(m: &mut JoinedNode, phase: &str, why: &str) {
    if m.alive {
        m.lost = Some(format!("during {phase}: {why}"));
    }
    m.alive = false;
    let _ = m.stream.shutdown(Shutdown::Both);
}

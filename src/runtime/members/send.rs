//! Orders out: each alive member's frame, a window of sends at once, a failed send losing its node.

use super::gather::lose;
use super::joined::JoinedNode;
use crate::runtime::dial::paced;
use crate::transport::wire::{Msg, WireError, encode_msg, write_frame};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Sends each alive member its order (None: nothing for it); returns the indices of the members asked.
pub fn send_orders(
    members: &mut [JoinedNode],
    phase: &str,
    order: impl Fn(&JoinedNode) -> Option<Msg>,
) -> Vec<usize> {
    send_frames(members, phase, |m| {
        order(m).map(|msg| encode_msg(&msg).map(Arc::new))
    })
}

/// Sends each alive member its frame (None: nothing for it), [`SEND_WINDOW`] at once so a slow
/// receiver holds up no one; returns the indices of the members sent to. A frame shared by many
/// members (an `Arc`) is serialised once.
pub fn send_frames(
    members: &mut [JoinedNode],
    phase: &str,
    frame: impl Fn(&JoinedNode) -> Option<Result<Arc<Vec<u8>>, WireError>>,
) -> Vec<usize> {
    let mut jobs: Vec<(usize, TcpStream, Arc<Vec<u8>>)> = Vec::new();
    for (i, m) in members.iter_mut().enumerate().filter(|(_, m)| m.alive) {
        match frame(m) {
            None => {}
            Some(Err(e)) => lose(m, phase, &e.to_string()),
            Some(Ok(f)) => match m.stream.try_clone() {
                Ok(s) => jobs.push((i, s, f)),
                Err(e) => lose(m, phase, &e.to_string()),
            },
        }
    }
    let results = paced(&jobs, SEND_WINDOW, |(_, s, f)| {
        let mut s = s;
        s.set_write_timeout(Some(Duration::from_secs(10))).ok();
        write_frame(&mut s, f)
    });
    let mut asked = Vec::new();
    for ((i, _, _), r) in jobs.iter().zip(results) {
        match r {
            Ok(()) => asked.push(*i),
            Err(e) => lose(&mut members[*i], phase, &e.to_string()),
        }
    }
    asked
}

/// Sends in flight at once from the coordinator.
pub const SEND_WINDOW: usize = 64;

//! What the node-side halves of the link phases share: a link's base from its listener, a
//! progress reporter beside long work, and the counter it reads.

use crate::transport::wire::{Listener, Msg, write_msg};
use preflight_checks::model::LinkResult;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::RecvTimeoutError;

/// A link from `from` to `target_rank`'s listener, before it is measured.
pub fn base_link(from: u32, target_rank: u32, l: &Listener) -> LinkResult {
    LinkResult {
        from,
        to: target_rank,
        interface: l.interface.as_str().into(),
        address: l.address.as_str().into(),
        port: l.port,
        ..Default::default()
    }
}

/// Runs `work` while a thread tells the coordinator, every [`PROBE_PROGRESS_EVERY`], how many
/// links have a result (`work` counts them in the counter it is given); the thread ends before
/// this returns, so the caller's next frame never interleaves with a progress frame.
///
/// [`PROBE_PROGRESS_EVERY`]: crate::runtime::budget::PROBE_PROGRESS_EVERY
pub fn with_progress<R>(stream: &TcpStream, work: impl FnOnce(&AtomicU32) -> R) -> R {
    let done = AtomicU32::new(0);
    let mut out = stream.try_clone().ok();
    // Dropping the sender when the work is over wakes the reporter at once.
    let (over, stop) = std::sync::mpsc::channel::<()>();
    let counted = &done;
    std::thread::scope(|s| {
        s.spawn(move || {
            while let Err(RecvTimeoutError::Timeout) =
                stop.recv_timeout(crate::runtime::budget::PROBE_PROGRESS_EVERY)
            {
                let progress = Msg::ProbeProgress {
                    done: counted.load(Ordering::SeqCst),
                };
                // A failed write ends the reports; the answer itself tells the rest.
                if out
                    .as_mut()
                    .is_none_or(|o| write_msg(o, &progress).is_err())
                {
                    break;
                }
            }
        });
        let r = work(&done);
        drop(over);
        r
    })
}

/// Counts one link as having its result when dropped (every way out of the closure).
pub struct Counted<'a>(pub &'a AtomicU32);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

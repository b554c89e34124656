//! The data path: per stream, one sender thread (to the right) and one receiver thread (from the left).
//!
//! Both walk the same [`SegmentPlan`] segment by segment. The sender may send segment `k` of step `t` once
//! the receiver has finished segment `k` of step `t-1` (that is the data it forwards); the receiver
//! may overwrite segment `k` of step `t` once the sender has sent segment `k` of step `t-1` (the
//! last read of that memory). So receiving, adding and sending overlap across steps, as in NCCL.

use super::plan::{self, Op, SegmentPlan};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const HEADER_MAGIC: [u8; 4] = *b"PFRS";

/// The buffer of one iteration, shared by all workers. Only disjoint or properly ordered
/// regions are touched concurrently (see the module doc); the owner waits for every worker
/// to report before it reads or writes the buffer again.
#[derive(Clone, Copy)]
pub struct BufPtr {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: the pointer is only dereferenced inside `SegmentPlan` ranges, whose concurrent use is ordered
// by `Sync` counters (release/acquire through the mutex), while the owning Vec is kept alive and
// untouched by the thread that posted the job until all workers answered.
unsafe impl Send for BufPtr {}

impl BufPtr {
    pub fn new(buf: &mut [f32]) -> BufPtr {
        BufPtr {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    /// SAFETY: the caller holds the ordering described in the module doc for `r`.
    unsafe fn slice(&self, r: &std::ops::Range<usize>) -> &[f32] {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "plan range out of bounds"
        );
        unsafe { std::slice::from_raw_parts(self.ptr.add(r.start), r.len()) }
    }

    /// SAFETY: as `slice`, and no other reference to `r` exists until this one is dropped.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice_mut(&self, r: &std::ops::Range<usize>) -> &mut [f32] {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "plan range out of bounds"
        );
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r.start), r.len()) }
    }
}

/// Float32 slices as bytes for the socket (native byte order; every supported target is little-endian).
fn as_bytes(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and any alignment suits u8; the length is in bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn as_bytes_mut(v: &mut [f32]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; every byte pattern is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

/// Adds `src` into `dst` element-wise (auto-vectorised).
pub fn add_into(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += *s;
    }
}

/// One iteration's work for one worker.
#[derive(Clone, Copy)]
pub struct Job {
    pub buf: BufPtr,
    pub count: usize,
    pub n: usize,
    pub pos: usize,
    pub used: usize,
    /// First iteration of a size: the sender announces the size so mismatched `--sizes` are caught.
    pub announce: bool,
}

/// Why a worker stopped.
#[derive(Debug)]
pub enum Failure {
    /// Another worker failed first; this one only stopped.
    Aborted,
    Io {
        send: bool,
        step: usize,
        err: io::Error,
    },
    Stalled {
        send: bool,
        step: usize,
    },
    Mismatch {
        theirs: u64,
        ours: u64,
    },
}

/// A worker's answer to one job: (stream, is the sender, outcome).
pub type Answer = (usize, bool, Result<(), Failure>);

/// Progress counters shared by the sender and receiver of one stream.
#[derive(Default)]
pub struct Sync {
    done: Mutex<(u64, u64)>, // (segments received, segments sent)
    cv: Condvar,
}

impl Sync {
    fn lock(&self) -> MutexGuard<'_, (u64, u64)> {
        self.done.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn reset(&self) {
        *self.lock() = (0, 0);
    }

    fn bump(&self, send: bool) {
        let mut g = self.lock();
        if send {
            g.1 += 1
        } else {
            g.0 += 1
        }
        drop(g);
        self.cv.notify_all();
    }

    pub fn wake(&self) {
        self.cv.notify_all();
    }

    /// Waits until the other side's counter reaches `at_least`, the run aborts, or `limit` passes.
    fn wait(&self, other_is_send: bool, at_least: u64, shared: &Shared, limit: Duration) -> bool {
        let start = Instant::now();
        let mut g = self.lock();
        loop {
            let have = if other_is_send { g.1 } else { g.0 };
            if have >= at_least {
                return true;
            }
            if shared.abort.load(Ordering::Acquire) || start.elapsed() >= limit {
                return false;
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(50))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// State every worker of a run shares.
pub struct Shared {
    pub abort: AtomicBool,
    /// Segments moved by anyone; the coordinator of the run watches it for stalls.
    pub ticks: AtomicU64,
    pub timeout: Duration,
}

/// Sender loop for stream `j`: one answer on `done` per job, until the job channel closes.
pub fn sender(
    j: usize,
    mut sock: TcpStream,
    jobs: Receiver<Job>,
    done: Sender<Answer>,
    sync: &Sync,
    shared: &Shared,
) {
    for job in jobs {
        let r = send_all(j, &mut sock, &job, sync, shared);
        finish((j, true, r), sync, shared, &done);
    }
}

/// Receiver loop for stream `j`.
pub fn receiver(
    j: usize,
    mut sock: TcpStream,
    jobs: Receiver<Job>,
    done: Sender<Answer>,
    sync: &Sync,
    shared: &Shared,
) {
    let mut scratch = vec![0f32; plan::SEG_ELEMS];
    for job in jobs {
        let r = recv_all(j, &mut sock, &job, &mut scratch, sync, shared);
        finish((j, false, r), sync, shared, &done);
    }
}

fn finish(answer: Answer, sync: &Sync, shared: &Shared, done: &Sender<Answer>) {
    if answer.2.is_err() {
        shared.abort.store(true, Ordering::Release);
        sync.wake();
    }
    let _ = done.send(answer);
}

fn io_failure(send: bool, step: usize, err: io::Error, shared: &Shared) -> Failure {
    if shared.abort.load(Ordering::Acquire) {
        Failure::Aborted
    } else {
        Failure::Io { send, step, err }
    }
}

fn stalled(send: bool, step: usize, shared: &Shared) -> Failure {
    if shared.abort.load(Ordering::Acquire) {
        Failure::Aborted
    } else {
        Failure::Stalled { send, step }
    }
}

fn header(j: usize, count: usize) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..4].copy_from_slice(&HEADER_MAGIC);
    h[4..8].copy_from_slice(&(j as u32).to_le_bytes());
    h[8..].copy_from_slice(&(count as u64).to_le_bytes());
    h
}

fn send_all(
    j: usize,
    sock: &mut TcpStream,
    job: &Job,
    sync: &Sync,
    shared: &Shared,
) -> Result<(), Failure> {
    let plan = SegmentPlan::new(job.count, job.n, job.pos, job.used, j);
    if job.announce {
        sock.write_all(&header(j, job.count))
            .map_err(|e| io_failure(true, 0, e, shared))?;
    }
    // Received segments before step t-1, i.e. the receiver's index of (t-1, 0).
    let mut recv_base = 0u64;
    for t in 0..plan.steps() {
        let step = plan.step(t);
        if t >= 2 {
            recv_base += plan::segments(&plan.step(t - 2).recv) as u64;
        }
        for k in 0..plan::segments(&step.send) {
            if t >= 1 && !sync.wait(false, recv_base + k as u64 + 1, shared, shared.timeout * 2) {
                return Err(stalled(true, t, shared));
            }
            let seg = plan::segment(&step.send, k);
            // SAFETY: segment k of step t-1's receive is complete (waited above), and the receiver
            // does not write it again before this send finishes (it waits for our counter).
            let data = unsafe { job.buf.slice(&seg) };
            sock.write_all(as_bytes(data))
                .map_err(|e| io_failure(true, t, e, shared))?;
            sync.bump(true);
            shared.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

fn recv_all(
    j: usize,
    sock: &mut TcpStream,
    job: &Job,
    scratch: &mut [f32],
    sync: &Sync,
    shared: &Shared,
) -> Result<(), Failure> {
    let plan = SegmentPlan::new(job.count, job.n, job.pos, job.used, j);
    if job.announce {
        let mut h = [0u8; 16];
        sock.read_exact(&mut h)
            .map_err(|e| io_failure(false, 0, e, shared))?;
        if h != header(j, job.count) {
            let theirs = u64::from_le_bytes(h[8..].try_into().unwrap_or([0; 8]));
            return Err(Failure::Mismatch {
                theirs: if h[..4] == HEADER_MAGIC {
                    theirs
                } else {
                    u64::MAX
                },
                ours: job.count as u64,
            });
        }
    }
    // Sent segments before step t-1, i.e. the sender's index of (t-1, 0).
    let mut send_base = 0u64;
    for t in 0..plan.steps() {
        let step = plan.step(t);
        if t >= 2 {
            send_base += plan::segments(&plan.step(t - 2).send) as u64;
        }
        let prev_segs = if t >= 1 {
            plan::segments(&plan.step(t - 1).send) as u64
        } else {
            0
        };
        for k in 0..plan::segments(&step.recv) {
            let need = send_base + (k as u64 + 1).min(prev_segs);
            if t >= 1 && !sync.wait(true, need, shared, shared.timeout * 2) {
                return Err(stalled(false, t, shared));
            }
            let seg = plan::segment(&step.recv, k);
            // SAFETY: the sender has finished every read of this segment before step t (waited
            // above) and will not read it again until we bump our counter.
            let dst = unsafe { job.buf.slice_mut(&seg) };
            match step.op {
                Op::Copy => sock.read_exact(as_bytes_mut(dst)),
                Op::Add => {
                    let tmp = &mut scratch[..seg.len()];
                    sock.read_exact(as_bytes_mut(tmp))
                        .map(|_| add_into(dst, tmp))
                }
            }
            .map_err(|e| io_failure(false, t, e, shared))?;
            sync.bump(false);
            shared.ticks.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

//! TCP ring all-reduce (sum of float32) between ring neighbours: reduce-scatter then all-gather,
//! several streams per neighbour, pipelined in segments, verified against the exact expected sum.
//!
//! Each rank holds integer-valued data (`((i*7 + pos*13) % 61)` for element `i` at ring position
//! `pos`), so every partial sum is exact in float32 for rings of up to 4096 ranks and any wrong
//! element is a real transport or reduction error.

mod conn;
mod plan;
mod worker;

pub use crate::measure::RankRow;
use crate::measure::sizes::human_bytes;
use crate::transport::auth::Secret;
pub use preflight_checks::collective::{algbw_gb_s, busbw_gb_s};
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};
use worker::{BufPtr, Failure, Job, Shared};

/// Total bytes one size may move in timed iterations before `iters` is cut (keeps 16 GiB runs bounded).
pub const ITER_BYTE_BUDGET: u64 = 1 << 30;
/// Most streams per neighbour.
pub const MAX_STREAMS: usize = 64;
/// Most ranks for which the check data sums exactly in float32.
pub const MAX_RANKS: usize = 4096;

/// How to run the all-reduce.
#[derive(Clone, Debug)]
pub struct RingConfig {
    /// Parallel TCP connections per neighbour (NCCL's socket transport uses several).
    pub streams: usize,
    /// Untimed iterations before the first size is timed. The sizes after it run on warm
    /// connections, so they are not warmed again (nccl-tests warms up once, not per size); at
    /// hundreds of ranks a warm-up per size was a third of the phase.
    pub warmup: u32,
    /// Timed iterations per size (fewer for huge sizes, see [`ITER_BYTE_BUDGET`]).
    pub iters: u32,
    /// Bound on connection setup and on every single wait for the network.
    pub timeout: Duration,
    /// Test hook: make this rank send a wrong value.
    pub corrupt: Option<Corrupt>,
}

/// Test hook: this rank perturbs one element of the chunk it sends in the first reduce-scatter step.
#[derive(Clone, Debug)]
pub struct Corrupt {
    /// The index into `sizes` to corrupt; `None`: all sizes.
    pub size_index: Option<usize>,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            streams: 4,
            warmup: 1,
            iters: 5,
            timeout: Duration::from_secs(30),
            corrupt: None,
        }
    }
}

/// The ring's listening socket; bind it early so its port can be announced before [`run`].
pub struct RingListener {
    inner: TcpListener,
}

impl RingListener {
    /// Binds `ip:0` (a random high port, as NCCL does).
    pub fn bind(ip: IpAddr) -> io::Result<RingListener> {
        Ok(RingListener {
            inner: TcpListener::bind(SocketAddr::new(ip, 0))?,
        })
    }

    pub fn port(&self) -> u16 {
        self.inner.local_addr().map(|a| a.port()).unwrap_or(0)
    }
}

/// This rank's place in the ring.
#[derive(Clone, Debug)]
pub struct RingPeers {
    pub my_rank: u32,
    pub nnodes: u32,
    /// Position in the ring, `0..n`.
    pub pos: usize,
    /// Ring size.
    pub n: usize,
    pub left_rank: u32,
    pub right_rank: u32,
    /// The right neighbour's ring listener.
    pub right: SocketAddr,
    /// Who may connect to this node's ring listener (the admitted nodes).
    pub admitted: crate::transport::gate::Gate,
}

#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error(
        "could not connect to the right ring neighbour rank {rank} at {addr} within {waited_s:.0} s: {reason}; check that preflight runs on rank {rank} and that TCP to {addr} is allowed (firewall: e.g. `iptables -I INPUT -p tcp -s <this node> -j ACCEPT` on rank {rank})"
    )]
    Connect {
        rank: u32,
        addr: SocketAddr,
        waited_s: f64,
        reason: String,
    },
    #[error(
        "the {side} ring neighbour rank {rank} at {addr} failed the handshake: {reason}; give every node the same --token / PREFLIGHT_TOKEN / --rdzv-id and the same preflight version"
    )]
    Auth {
        side: &'static str,
        rank: u32,
        addr: SocketAddr,
        reason: String,
    },
    #[error(
        "the left ring neighbour rank {rank} opened {got} of {want} streams within {waited_s:.0} s{}; check that rank {rank} is running and can reach this node's ring port (firewall)",
        if refused.is_empty() { String::new() } else { format!(" (refused: {refused})") }
    )]
    LeftMissing {
        rank: u32,
        got: usize,
        want: usize,
        waited_s: f64,
        refused: String,
    },
    #[error(
        "all-reduce of {} stopped in {phase} step {step} (stream {stream}): {what} rank {rank}: {reason}",
        human_bytes(*bytes)
    )]
    Step {
        bytes: u64,
        phase: &'static str,
        step: usize,
        stream: usize,
        what: &'static str,
        rank: u32,
        reason: String,
    },
    #[error(
        "the left ring neighbour rank {rank} runs a different size ({theirs}, we run {ours}): run every node with the same --sizes"
    )]
    SizeMismatch {
        rank: u32,
        theirs: String,
        ours: String,
    },
    #[error("bad ring configuration: {0}")]
    Config(String),
    #[error(
        "cannot allocate {} for the all-reduce buffer; use smaller --sizes",
        human_bytes(*bytes)
    )]
    Memory { bytes: u64 },
    #[error("ring all-reduce: {0}")]
    Internal(String),
}

/// Timed iterations for one size: `iters`, cut so a size moves at most [`ITER_BYTE_BUDGET`].
pub fn iters_for(bytes: u64, iters: u32) -> u32 {
    let budget = (ITER_BYTE_BUDGET / bytes.max(1)).clamp(1, u32::MAX as u64) as u32;
    iters.max(1).min(budget)
}

/// Runs the all-reduce over every size in `sizes` (bytes, multiples of 4) and returns one row each.
pub fn ring_allreduce(
    listener: RingListener,
    peers: &RingPeers,
    sizes: &[u64],
    cfg: &RingConfig,
    secret: &Secret,
) -> Result<Vec<RankRow>, RingError> {
    run_with_progress(listener, peers, sizes, cfg, secret, &mut |_| {}).map_err(|f| f.error)
}

/// What was measured before the ring failed, and why it failed.
#[derive(Debug)]
pub struct RingFailure {
    pub rows: Vec<RankRow>,
    pub error: RingError,
}

impl From<RingError> for RingFailure {
    fn from(error: RingError) -> Self {
        RingFailure {
            rows: Vec::new(),
            error,
        }
    }
}

/// [`run`], calling `on_row` as each size finishes; a failure keeps the rows measured before it.
pub fn run_with_progress(
    listener: RingListener,
    peers: &RingPeers,
    sizes: &[u64],
    cfg: &RingConfig,
    secret: &Secret,
    on_row: &mut dyn FnMut(&RankRow),
) -> Result<Vec<RankRow>, RingFailure> {
    check_config(peers, sizes)?;
    let streams = cfg.streams.clamp(1, MAX_STREAMS);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let mut buf = allocate(largest)?;
    if peers.n == 1 {
        let rows = run_alone(peers, sizes, cfg, &mut buf);
        rows.iter().for_each(&mut *on_row);
        return Ok(rows);
    }
    let links = conn::establish(listener.inner, peers, streams, cfg.timeout, secret)?;
    Ring {
        peers,
        cfg,
        streams,
    }
    .measure(links, sizes, &mut buf, on_row)
}

fn check_config(peers: &RingPeers, sizes: &[u64]) -> Result<(), RingError> {
    if peers.n == 0 || peers.pos >= peers.n {
        return Err(RingError::Config(format!(
            "position {} in a ring of {}",
            peers.pos, peers.n
        )));
    }
    if peers.n > MAX_RANKS {
        return Err(RingError::Config(format!(
            "{} ranks; the exact check supports at most {MAX_RANKS}",
            peers.n
        )));
    }
    if let Some(bad) = sizes.iter().find(|b| **b == 0 || **b % 4 != 0) {
        return Err(RingError::Config(format!(
            "size {bad} bytes is not a positive multiple of 4 (float32)"
        )));
    }
    Ok(())
}

fn allocate(bytes: u64) -> Result<Vec<f32>, RingError> {
    let count = usize::try_from(bytes / 4).map_err(|_| RingError::Memory { bytes })?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(count)
        .map_err(|_| RingError::Memory { bytes })?;
    Ok(buf)
}

/// A ring of one: nothing to exchange; the result is the rank's own buffer.
fn run_alone(
    peers: &RingPeers,
    sizes: &[u64],
    cfg: &RingConfig,
    buf: &mut Vec<f32>,
) -> Vec<RankRow> {
    sizes
        .iter()
        .enumerate()
        .map(|(index, &bytes)| {
            let count = (bytes / 4) as usize;
            let iters = iters_for(bytes, cfg.iters);
            let warmup = if index == 0 { cfg.warmup } else { 0 };
            let mut total = Duration::ZERO;
            for it in 0..warmup + iters {
                data::fill(buf, count, peers.pos);
                let t0 = Instant::now();
                std::hint::black_box(&mut buf[..]);
                if it >= warmup {
                    total += t0.elapsed();
                }
            }
            RankRow {
                bytes,
                time_us: total.as_secs_f64() * 1e6 / iters as f64,
                wrong: data::count_wrong(&buf[..count], 1),
            }
        })
        .collect()
}

struct Ring<'a> {
    peers: &'a RingPeers,
    cfg: &'a RingConfig,
    streams: usize,
}

/// The job and result channels of the running workers.
struct Workers {
    send_jobs: Vec<mpsc::Sender<Job>>,
    recv_jobs: Vec<mpsc::Sender<Job>>,
    done: mpsc::Receiver<worker::Answer>,
}

impl Ring<'_> {
    fn measure(
        &self,
        links: conn::Links,
        sizes: &[u64],
        buf: &mut Vec<f32>,
        on_row: &mut dyn FnMut(&RankRow),
    ) -> Result<Vec<RankRow>, RingFailure> {
        let closers: Vec<TcpStream> = links
            .send
            .iter()
            .chain(&links.recv)
            .filter_map(|s| s.try_clone().ok())
            .collect();
        let shared = Shared {
            abort: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            timeout: self.cfg.timeout,
        };
        let syncs: Vec<worker::Sync> = (0..self.streams).map(|_| Default::default()).collect();
        std::thread::scope(|s| {
            let workers = self.spawn(s, links, &syncs, &shared)?;
            let mut rows = Vec::with_capacity(sizes.len());
            let mut failed = None;
            for (i, &bytes) in sizes.iter().enumerate() {
                match self.one_size(i, bytes, buf, &workers, &syncs, &shared) {
                    Ok(row) => {
                        on_row(&row);
                        rows.push(row);
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if failed.is_some() {
                shared.abort.store(true, Ordering::Release);
                syncs.iter().for_each(|y| y.wake());
                closers.iter().for_each(|c| {
                    let _ = c.shutdown(Shutdown::Both);
                });
            }
            drop(workers);
            match failed {
                None => Ok(rows),
                Some(error) => Err(RingFailure { rows, error }),
            }
        })
    }

    fn spawn<'s, 'e>(
        &self,
        s: &'s std::thread::Scope<'s, 'e>,
        links: conn::Links,
        syncs: &'s [worker::Sync],
        shared: &'s Shared,
    ) -> Result<Workers, RingError> {
        let (done_tx, done) = mpsc::channel();
        let mut send_jobs = Vec::new();
        let mut recv_jobs = Vec::new();
        let socks = links.send.into_iter().map(|s| (true, s));
        let socks = socks.chain(links.recv.into_iter().map(|s| (false, s)));
        for (i, (is_send, sock)) in socks.enumerate() {
            let j = i % self.streams;
            let (tx, rx) = mpsc::channel::<Job>();
            let (done_tx, sync) = (done_tx.clone(), &syncs[j]);
            let body = move || {
                if is_send {
                    worker::sender(j, sock, rx, done_tx, sync, shared)
                } else {
                    worker::receiver(j, sock, rx, done_tx, sync, shared)
                }
            };
            std::thread::Builder::new()
                .name(format!("ring-{}{j}", if is_send { "tx" } else { "rx" }))
                .spawn_scoped(s, body)
                .map_err(|e| RingError::Internal(format!("cannot start a worker thread: {e}")))?;
            if is_send {
                send_jobs.push(tx)
            } else {
                recv_jobs.push(tx)
            }
        }
        Ok(Workers {
            send_jobs,
            recv_jobs,
            done,
        })
    }

    fn one_size(
        &self,
        index: usize,
        bytes: u64,
        buf: &mut Vec<f32>,
        workers: &Workers,
        syncs: &[worker::Sync],
        shared: &Shared,
    ) -> Result<RankRow, RingError> {
        let (n, pos) = (self.peers.n, self.peers.pos);
        let count = (bytes / 4) as usize;
        let used = plan::streams_used(count, n, self.streams);
        let corrupt = self
            .cfg
            .corrupt
            .as_ref()
            .is_some_and(|c| c.size_index.is_none_or(|i| i == index));
        let iters = iters_for(bytes, self.cfg.iters);
        let warmup = if index == 0 { self.cfg.warmup } else { 0 };
        let mut total = Duration::ZERO;
        for it in 0..warmup + iters {
            data::fill(buf, count, pos);
            if corrupt {
                data::perturb_first_send(buf, count, n, pos, used);
            }
            syncs.iter().for_each(|y| y.reset());
            let job = Job {
                buf: BufPtr::new(&mut buf[..count]),
                count,
                n,
                pos,
                used,
                announce: it == 0,
            };
            let t0 = Instant::now();
            self.iterate(job, used, workers, shared)
                .map_err(|f| self.explain(f, bytes))?;
            if it >= warmup {
                total += t0.elapsed();
            }
        }
        Ok(RankRow {
            bytes,
            time_us: total.as_secs_f64() * 1e6 / iters as f64,
            wrong: data::count_wrong(&buf[..count], n),
        })
    }

    /// Posts one iteration to the used streams' workers and waits for all of them.
    fn iterate(
        &self,
        job: Job,
        used: usize,
        workers: &Workers,
        shared: &Shared,
    ) -> Result<(), (usize, bool, Failure)> {
        let posted = workers.send_jobs[..used]
            .iter()
            .chain(&workers.recv_jobs[..used])
            .all(|tx| tx.send(job).is_ok());
        if !posted {
            return Err((0, true, Failure::Aborted));
        }
        let mut first_err: Option<(usize, bool, Failure)> = None;
        let mut answers = 0;
        let mut seen_ticks = shared.ticks.load(Ordering::Relaxed);
        let mut quiet_rounds = 0;
        while answers < 2 * used {
            match workers.done.recv_timeout(self.cfg.timeout) {
                Ok((j, is_send, r)) => {
                    answers += 1;
                    if let Err(f) = r {
                        // The first real failure is the cause: stop now rather than wait for
                        // the other streams (one may be blocked on a hung neighbour), so the
                        // caller shuts every socket at once and the neighbours learn of it
                        // in milliseconds, not after their own stall timeout.
                        if !matches!(f, Failure::Aborted) {
                            shared.abort.store(true, Ordering::Release);
                            return Err((j, is_send, f));
                        }
                        first_err.get_or_insert((j, is_send, f));
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let now = shared.ticks.load(Ordering::Relaxed);
                    quiet_rounds = if now == seen_ticks {
                        quiet_rounds + 1
                    } else {
                        0
                    };
                    // Workers bound their own waits (at most twice the timeout) and report
                    // precisely; this is a last resort if one of them never answers.
                    if quiet_rounds >= 3 {
                        shared.abort.store(true, Ordering::Release);
                        return Err(first_err.unwrap_or((
                            0,
                            false,
                            Failure::Stalled {
                                send: false,
                                step: 0,
                            },
                        )));
                    }
                    seen_ticks = now;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err((0, true, Failure::Aborted));
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Turns a worker failure into an error that names the step, the neighbour and the cause.
    fn explain(&self, (stream, is_send, f): (usize, bool, Failure), bytes: u64) -> RingError {
        let n = self.peers.n;
        let phase_of = |t: usize| {
            if t < n - 1 {
                ("reduce-scatter", t)
            } else {
                ("all-gather", t - (n - 1))
            }
        };
        let timeout_s = self.cfg.timeout.as_secs_f64();
        let (send, t, reason) = match f {
            Failure::Aborted => (
                is_send,
                0,
                "stopped after another stream failed".to_string(),
            ),
            Failure::Stalled { send, step } => (
                send,
                step,
                format!(
                    "no progress for {timeout_s:.0} s (the neighbour hung or the network dropped)"
                ),
            ),
            Failure::Io { send, step, err } => (send, step, describe_io(&err, timeout_s)),
            Failure::Mismatch { theirs, ours, .. } => {
                return RingError::SizeMismatch {
                    rank: self.peers.left_rank,
                    theirs: if theirs == u64::MAX {
                        "not a ring size header".into()
                    } else {
                        human_bytes(theirs * 4)
                    },
                    ours: human_bytes(ours * 4),
                };
            }
        };
        let (phase, step) = phase_of(t);
        let (what, rank) = if send {
            ("sending to", self.peers.right_rank)
        } else {
            ("receiving from", self.peers.left_rank)
        };
        RingError::Step {
            bytes,
            phase,
            step,
            stream,
            what,
            rank,
            reason,
        }
    }
}

fn describe_io(e: &io::Error, timeout_s: f64) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("no data for {timeout_s:.0} s (the neighbour hung or the network dropped)")
        }
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionAborted => {
            format!("the connection closed ({e}); its preflight probably exited or was killed")
        }
        _ => e.to_string(),
    }
}

/// The check data and its verification.
mod data {
    use super::plan;

    /// Value period of the check data in elements.
    const PERIOD: usize = 61;
    /// Block length that repeats exactly (a multiple of the period, a few KiB).
    const BLOCK: usize = PERIOD * 16;

    fn value(i: usize, pos: usize) -> f32 {
        ((i * 7 + pos * 13) % PERIOD) as f32
    }

    /// Sets `buf` to `count` elements of ring position `pos`'s data.
    pub fn fill(buf: &mut Vec<f32>, count: usize, pos: usize) {
        buf.clear();
        let block: Vec<f32> = (0..BLOCK.min(count)).map(|i| value(i, pos)).collect();
        while buf.len() + block.len() <= count {
            buf.extend_from_slice(&block);
        }
        let rest = count - buf.len();
        buf.extend_from_slice(&block[..rest]);
    }

    /// The exact all-reduce result for element `i` of a ring of `n`.
    fn expected_block(n: usize) -> Vec<f32> {
        (0..BLOCK)
            .map(|i| (0..n).map(|p| value(i, p) as u64).sum::<u64>() as f32)
            .collect()
    }

    /// Elements of `buf` that differ from the exact sum over `n` ranks.
    pub fn count_wrong(buf: &[f32], n: usize) -> u64 {
        let want = expected_block(n);
        buf.chunks(BLOCK)
            .map(|c| {
                c.iter()
                    .zip(&want)
                    .map(|(a, b)| u64::from(a.to_bits() != b.to_bits()))
                    .sum::<u64>()
            })
            .sum()
    }

    /// Test hook: change the first element of the first non-empty chunk this rank sends in
    /// reduce-scatter step 0, so the wrong value travels the whole ring.
    pub fn perturb_first_send(buf: &mut [f32], count: usize, n: usize, pos: usize, used: usize) {
        let first = (0..used)
            .map(|j| plan::SegmentPlan::new(count, n, pos, used, j).step(0).send)
            .find(|r| !r.is_empty());
        if let Some(r) = first {
            buf[r.start] += 1.0;
        }
    }
}

#[cfg(test)]
mod tests;

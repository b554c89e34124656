//! The node's part of the idle test: open a few authenticated connections to its ring neighbour(s) on the chosen network, see each answer, hold them silent across the later phases, then use them again and say what each gave.

use crate::measure::idle;
use crate::runtime::dial;
use crate::runtime::phases::state::NodeState;
use crate::transport::auth::Secret;
use crate::transport::wire::{Msg, Target};
use preflight_checks::model::{IdleLink, IdleOutcome, IdleTest};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Targets (neighbour listeners) one node holds connections to, at most.
pub const MAX_TARGETS: usize = 4;
/// Connections held per target, at most.
pub const MAX_STREAMS: u32 = 4;
/// How long opening a connection and its first echo may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(3);

/// The connections one target holds, silent since `quiet_from`.
struct HeldTarget {
    target: Target,
    streams: Vec<(TcpStream, Instant)>,
    /// Why a connection could not be opened (the last such error).
    error: Option<String>,
}

/// What a node holds between [`Holding::open`] and [`Holding::check`].
#[derive(Default)]
pub struct Holding {
    held: Vec<HeldTarget>,
    idle: Duration,
}

impl Holding {
    /// Opens `streams` connections to each target (at most [`MAX_TARGETS`] x [`MAX_STREAMS`]),
    /// each authenticated and answered once; replaces what was held before.
    pub fn open(
        me: u32,
        nnodes: u32,
        targets: &[Target],
        streams: u32,
        idle: Duration,
        secret: &Secret,
    ) -> Holding {
        let idle = idle.min(idle::MAX_IDLE);
        let streams = streams.clamp(1, MAX_STREAMS);
        let targets = &targets[..targets.len().min(MAX_TARGETS)];
        let until = Instant::now() + OPEN_TIMEOUT * 4;
        let held = dial::paced(targets, MAX_TARGETS, |t| {
            let mut h = HeldTarget {
                target: t.clone(),
                streams: Vec::new(),
                error: None,
            };
            for _ in 0..streams {
                let (opened, _) =
                    dial::open(me, nnodes, t.rank, &t.listener, OPEN_TIMEOUT, secret, until);
                let started = opened.map_err(|f| f.error).and_then(|mut s| {
                    idle::start(&mut s, idle, OPEN_TIMEOUT)
                        .map(|at| (s, at))
                        .map_err(|e| format!("the first echo failed: {e}"))
                });
                match started {
                    Ok(held) => h.streams.push(held),
                    Err(e) => h.error = Some(e),
                }
            }
            h
        });
        Holding { held, idle }
    }

    /// Connections held now.
    pub fn count(&self) -> u32 {
        self.held.iter().map(|h| h.streams.len() as u32).sum()
    }

    /// Uses every held connection again, all at once, each given `answer` to echo; what each
    /// target's connections gave. The connections are closed after.
    pub fn check(self, me: u32, answer: Duration) -> IdleTest {
        let answer = answer.clamp(Duration::from_millis(100), Duration::from_secs(60));
        let links = std::thread::scope(|s| {
            let running: Vec<_> = self
                .held
                .into_iter()
                .map(|h| s.spawn(move || check_target(me, h, answer)))
                .collect();
            running.into_iter().filter_map(|r| r.join().ok()).collect()
        });
        IdleTest {
            idle_s: self.idle.as_secs_f64(),
            answer_wait_s: answer.as_secs_f64(),
            links,
        }
    }
}

/// Reuses one target's connections in parallel; the link says how many answered and, when
/// one did not, how the first such failed.
fn check_target(me: u32, h: HeldTarget, answer: Duration) -> IdleLink {
    let mut link = IdleLink {
        from: me,
        to: h.target.rank,
        interface: h.target.listener.interface.clone(),
        address: h.target.listener.address.clone(),
        port: h.target.listener.port,
        opened: h.streams.len() as u32,
        outcome: if h.streams.is_empty() {
            IdleOutcome::NotOpened
        } else {
            IdleOutcome::Ok
        },
        error: h.error.clone(),
        ..Default::default()
    };
    let results: Vec<(f64, idle::Reused)> = std::thread::scope(|s| {
        let running: Vec<_> = h
            .streams
            .into_iter()
            .map(|(mut stream, quiet_from)| {
                s.spawn(move || {
                    let silent = quiet_from.elapsed().as_secs_f64();
                    (silent, idle::reuse(&mut stream, answer))
                })
            })
            .collect();
        running.into_iter().filter_map(|r| r.join().ok()).collect()
    });
    for (silent, r) in results {
        link.silent_s = link.silent_s.max(silent);
        match r {
            Ok(()) => link.answered += 1,
            Err((outcome, e)) if link.outcome == IdleOutcome::Ok => {
                link.outcome = outcome;
                link.error = Some(e.to_string());
            }
            Err(_) => {}
        }
    }
    link
}
/// `IdleOpen`: holds `streams` connections to each target (itself left out) silent for the idle
/// time (capped); returns the answer and the idle time, which the node adds to its wait for the
/// next order (the check comes once the silence is over).
pub fn answer_open(
    node: &NodeState,
    holding: &mut Holding,
    targets: Vec<Target>,
    streams: u32,
    idle_ms: u64,
) -> (Msg, Duration) {
    let idle = Duration::from_millis(idle_ms).min(idle::MAX_IDLE);
    let targets: Vec<Target> = targets
        .into_iter()
        .filter(|t| t.rank != node.rank)
        .collect();
    *holding = Holding::open(
        node.rank,
        node.nnodes,
        &targets,
        streams,
        idle,
        &node.secret,
    );
    if !targets.is_empty() {
        node.events.log(format!(
            "idle test: holding {} connections to rank(s) {} silent for {} s",
            holding.count(),
            targets
                .iter()
                .map(|t| t.rank.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            idle.as_secs()
        ));
    }
    let reply = Msg::IdleHeld {
        held: holding.count(),
    };
    (reply, idle)
}

/// `IdleCheck`: uses every held connection again and says what each gave.
pub fn answer_check(node: &NodeState, holding: &mut Holding, answer_ms: u64) -> Msg {
    Msg::IdleDone {
        test: std::mem::take(holding).check(node.rank, Duration::from_millis(answer_ms)),
    }
}

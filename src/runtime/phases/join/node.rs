//! Joining the coordinator on the master port: resolve the master address (again and again
//! while it does not resolve, timing how long it took to appear), connect to each address it
//! resolved to in turn and authenticate, retrying until the deadline; tells timeout, refused and
//! unreachable apart. When every address of the name fails, the host's other names this node
//! knows are tried: an address of rank 0 that works there is joined through and reported with
//! the ones that failed (the name leads elsewhere).

use crate::measure::tcp;
use crate::placement::{Placement, resolve_host};
use crate::runtime::job::Timing;
use crate::transport::auth::{self, AuthError, Secret};
use crate::transport::events::Events;
use preflight_checks::cluster::{Dialed, RefusalKind};
use preflight_checks::model::{AddressTry, LinkOutcome};
use preflight_checks::net::host_port;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A join that worked: the control stream, the address it went through, how the master was dialed.
pub struct Joined {
    pub stream: TcpStream,
    pub via: SocketAddr,
    pub dialed: Dialed,
    /// Seconds the name took to resolve and what the resolver said until then, when it did not
    /// resolve at the first try.
    pub late: Option<(f64, String)>,
    /// The name's addresses that failed while another address of rank 0 worked.
    pub failed: Vec<AddressTry>,
    /// The other name that led to the address joined through.
    pub worked_name: Option<String>,
    /// The name's own addresses dialled before the one joined through, which failed, in the
    /// resolver's order (a stale first address the job's store client would wait on).
    pub passed_over: Vec<AddressTry>,
}

/// A join that did not: the outcome of the last attempt, in words, and how the master was dialed.
pub struct JoinFailed {
    pub outcome: LinkOutcome,
    pub error: String,
    /// Rank 0 answered and turned this node away during the handshake: why.
    pub refusal: Option<(Option<RefusalKind>, String)>,
    pub dialed: Dialed,
    /// The name never resolved: for how long it was retried.
    pub never_resolved_s: Option<f64>,
}

/// The order addresses are tried in: the resolver's (getaddrinfo's, after RFC 6724 sorting and
/// `/etc/gai.conf`), each once, as torchrun's store client dials MASTER_ADDR (c10d's
/// `SocketConnectOp` walks getaddrinfo's list in order).
fn dial_order(addrs: &[IpAddr]) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for a in addrs {
        if !out.contains(a) {
            out.push(*a);
        }
    }
    out
}

/// Connects to the coordinator, retrying until `deadline` and trying every address the master
/// resolves to, then the addresses of `other_names` (the host's other names); tells timeout,
/// refused and unreachable apart.
pub fn join(
    p: &Placement,
    secret: &Secret,
    deadline: Instant,
    timing: Timing,
    events: &Events,
    other_names: &[String],
) -> Result<Joined, Box<JoinFailed>> {
    let mut d = Dialing {
        p,
        secret,
        deadline,
        timing,
        started: Instant::now(),
        last: (LinkOutcome::Timeout, "no attempt finished".to_string()),
        dialed: Dialed::default(),
        attempts: 0,
        unresolved: None,
        late: None,
    };
    while Instant::now() < deadline {
        let order = match d.resolve(events) {
            Resolved::Again => continue,
            Resolved::Nothing => break,
            Resolved::Order(order) => order,
        };
        let (all_timed_out, failed) = match d.dial_each(&order)? {
            Tried::Joined(j) => return Ok(*j),
            Tried::Failed {
                all_timed_out,
                failed,
            } => (all_timed_out, failed),
        };
        // Every address of the name failed to connect: does another name of the host lead to
        // rank 0? Then the name leads elsewhere (unless rank 0 just came up: dial the name again).
        if failed.len() == order.len() && !other_names.is_empty() {
            if let Some(j) = d.through_other_names(other_names, &order, failed, events)? {
                return Ok(j);
            }
        }
        // Rank 0 may simply not be up yet: wait a little and try again.
        if !all_timed_out {
            std::thread::sleep(
                Duration::from_millis(200).min(deadline.saturating_duration_since(Instant::now())),
            );
        }
    }
    events.log(format!(
        "could not join {}:{} after {} attempts: {}",
        p.master_addr, p.master_port, d.attempts, d.last.1
    ));
    let never_resolved_s = d.unresolved.map(|_| d.started.elapsed().as_secs_f64());
    Err(Box::new(JoinFailed {
        outcome: d.last.0,
        error: d.last.1,
        refusal: None,
        dialed: d.dialed,
        never_resolved_s,
    }))
}

/// One join's attempts so far: what to dial and until when, what was tried and the last error.
struct Dialing<'a> {
    p: &'a Placement,
    secret: &'a Secret,
    deadline: Instant,
    timing: Timing,
    started: Instant,
    last: (LinkOutcome, String),
    dialed: Dialed,
    attempts: u32,
    /// The resolver's error while the name does not resolve.
    unresolved: Option<String>,
    late: Option<(f64, String)>,
}

/// What resolving the master's name gave.
enum Resolved {
    /// Not yet: try again (after a pause).
    Again,
    /// It resolves to no address: give up.
    Nothing,
    /// The addresses, in the order they are dialed.
    Order(Vec<IpAddr>),
}

/// What dialing every address of the name came to.
enum Tried {
    Joined(Box<Joined>),
    Failed {
        all_timed_out: bool,
        /// The addresses that did not connect.
        failed: Vec<AddressTry>,
    },
}

impl Dialing<'_> {
    /// How long one connect may take now.
    fn attempt_timeout(&self) -> Duration {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.timing
            .connect_timeout
            .max(Duration::from_secs(2))
            .min(left)
    }

    /// Resolves the master's name again (timing how long it took to appear).
    fn resolve(&mut self, events: &Events) -> Resolved {
        let p = self.p;
        let resolved = resolve_host(&p.master_addr);
        if let Some(e) = &resolved.error {
            if self.unresolved.is_none() {
                events.log(format!(
                    "{} does not resolve yet ({e}); trying again until the join timeout",
                    p.master_addr
                ));
            }
            self.unresolved = Some(e.clone());
            self.last = (
                LinkOutcome::Unreachable,
                format!("cannot resolve {}: {e}", p.master_addr),
            );
            self.dialed.resolve_error = Some(e.clone());
            std::thread::sleep(
                Duration::from_millis(500)
                    .min(self.deadline.saturating_duration_since(Instant::now())),
            );
            return Resolved::Again;
        }
        if let Some(e) = self.unresolved.take() {
            let after = self.started.elapsed().as_secs_f64();
            events.log(format!(
                "{} resolved after {after:.1} s (until then: {e})",
                p.master_addr
            ));
            self.late = Some((after, e));
        }
        self.dialed.resolve_error = None;
        let order = dial_order(&resolved.addrs);
        self.dialed.resolved = order.iter().map(IpAddr::to_string).collect();
        if order.is_empty() {
            self.last = (
                LinkOutcome::Unreachable,
                format!("{} resolves to no address", p.master_addr),
            );
            return Resolved::Nothing;
        }
        Resolved::Order(order)
    }

    /// Connects to each address in turn and authenticates; the first that works is the join.
    fn dial_each(&mut self, order: &[IpAddr]) -> Result<Tried, Box<JoinFailed>> {
        let p = self.p;
        let mut all_timed_out = true;
        let mut failed: Vec<AddressTry> = Vec::new();
        for ip in order.iter().copied() {
            let addr = SocketAddr::new(ip, p.master_port);
            let attempt_timeout = self.attempt_timeout();
            if attempt_timeout.is_zero() {
                break;
            }
            self.attempts += 1;
            let shown = host_port(&ip.to_string(), p.master_port);
            if !self.dialed.tried.contains(&shown) {
                self.dialed.tried.push(shown);
            }
            match tcp::connect_control(addr, attempt_timeout) {
                Ok(s) => match authenticate(s, p, self.secret) {
                    Ok(stream) => {
                        let j = self.joined(stream, addr, std::mem::take(&mut failed), None);
                        return Ok(Tried::Joined(Box::new(j)));
                    }
                    Err(Attempt::Fatal(f)) => return Err(self.fatal(*f)),
                    Err(Attempt::Again(e)) => {
                        all_timed_out = false;
                        self.last = (LinkOutcome::Error, e);
                    }
                },
                Err((outcome, msg)) => {
                    all_timed_out &= outcome == LinkOutcome::Timeout;
                    failed.push(AddressTry {
                        address: ip.to_string(),
                        result: outcome.as_str().to_string(),
                        error: msg.clone(),
                    });
                    self.last = (
                        outcome,
                        format!("{}: {msg}", host_port(&ip.to_string(), p.master_port)),
                    );
                }
            }
        }
        Ok(Tried::Failed {
            all_timed_out,
            failed,
        })
    }

    /// Every address of the name failed: joins rank 0 through another name of the host, unless
    /// the name's own addresses answer by now (rank 0 just came up).
    fn through_other_names(
        &mut self,
        other_names: &[String],
        order: &[IpAddr],
        failed: Vec<AddressTry>,
        events: &Events,
    ) -> Result<Option<Joined>, Box<JoinFailed>> {
        let p = self.p;
        let Some((stream, via, name)) =
            join_elsewhere(p, self.deadline, self.timing, other_names, order)
        else {
            return Ok(None);
        };
        let again = order.iter().any(|ip| {
            let t = self.attempt_timeout();
            !t.is_zero() && tcp::connect_control(SocketAddr::new(*ip, p.master_port), t).is_ok()
        });
        if again {
            return Ok(None);
        }
        match authenticate(stream, p, self.secret) {
            Ok(stream) => {
                events.log(format!(
                    "{} led to {} that failed; joined rank 0 at {via} ({name})",
                    p.master_addr,
                    order
                        .iter()
                        .map(IpAddr::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                Ok(Some(self.joined(stream, via, failed, Some(name))))
            }
            Err(Attempt::Fatal(f)) => Err(self.fatal(*f)),
            Err(Attempt::Again(e)) => {
                self.last = (LinkOutcome::Error, e);
                Ok(None)
            }
        }
    }

    fn joined(
        &mut self,
        stream: TcpStream,
        via: SocketAddr,
        failed: Vec<AddressTry>,
        worked_name: Option<String>,
    ) -> Joined {
        Joined {
            stream,
            via,
            dialed: std::mem::take(&mut self.dialed),
            late: self.late.take(),
            // The first name's own failures are what a store client passes over; through
            // another name, they are the addresses of a name that leads elsewhere.
            passed_over: if worked_name.is_none() {
                failed.clone()
            } else {
                Vec::new()
            },
            failed: if worked_name.is_none() {
                Vec::new()
            } else {
                failed
            },
            worked_name,
        }
    }

    fn fatal(&mut self, f: JoinFailed) -> Box<JoinFailed> {
        Box::new(JoinFailed {
            dialed: std::mem::take(&mut self.dialed),
            ..f
        })
    }
}

/// Why an authentication did not work: try again, or give up with this failure.
enum Attempt {
    Again(String),
    Fatal(Box<JoinFailed>),
}

/// The handshake on a connected stream; an answer that is not preflight, another secret or
/// version, or a refusal ends the join.
fn authenticate(mut s: TcpStream, p: &Placement, secret: &Secret) -> Result<TcpStream, Attempt> {
    match auth::connect(&mut s, secret, p.rank, p.nnodes, Some(0)) {
        Ok(_) => Ok(s),
        Err(
            e @ (AuthError::NotPreflight(_)
            | AuthError::BadProof
            | AuthError::Version { .. }
            | AuthError::Rejected(..)),
        ) => {
            let refusal = match &e {
                AuthError::Rejected(reason, kind) => Some((*kind, reason.clone())),
                AuthError::Version { .. } => Some((Some(RefusalKind::Version), e.to_string())),
                _ => None,
            };
            let what = match e {
                AuthError::NotPreflight(_) => format!(
                    "{}:{} answered but is not preflight ({e}); something else holds the master port there, e.g. a leftover torchrun",
                    p.master_addr, p.master_port
                ),
                _ => e.to_string(),
            };
            Err(Attempt::Fatal(Box::new(JoinFailed {
                outcome: LinkOutcome::Error,
                error: what,
                refusal,
                dialed: Dialed::default(),
                never_resolved_s: None,
            })))
        }
        Err(e) => Err(Attempt::Again(e.to_string())),
    }
}

/// The first address of the host's other names (not among `skip`) that accepts a connection
/// on the master port, with the name that led to it.
fn join_elsewhere(
    p: &Placement,
    deadline: Instant,
    timing: Timing,
    other_names: &[String],
    skip: &[IpAddr],
) -> Option<(TcpStream, SocketAddr, String)> {
    let mut seen: Vec<IpAddr> = skip.to_vec();
    for name in other_names {
        if Instant::now() >= deadline {
            return None;
        }
        for ip in dial_order(&resolve_host(name).addrs) {
            if seen.contains(&ip) {
                continue;
            }
            seen.push(ip);
            let left = deadline.saturating_duration_since(Instant::now());
            let t = timing.connect_timeout.max(Duration::from_secs(2)).min(left);
            if t.is_zero() {
                return None;
            }
            let addr = SocketAddr::new(ip, p.master_port);
            if let Ok(s) = tcp::connect_control(addr, t) {
                return Some((s, addr, name.clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resolved_address_is_tried_in_the_resolvers_order_once_each() {
        let ips: Vec<IpAddr> = ["fd00::1", "10.0.0.2", "10.0.0.1", "10.0.0.2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let order: Vec<String> = dial_order(&ips).iter().map(|a| a.to_string()).collect();
        assert_eq!(order, ["fd00::1", "10.0.0.2", "10.0.0.1"]);
    }
}

//! Joining the coordinator on the master port: resolve the master address, connect to each
//! address it resolved to in turn and authenticate, retrying until the deadline; tells timeout,
//! refused and unreachable apart, and keeps what was resolved and tried for the report.

use crate::measure::tcp;
use crate::placement::{Placement, resolve_host};
use crate::runtime::Timing;
use crate::transport::auth::{self, AuthError, Secret};
use crate::transport::events::Events;
use preflight_checks::cluster::{Dialed, RefusalKind};
use preflight_checks::model::LinkOutcome;
use preflight_checks::net::host_port;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A join that worked: the control stream, the address it went through, how the master was dialed.
pub(super) struct Joined {
    pub stream: TcpStream,
    pub via: SocketAddr,
    pub dialed: Dialed,
}

/// A join that did not: the outcome of the last attempt, in words, and how the master was dialed.
pub(super) struct JoinFailed {
    pub outcome: LinkOutcome,
    pub error: String,
    /// Rank 0 answered and turned this node away during the handshake: why.
    pub refusal: Option<(Option<RefusalKind>, String)>,
    pub dialed: Dialed,
}

/// The order addresses are tried in: IPv4 first (as before), each family in the resolver's order.
fn dial_order(addrs: &[IpAddr]) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for a in addrs
        .iter()
        .filter(|a| a.is_ipv4())
        .chain(addrs.iter().filter(|a| a.is_ipv6()))
    {
        if !out.contains(a) {
            out.push(*a);
        }
    }
    out
}

/// Connects to the coordinator, retrying until `deadline` and trying every address the master
/// resolves to; tells timeout, refused and unreachable apart.
pub(super) fn join(
    p: &Placement,
    secret: &Secret,
    deadline: Instant,
    timing: Timing,
    events: &Events,
) -> Result<Joined, Box<JoinFailed>> {
    let mut last = (LinkOutcome::Timeout, "no attempt finished".to_string());
    let mut dialed = Dialed::default();
    let mut attempts = 0u32;
    while Instant::now() < deadline {
        let resolved = resolve_host(&p.master_addr);
        if let Some(e) = &resolved.error {
            last = (
                LinkOutcome::Unreachable,
                format!("cannot resolve {}: {e}", p.master_addr),
            );
            dialed.resolve_error = Some(e.clone());
            std::thread::sleep(
                Duration::from_millis(500).min(deadline.saturating_duration_since(Instant::now())),
            );
            continue;
        }
        dialed.resolve_error = None;
        let order = dial_order(&resolved.addrs);
        dialed.resolved = order.iter().map(IpAddr::to_string).collect();
        if order.is_empty() {
            last = (
                LinkOutcome::Unreachable,
                format!("{} resolves to no address", p.master_addr),
            );
            break;
        }
        let mut all_timed_out = true;
        for ip in order {
            let addr = SocketAddr::new(ip, p.master_port);
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt_timeout = timing.connect_timeout.max(Duration::from_secs(2)).min(left);
            if attempt_timeout.is_zero() {
                break;
            }
            attempts += 1;
            let shown = host_port(&ip.to_string(), p.master_port);
            if !dialed.tried.contains(&shown) {
                dialed.tried.push(shown);
            }
            match tcp::connect_control(addr, attempt_timeout) {
                Ok(mut s) => match auth::connect(&mut s, secret, p.rank, p.nnodes, Some(0)) {
                    Ok(_) => {
                        return Ok(Joined {
                            stream: s,
                            via: addr,
                            dialed,
                        });
                    }
                    Err(
                        e @ (AuthError::NotPreflight(_)
                        | AuthError::BadProof
                        | AuthError::Version { .. }
                        | AuthError::Rejected(..)),
                    ) => {
                        let refusal = match &e {
                            AuthError::Rejected(reason, kind) => Some((*kind, reason.clone())),
                            AuthError::Version { .. } => {
                                Some((Some(RefusalKind::Version), e.to_string()))
                            }
                            _ => None,
                        };
                        let what = match e {
                            AuthError::NotPreflight(_) => format!(
                                "{}:{} answered but is not preflight ({e}); something else holds the master port there, e.g. a leftover torchrun",
                                p.master_addr, p.master_port
                            ),
                            _ => e.to_string(),
                        };
                        return Err(Box::new(JoinFailed {
                            outcome: LinkOutcome::Error,
                            error: what,
                            refusal,
                            dialed,
                        }));
                    }
                    Err(e) => {
                        all_timed_out = false;
                        last = (LinkOutcome::Error, e.to_string());
                    }
                },
                Err((outcome, msg)) => {
                    all_timed_out &= outcome == LinkOutcome::Timeout;
                    last = (
                        outcome,
                        format!("{}: {msg}", host_port(&ip.to_string(), p.master_port)),
                    );
                }
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
        "could not join {}:{} after {attempts} attempts: {}",
        p.master_addr, p.master_port, last.1
    ));
    Err(Box::new(JoinFailed {
        outcome: last.0,
        error: last.1,
        refusal: None,
        dialed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resolved_address_is_tried_ipv4_first_once_each() {
        let ips: Vec<IpAddr> = ["fd00::1", "10.0.0.2", "10.0.0.1", "10.0.0.2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let order: Vec<String> = dial_order(&ips).iter().map(|a| a.to_string()).collect();
        assert_eq!(order, ["10.0.0.2", "10.0.0.1", "fd00::1"]);
    }
}

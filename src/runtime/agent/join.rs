//! Joining the coordinator on the master port: connect and authenticate, retrying until the deadline, telling timeout, refused and unreachable apart.

use crate::measure::tcp;
use crate::placement::Placement;
use crate::runtime::Timing;
use crate::transport::auth::{self, AuthError, Secret};
use crate::transport::events::Events;
use preflight_checks::model::LinkOutcome;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Connects to the coordinator, retrying until `deadline`; tells timeout, refused and unreachable apart.
pub(super) fn join(
    p: &Placement,
    secret: &Secret,
    deadline: Instant,
    timing: Timing,
    events: &Events,
) -> Result<TcpStream, (LinkOutcome, String)> {
    let mut last = (LinkOutcome::Timeout, "no attempt finished".to_string());
    let mut attempts = 0u32;
    while Instant::now() < deadline {
        attempts += 1;
        let addrs: Vec<SocketAddr> = match (p.master_addr.as_str(), p.master_port).to_socket_addrs()
        {
            Ok(a) => a.collect(),
            Err(e) => {
                last = (
                    LinkOutcome::Unreachable,
                    format!("cannot resolve {}: {e}", p.master_addr),
                );
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
        };
        let Some(addr) = addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
        else {
            last = (
                LinkOutcome::Unreachable,
                format!("{} resolves to no address", p.master_addr),
            );
            break;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt_timeout = timing.connect_timeout.max(Duration::from_secs(2)).min(left);
        if attempt_timeout.is_zero() {
            break;
        }
        match tcp::connect(addr, attempt_timeout) {
            Ok(mut s) => match auth::connect(&mut s, secret, p.rank, p.nnodes, Some(0)) {
                Ok(_) => return Ok(s),
                Err(
                    e @ (AuthError::NotPreflight(_)
                    | AuthError::BadProof
                    | AuthError::Version { .. }
                    | AuthError::Rejected(_)),
                ) => {
                    let what = match e {
                        AuthError::NotPreflight(_) => format!(
                            "{}:{} answered but is not preflight ({e}); something else holds the master port there, e.g. a leftover torchrun",
                            p.master_addr, p.master_port
                        ),
                        _ => e.to_string(),
                    };
                    return Err((LinkOutcome::Error, what));
                }
                Err(e) => last = (LinkOutcome::Error, e.to_string()),
            },
            Err((outcome, msg)) => {
                last = (outcome, msg);
                // Rank 0 may simply not be up yet: wait a little and try again.
                if outcome != LinkOutcome::Timeout {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
    events.log(format!(
        "could not join {}:{} after {attempts} attempts: {}",
        p.master_addr, p.master_port, last.1
    ));
    Err(last)
}

//! Name resolution with a bound: a host name to its addresses, giving up after a few seconds.

use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

/// Longest wait for a name to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// A host name's resolution.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub host: String,
    pub addrs: Vec<IpAddr>,
    pub error: Option<String>,
}

/// Resolves the endpoint's host, giving up after [`RESOLVE_TIMEOUT`].
pub fn resolve_host(host: &str) -> Resolved {
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Resolved {
            host: host.to_string(),
            addrs: vec![ip],
            error: None,
        };
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let name = bare.clone();
    let spawned = std::thread::Builder::new()
        .name("resolve".into())
        .spawn(move || {
            let r = (name.as_str(), 0u16)
                .to_socket_addrs()
                .map(|it| it.map(|a| a.ip()).collect::<Vec<_>>());
            let _ = tx.send(r);
        });
    let outcome = match spawned {
        Err(e) => Err(format!("cannot start the resolver: {e}")),
        Ok(_) => match rx.recv_timeout(RESOLVE_TIMEOUT) {
            Ok(Ok(mut addrs)) => {
                addrs.dedup();
                if addrs.is_empty() {
                    Err("it resolves to no address".to_string())
                } else {
                    Ok(addrs)
                }
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {} s", RESOLVE_TIMEOUT.as_secs())),
        },
    };
    match outcome {
        Ok(addrs) => Resolved {
            host: host.to_string(),
            addrs,
            error: None,
        },
        Err(e) => Resolved {
            host: host.to_string(),
            addrs: Vec::new(),
            error: Some(e),
        },
    }
}

//! The data listeners a node offers its peers: a random high port per candidate address (IPv4 and IPv6), as NCCL does, with a UDP echo for path MTU.

use crate::measure::{mtu, tcp};
use crate::transport::auth::Secret;
use crate::transport::events::Events;
use crate::transport::gate::Gate;
use crate::transport::wire::Listener;
use preflight_checks::model::NodeFacts;

/// A data server and the listener entry peers are told about.
pub(super) struct Served {
    pub(super) listener: Listener,
    _tcp: tcp::DataServer,
    _udp: Option<mtu::EchoServer>,
}

pub(super) fn start_data_servers(
    facts: &NodeFacts,
    secret: &Secret,
    rank: u32,
    events: &Events,
    admitted: &Gate,
) -> Vec<Served> {
    let mut out = Vec::new();
    for iface in facts.net.interfaces.iter().filter(|i| i.up) {
        for a in iface.usable_addrs() {
            match tcp::DataServer::start(
                a.addr,
                secret.clone(),
                rank,
                events.clone(),
                admitted.clone(),
            ) {
                Ok(server) => {
                    let port = server.addr.port();
                    let udp = mtu::EchoServer::start(a.addr, port, secret, admitted.clone()).ok();
                    out.push(Served {
                        listener: Listener {
                            interface: iface.name.clone(),
                            address: a.addr.to_string(),
                            port,
                        },
                        _tcp: server,
                        _udp: udp,
                    });
                }
                Err(e) => events.log(format!("cannot listen on {} ({}): {e}", a.addr, iface.name)),
            }
        }
    }
    out
}

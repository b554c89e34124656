//! After joining: send this node's facts, then answer the coordinator's orders (each phase's
//! node side: connectivity, throughput, path MTU, the idle test, the all-reduce, the per-rail
//! tests and the counters) until the report arrives.

use crate::placement::Placement;
use crate::runtime::phases::idle::node::Holding;
use crate::runtime::phases::state::NodeState;
use crate::runtime::phases::{allreduce, connectivity, idle, mtu, pairs, rails};
use crate::transport::wire::{Listener, Msg, WireError, order_budget, read_msg_budget, write_msg};
use preflight_checks::model::{NodeFacts, Report};
use std::net::TcpStream;
use std::time::Duration;

/// After joining: send facts, then answer orders until the report arrives.
pub(super) fn serve_orders(
    stream: &mut TcpStream,
    p: &Placement,
    node: &mut NodeState,
    listeners: Vec<Listener>,
    whole_report: bool,
    timeout: Duration,
) -> Result<Report, WireError> {
    stream.set_write_timeout(Some(Duration::from_secs(30))).ok();
    // The control connection is silent for whole phases (and the idle test's wait): keepalives
    // keep a firewall or NAT between this node and rank 0 from forgetting it meanwhile.
    keep_alive(stream);
    write_msg(
        stream,
        &Msg::Join {
            facts: Box::new(node.facts.clone()),
            listeners,
            whole_report,
        },
    )?;
    node.events
        .log("joined; waiting for the other nodes and the measurements");
    let mut wait = Waiting::new(timeout);
    // The connections the idle test holds silent between its two orders.
    let mut holding = Holding::default();
    loop {
        stream.set_read_timeout(Some(wait.limit)).ok();
        let msg: Msg = read_msg_budget(stream, &order_budget(p.nnodes))?;
        if let Some(reply) = allreduce::node::handle(node, &msg, stream) {
            write_msg(stream, &reply?)?;
            continue;
        }
        let reply = match answer(node, stream, &mut holding, &mut wait, msg)? {
            Answer::Reply(reply) => reply,
            Answer::Report(report) => return Ok(own_facts_back(*report, p.rank, &node.facts)),
        };
        write_msg(stream, &reply)?;
    }
}

/// How long this node waits for its next order: the coordinator may wait up to the join
/// timeout for others, and every phase after that ends within --timeout + 5 s, so past
/// --timeout + 10 s of silence rank 0 is gone or stopped; an order whose work takes longer
/// (a large cluster's probe, the idle test's silence) extends it.
struct Waiting {
    base: Duration,
    limit: Duration,
}

impl Waiting {
    fn new(timeout: Duration) -> Waiting {
        let base = timeout + Duration::from_secs(10);
        Waiting { base, limit: base }
    }

    /// The next order may now take as long as `work` on top of the usual wait.
    fn extend(&mut self, work: Duration) {
        self.limit = self.limit.max(self.base + work);
    }
}

/// What one order comes to: the reply to send, or the report that ends the run.
enum Answer {
    Reply(Msg),
    Report(Box<Report>),
}

/// Each phase's node side for its order; a refusal or an order out of protocol ends the run.
fn answer(
    node: &mut NodeState,
    stream: &TcpStream,
    holding: &mut Holding,
    wait: &mut Waiting,
    msg: Msg,
) -> Result<Answer, WireError> {
    let reply = match msg {
        Msg::Probe {
            peers,
            pings,
            connect_timeout_ms,
            admitted,
            resolve,
            deadline_ms,
        } => {
            let order = connectivity::ProbeOrder {
                peers,
                pings,
                connect_timeout_ms,
                admitted,
                resolve,
                deadline_ms,
            };
            let (reply, budget) = connectivity::answer(node, stream, order);
            // Waiting for the next order may take as long as the slowest node's probe.
            wait.extend(budget);
            reply
        }
        Msg::Bulk {
            targets,
            duration_ms,
        } => pairs::answer(node, &targets, duration_ms),
        Msg::Mtu { targets, max_mtu } => mtu::answer(node, stream, targets, max_mtu),
        Msg::IdleOpen {
            targets,
            streams,
            idle_ms,
        } => {
            let (reply, idle) = idle::node::answer_open(node, holding, targets, streams, idle_ms);
            // The check comes once the silence is over: the next order may take that long.
            wait.extend(idle);
            reply
        }
        Msg::IdleCheck { answer_ms } => idle::node::answer_check(node, holding, answer_ms),
        Msg::RailStart { children } => {
            let net = node.seams.rail_net();
            rails::node::start(&mut node.rails, &node.facts, &children, net)
        }
        Msg::RailRun { children } => {
            let net = node.seams.rail_net();
            rails::node::run(&mut node.rails, &node.facts, &children, net)
        }
        Msg::CountersSnapshot => Msg::Counters {
            ports: rails::counters::snapshot(&node.seams.rdma_root(&node.root)),
        },
        Msg::Report { report } => return Ok(Answer::Report(report)),
        Msg::Reject { reason, kind } => return Err(WireError::Rejected { reason, kind }),
        other => {
            return Err(WireError::Malformed(format!(
                "unexpected message {other:?}"
            )));
        }
    };
    Ok(Answer::Reply(reply))
}

/// TCP keepalives on a control connection: a probe after [`KEEPALIVE_IDLE`] of silence, then
/// every [`KEEPALIVE_IDLE`]; the kernel gives the connection up only after
/// [`KEEPALIVE_PROBES`] unanswered probes (minutes), longer than any phase waits anyway.
fn keep_alive(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let ka = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_IDLE);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&ka);
    let probes = KEEPALIVE_PROBES as libc::c_int;
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int of the stated size.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            &probes as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Silence before a control connection's first keepalive probe, and between probes: shorter
/// than any firewall's or NAT's established timeout worth the name.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(2);
/// Unanswered keepalive probes before the kernel drops a control connection (2 minutes).
const KEEPALIVE_PROBES: u32 = 60;

/// A copy of the report without the other nodes' facts (above 64 nodes, see
/// `coordinator::delivery::shared_copy`) gets this node's own facts back: the ones it sent.
fn own_facts_back(mut report: Report, rank: u32, facts: &NodeFacts) -> Report {
    if let Some(trimmed) = &mut report.trimmed
        && let Some(own) = report.nodes.iter_mut().find(|n| n.rank == rank)
        && own.facts.net.interfaces.is_empty()
        && !facts.net.interfaces.is_empty()
    {
        own.facts = facts.clone();
        trimmed.facts_omitted = trimmed.facts_omitted.saturating_sub(1);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::{Interface, NodeEntry, Trimmed};

    fn entry(rank: u32, interfaces: usize) -> NodeEntry {
        let mut facts = NodeFacts {
            hostname: format!("node{rank}"),
            ..Default::default()
        };
        facts.net.interfaces = vec![Interface::default(); interfaces];
        NodeEntry {
            rank,
            hostname: facts.hostname.clone(),
            facts,
        }
    }

    #[test]
    fn a_shared_copy_gets_this_nodes_facts_back() {
        let mut report =
            crate::report::ReportBuilder::new(preflight_checks::model::Mode::Cluster).build();
        report.nodes = (0..3).map(|r| entry(r, 0)).collect();
        let own = entry(1, 2).facts;
        // A whole report is left as it came.
        let whole = own_facts_back(report.clone(), 1, &own);
        assert!(whole.nodes[1].facts.net.interfaces.is_empty());
        report.trimmed = Some(Trimmed {
            facts_omitted: 3,
            ..Default::default()
        });
        let back = own_facts_back(report, 1, &own);
        assert_eq!(back.nodes[1].facts, own);
        assert!(back.nodes[0].facts.net.interfaces.is_empty());
        assert_eq!(back.trimmed.unwrap().facts_omitted, 2);
    }
}

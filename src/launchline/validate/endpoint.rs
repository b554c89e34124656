//! `launch.endpoint` and `launch.port`: where the rendezvous store is, and whether this node can bind it.

use super::{CommandShape, Context, Correction, Resolved, finding, flag};
use crate::launchline::args::Parsed;
use crate::placement::DEFAULT_RDZV_PORT;
use preflight_checks::cluster::MasterIsSelf;
use preflight_checks::model::{BindStatus, Finding, Fix, NodeFacts, PortFacts, Status};
use preflight_checks::net::host_port;
use std::net::IpAddr;

/// Is this address one of this node's (or loopback)?
fn is_local(facts: &NodeFacts, ip: &IpAddr) -> bool {
    ip.is_loopback()
        || facts
            .net
            .interfaces
            .iter()
            .any(|i| i.ipv4.iter().chain(i.ipv6.iter()).any(|a| a.addr == *ip))
}

/// Does this node host the store (bind the port)?
pub fn hosts_store(plan: &CommandShape, resolved: Option<&Resolved>, facts: &NodeFacts) -> bool {
    if plan.standalone || plan.backend.starts_with("etcd") {
        return false;
    }
    let local =
        resolved.is_some_and(|r| !r.addrs.is_empty() && r.addrs.iter().all(|a| is_local(facts, a)));
    match plan.backend.as_str() {
        "static" => plan.rank == 0,
        _ => local,
    }
}

pub(super) fn endpoint(
    p: &Parsed,
    plan: &CommandShape,
    ctx: &Context,
) -> (Finding, Option<Correction>) {
    let rank = plan.rank;
    if plan.standalone {
        return (
            finding(
                preflight_checks::launch::ids::ENDPOINT,
                Status::Pass,
                rank,
                "standalone",
                "--standalone: the rendezvous is local to this node".into(),
            ),
            None,
        );
    }
    if let Some(e) = &plan.endpoint_error {
        let f = finding(
            preflight_checks::launch::ids::ENDPOINT,
            Status::Fail,
            rank,
            "endpoint",
            format!("rank {rank}: {e}"),
        )
        .fix(Fix::new(format!(
            "give HOST:PORT, e.g. {}=10.0.0.1:{DEFAULT_RDZV_PORT}",
            flag(p, "rdzv-endpoint")
        )));
        return (f, None);
    }
    let Some((host, port)) = plan.endpoint.clone() else {
        return (
            finding(
                preflight_checks::launch::ids::ENDPOINT,
                Status::Skip,
                rank,
                "endpoint",
                "no rendezvous endpoint".into(),
            ),
            None,
        );
    };
    (Endpoint::new(p, plan, ctx, host, port).judge(), None)
}

/// A rendezvous endpoint given on the line, with what it resolved to here: `launch.endpoint`'s
/// judgment of it.
struct Endpoint<'a> {
    p: &'a Parsed,
    plan: &'a CommandShape,
    ctx: &'a Context<'a>,
    host: String,
    port: u16,
    /// `HOST:PORT`, the finding's subject.
    subject: String,
    resolved: Resolved,
    /// This node's usable addresses, as text.
    local_addrs: Vec<String>,
    /// The address to suggest: this node's when it is rank 0, else a placeholder for rank 0's.
    use_addr: String,
}

impl<'a> Endpoint<'a> {
    fn new(
        p: &'a Parsed,
        plan: &'a CommandShape,
        ctx: &'a Context<'a>,
        host: String,
        port: u16,
    ) -> Self {
        let subject = host_port(&host, port);
        let resolved = ctx.resolved.clone().unwrap_or_default();
        let local_addrs: Vec<String> = ctx
            .facts
            .net
            .interfaces
            .iter()
            .flat_map(|i| i.usable_addrs())
            .map(|a| a.addr.to_string())
            .collect();
        // Only rank 0 may be pointed at its own address: any other node needs rank 0's.
        let use_addr = ctx
            .this_addr
            .clone()
            .filter(|_| plan.rank == 0)
            .unwrap_or_else(|| "<rank 0's address>".into());
        Self {
            p,
            plan,
            ctx,
            host,
            port,
            subject,
            resolved,
            local_addrs,
            use_addr,
        }
    }

    /// The finding with the endpoint's evidence.
    fn base(&self, status: Status, summary: String) -> Finding {
        finding(
            preflight_checks::launch::ids::ENDPOINT,
            status,
            self.plan.rank,
            self.subject.clone(),
            summary,
        )
        .with("host", &self.host)
        .with("port", self.port)
        .with("from", self.plan.endpoint_from)
        .with("backend", &self.plan.backend)
        .with(
            "resolved",
            self.resolved
                .addrs
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>(),
        )
        .with("this_node_addresses", &self.local_addrs)
    }

    /// The flag that gave the master's address, as the user spelled it.
    fn given_flag(&self) -> String {
        flag(
            self.p,
            if self.plan.endpoint_from == "--rdzv-endpoint" {
                "rdzv-endpoint"
            } else {
                "master-addr"
            },
        )
    }

    /// The resolved addresses, comma-separated.
    fn addrs_text(&self) -> String {
        self.resolved
            .addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn judge(&self) -> Finding {
        let (plan, rank, host) = (self.plan, self.plan.rank, &self.host);
        if host.trim().is_empty() {
            return self.empty();
        }
        if let Some(err) = &self.resolved.error {
            return self
                .base(
                    Status::Fail,
                    format!("rank {rank} cannot resolve the rendezvous host {host}: {err}"),
                )
                .fix(Fix::new(format!(
                    "use an IP address, or add {host} to /etc/hosts on every node"
                )));
        }
        if self.resolved.addrs.is_empty() {
            return self.base(Status::Skip, format!("{host} was not resolved"));
        }
        let all_loopback = self.resolved.addrs.iter().all(|a| a.is_loopback());
        if plan.is_multi_node() && all_loopback {
            return self.loopback();
        }
        // A rank other than 0 given its own address: it would host nothing and wait for itself.
        if plan.rank_given && rank != 0 && plan.is_multi_node() {
            if let Some(f) = self.master_is_self() {
                return f;
            }
        }
        let local = self
            .resolved
            .addrs
            .iter()
            .all(|a| is_local(self.ctx.facts, a));
        if plan.backend == "static" && rank == 0 && !local {
            return self.base(
                Status::Fail,
                format!("rank 0 hosts the static rendezvous, but {host} ({}) is not this machine: the other nodes would look for the master elsewhere", self.addrs_text()),
            )
            .fix(Fix::new(format!("run rank 0 on {host}, or point every node at this machine: {}={}", self.given_flag(), self.use_addr)));
        }
        if plan.backend.starts_with("etcd") {
            return self.base(
                Status::Warn,
                format!(
                    "{} must be an etcd server; preflight's cluster run cannot use it",
                    self.subject
                ),
            );
        }
        let role = if hosts_store(plan, Some(&self.resolved), self.ctx.facts) {
            "this node hosts the rendezvous store there".to_string()
        } else {
            format!("rank {rank} connects to it; the cluster run checks that it is reachable")
        };
        self.base(
            Status::Pass,
            format!("{} resolves to {}; {role}", self.subject, self.addrs_text()),
        )
        .with("local", local)
    }

    /// The master address is empty: whatever was meant to fill it printed nothing.
    fn empty(&self) -> Finding {
        let rank = self.plan.rank;
        let given = self.given_flag();
        self.base(
            Status::Fail,
            format!(
                "the master address is empty ({given}= on rank {rank}'s line): the command or variable meant to fill it gave nothing (e.g. `$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)` in a container without scontrol), so torchrun has no master to dial"
            ),
        )
        .with("cause", "empty")
        .fix(
            Fix::new(format!(
                "Give {given} rank 0's address, the same on every node; where a command fills it, run that command where it exists and check it prints a host"
            ))
            .command("hostname -I   # on rank 0: its address"),
        )
    }

    /// Loopback in a multi-node job: every other node would dial itself.
    fn loopback(&self) -> Finding {
        self.base(
            Status::Fail,
            format!(
                "{} is loopback ({}) in a {}-node job: the other nodes connect to themselves and wait until the rendezvous times out{}",
                self.subject,
                self.addrs_text(),
                self.plan.max_nodes(),
                if self.ctx.facts.env.get("MASTER_ADDR").is_some_and(|v| v.trim().is_empty()) {
                    " (MASTER_ADDR is set but empty here: the command meant to fill it printed nothing, and torchrun falls back to its default 127.0.0.1)"
                } else {
                    ""
                }
            ),
        )
        .fix(Fix::new(format!("use rank 0's address reachable by every node instead of {}, e.g. {}", self.host, host_port(&self.use_addr, self.port))))
    }

    /// A rank other than 0 pointed at its own address, when [`MasterIsSelf`] judges it so.
    fn master_is_self(&self) -> Option<Finding> {
        let own: Vec<IpAddr> = self
            .ctx
            .facts
            .net
            .interfaces
            .iter()
            .flat_map(|i| i.ipv4.iter().chain(i.ipv6.iter()).map(|a| a.addr))
            .collect();
        let given_as = self.given_flag();
        let f = MasterIsSelf {
            id: preflight_checks::launch::ids::ENDPOINT,
            rank: self.plan.rank,
            master: &self.host,
            port: self.port,
            given_as: &given_as,
            resolved: &self.resolved.addrs,
            own: &own,
            rank0: None,
        }
        .judge()?;
        Some(
            f.with("from", self.plan.endpoint_from)
                .with("backend", &self.plan.backend)
                .with("this_node_addresses", &self.local_addrs),
        )
    }
}

pub(super) fn port(
    p: &Parsed,
    plan: &CommandShape,
    ctx: &Context,
) -> (Finding, Option<Correction>) {
    let rank = plan.rank;
    let Some((host, port)) = plan.endpoint.clone() else {
        return (
            finding(
                preflight_checks::launch::ids::PORT,
                Status::Skip,
                rank,
                "port",
                "no fixed port: --standalone picks a free one".into(),
            ),
            None,
        );
    };
    if !hosts_store(plan, ctx.resolved.as_ref(), ctx.facts) {
        return (
            finding(
                preflight_checks::launch::ids::PORT,
                Status::Skip,
                rank,
                port.to_string(),
                format!("rank {rank} does not bind {port}; the node that hosts {host} does"),
            )
            .with("port", port),
            None,
        );
    }
    let facts = &ctx.facts.ports;
    if facts.port != port {
        return (
            finding(
                preflight_checks::launch::ids::PORT,
                Status::Skip,
                rank,
                port.to_string(),
                format!(
                    "port {port} was not probed on this node (the facts are for {})",
                    facts.port
                ),
            )
            .with("port", port),
            None,
        );
    }
    let held = facts.ipv4.status == BindStatus::InUse || facts.ipv6.status == BindStatus::InUse;
    if !held {
        return match facts.ipv4.status {
            BindStatus::Free => (
                port_base(
                    rank,
                    facts,
                    Status::Pass,
                    format!("port {port} is free on rank {rank}, which binds it"),
                ),
                None,
            ),
            s => (
                port_base(
                    rank,
                    facts,
                    Status::Warn,
                    format!(
                        "port {port} could not be test-bound on rank {rank} ({s:?}); see port.in-use"
                    ),
                ),
                None,
            ),
        };
    }
    port_held(p, plan, facts, &host)
}

/// The `launch.port` finding with the port's evidence (`facts.port` is the port judged).
fn port_base(rank: u32, facts: &PortFacts, status: Status, summary: String) -> Finding {
    let port = facts.port;
    finding(
        preflight_checks::launch::ids::PORT,
        status,
        rank,
        port.to_string(),
        summary,
    )
    .with("port", port)
    .with("ipv4", facts.ipv4.status)
    .with("ipv6", facts.ipv6.status)
    .with("holders", &facts.holders)
    .with("suggested_free", facts.suggested_free)
}

/// The port this node binds is held by another process: who, and a free port to use instead.
fn port_held(
    p: &Parsed,
    plan: &CommandShape,
    facts: &PortFacts,
    host: &str,
) -> (Finding, Option<Correction>) {
    let (rank, port) = (plan.rank, facts.port);
    let who: Vec<String> = facts
        .holders
        .iter()
        .filter_map(|h| {
            Some(format!(
                "pid {} ({})",
                h.pid?,
                h.command.clone().unwrap_or_default()
            ))
        })
        .collect();
    let who = if who.is_empty() {
        "a process this user cannot see".to_string()
    } else {
        who.join(", ")
    };
    let summary = format!(
        "port {port} is held on rank {rank} by {who}: torchrun fails with \"Address already in use\""
    );
    let Some(free) = facts.suggested_free else {
        return (
            port_base(rank, facts, Status::Fail, summary).fix(Fix::new(format!(
                "stop {who}, or choose another port on every node"
            ))),
            None,
        );
    };
    let correction = if plan.endpoint_from == "--rdzv-endpoint" {
        Correction::SetValue {
            name: "rdzv-endpoint",
            value: host_port(host, free),
        }
    } else {
        Correction::SetValue {
            name: "master-port",
            value: free.to_string(),
        }
    };
    let flag_text = match &correction {
        Correction::SetValue { name, value } => format!("{}={value}", flag(p, name)),
        _ => String::new(),
    };
    (
        port_base(rank, facts, Status::Fail, summary).fix(Fix::new(format!(
            "use {flag_text} (bound successfully here) on every node, or stop {who}"
        ))),
        Some(correction),
    )
}

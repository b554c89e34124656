//! Checks for the env concern (pure functions of facts): the NCCL/Gloo interface
//! variables, NCCL_IB_DISABLE against the InfiniBand state, MASTER_ADDR/MASTER_PORT.

pub mod catalog;
pub mod ids;
pub mod ifname_choice;
pub mod probe;

use crate::core::CheckContext;
use crate::core::{Finding, Fix, IfKind, Interface, NodeFacts, Status};
use crate::net::ifname::{IfnameSpec, nccl_default_select, nccl_usable, suggest_nccl_value};
use crate::net::{candidate_interfaces, interface_evidence, is_usable_interface, is_virtual_name};
use std::net::IpAddr;

const NCCL_IFNAME: &str = "NCCL_SOCKET_IFNAME";
const GLOO_IFNAME: &str = "GLOO_SOCKET_IFNAME";
const IB_DISABLE: &str = "NCCL_IB_DISABLE";
/// Longest value quoted in a summary; the full value stays in evidence.
const SHOWN_MAX: usize = 64;

pub fn check(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    let mut out = socket_ifname(facts);
    out.push(ib_disable(facts));
    out.extend(master(facts, ctx));
    out
}

/// A value as quoted in a summary (`"eth0"`, or `$'eth0\n'` as a shell user writes a control
/// character) and cut to a sane length.
fn shown(v: &str) -> String {
    if v.chars().count() > SHOWN_MAX {
        let head: String = v.chars().take(SHOWN_MAX).collect();
        format!("{}…", crate::infra::shellword::quoted(&head))
    } else {
        crate::infra::shellword::quoted(v)
    }
}

// ----- env.socket-ifname -----

/// `env.socket-ifname`: one finding per variable set; when NCCL's is unset, what NCCL will pick.
fn socket_ifname(facts: &NodeFacts) -> Vec<Finding> {
    use crate::env::ids::SOCKET_IFNAME as ID;
    let net = &facts.net;
    if net.interfaces.is_empty() {
        if let Some(err) = &net.error {
            return vec![
                Finding::new(
                    ID,
                    Status::Error,
                    NCCL_IFNAME,
                    format!("cannot judge the socket interface variables: {err}"),
                )
                .with("probe_error", err),
            ];
        }
    }
    let mut out = Vec::new();
    match facts.env.get(NCCL_IFNAME) {
        Some(v) => out.push(judge_ifname(facts, NCCL_IFNAME, &IfnameSpec::parse(v))),
        None => out.push(nccl_auto_pick(facts)),
    }
    if let Some(v) = facts.env.get(GLOO_IFNAME) {
        out.push(judge_ifname(facts, GLOO_IFNAME, &IfnameSpec::parse_gloo(v)));
    }
    out
}

/// The value to suggest for `var`, from this node's best candidate.
fn suggested_value(facts: &NodeFacts, var: &str) -> Option<String> {
    let best = candidate_interfaces(&facts.net).into_iter().next()?;
    Some(if var == NCCL_IFNAME {
        suggest_nccl_value(&best.name, &facts.net.interfaces)
    } else {
        best.name.clone()
    })
}

fn export_fix(facts: &NodeFacts, var: &str, hint: &str) -> Fix {
    match suggested_value(facts, var) {
        Some(v) => Fix::new(hint).command(format!("export {var}={v}")),
        None => Fix::new(hint).command("ip -br addr show"),
    }
}

fn names(v: &[&Interface]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why each matched interface cannot carry the job: "lo, which is loopback (127.0.0.1): the
/// other nodes cannot reach this node there", "eth1, which is down", "eth2, which has no
/// usable address".
fn why_unusable(matched: &[&Interface]) -> String {
    matched
        .iter()
        .map(|i| {
            let addrs: Vec<String> = i
                .ipv4
                .iter()
                .chain(i.ipv6.iter())
                .map(|a| a.addr.to_string())
                .collect();
            if i.up && (i.kind == IfKind::Loopback || i.name == "lo") {
                let shown = if addrs.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", addrs.join(", "))
                };
                format!(
                    "{}, which is loopback{shown}: the other nodes cannot reach this node there, so their connections to it fail",
                    i.name
                )
            } else if !i.up {
                format!("{}, which is down", i.name)
            } else {
                format!("{}, which has no usable address", i.name)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Suspicious for NCCL: a container/VM bridge by name or kind, or no address other nodes can reach.
fn is_virtual_pick(i: &Interface) -> bool {
    is_virtual_name(&i.name) || matches!(i.kind, IfKind::Docker | IfKind::Bridge | IfKind::Loopback)
}

fn judge_ifname(facts: &NodeFacts, var: &str, spec: &IfnameSpec) -> Finding {
    use crate::env::ids::SOCKET_IFNAME as ID;
    let all = &facts.net.interfaces;
    let value = shown(&spec.raw);
    let matched = spec.select(all);
    let usable: Vec<&Interface> = matched
        .iter()
        .copied()
        .filter(|i| is_usable_interface(i))
        .collect();
    let base = |status: Status, summary: String| {
        Finding::new(ID, status, var, summary)
            .with("value", &spec.raw)
            .with("exclude", spec.exclude)
            .with("exact", spec.exact)
            .with("entries", &spec.entries)
            .with("parse_warnings", &spec.warnings)
            .with(
                "matched",
                matched
                    .iter()
                    .map(|i| interface_evidence(i))
                    .collect::<Vec<_>>(),
            )
    };

    if var == NCCL_IFNAME && spec.ignored {
        let auto = nccl_default_select(all);
        return base(
            Status::Warn,
            format!(
                "{var}={value} is too short for NCCL, which ignores it and auto-picks {}",
                names(&auto)
            ),
        )
        .fix(export_fix(facts, var, "Name the interface NCCL must use"));
    }
    if matched.is_empty() {
        return base(
            Status::Fail,
            format!(
                "{var}={value} matches no interface on this node (interfaces: {}); the job will fail with {}",
                names(&all.iter().collect::<Vec<_>>()),
                if var == GLOO_IFNAME {
                    format!("gloo's \"Unable to find address for: {}\"", spec.raw)
                } else {
                    "\"no socket interface found\"".to_string()
                }
            ),
        )
        .fix(export_fix(facts, var, "Use an interface that exists on this node"));
    }
    if usable.is_empty() {
        let loopback = matched
            .iter()
            .all(|i| i.up && (i.kind == IfKind::Loopback || i.name == "lo"));
        return base(
            Status::Fail,
            format!("{var}={value} matches only {}", why_unusable(&matched)),
        )
        .fix(export_fix(
            facts,
            var,
            if loopback {
                "Use the interface the other nodes reach this node on, not loopback"
            } else {
                "Use an interface that is up and has an address"
            },
        ));
    }
    if usable.iter().all(|i| i.is_virtual()) {
        let better = candidate_interfaces(&facts.net)
            .into_iter()
            .find(|i| !i.is_virtual());
        if better.is_some() {
            return base(
                Status::Warn,
                format!(
                    "{var}={value} selects only virtual interfaces ({}); traffic to other nodes may not pass or will crawl",
                    names(&usable)
                ),
            )
            .fix(export_fix(facts, var, "Use the physical NIC instead"));
        }
    }
    let stray: Vec<&Interface> = matched
        .iter()
        .copied()
        .filter(|i| nccl_usable(i) && (is_virtual_pick(i) || i.usable_addrs().is_empty()))
        .collect();
    if !stray.is_empty() {
        return base(
            Status::Warn,
            format!(
                "{var}={value} selects {} but also {} (virtual or without a routable address), which the job would try to use too",
                names(&usable.iter().copied().filter(|i| !stray.iter().any(|s| s.name == i.name)).collect::<Vec<_>>()),
                names(&stray)
            ),
        )
        .fix(export_fix(facts, var, "Name only the cluster-facing interface"));
    }
    if var == NCCL_IFNAME {
        let ambiguous = spec.ambiguous_prefixes(all);
        if let Some((entry, hits)) = ambiguous.first() {
            return base(
                Status::Warn,
                format!(
                    "{var}={value}: the prefix \"{entry}\" also matches {}; NCCL may use any of them",
                    hits.iter()
                        .filter(|h| *h != entry)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .fix(
                Fix::new("Match the name exactly with a leading '='")
                    .command(format!("export {var}=={entry}")),
            );
        }
    }
    base(
        Status::Pass,
        format!("{var}={value} selects {}", describe(&usable)),
    )
}

fn describe(v: &[&Interface]) -> String {
    v.iter()
        .map(|i| {
            let addrs: Vec<String> = i.usable_addrs().iter().map(|a| a.to_string()).collect();
            format!("{} ({})", i.name, addrs.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// NCCL_SOCKET_IFNAME unset: say what NCCL will pick, and warn when that includes a virtual or unreachable interface.
fn nccl_auto_pick(facts: &NodeFacts) -> Finding {
    use crate::env::ids::SOCKET_IFNAME as ID;
    let picks = nccl_default_select(&facts.net.interfaces);
    let evidence: Vec<_> = picks.iter().map(|i| interface_evidence(i)).collect();
    let suspicious: Vec<&Interface> = picks
        .iter()
        .copied()
        .filter(|i| is_virtual_pick(i) || i.usable_addrs().is_empty())
        .collect();
    let Some(first) = picks.first() else {
        return Finding::new(
            ID,
            Status::Skip,
            NCCL_IFNAME,
            "NCCL_SOCKET_IFNAME is unset and NCCL would find no usable interface here (see net.no-interface)",
        );
    };
    let base = |status, summary: String| {
        Finding::new(ID, status, NCCL_IFNAME, summary)
            .with("nccl_default", evidence.clone())
            .with("bootstrap_interface", &first.name)
    };
    if suspicious.is_empty() {
        return base(
            Status::Pass,
            format!(
                "NCCL_SOCKET_IFNAME is unset; NCCL will auto-pick {} (bootstrap on {})",
                names(&picks),
                first.name
            ),
        );
    }
    base(
        Status::Warn,
        format!(
            "NCCL_SOCKET_IFNAME is unset; NCCL will auto-pick {}, including {} (virtual or without a routable address)",
            names(&picks),
            names(&suspicious)
        ),
    )
    .fix(export_fix(
        facts,
        NCCL_IFNAME,
        "Pin NCCL to the cluster-facing interface",
    ))
}

// ----- env.ib-disable -----

/// The value NCCL uses for an integer parameter: `strtoll(str, NULL, 0)` (leading
/// space, sign, 0x/0 prefixes, trailing junk ignored); empty or out of range gives `default`.
pub fn nccl_int(value: &str, default: i64) -> i64 {
    let s = value.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            (16, h)
        } else {
            (10, "0")
        }
    } else if s.len() > 1 && s.starts_with('0') {
        (8, &s[1..])
    } else {
        (10, s)
    };
    if value.is_empty() {
        return default;
    }
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    if end == 0 {
        return 0;
    }
    match i64::from_str_radix(&digits[..end], radix) {
        Ok(v) if neg => -v,
        Ok(v) => v,
        // ERANGE: NCCL logs "Invalid value" and keeps the default.
        Err(_) => default,
    }
}

/// True when the value is a plain decimal integer, as a user would mean it.
fn is_plain_int(value: &str) -> bool {
    let t = value.strip_prefix(['-', '+']).unwrap_or(value);
    !t.is_empty() && t.chars().all(|c| c.is_ascii_digit())
}

fn ib_disable(facts: &NodeFacts) -> Finding {
    use crate::env::ids::IB_DISABLE as ID;
    let active: Vec<String> = facts
        .ib
        .active_ports()
        .into_iter()
        .map(|(d, p)| format!("{d}/{p}"))
        .collect();
    let all_ports: Vec<String> = facts
        .ib
        .devices
        .iter()
        .flat_map(|d| {
            d.ports
                .iter()
                .map(move |p| format!("{}/{} {}", d.name, p.port, p.state))
        })
        .collect();
    let ib_unknown = facts.ib.devices.is_empty() && facts.ib.error.is_some();
    let value = facts.env.get(IB_DISABLE);
    let base = |status, summary: String| {
        let f = Finding::new(ID, status, IB_DISABLE, summary)
            .with("value", value)
            .with("active_ports", &active)
            .with("ports", &all_ports);
        match &facts.ib.error {
            Some(e) => f.with("ib_probe_error", e),
            None => f,
        }
    };
    let Some(value) = value else {
        return if active.is_empty() {
            base(
                Status::Skip,
                "NCCL_IB_DISABLE is unset and there is no ACTIVE InfiniBand/RoCE port; NCCL will use sockets".into(),
            )
        } else {
            base(
                Status::Pass,
                format!(
                    "NCCL_IB_DISABLE is unset; NCCL will use the ACTIVE port(s) {}",
                    active.join(", ")
                ),
            )
        };
    };
    let shown_v = shown(value);
    let effective = nccl_int(value, 0);
    if !is_plain_int(value) || value.parse::<i64>().is_err() {
        return base(
            Status::Warn,
            format!(
                "NCCL_IB_DISABLE={shown_v} is not a plain integer; NCCL reads it as {effective} ({})",
                if effective == 0 {
                    "InfiniBand stays ENABLED"
                } else {
                    "InfiniBand disabled"
                }
            ),
        )
        .with("nccl_reads", effective)
        .fix(
            Fix::new("Use 1 to disable InfiniBand, or unset the variable to let NCCL use it")
                .command(format!(
                    "export NCCL_IB_DISABLE={}",
                    if active.is_empty() { 1 } else { 0 }
                ))
                .command("unset NCCL_IB_DISABLE"),
        );
    }
    if ib_unknown {
        return base(
            Status::Error,
            format!("NCCL_IB_DISABLE={shown_v} is set but the InfiniBand state could not be read"),
        );
    }
    match (effective != 0, active.is_empty()) {
        (true, false) => base(
            Status::Warn,
            format!(
                "NCCL_IB_DISABLE={shown_v} but port(s) {} are ACTIVE: the fast fabric stays unused and NCCL runs over TCP sockets",
                active.join(", ")
            ),
        )
        .fix(
            Fix::new("Let NCCL use InfiniBand (keep it disabled only if other nodes lack it; see ib.partial)")
                .command("unset NCCL_IB_DISABLE"),
        ),
        (false, true) => base(
            Status::Warn,
            format!(
                "NCCL_IB_DISABLE={shown_v} asks for InfiniBand but no port is ACTIVE{}",
                if all_ports.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", all_ports.join(", "))
                }
            ),
        )
        .fix(
            Fix::new("Disable InfiniBand for NCCL here, or bring a port up (see ib.port-down)")
                .command("export NCCL_IB_DISABLE=1"),
        ),
        (true, true) => base(
            Status::Pass,
            format!("NCCL_IB_DISABLE={shown_v} and there is no ACTIVE InfiniBand/RoCE port"),
        ),
        (false, false) => base(
            Status::Pass,
            format!(
                "NCCL_IB_DISABLE={shown_v}; NCCL will use the ACTIVE port(s) {}",
                active.join(", ")
            ),
        ),
    }
}

// ----- env.master -----

fn master(facts: &NodeFacts, ctx: &CheckContext) -> Vec<Finding> {
    use crate::env::ids::MASTER as ID;
    let addr = facts.env.get("MASTER_ADDR");
    let port = facts.env.get("MASTER_PORT");
    if addr.is_none() && port.is_none() {
        return vec![Finding::new(
            ID,
            Status::Skip,
            "MASTER_ADDR",
            "MASTER_ADDR and MASTER_PORT are unset (torchrun flags or the launcher will supply them)",
        )];
    }
    let mut out = Vec::new();
    if let Some(a) = addr {
        out.push(master_addr(facts, a));
    }
    if let Some(p) = port {
        out.push(master_port(p, ctx.master_port));
    }
    out
}

fn master_addr(facts: &NodeFacts, value: &str) -> Finding {
    use crate::env::ids::MASTER as ID;
    let shown_v = shown(value);
    let trimmed = value.trim();
    let best_ip = candidate_interfaces(&facts.net)
        .into_iter()
        .flat_map(|i| i.ipv4.iter().map(|a| a.addr))
        .find(crate::net::is_usable_addr);
    let fix_to_best = |hint: &str| match best_ip {
        Some(ip) => Fix::new(hint).command(format!("export MASTER_ADDR={ip}")),
        None => Fix::new(hint).command("hostname -I"),
    };
    let f = |status, summary: String| {
        Finding::new(ID, status, "MASTER_ADDR", summary).with("value", value)
    };
    if trimmed.is_empty() {
        // Only rank 0 may be pointed at its own address; any other node needs rank 0's.
        let rank = env_node_rank(facts);
        let slurm = facts.env.contains_key("SLURM_JOB_NODELIST");
        let fix = if rank.is_some_and(|(r, _)| r == 0) {
            fix_to_best(
                "Set MASTER_ADDR to this node's (rank 0's) address on the cluster network, the same on every node",
            )
        } else {
            let who = match rank {
                Some((r, var)) => format!("this node is rank {r} ({var}), so not its own address"),
                None => "not this node's own address unless it is rank 0".to_string(),
            };
            let mut fix = Fix::new(format!(
                "Set MASTER_ADDR to rank 0's address on the cluster network, the same on every node ({who}); where a command fills it, run that command where it exists and check it prints a host"
            ));
            if slurm {
                fix = fix.command(
                    "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)",
                );
            }
            fix.command("hostname -I   # on rank 0: its address")
        };
        return f(
            Status::Warn,
            format!(
                "MASTER_ADDR is set but empty (MASTER_ADDR={shown_v}): the command meant to fill it printed nothing (e.g. `scontrol show hostnames` missing in a container); torchrun cannot reach a master"
            ),
        )
        .with("cause", "empty")
        .fix(fix);
    }
    if trimmed != value || trimmed.chars().any(char::is_whitespace) {
        return f(
            Status::Warn,
            format!("MASTER_ADDR={shown_v} contains whitespace; name resolution will fail"),
        )
        .fix(fix_to_best("Remove the whitespace"));
    }
    let is_loopback = match trimmed.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip.is_unspecified(),
        Err(_) => {
            trimmed.eq_ignore_ascii_case("localhost")
                || trimmed.to_ascii_lowercase().ends_with(".localhost")
        }
    };
    if is_loopback {
        return f(
            Status::Warn,
            format!(
                "MASTER_ADDR={shown_v} is a loopback/unspecified address; ranks on other nodes cannot reach it"
            ),
        )
        .fix(fix_to_best("Use rank 0's address on the cluster network"));
    }
    if let Some(f) = master_is_self(facts, trimmed) {
        return f.with("value", value);
    }
    let local = trimmed.parse::<IpAddr>().ok().and_then(|ip| {
        facts
            .net
            .interfaces
            .iter()
            .find(|i| i.ipv4.iter().chain(i.ipv6.iter()).any(|a| a.addr == ip))
    });
    let finding = f(Status::Pass, format!("MASTER_ADDR={shown_v}"));
    match local {
        Some(i) => finding
            .with("local_interface", &i.name)
            .with("local_interface_up", nccl_usable(i)),
        None => finding,
    }
}

/// This node's node rank from the launcher's environment: NODE_RANK, GROUP_RANK (torchrun's
/// workers), else RANK outside a torchrun worker (Kubeflow's PyTorchJob sets RANK per pod).
fn env_node_rank(facts: &NodeFacts) -> Option<(u32, &'static str)> {
    let get = |k: &'static str| {
        facts
            .env
            .get(k)
            .and_then(|v| v.trim().parse::<u32>().ok())
            .map(|r| (r, k))
    };
    get("NODE_RANK").or_else(|| get("GROUP_RANK")).or_else(|| {
        if facts.env.contains_key("LOCAL_RANK") {
            None
        } else {
            get("RANK")
        }
    })
}

/// `env.master` FAIL: a node whose rank is not 0 has one of its own addresses (or its own
/// hostname) as MASTER_ADDR.
fn master_is_self(facts: &NodeFacts, master: &str) -> Option<Finding> {
    let (rank, rank_var) = env_node_rank(facts)?;
    let own: Vec<IpAddr> = facts
        .net
        .interfaces
        .iter()
        .flat_map(|i| i.ipv4.iter().chain(i.ipv6.iter()).map(|a| a.addr))
        .filter(|a| !a.is_loopback())
        .collect();
    let resolved: Vec<IpAddr> = match master.trim_matches(|c| c == '[' || c == ']').parse() {
        Ok(ip) => vec![ip],
        Err(_) => {
            let short = facts.hostname.split('.').next().unwrap_or_default();
            let named_self = master.eq_ignore_ascii_case(facts.hostname.trim())
                || (!short.is_empty() && master.eq_ignore_ascii_case(short));
            if !named_self {
                return None;
            }
            own.iter()
                .copied()
                .filter(crate::net::is_usable_addr)
                .take(1)
                .collect()
        }
    };
    let port = facts
        .env
        .get("MASTER_PORT")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(29500);
    crate::cluster::MasterIsSelf {
        id: crate::env::ids::MASTER,
        rank,
        master,
        port,
        given_as: "MASTER_ADDR",
        resolved: &resolved,
        own: &own,
        rank0: None,
    }
    .judge()
    .map(|mut f| {
        f.subject = "MASTER_ADDR".into();
        f.with("rank_from", rank_var)
    })
}

fn master_port(value: &str, expected: u16) -> Finding {
    use crate::env::ids::MASTER as ID;
    let shown_v = shown(value);
    let f = |status, summary: String| {
        Finding::new(ID, status, "MASTER_PORT", summary)
            .with("value", value)
            .with("checked_port", expected)
    };
    let parsed = value.trim().parse::<u16>().ok().filter(|p| *p != 0);
    match parsed {
        None => f(
            Status::Warn,
            format!("MASTER_PORT={shown_v} is not a valid TCP port (1-65535)"),
        )
        .fix(Fix::new("Set a valid port").command(format!(
            "export MASTER_PORT={}",
            if expected == 0 { 29500 } else { expected }
        ))),
        Some(p) if expected != 0 && p != expected => f(
            Status::Warn,
            format!(
                "MASTER_PORT={p} but preflight checked port {expected}; the job would use a port that was not tested"
            ),
        )
        .fix(
            Fix::new("Use the same port for preflight and the job")
                .command(format!("export MASTER_PORT={expected}")),
        ),
        Some(p) => f(Status::Pass, format!("MASTER_PORT={p}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IbDevice, IbFacts, IbPort, NetFacts};
    use crate::infra::root::Root;
    use crate::probe;

    fn fixture_facts(name: &str, env: &[(&str, &str)]) -> NodeFacts {
        let root = Root::at(format!(
            "{}/../tests/fixtures/{name}",
            env!("CARGO_MANIFEST_DIR")
        ));
        NodeFacts {
            net: probe::net::probe(&root),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn ctx() -> CheckContext {
        CheckContext {
            master_port: 29500,
            ..Default::default()
        }
    }

    fn find<'a>(fs: &'a [Finding], id: crate::core::FindingId, subject: &str) -> &'a Finding {
        match fs.iter().find(|f| f.id == id && f.subject == subject) {
            Some(f) => f,
            None => panic!("no {id} for {subject} in {fs:#?}"),
        }
    }

    fn ib(states: &[(&str, &str)]) -> IbFacts {
        IbFacts {
            devices: states
                .iter()
                .map(|(name, state)| IbDevice {
                    name: name.to_string(),
                    ports: vec![IbPort {
                        port: 1,
                        state: state.to_string(),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn ifname_missing_interface_fails_with_a_working_value() {
        let f = check(
            &fixture_facts("ib-node", &[("NCCL_SOCKET_IFNAME", "bond0")]),
            &ctx(),
        );
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Fail);
        assert!(s.summary.contains("matches no interface"), "{}", s.summary);
        let fix = s.fix.clone().unwrap_or_default();
        assert_eq!(fix.commands, ["export NCCL_SOCKET_IFNAME=ib0"]);
    }

    #[test]
    fn ifname_matching_only_a_down_interface_fails() {
        let f = check(
            &fixture_facts("ib-node", &[("NCCL_SOCKET_IFNAME", "=ib1")]),
            &ctx(),
        );
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Fail);
        assert!(s.summary.contains("ib1"), "{}", s.summary);
    }

    #[test]
    fn ifname_virtual_only_warns() {
        let f = check(
            &fixture_facts("docker-bond-host", &[("NCCL_SOCKET_IFNAME", "docker")]),
            &ctx(),
        );
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Warn);
        assert!(s.summary.contains("virtual"), "{}", s.summary);
        assert_eq!(
            s.fix.clone().unwrap_or_default().commands,
            ["export NCCL_SOCKET_IFNAME==bond0"]
        );
    }

    #[test]
    fn ifname_bond_prefix_also_matching_vlan_warns_and_exact_passes() {
        let f = check(
            &fixture_facts("docker-bond-host", &[("NCCL_SOCKET_IFNAME", "bond0")]),
            &ctx(),
        );
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Warn);
        assert!(s.summary.contains("bond0.100"), "{}", s.summary);
        assert_eq!(
            s.fix.clone().unwrap_or_default().commands,
            ["export NCCL_SOCKET_IFNAME==bond0"]
        );
        let f = check(
            &fixture_facts("docker-bond-host", &[("NCCL_SOCKET_IFNAME", "=bond0")]),
            &ctx(),
        );
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Pass, "{}", s.summary);
        assert!(s.fix.is_none());
    }

    #[test]
    fn ifname_exclude_list_that_lets_lo_and_veth_through_warns() {
        let f = check(
            &fixture_facts("docker-bond-host", &[("NCCL_SOCKET_IFNAME", "^docker")]),
            &ctx(),
        );
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Warn);
        assert!(s.summary.contains("lo, veth3f2a1b0"), "{}", s.summary);
        assert_eq!(
            s.fix.clone().unwrap_or_default().commands,
            ["export NCCL_SOCKET_IFNAME==bond0"]
        );
    }

    #[test]
    fn gloo_with_prefix_fails_because_gloo_wants_exact_names() {
        let f = check(
            &fixture_facts(
                "roce-node",
                &[
                    ("NCCL_SOCKET_IFNAME", "ens1"),
                    ("GLOO_SOCKET_IFNAME", "ens1"),
                ],
            ),
            &ctx(),
        );
        assert_eq!(
            find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME).status,
            Status::Pass
        );
        let g = find(&f, crate::env::ids::SOCKET_IFNAME, GLOO_IFNAME);
        assert_eq!(g.status, Status::Fail);
        assert_eq!(
            g.fix.clone().unwrap_or_default().commands,
            ["export GLOO_SOCKET_IFNAME=ens1f0np0"]
        );
    }

    #[test]
    fn ifname_unset_reports_nccl_default_pick() {
        let f = check(&fixture_facts("ib-node", &[]), &ctx());
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Pass);
        assert!(s.summary.contains("ib0"), "{}", s.summary);
        assert!(!f.iter().any(|x| x.subject == GLOO_IFNAME));
        // On the docker host NCCL would also take the veth (link-local only).
        let f = check(&fixture_facts("docker-bond-host", &[]), &ctx());
        let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
        assert_eq!(s.status, Status::Warn, "{}", s.summary);
        assert!(s.summary.contains("veth3f2a1b0"), "{}", s.summary);
        // A pod's only interface is a veth named eth0: fine.
        let f = check(&fixture_facts("k8s-pod", &[]), &ctx());
        assert_eq!(
            find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME).status,
            Status::Pass
        );
    }

    #[test]
    fn ifname_garbage_values_never_panic() {
        let long = "x".repeat(10_000);
        for v in [
            "",
            " ",
            "e",
            "\u{fffd}\u{fffd}",
            ",,,",
            "^=",
            "eth0 ",
            &long,
            "^^^^",
        ] {
            let f = check(
                &fixture_facts(
                    "plain-vm",
                    &[("NCCL_SOCKET_IFNAME", v), ("GLOO_SOCKET_IFNAME", v)],
                ),
                &ctx(),
            );
            let s = find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME);
            assert!(s.summary.len() < 400, "summary too long for {v:?}");
        }
        let f = check(
            &fixture_facts("plain-vm", &[("NCCL_SOCKET_IFNAME", " eth0")]),
            &ctx(),
        );
        assert_eq!(
            find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME).status,
            Status::Fail
        );
        let f = check(
            &fixture_facts("plain-vm", &[("NCCL_SOCKET_IFNAME", "e")]),
            &ctx(),
        );
        assert_eq!(
            find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME).status,
            Status::Warn
        );
    }

    #[test]
    fn ifname_error_when_net_probe_failed() {
        let facts = NodeFacts {
            net: NetFacts {
                interfaces: vec![],
                error: Some("boom".into()),
            },
            ..Default::default()
        };
        let f = check(&facts, &ctx());
        assert_eq!(
            find(&f, crate::env::ids::SOCKET_IFNAME, NCCL_IFNAME).status,
            Status::Error
        );
    }

    fn ib_finding(value: Option<&str>, states: &[(&str, &str)]) -> Finding {
        let mut facts = NodeFacts {
            ib: ib(states),
            ..Default::default()
        };
        if let Some(v) = value {
            facts.env.insert(IB_DISABLE.into(), v.into());
        }
        find(
            &check(&facts, &ctx()),
            crate::env::ids::IB_DISABLE,
            IB_DISABLE,
        )
        .clone()
    }

    #[test]
    fn ib_disable_contradictions_warn() {
        let f = ib_finding(Some("1"), &[("mlx5_0", "ACTIVE")]);
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("mlx5_0/1"), "{}", f.summary);
        assert_eq!(
            f.fix.unwrap_or_default().commands,
            ["unset NCCL_IB_DISABLE"]
        );
        let f = ib_finding(Some("0"), &[("mlx5_1", "DOWN")]);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(
            f.fix.unwrap_or_default().commands,
            ["export NCCL_IB_DISABLE=1"]
        );
        let f = ib_finding(Some("0"), &[]);
        assert_eq!(f.status, Status::Warn);
    }

    #[test]
    fn ib_disable_consistent_values_pass_or_skip() {
        assert_eq!(ib_finding(Some("1"), &[]).status, Status::Pass);
        assert_eq!(
            ib_finding(Some("0"), &[("mlx5_0", "ACTIVE")]).status,
            Status::Pass
        );
        assert_eq!(ib_finding(None, &[]).status, Status::Skip);
        assert_eq!(
            ib_finding(None, &[("mlx5_0", "ACTIVE")]).status,
            Status::Pass
        );
    }

    #[test]
    fn ib_disable_garbage_is_read_as_an_integer() {
        let f = ib_finding(Some("yes"), &[("mlx5_0", "ACTIVE")]);
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("reads it as 0"), "{}", f.summary);
        assert!(f.summary.contains("ENABLED"), "{}", f.summary);
        let f = ib_finding(Some(" 1"), &[]);
        assert_eq!(f.status, Status::Warn);
        assert_eq!(f.evidence["nccl_reads"], 1);
        assert_eq!(ib_finding(Some(&"9".repeat(500)), &[]).status, Status::Warn);
    }

    #[test]
    fn nccl_int_mirrors_strtoll() {
        assert_eq!(nccl_int("1", 0), 1);
        assert_eq!(nccl_int(" 1", 0), 1);
        assert_eq!(nccl_int("1abc", 0), 1);
        assert_eq!(nccl_int("yes", 7), 0);
        assert_eq!(nccl_int("", 7), 7);
        assert_eq!(nccl_int("0x10", 0), 16);
        assert_eq!(nccl_int("010", 0), 8);
        assert_eq!(nccl_int("08", 0), 0);
        assert_eq!(nccl_int("-2", 0), -2);
        assert_eq!(nccl_int("0x", 0), 0);
        assert_eq!(nccl_int(&"9".repeat(40), 5), 5);
    }

    #[test]
    fn ib_disable_errors_when_ib_state_unknown() {
        let mut facts = NodeFacts::default();
        facts.ib.error = Some("cannot read /sys/class/infiniband".into());
        facts.env.insert(IB_DISABLE.into(), "0".into());
        let f = check(&facts, &ctx());
        assert_eq!(
            find(&f, crate::env::ids::IB_DISABLE, IB_DISABLE).status,
            Status::Error
        );
    }

    #[test]
    fn a_nonzero_node_rank_with_its_own_address_as_master_fails() {
        let own = "10.0.2.15";
        for (var, rank) in [("NODE_RANK", "1"), ("GROUP_RANK", "2"), ("RANK", "3")] {
            let f = check(
                &fixture_facts("plain-vm", &[("MASTER_ADDR", own), (var, rank)]),
                &ctx(),
            );
            let a = find(&f, crate::env::ids::MASTER, "MASTER_ADDR");
            assert_eq!(a.status, Status::Fail, "{var}: {a:#?}");
            assert!(
                a.summary
                    .contains(&format!("rank {rank} was given its own address 10.0.2.15")),
                "{}",
                a.summary
            );
            assert!(
                a.summary.contains("cannot know rank 0's address"),
                "{}",
                a.summary
            );
            assert_eq!(a.evidence["rank_from"], serde_json::json!(var));
        }
        // Rank 0 is the master; RANK inside a torchrun worker is a process rank, not a node's.
        for env in [
            vec![("MASTER_ADDR", own), ("NODE_RANK", "0")],
            vec![("MASTER_ADDR", own), ("RANK", "1"), ("LOCAL_RANK", "1")],
            vec![("MASTER_ADDR", "10.0.2.99"), ("NODE_RANK", "1")],
            vec![("MASTER_ADDR", own)],
        ] {
            let f = check(&fixture_facts("plain-vm", &env), &ctx());
            let a = find(&f, crate::env::ids::MASTER, "MASTER_ADDR");
            assert_eq!(a.status, Status::Pass, "{env:?}: {a:#?}");
        }
    }

    #[test]
    fn an_empty_master_addr_says_empty_and_only_rank_0_is_pointed_at_itself() {
        // Rank 1 (a torchrun worker's GROUP_RANK): never its own address.
        let f = check(
            &fixture_facts(
                "plain-vm",
                &[
                    ("MASTER_ADDR", ""),
                    ("GROUP_RANK", "1"),
                    ("SLURM_JOB_NODELIST", "node[0-1]"),
                ],
            ),
            &ctx(),
        );
        let a = find(&f, crate::env::ids::MASTER, "MASTER_ADDR");
        assert_eq!(a.status, Status::Warn);
        assert!(
            a.summary.contains("MASTER_ADDR is set but empty"),
            "{}",
            a.summary
        );
        let cmds = a.fix.clone().unwrap_or_default().commands;
        assert!(!cmds.iter().any(|c| c.contains("10.0.2.15")), "{cmds:?}");
        assert!(cmds[0].contains("scontrol show hostnames"), "{cmds:?}");
        assert!(
            a.fix
                .clone()
                .unwrap_or_default()
                .hint
                .contains("rank 1 (GROUP_RANK), so not its own address"),
            "{a:#?}"
        );
        // Rank 0 may use its own address.
        let f = check(
            &fixture_facts("plain-vm", &[("MASTER_ADDR", ""), ("NODE_RANK", "0")]),
            &ctx(),
        );
        let a = find(&f, crate::env::ids::MASTER, "MASTER_ADDR");
        assert_eq!(
            a.fix.clone().unwrap_or_default().commands,
            ["export MASTER_ADDR=10.0.2.15"]
        );
    }

    #[test]
    fn master_vars_are_audited() {
        let f = check(&fixture_facts("plain-vm", &[]), &ctx());
        assert_eq!(
            find(&f, crate::env::ids::MASTER, "MASTER_ADDR").status,
            Status::Skip
        );

        let f = check(
            &fixture_facts(
                "plain-vm",
                &[("MASTER_ADDR", "127.0.1.1"), ("MASTER_PORT", "29501")],
            ),
            &ctx(),
        );
        let a = find(&f, crate::env::ids::MASTER, "MASTER_ADDR");
        assert_eq!(a.status, Status::Warn);
        assert_eq!(
            a.fix.clone().unwrap_or_default().commands,
            ["export MASTER_ADDR=10.0.2.15"]
        );
        let p = find(&f, crate::env::ids::MASTER, "MASTER_PORT");
        assert_eq!(p.status, Status::Warn);
        assert_eq!(
            p.fix.clone().unwrap_or_default().commands,
            ["export MASTER_PORT=29500"]
        );

        let f = check(
            &fixture_facts(
                "plain-vm",
                &[("MASTER_ADDR", "10.0.2.15"), ("MASTER_PORT", "29500")],
            ),
            &ctx(),
        );
        let a = find(&f, crate::env::ids::MASTER, "MASTER_ADDR");
        assert_eq!(a.status, Status::Pass);
        assert_eq!(a.evidence["local_interface"], "eth0");
        assert_eq!(
            find(&f, crate::env::ids::MASTER, "MASTER_PORT").status,
            Status::Pass
        );
    }

    #[test]
    fn master_garbage_values_warn() {
        for (addr, port) in [
            ("", "0"),
            ("localhost", "70000"),
            (" node1", "port"),
            ("0.0.0.0", ""),
        ] {
            let f = check(
                &fixture_facts("plain-vm", &[("MASTER_ADDR", addr), ("MASTER_PORT", port)]),
                &ctx(),
            );
            assert_eq!(
                find(&f, crate::env::ids::MASTER, "MASTER_ADDR").status,
                Status::Warn,
                "{addr:?}"
            );
            assert_eq!(
                find(&f, crate::env::ids::MASTER, "MASTER_PORT").status,
                Status::Warn,
                "{port:?}"
            );
        }
    }
}

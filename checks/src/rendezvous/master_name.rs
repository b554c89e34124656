//! Where the master's name leads: `cluster.master-late` (the name resolved only after a while,
//! or never within the join timeout: a Kubernetes headless Service publishes a pod's record only
//! once the pod is ready) and `cluster.master-elsewhere` (the name led a node to an address of
//! rank 0's host that failed, while another address of that host worked: a short name resolving
//! through /etc/hosts or a search domain to an admin network).

use crate::core::ClusterInput;
use crate::core::cluster_common::{LIST_CAP, host_port};
use crate::core::{AddressTry, Finding, Fix, Status};

use crate::rendezvous::ids::MASTER_ELSEWHERE as ELSEWHERE;
use crate::rendezvous::ids::MASTER_LATE as LATE;

/// The fix for a name that appears late or never: what makes the record exist from the start.
fn late_fix(master: &str) -> Fix {
    Fix::new(format!(
        "Make {master} resolvable before the job starts: on Kubernetes set `publishNotReadyAddresses: true` on the headless Service (the record then exists while the pod is not ready), or make the master pod ready sooner; or give the master's IP address instead of the name"
    ))
    .command("kubectl patch service <headless-service> -p '{\"spec\":{\"publishNotReadyAddresses\":true}}'")
    .command(format!("getent hosts {master}"))
}

/// `cluster.master-late` FAIL on a node where the master's name never resolved within the join
/// timeout.
pub fn master_never_resolved(
    rank: u32,
    master: &str,
    port: u16,
    waited_s: f64,
    error: &str,
) -> Finding {
    Finding::new(
        LATE,
        Status::Fail,
        host_port(master, port),
        format!(
            "the master address {master} did not resolve on this node for the whole join timeout ({waited_s:.0} s, tried again every 0.5 s): {error}; a Kubernetes headless Service publishes the master pod's record only once it is ready, so torchrun here would wait for a name that never appears"
        ),
    )
    .on_node(Some(rank))
    .with("cause", "never-resolved")
    .with("master", master)
    .with("port", port)
    .with("waited_s", waited_s)
    .with("error", error)
    .fix(late_fix(master))
}

/// `cluster.master-late`: the joined nodes on which the master's name resolved only after a
/// while (warn), else pass; skip when no node reported its resolution.
pub(crate) fn master_late(input: &ClusterInput) -> Finding {
    let reports: Vec<(u32, &crate::core::MasterResolution)> = input
        .nodes
        .iter()
        .filter_map(|(r, f)| f.master_resolution.as_ref().map(|m| (*r, m)))
        .collect();
    let Some((_, first)) = reports.first() else {
        return Finding::new(
            LATE,
            Status::Skip,
            "master",
            "no node reported how it resolved the master address",
        );
    };
    let master = first.name.clone();
    let late: Vec<(u32, f64, &str)> = reports
        .iter()
        .filter_map(|(r, m)| {
            m.resolved_after_s
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| (*r, s, m.resolve_error.as_deref().unwrap_or("no answer")))
        })
        .collect();
    if late.is_empty() {
        return Finding::new(
            LATE,
            Status::Pass,
            master.clone(),
            format!(
                "the master address {master} resolved at the first try on every node that joined"
            ),
        )
        .with("master", &master);
    }
    let slowest = late.iter().map(|(_, s, _)| *s).fold(0.0, f64::max);
    let described: Vec<String> = late
        .iter()
        .take(LIST_CAP)
        .map(|(r, s, e)| format!("on {} after {s:.1} s ({e} until then)", input.who(*r)))
        .collect();
    let more = late.len().saturating_sub(LIST_CAP);
    Finding::new(
        LATE,
        Status::Warn,
        master.clone(),
        format!(
            "the master address {master} did not resolve at first and appeared only later: {}{}; the job's own lookups at start (torchrun, NCCL, gloo) may fail or wait as long, and a slower start runs into the rendezvous timeout",
            described.join("; "),
            if more > 0 { format!(" and on {more} more") } else { String::new() }
        ),
    )
    .with("cause", "late")
    .with("master", &master)
    .with("slowest_s", slowest)
    .with(
        "nodes",
        late.iter()
            .take(64)
            .map(|(r, s, e)| serde_json::json!({"rank": r, "resolved_after_s": s, "error": e}))
            .collect::<Vec<_>>(),
    )
    .fix(late_fix(&master))
}

/// `cluster.master-elsewhere`: FAIL on each joined node whose master name led to addresses that
/// failed while another address of rank 0's host worked; a pass when none.
pub(crate) fn master_elsewhere(input: &ClusterInput) -> Vec<Finding> {
    let mut out = Vec::new();
    let c10d = input.nodes.iter().any(|(_, f)| f.sys.master_fqdn.is_some());
    for (r, f) in input.nodes {
        if let Some(f) = f
            .master_resolution
            .as_ref()
            .and_then(|m| stale_first(*r, m, input.master_port, c10d))
        {
            out.push(f);
            continue;
        }
        let Some(m) = f
            .master_resolution
            .as_ref()
            .filter(|m| !m.failed.is_empty())
        else {
            continue;
        };
        out.push(elsewhere(
            *r,
            &m.name,
            input.master_port,
            &m.failed,
            m.joined_via.as_deref().unwrap_or("another address"),
            m.worked_name.as_deref(),
            c10d,
        ));
    }
    if out.is_empty() {
        let judged = input
            .nodes
            .iter()
            .filter(|(_, f)| f.master_resolution.is_some())
            .count();
        let status = if judged == 0 {
            Status::Skip
        } else {
            Status::Pass
        };
        out.push(Finding::new(
            ELSEWHERE,
            status,
            "master",
            if judged == 0 {
                "no node reported how it resolved the master address".to_string()
            } else {
                format!(
                    "the master address led every node that joined ({judged}) to an address of rank 0 that answered"
                )
            },
        ));
    }
    out
}

/// FAIL on rank `rank` when the master's name resolved there first to an address that did not
/// answer within the join's wait, while a later address of the same name led to rank 0: the
/// job's store client dials the list in order and waits on the first for its whole timeout.
fn stale_first(
    rank: u32,
    m: &crate::core::MasterResolution,
    port: u16,
    c10d: bool,
) -> Option<Finding> {
    let first = m.addrs.first()?;
    let tried = m
        .passed_over
        .first()
        .filter(|t| &t.address == first && t.result == "timeout")?;
    let via = m.joined_via.as_deref()?;
    let worked = via
        .rsplit_once(':')
        .map_or(via, |(h, _)| h)
        .trim_matches(|c| c == '[' || c == ']')
        .to_string();
    let origin = m.origins.first().filter(|o| &o.address == first);
    let from = origin.map_or(String::new(), |o| format!(" ({})", o.describe()));
    let master = &m.name;
    let mut hint = String::new();
    let mut fix_cmds = Vec::new();
    if let Some((file, line)) = origin.and_then(|o| Some((o.file.as_deref()?, o.line?))) {
        hint.push_str(&format!(
            "Remove the stale line ({file} line {line} here) so {master} resolves first to {worked}; or "
        ));
        let written = origin
            .and_then(|o| o.text.as_deref()?.split_whitespace().next())
            .filter(|w| w.parse::<std::net::IpAddr>().ok() == first.parse().ok())
            .unwrap_or(first);
        fix_cmds.push(format!(
            "{}   # here: drops line {line}, {first} {master}",
            super::fqdn::drop_hosts_line(file, line, written)
        ));
    } else {
        hint.push_str(&format!(
            "Fix the DNS record that gives {first} first for {master}; or "
        ));
    }
    hint.push_str(&format!(
        "give every node the master as its IP address {worked} (MASTER_ADDR, --master-addr; under torchrun's c10d rendezvous also --local-addr on rank 0)"
    ));
    let mut fix = Fix::new(hint);
    for c in fix_cmds {
        fix = fix.command(c);
    }
    fix = fix
        .command(format!("export MASTER_ADDR={worked}"))
        .command(format!(
            "torchrun --master-addr={worked} ...   # on every node"
        ));
    if c10d {
        fix = fix.command(format!(
            "torchrun --local-addr={worked} ...   # on rank 0, under the c10d rendezvous"
        ));
    }
    fix = fix.command(format!(
        "getent ahosts {master}   # here: the addresses in the order the job dials them"
    ));
    Some(
        Finding::new(
            ELSEWHERE,
            Status::Fail,
            host_port(master, port),
            format!(
                "on rank {rank} the master address {master} resolves first to {first}{from}, which did not answer on port {port} ({}), and only after it to {via}, where rank 0 answers: torchrun's store client dials getaddrinfo's list in order and waits on the first address for its whole connect timeout (`The client socket has timed out after ... while trying to connect to ({master}, {port})`), although rank 0 is reachable",
                tried.error
            ),
        )
        .on_node(Some(rank))
        .with("cause", "stale-first-address")
        .with("master", master)
        .with("port", port)
        .with("first_address", first)
        .with("first_origin", origin)
        .with("passed_over", &m.passed_over)
        .with("worked", &worked)
        .with("resolved", &m.addrs)
        .with("origins", &m.origins)
        .fix(fix),
    )
}

/// The finding for one node: the name's addresses with what each gave, the one that worked.
fn elsewhere(
    rank: u32,
    master: &str,
    port: u16,
    failed: &[AddressTry],
    joined_via: &str,
    worked_name: Option<&str>,
    c10d: bool,
) -> Finding {
    let worked_ip = joined_via
        .rsplit_once(':')
        .map(|(h, _)| h.trim_matches(|c| c == '[' || c == ']'))
        .unwrap_or(joined_via)
        .to_string();
    let gave: Vec<String> = failed
        .iter()
        .take(LIST_CAP)
        .map(|t| format!("{} ({})", host_port(&t.address, port), t.result))
        .collect();
    let through = worked_name.map_or(String::new(), |n| format!(", which {n} resolves to"));
    let good_name = worked_name.unwrap_or(&worked_ip);
    let mut fix = Fix::new(format!(
        "Give every node a master address that leads to {worked_ip}: its IP or the name that resolves to it ({good_name}), instead of {master}; or make {master} resolve to {worked_ip} on this node"
    ))
    .command(format!("export MASTER_ADDR={worked_ip}"))
    .command(format!("torchrun --master-addr={good_name} ...   # on every node"));
    if c10d {
        fix = fix.command(format!(
            "torchrun --local-addr={worked_ip} ...   # on rank 0, under the c10d rendezvous"
        ));
    }
    fix = fix.command(format!(
        "getent hosts {master}   # here: where the name leads"
    ));
    Finding::new(
        ELSEWHERE,
        Status::Fail,
        host_port(master, port),
        format!(
            "on rank {rank} the master address {master} leads to {}, while rank 0's host answers at {joined_via}{through}: the job's processes here dial {master} and fail, although rank 0 is reachable",
            gave.join(", ")
        ),
    )
    .on_node(Some(rank))
    .with("cause", "name-leads-elsewhere")
    .with("master", master)
    .with("port", port)
    .with("failed", failed)
    .with("worked", &worked_ip)
    .with("worked_name", worked_name)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use crate::core::{AddressTry, MasterResolution, Status};
    use crate::testkit::*;

    fn resolution(c: &mut Cluster, rank: usize, m: MasterResolution) {
        c.facts[rank].master_resolution = Some(m);
    }

    fn plain(via: &str) -> MasterResolution {
        MasterResolution {
            name: "node0".into(),
            addrs: vec![via.into()],
            joined_via: Some(format!("{via}:29500")),
            ..Default::default()
        }
    }

    #[test]
    fn a_name_that_leads_to_a_failing_address_names_both_addresses_and_the_fix() {
        let mut c = Cluster::healthy(3);
        resolution(&mut c, 0, plain("10.0.0.1"));
        resolution(&mut c, 1, plain("10.0.0.1"));
        resolution(
            &mut c,
            2,
            MasterResolution {
                addrs: vec!["10.9.0.1".into()],
                joined_via: Some("10.0.0.1:29500".into()),
                failed: vec![AddressTry {
                    address: "10.9.0.1".into(),
                    result: "refused".into(),
                    error: "Connection refused".into(),
                }],
                worked_name: Some("node0.data".into()),
                ..plain("10.0.0.1")
            },
        );
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::MASTER_ELSEWHERE);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(2));
        assert!(
            f.summary.contains(
                "the master address node0 leads to 10.9.0.1:29500 (refused), while rank 0's host answers at 10.0.0.1:29500, which node0.data resolves to"
            ),
            "{}",
            f.summary
        );
        let cmds = commands(f);
        assert_eq!(cmds[0], "export MASTER_ADDR=10.0.0.1");
        assert!(cmds[1].contains("--master-addr=node0.data"), "{cmds:?}");
        assert_eq!(f.evidence["failed"][0]["result"], "refused");
        assert_eq!(
            only(&fs, crate::rendezvous::ids::MASTER_LATE).status,
            Status::Pass
        );
    }

    #[test]
    fn a_name_that_appeared_late_warns_with_the_time_and_publish_not_ready_addresses() {
        let mut c = Cluster::healthy(2);
        resolution(&mut c, 0, plain("10.0.0.1"));
        resolution(
            &mut c,
            1,
            MasterResolution {
                resolved_after_s: Some(4.2),
                resolve_error: Some("Name or service not known".into()),
                ..plain("10.0.0.1")
            },
        );
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::MASTER_LATE);
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.summary
                .contains("after 4.2 s (Name or service not known until then)"),
            "{}",
            f.summary
        );
        assert!(
            f.fix
                .as_ref()
                .unwrap()
                .hint
                .contains("publishNotReadyAddresses: true")
        );
        assert_eq!(f.evidence["slowest_s"], 4.2);
        assert_eq!(
            only(&fs, crate::rendezvous::ids::MASTER_ELSEWHERE).status,
            Status::Pass
        );
    }

    #[test]
    fn a_name_that_never_resolved_says_the_whole_timeout() {
        let f = crate::rendezvous::master_name::master_never_resolved(
            1,
            "master-0.train",
            29500,
            30.0,
            "Name or service not known",
        );
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.node, Some(1));
        assert!(
            f.summary
                .contains("did not resolve on this node for the whole join timeout (30 s"),
            "{}",
            f.summary
        );
        assert!(
            commands(&f)
                .iter()
                .any(|c| c.contains("publishNotReadyAddresses"))
        );
    }

    #[test]
    fn no_reports_skip() {
        let mut c = Cluster::healthy(2);
        c.facts.iter_mut().for_each(|f| f.master_resolution = None);
        let fs = c.findings();
        assert_eq!(
            only(&fs, crate::rendezvous::ids::MASTER_LATE).status,
            Status::Skip
        );
        assert_eq!(
            only(&fs, crate::rendezvous::ids::MASTER_ELSEWHERE).status,
            Status::Skip
        );
    }

    #[test]
    fn a_stale_first_address_of_the_master_name_fails_with_its_line_and_the_ip() {
        let mut c = Cluster::healthy(2);
        resolution(&mut c, 0, plain("10.0.0.1"));
        let m: MasterResolution = serde_json::from_value(serde_json::json!({
            "name": "fake-host",
            "addrs": ["10.0.0.77", "10.0.0.1"],
            "joined_via": "10.0.0.1:29500",
            "origins": [
                {"address": "10.0.0.77", "source": "files", "file": "/etc/hosts", "line": 1,
                 "text": "10.0.0.77 fake-host"},
                {"address": "10.0.0.1", "source": "files", "file": "/etc/hosts", "line": 2}
            ],
            "passed_over": [{"address": "10.0.0.77", "result": "timeout",
                             "error": "connection timed out"}]
        }))
        .unwrap();
        resolution(&mut c, 1, m.clone());
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::MASTER_ELSEWHERE);
        assert_eq!(f.status, Status::Fail, "{f:#?}");
        assert_eq!(f.node, Some(1));
        assert!(
            f.summary.contains(
                "the master address fake-host resolves first to 10.0.0.77 (/etc/hosts line 1), which did not answer on port 29500 (connection timed out), and only after it to 10.0.0.1:29500, where rank 0 answers"
            ),
            "{}",
            f.summary
        );
        let cmds = commands(f);
        assert_eq!(
            cmds[0],
            r#"t=$(mktemp) && sed '1{/^10\.0\.0\.77[[:space:]]/d}' /etc/hosts > "$t" && cat "$t" > /etc/hosts && rm "$t"   # here: drops line 1, 10.0.0.77 fake-host"#
        );
        assert_eq!(cmds[1], "export MASTER_ADDR=10.0.0.1");
        assert_eq!(f.evidence["first_origin"]["line"], 1);
        // A refused first address: the store client moves on to the next at once.
        let mut refused = m.clone();
        refused.passed_over[0].result = "refused".into();
        resolution(&mut c, 1, refused);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::MASTER_ELSEWHERE).status,
            Status::Pass
        );
        // The stale address second: the join went through the first.
        let mut second = m;
        second.addrs.reverse();
        second.origins.reverse();
        second.passed_over.clear();
        resolution(&mut c, 1, second);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::MASTER_ELSEWHERE).status,
            Status::Pass
        );
    }
}

//! `cluster.fqdn`: under torchrun's c10d rendezvous the workers reach the TCPStore at the name
//! rank 0 publishes, `socket.getfqdn()`, unless `--local-addr` is given (pytorch/pytorch
//! #73682, #150532). Every other node must resolve that name to an address of rank 0 it
//! reached.

use crate::core::ClusterInput;
use crate::core::cluster_common::LIST_CAP;
use crate::core::{AddressOrigin, Finding, Fix, LinkOutcome, NameLookup, NodeFacts, Status};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// Nodes named in the evidence; the count says how many there were in all.
const NODES_SHOWN: usize = 64;

/// A node where the name does not lead to rank 0: why in words, the evidence, and the stale
/// first address when that is the cause (the job fails there: FAIL).
struct Bad {
    rank: u32,
    why: String,
    evidence: Value,
    stale: Option<Stale>,
}

/// The resolver's first address on a node: not rank 0's, and silent for the whole dial.
struct Stale {
    address: IpAddr,
    origin: Option<AddressOrigin>,
}

impl Stale {
    /// The address as its hosts line writes it (`fd00:0::9` for `fd00::9`), for a command
    /// that matches the line.
    fn written(&self) -> String {
        self.origin
            .as_ref()
            .and_then(|o| o.text.as_deref()?.split_whitespace().next())
            .filter(|w| w.parse() == Ok(self.address))
            .map_or_else(|| self.address.to_string(), str::to_string)
    }
}

pub(super) fn fqdn(input: &ClusterInput) -> Finding {
    let id = crate::rendezvous::ids::FQDN;
    let lookups: Vec<(u32, &NameLookup, &NodeFacts)> = input
        .nodes
        .iter()
        .filter_map(|(r, f)| f.sys.master_fqdn.as_ref().map(|l| (*r, l, *f)))
        .collect();
    let Some(name) = lookups
        .iter()
        .find(|(r, _, _)| *r != 0)
        .map(|(_, l, _)| l.name.clone())
    else {
        return Finding::new(
            id,
            Status::Skip,
            "fqdn",
            "not a c10d rendezvous (or no node looked rank 0's name up): the static rendezvous uses the master address as given",
        );
    };
    // Rank 0's addresses each node reached, from the links (indexed once).
    let mut reached: HashMap<u32, BTreeSet<IpAddr>> = HashMap::new();
    for l in input
        .links
        .to_rank(0)
        .filter(|l| l.result == LinkOutcome::Ok)
    {
        if let Ok(ip) = l.address.parse::<IpAddr>() {
            reached.entry(l.from).or_default().insert(ip);
        }
    }
    let rank0_own = own_addrs(input.facts(0));
    let mut bad: Vec<Bad> = Vec::new();
    for (r, l, f) in &lookups {
        let theirs = reached.get(r);
        // Rank 0's addresses as seen from this node: those it reached, and rank 0's own that
        // are not also this node's (every node has the same docker0 address).
        let mine = own_addrs(Some(f));
        let is_rank0 = |a: &IpAddr| {
            theirs.is_some_and(|t| t.contains(a))
                || (rank0_own.contains(a) && (*r == 0 || !mine.contains(a)))
        };
        if let Some(b) = judge_node(input, &name, *r, l, theirs, &is_rank0) {
            bad.push(b);
        }
    }
    let judged = lookups.iter().filter(|(r, _, _)| *r != 0).count();
    if bad.is_empty() {
        return Finding::new(
            id,
            Status::Pass,
            name.clone(),
            format!(
                "rank 0's FQDN {name} (what torchrun's c10d publishes) resolves on every node to an address of rank 0 it reached, first in the order the workers dial ({judged} node(s) checked)"
            ),
        )
        .with("fqdn", &name)
        .with("nodes_checked", judged);
    }
    // The nodes where the job fails come first: they set the status and the example.
    bad.sort_by_key(|b| (b.stale.is_none(), b.rank));
    let target = input
        .chosen
        .and_then(|e| e.network.members.get(&0))
        .map(|m| m.address.to_string())
        .or_else(|| {
            reached
                .values()
                .flat_map(|s| s.iter())
                .next()
                .map(|a| a.to_string())
        });
    let stale = bad.iter().any(|b| b.stale.is_some());
    let summary = summary(&name, &bad, stale, judged);
    let fix = if stale {
        stale_fix(input, &name, &bad, target.as_deref())
    } else {
        resolve_fix(input, &name, target.as_deref())
    };
    let mut f = Finding::new(
        id,
        if stale { Status::Fail } else { Status::Warn },
        name.clone(),
        summary,
    )
    .with("fqdn", &name)
    .with("nodes_checked", judged)
    .with("nodes_failing", bad.len())
    .with(
        "nodes",
        bad.iter()
            .take(NODES_SHOWN)
            .map(|b| b.evidence.clone())
            .collect::<Vec<_>>(),
    )
    .with("rank0_address", &target);
    if let Some(s) = bad.iter().find_map(|b| b.stale.as_ref()) {
        f = f
            .with("cause", "stale-first-address")
            .with("first_address", s.address.to_string())
            .with("first_origin", &s.origin);
    }
    f.fix(fix)
}

/// The finding's sentence: the one node's cause with what the job does, or how many nodes and
/// the first one's cause.
fn summary(name: &str, bad: &[Bad], stale: bool, judged: usize) -> String {
    let ranks: Vec<u32> = bad.iter().map(|b| b.rank).collect();
    // The workers judged, and rank 0 when its own lookup is one of the causes.
    let of = judged + usize::from(ranks.contains(&0));
    let first = &bad[0].why;
    if bad.len() == 1 && stale {
        format!(
            "{first}: the workers' TCPStore client dials the name's addresses in getaddrinfo's order and waits on the first for its whole connect timeout, so they time out at init (`The client socket has timed out ... while trying to connect to ({name}, <port>)`) although rank 0 is reachable"
        )
    } else if bad.len() == 1 {
        format!(
            "{first}: under torchrun's c10d rendezvous the workers connect to rank 0's TCPStore at the name it publishes, so this node's workers would time out at init"
        )
    } else {
        format!(
            "rank 0's FQDN {name} (what torchrun's c10d publishes for the TCPStore) does not lead to rank 0 on {} of {of} nodes ({}); e.g. {first}: their workers would time out at init",
            bad.len(),
            crate::core::cluster_common::ranks_phrase(&ranks)
        )
    }
}

/// What is wrong with `name` on rank `r` (its lookup `l`), if anything: nothing resolved,
/// loopback only, a first address that is not rank 0's and did not answer, or no address of
/// rank 0 this node reached. Rank 0 itself is judged on the first address alone.
fn judge_node(
    input: &ClusterInput,
    name: &str,
    r: u32,
    l: &NameLookup,
    theirs: Option<&BTreeSet<IpAddr>>,
    is_rank0: &dyn Fn(&IpAddr) -> bool,
) -> Option<Bad> {
    let got: &[IpAddr] = &l.addresses;
    let mut evidence = json!({"rank": r, "host": input.host(r), "resolved": got, "error": l.error});
    if !l.origins.is_empty() {
        evidence["origins"] = json!(l.origins);
    }
    if let Some(d) = &l.first_dial {
        evidence["first_dial"] = json!(d);
    }
    if let Some((stale, why)) = stale_first(input, name, r, l, is_rank0) {
        evidence["cause"] = json!("stale-first-address");
        return Some(Bad {
            rank: r,
            why,
            evidence,
            stale: Some(stale),
        });
    }
    if r == 0 {
        return None;
    }
    let why = if got.is_empty() {
        format!(
            "{name} does not resolve on {} ({})",
            input.who(r),
            l.error.as_deref().unwrap_or("no address")
        )
    } else if got.iter().all(|a| a.is_loopback()) {
        format!(
            "{name} resolves to loopback {} on {}",
            list(got),
            input.who(r)
        )
    } else if !got.iter().any(|a| theirs.is_some_and(|t| t.contains(a))) {
        format!(
            "{name} resolves to {} on {}, an address of rank 0 it did not reach{}",
            list(got),
            input.who(r),
            match theirs {
                Some(t) if !t.is_empty() => format!(
                    " (it reached rank 0 at {})",
                    list(&t.iter().copied().collect::<Vec<_>>())
                ),
                _ => String::new(),
            }
        )
    } else {
        return None;
    };
    Some(Bad {
        rank: r,
        why,
        evidence,
        stale: None,
    })
}

/// The resolver's first address on rank `r` when it is not rank 0's and the node's dial to it
/// timed out, with the sentence that says so (its source, and rank 0's address later in the
/// list when there is one).
fn stale_first(
    input: &ClusterInput,
    name: &str,
    r: u32,
    l: &NameLookup,
    is_rank0: &dyn Fn(&IpAddr) -> bool,
) -> Option<(Stale, String)> {
    let first = *l.addresses.first()?;
    let dial = l.first_dial.as_ref()?;
    if is_rank0(&first) || dial.result != "timeout" || dial.address.parse() != Ok(first) {
        return None;
    }
    let origin_of = |i: usize| {
        l.origins
            .get(i)
            .filter(|o| o.address.parse() == Ok(l.addresses[i]))
            .cloned()
    };
    let origin = origin_of(0);
    let from = origin
        .as_ref()
        .map_or(String::new(), |o| format!(" ({})", described(o)));
    let then = match l.addresses.iter().position(is_rank0) {
        Some(i) => format!(
            ", and only after it ({} in the list) to rank 0's {}{}",
            ordinal(i + 1),
            l.addresses[i],
            origin_of(i).map_or(String::new(), |o| format!(" ({})", o.describe()))
        ),
        None => String::new(),
    };
    let why = format!(
        "on {} rank 0's FQDN {name} resolves first to {first}{from}, which is not rank 0 and did not answer on port {} within {:.0} s{then}",
        input.who(r),
        dial.port,
        dial.timeout_s
    );
    Some((
        Stale {
            address: first,
            origin,
        },
        why,
    ))
}

/// The command that drops line `line` of `file` when it still maps the address `written` (as
/// the line writes it). It rewrites the file in place instead of `sed -i`'s rename, which fails
/// on a bind-mounted /etc/hosts (Docker, Kubernetes pods).
pub(super) fn drop_hosts_line(file: &str, line: u32, written: &str) -> String {
    format!(
        "t=$(mktemp) && sed '{line}{{/^{}[[:space:]]/d}}' {file} > \"$t\" && cat \"$t\" > {file} && rm \"$t\"",
        written.replace('.', "\\.")
    )
}

/// `/etc/hosts line 1: 10.0.0.9 fake-host`, or `DNS`.
fn described(o: &AddressOrigin) -> String {
    match &o.text {
        Some(t) if o.line.is_some() => format!("{}: {t}", o.describe()),
        _ => o.describe(),
    }
}

fn ordinal(n: usize) -> String {
    match n {
        1 => "1st".into(),
        2 => "2nd".into(),
        3 => "3rd".into(),
        n => format!("{n}th"),
    }
}

/// Every interface address of a node (none when its facts are missing).
fn own_addrs(f: Option<&NodeFacts>) -> Vec<IpAddr> {
    f.map(|f| {
        f.net
            .interfaces
            .iter()
            .flat_map(|i| i.ipv4.iter().chain(&i.ipv6).map(|a| a.addr))
            .collect()
    })
    .unwrap_or_default()
}

/// The fix for a name that does not resolve, or not to rank 0: publish the address instead,
/// or make the name resolve to it.
fn resolve_fix(input: &ClusterInput, name: &str, target: Option<&str>) -> Fix {
    let mut fix = Fix::new(format!(
        "Either start rank 0's torchrun with --local-addr=<its address on the chosen network> (torchrun then publishes that address instead of {name}), or make {name} resolve to that address on every node (DNS or /etc/hosts)"
    ));
    if let Some(addr) = target {
        fix = fix
            .command(format!(
                "torchrun --local-addr={addr} ...   # on rank 0 ({}), with the rest of its line",
                input.host(0).unwrap_or_default()
            ))
            .command(format!(
                "echo '{addr} {name}' >> /etc/hosts   # on the nodes above"
            ));
    }
    fix.command(format!(
        "getent hosts {name}   # on a node above: what it resolves to"
    ))
}

/// The fix for a stale first address: drop the line that gives it (per file line, on the
/// nodes that have it), or keep the name out of the job's path (`--local-addr`, or the static
/// rendezvous with the IP).
fn stale_fix(input: &ClusterInput, name: &str, bad: &[Bad], target: Option<&str>) -> Fix {
    // The hosts lines to drop, each with the ranks that have it.
    let mut lines: BTreeMap<(String, u32, String), Vec<u32>> = BTreeMap::new();
    let mut dns: Vec<(u32, IpAddr)> = Vec::new();
    for b in bad {
        let Some(s) = &b.stale else { continue };
        match s
            .origin
            .as_ref()
            .and_then(|o| Some((o.file.clone()?, o.line?)))
        {
            Some((file, line)) => lines
                .entry((file, line, s.written()))
                .or_default()
                .push(b.rank),
            None => dns.push((b.rank, s.address)),
        }
    }
    let addr = target.unwrap_or("<rank 0's address>");
    let mut hint = String::new();
    if let Some(((file, line, stale), ranks)) = lines.iter().next() {
        hint.push_str(&format!(
            "Remove the stale line that makes {name} resolve first to {stale} ({file} line {line} on {}{}), so the workers dial rank 0 first; ",
            crate::core::cluster_common::ranks_phrase(ranks),
            if lines.len() > 1 { ", and the others below" } else { "" }
        ));
    }
    if let Some((r, a)) = dns.first() {
        hint.push_str(&format!(
            "Fix the DNS record that gives {a} first for {name} (on rank {r}), so the workers dial rank 0 first; "
        ));
    }
    hint.push_str(&format!(
        "or keep the name out of the job's path: start rank 0's torchrun with --local-addr={addr} (torchrun then publishes the address, not {name}), or use the static rendezvous with the IP (--rdzv-backend=static --master-addr={addr})"
    ));
    let mut fix = Fix::new(hint);
    for ((file, line, stale), ranks) in lines.iter().take(LIST_CAP) {
        fix = fix.command(format!(
            "{}   # on {}: drops line {line}, {stale} {name}",
            drop_hosts_line(file, *line, stale),
            crate::core::cluster_common::ranks_phrase(ranks)
        ));
    }
    fix.command(format!(
        "torchrun --local-addr={addr} ...   # on rank 0 ({}), with the rest of its line",
        input.host(0).unwrap_or_default()
    ))
    .command(format!(
        "torchrun --rdzv-backend=static --master-addr={addr} --master-port={} --node-rank=<rank> ...   # or, on every node",
        input.master_port
    ))
    .command(format!(
        "getent ahosts {name}   # on a node above: the addresses in the order the job dials them"
    ))
}

fn list(addrs: &[IpAddr]) -> String {
    addrs
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use crate::core::{NameLookup, Status};
    use crate::testkit::*;
    use serde_json::json;

    fn c10d(c: &mut Cluster, resolved: &[(u32, &[&str])]) {
        for (r, addrs) in resolved {
            c.facts[*r as usize].sys.master_fqdn = Some(NameLookup {
                name: "node01.cluster.local".into(),
                addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
                error: addrs.is_empty().then(|| "Name or service not known".into()),
                ..Default::default()
            });
        }
    }

    #[test]
    fn a_static_rendezvous_is_skipped() {
        let fs = Cluster::healthy(3).findings();
        assert_eq!(only(&fs, crate::rendezvous::ids::FQDN).status, Status::Skip);
    }

    #[test]
    fn every_node_resolving_to_a_reached_address_passes() {
        let mut c = Cluster::healthy(3);
        c10d(&mut c, &[(1, &["10.0.0.1"]), (2, &["10.0.0.1"])]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert_eq!(f.evidence["nodes_checked"], 2);
    }

    #[test]
    fn a_node_where_the_name_does_not_resolve_or_leads_elsewhere_warns_with_the_fix() {
        let mut c = Cluster::healthy(4);
        c10d(
            &mut c,
            &[(1, &["10.0.0.1"]), (2, &[]), (3, &["192.168.77.1"])],
        );
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert_eq!(f.evidence["nodes_failing"], 2);
        assert!(
            f.summary.contains("on 2 of 3 nodes (ranks 2, 3)"),
            "{}",
            f.summary
        );
        assert!(
            f.summary.contains("does not resolve on rank 2"),
            "{}",
            f.summary
        );
        let nodes = f.evidence["nodes"].as_array().unwrap();
        assert_eq!(nodes[1]["resolved"][0], "192.168.77.1");
        let cmds = commands(f);
        assert!(
            cmds[0].starts_with("torchrun --local-addr=10.0.0.1 "),
            "{cmds:?}"
        );
        assert_eq!(
            cmds[1],
            "echo '10.0.0.1 node01.cluster.local' >> /etc/hosts   # on the nodes above"
        );
    }

    #[test]
    fn loopback_is_not_rank_0() {
        let mut c = Cluster::healthy(2);
        c10d(&mut c, &[(1, &["127.0.1.1"])]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.contains("loopback"), "{}", f.summary);
    }

    /// Rank `r`'s lookup of `fake-host` as a node writes it into its facts (JSON): the stale
    /// box 10.0.0.77 and rank 0's 10.0.0.1 from /etc/hosts lines 2 and 3 in `order`, and the
    /// dial of the first address when it is not rank 0's (the stale box drops everything).
    fn lookup_json(order: &[&str]) -> NameLookup {
        let line = |a: &str| if a == "10.0.0.77" { 2 } else { 3 };
        let origins: Vec<_> = order
            .iter()
            .map(|a| {
                json!({"address": a, "source": "files", "file": "/etc/hosts", "line": line(a),
                       "text": format!("{a} fake-host")})
            })
            .collect();
        let mut v = json!({"name": "fake-host", "addresses": order, "origins": origins});
        if order[0] == "10.0.0.77" {
            v["first_dial"] = json!({"address": "10.0.0.77", "port": 29500, "result": "timeout",
                                     "error": "connection timed out", "timeout_s": 2.0});
        }
        serde_json::from_value(v).unwrap()
    }

    fn with_lookup(c: &mut Cluster, r: usize, order: &[&str]) {
        c.facts[r].sys.master_fqdn = Some(lookup_json(order));
    }

    #[test]
    fn a_stale_first_address_that_does_not_answer_fails_naming_it_and_its_line() {
        let mut c = Cluster::healthy(3);
        with_lookup(&mut c, 1, &["10.0.0.77", "10.0.0.1"]);
        with_lookup(&mut c, 2, &["10.0.0.1", "10.0.0.77"]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Fail, "{f:#?}");
        assert_eq!(f.evidence["nodes_failing"], 1);
        assert_eq!(f.evidence["first_address"], "10.0.0.77");
        assert_eq!(f.evidence["first_origin"]["line"], 2);
        assert_eq!(f.evidence["nodes"][0]["rank"], 1);
        assert!(
            f.summary.contains(
                "on rank 1 (node02) rank 0's FQDN fake-host resolves first to 10.0.0.77 (/etc/hosts line 2: 10.0.0.77 fake-host), which is not rank 0 and did not answer on port 29500 within 2 s, and only after it (2nd in the list) to rank 0's 10.0.0.1 (/etc/hosts line 3)"
            ),
            "{}",
            f.summary
        );
        assert!(f.summary.contains("getaddrinfo's order"), "{}", f.summary);
        let cmds = commands(f);
        assert_eq!(
            cmds[0],
            r#"t=$(mktemp) && sed '2{/^10\.0\.0\.77[[:space:]]/d}' /etc/hosts > "$t" && cat "$t" > /etc/hosts && rm "$t"   # on rank 1: drops line 2, 10.0.0.77 fake-host"#
        );
        assert!(
            cmds[1].starts_with("torchrun --local-addr=10.0.0.1 "),
            "{cmds:?}"
        );
        assert!(
            cmds[2].starts_with(
                "torchrun --rdzv-backend=static --master-addr=10.0.0.1 --master-port=29500 "
            ),
            "{cmds:?}"
        );
        assert!(cmds[3].starts_with("getent ahosts fake-host"), "{cmds:?}");
        let hint = &f.fix.as_ref().unwrap().hint;
        assert!(hint.contains("Remove the stale line"), "{hint}");
    }

    #[test]
    fn a_stale_second_address_or_rank_0s_first_passes() {
        let mut c = Cluster::healthy(3);
        with_lookup(&mut c, 1, &["10.0.0.1", "10.0.0.77"]);
        with_lookup(&mut c, 2, &["10.0.0.1"]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert!(f.summary.contains("first in the order"), "{}", f.summary);
    }

    #[test]
    fn a_first_address_that_answers_or_was_not_dialled_passes_as_before() {
        let mut c = Cluster::healthy(2);
        let mut l = lookup_json(&["10.0.0.77", "10.0.0.1"]);
        l.first_dial.as_mut().unwrap().result = "refused".into();
        c.facts[1].sys.master_fqdn = Some(l.clone());
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::FQDN).status,
            Status::Pass
        );
        // Facts of a release before the dial: the order cannot be judged, the rest is.
        l.first_dial = None;
        c.facts[1].sys.master_fqdn = Some(l);
        assert_eq!(
            only(&c.findings(), crate::rendezvous::ids::FQDN).status,
            Status::Pass
        );
    }

    #[test]
    fn rank_0s_own_stale_first_address_fails_too_and_its_own_address_passes() {
        let mut c = Cluster::healthy(2);
        with_lookup(&mut c, 1, &["10.0.0.1"]);
        with_lookup(&mut c, 0, &["10.0.0.77", "10.0.0.1"]);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Fail, "{f:#?}");
        assert_eq!(f.evidence["nodes"][0]["rank"], 0);
        // The same stale address on a worker, where it is that worker's own docker0: not rank
        // 0's, whatever rank 0 holds.
        with_lookup(&mut c, 0, &["10.0.0.1"]);
        let mut l = lookup_json(&["10.0.0.77", "10.0.0.1"]);
        l.addresses[0] = "172.17.0.1".parse().unwrap();
        l.origins.clear();
        l.first_dial.as_mut().unwrap().address = "172.17.0.1".into();
        c.facts[1].sys.master_fqdn = Some(l);
        let fs = c.findings();
        let f = only(&fs, crate::rendezvous::ids::FQDN);
        assert_eq!(f.status, Status::Fail, "{f:#?}");
        assert!(
            f.summary.contains("172.17.0.1, which is not rank 0"),
            "{}",
            f.summary
        );
        assert!(
            f.fix.as_ref().unwrap().hint.contains("Fix the DNS record"),
            "{f:#?}"
        );
    }
}

//! `net.nccl-auto-pick`: with `NCCL_SOCKET_IFNAME` unset, NCCL picks interfaces by itself (`ib*`, else
//! everything but `docker*`/`lo*`/`virbr*`) and uses all of them; this names the picks the other
//! nodes cannot reach (a link-local address every node shares, a second NIC without a route, a
//! wireless or management NIC) and what happens to the job without the advised value.

use crate::core::ClusterInput;
use crate::core::{Finding, Fix, Interface, LinkOutcome, Recommendation, Status};
use crate::core::{Label, Links, side_of};
use crate::net::ifname::{IfnameSpec, nccl_default_select};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

pub use crate::net::ids::NCCL_AUTO_PICK as ID;
const VAR: &str = "NCCL_SOCKET_IFNAME";
/// Groups of (interface, cause) written out in the summary; the rest are counted.
const GROUPS_SHOWN: usize = 4;
/// Nodes listed per group in the evidence; the count says how many there were.
const NODES_SHOWN: usize = 64;
/// A hostlist in the summary is cut to about this many characters.
const HOSTS_CHARS: usize = 40;

/// Name prefixes of NICs that are not meant for a job's traffic: wireless, and the USB or
/// dedicated NICs of a BMC (iDRAC, iLO, IPMI) or a management network.
const WIRELESS: &[&str] = &["wl", "ww"];
const MANAGEMENT: &[&str] = &["usb", "idrac", "ilo", "bmc", "ipmi", "mgmt", "mgt"];

/// Why the peers cannot use one of NCCL's picks.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cause {
    /// Its only address is link-local (169.254/16, fe80::/10): never routed off the link.
    LinkLocal,
    /// The same address sits on several nodes: a peer dialling it reaches itself or a stranger.
    Shared,
    /// Peers dialled it and did not get through.
    NotReached,
    /// A wireless NIC.
    Wireless,
    /// A BMC's or a management network's NIC.
    Management,
}

impl Cause {
    fn key(&self) -> &'static str {
        match self {
            Cause::LinkLocal => "link-local",
            Cause::Shared => "shared-address",
            Cause::NotReached => "not-reached",
            Cause::Wireless => "wireless",
            Cause::Management => "management",
        }
    }
}

/// Bad picks are told in groups of one cause, one interface name and one role (bootstrap or not).
type GroupKey = (Cause, String, bool);

/// One of NCCL's picks on one node that the job cannot use.
struct BadPick {
    rank: u32,
    iface: String,
    addr: Option<IpAddr>,
    cause: Cause,
    /// NCCL's first pick: the bootstrap (init) goes through it.
    bootstrap: bool,
    /// "0 of 3 peers got through (timeout)", or why it was not measured.
    detail: String,
}

/// The address NCCL advertises for `iface`: getifaddrs order (IPv4, global IPv6, link-local IPv6),
/// the first one, never ::1.
fn nccl_address(iface: &Interface) -> Option<IpAddr> {
    let v6 = |link_local: bool| {
        iface.ipv6.iter().map(|a| a.addr).find(|a| match a {
            IpAddr::V6(v) => {
                !v.is_loopback() && ((v.segments()[0] & 0xffc0 == 0xfe80) == link_local)
            }
            IpAddr::V4(_) => false,
        })
    };
    iface
        .ipv4
        .first()
        .map(|a| a.addr)
        .or_else(|| v6(false))
        .or_else(|| v6(true))
}

fn is_link_local(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => v.is_link_local(),
        IpAddr::V6(v) => v.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn named_like(name: &str, prefixes: &[&str]) -> bool {
    let lower = name.to_ascii_lowercase();
    prefixes.iter().any(|p| lower.starts_with(p))
}

/// The nodes that leave the choice to NCCL: no `NCCL_SOCKET_IFNAME`, or one NCCL ignores (one byte or less).
fn auto_ranks(input: &ClusterInput) -> Vec<u32> {
    input
        .nodes
        .iter()
        .filter(|(_, f)| f.env.get(VAR).is_none_or(|v| IfnameSpec::parse(v).ignored))
        .map(|(r, _)| *r)
        .collect()
}

/// How the peers fared dialling one address of one node: (ok, tried, the failures' words).
#[derive(Default)]
struct Dialled {
    ok: usize,
    tried: usize,
    words: Vec<&'static str>,
}

/// The links' outcomes per destination rank and address text, for the addresses NCCL would
/// pick: one pass over the links, then each node is judged against this index (never a scan of
/// every link per node: that is n³ at thousands of nodes).
struct DialIndex {
    /// Per node with picks: its picks' address texts with their outcomes.
    slots: Vec<Vec<(String, Dialled)>>,
    /// Rank -> slot: indexed by rank where the ranks are a cluster's, else the map.
    near: Vec<u32>,
    far: HashMap<u32, u32>,
}

impl DialIndex {
    fn of(picks: &BTreeMap<u32, Vec<&Interface>>, links: &Links) -> DialIndex {
        let side = side_of(picks.keys().copied());
        let mut index = DialIndex {
            slots: Vec::new(),
            near: Vec::new(),
            far: HashMap::new(),
        };
        if side <= 1 << 20 {
            index.near = vec![u32::MAX; side as usize];
        }
        for (rank, p) in picks {
            let mut mine: Vec<(String, Dialled)> = Vec::new();
            for a in p.iter().filter_map(|i| nccl_address(i)) {
                let text = a.to_string();
                if !mine.iter().any(|(t, _)| *t == text) {
                    mine.push((text, Dialled::default()));
                }
            }
            let slot = index.slots.len() as u32;
            index.slots.push(mine);
            match index.near.get_mut(*rank as usize) {
                Some(s) => *s = slot,
                None => {
                    index.far.insert(*rank, slot);
                }
            }
        }
        // The table's cells read as bytes (a target judged once, its ok links counted), the
        // records one by one: never a string compared per link.
        let position = |to: u32, address: &Label| {
            let slot = index.slot(to)?;
            let text = address.trim_matches(['[', ']']);
            let pos = index.slots[slot].iter().position(|(t, _)| t == text)?;
            Some((slot, pos))
        };
        let mut plain_ok: Vec<Vec<usize>> = index.slots.iter().map(|m| vec![0; m.len()]).collect();
        let mut records: Vec<(usize, usize, LinkOutcome)> = Vec::new();
        match links.cells() {
            // Every link in a cell: the plain ones counted per target from the state bytes.
            Some(cells) => {
                let every_row = vec![true; cells.rows() as usize];
                let counts = cells.plain_counts(&every_row);
                for (t, n) in cells.targets().iter().zip(counts) {
                    if let Some((slot, pos)) = position(t.to, &t.address) {
                        plain_ok[slot][pos] += n as usize;
                    }
                }
                for l in links.records() {
                    if let Some((slot, pos)) = position(l.to, &l.address) {
                        records.push((slot, pos, l.result));
                    }
                }
            }
            None => links.scan(
                position,
                |_, (slot, pos)| plain_ok[slot][pos] += 1,
                |l, (slot, pos)| records.push((slot, pos, l.result)),
            ),
        }
        for (slot, counts) in plain_ok.into_iter().enumerate() {
            for (pos, ok) in counts.into_iter().enumerate() {
                let d = &mut index.slots[slot][pos].1;
                d.tried += ok;
                d.ok += ok;
            }
        }
        for (slot, pos, result) in records {
            let d = &mut index.slots[slot][pos].1;
            d.tried += 1;
            if result == LinkOutcome::Ok {
                d.ok += 1;
            } else if !d.words.contains(&result.as_str()) {
                d.words.push(result.as_str());
            }
        }
        index
    }

    fn slot(&self, rank: u32) -> Option<usize> {
        let slot = if self.near.is_empty() {
            *self.far.get(&rank)?
        } else {
            *self.near.get(rank as usize)?
        };
        (slot != u32::MAX).then_some(slot as usize)
    }

    /// (ok, tried, the failures' words) for `addr` on `rank`.
    fn get(&self, rank: u32, addr: IpAddr) -> (usize, usize, String) {
        let text = addr.to_string();
        let found = self
            .slot(rank)
            .and_then(|s| self.slots[s].iter().find(|(t, _)| *t == text));
        found.map_or((0, 0, String::new()), |(_, d)| {
            let mut words = d.words.clone();
            words.sort_unstable();
            (d.ok, d.tried, words.join(", "))
        })
    }
}

/// Judges every pick of one node; `holders` counts the nodes holding each address.
fn judge_node(
    input: &ClusterInput,
    rank: u32,
    picks: &[&Interface],
    holders: &HashMap<IpAddr, usize>,
    dialled: &DialIndex,
) -> Vec<BadPick> {
    let mut out = Vec::new();
    // The node's interface on the network the advice uses (or, when none carries every pair, the
    // one judged): its failures are link.unreachable's, and the advised value names it.
    let advised = input
        .chosen
        .or(input.evals.first())
        .and_then(|e| e.network.members.get(&rank))
        .map(|m| m.interface.as_str());
    for (i, iface) in picks.iter().enumerate() {
        let addr = nccl_address(iface);
        let shared = addr.and_then(|a| holders.get(&a)).copied().unwrap_or(0);
        let (ok, tried, words) = addr.map_or((0, 0, String::new()), |a| dialled.get(rank, a));
        let (cause, detail) = if addr.is_some_and(|a| is_link_local(&a)) {
            let on = if shared > 1 {
                format!("link-local, the same address on {shared} nodes")
            } else {
                "link-local".to_string()
            };
            (
                Some(Cause::LinkLocal),
                format!("{on}: never routed to another node"),
            )
        } else if shared > 1 {
            (
                Some(Cause::Shared),
                format!(
                    "the same address on {shared} nodes: a peer dialling it reaches the wrong node"
                ),
            )
        } else if tried > 0 && ok < tried && advised != Some(iface.name.as_str()) {
            (
                Some(Cause::NotReached),
                format!("{ok} of {tried} peers got through to it ({words}): no route or filtered"),
            )
        } else if named_like(&iface.name, WIRELESS) {
            (Some(Cause::Wireless), "a wireless NIC".to_string())
        } else if named_like(&iface.name, MANAGEMENT) {
            (
                Some(Cause::Management),
                "named as a BMC or management NIC, not a data network".to_string(),
            )
        } else {
            (None, String::new())
        };
        if let Some(cause) = cause {
            out.push(BadPick {
                rank,
                iface: iface.name.clone(),
                addr,
                cause,
                bootstrap: i == 0,
                detail,
            });
        }
    }
    out
}

/// What NCCL does with a pick the peers cannot use.
fn consequence(bootstrap: bool) -> &'static str {
    if bootstrap {
        "NCCL's first pick, so its bootstrap advertises it and ncclCommInitRank hangs until the timeout"
    } else {
        "NCCL's socket transport opens connections over these too, and they hang or crawl"
    }
}

/// The fix: the advised value, else one that leaves the bad picks out.
fn fix(rec: &Recommendation, bad: &[BadPick]) -> Fix {
    let fix = Fix::new(
        "Set NCCL_SOCKET_IFNAME on every node as the report advises (its launch commands carry it), so \
         NCCL does not pick by itself",
    );
    if let Some(v) = rec.env.get(VAR) {
        return fix.command(format!("export {VAR}={v}"));
    }
    if !rec.node_env.is_empty() {
        return fix.command(
            "export NCCL_SOCKET_IFNAME=<the per-node value in the report's recommendation>"
                .to_string(),
        );
    }
    let mut names: Vec<&str> = bad.iter().map(|b| b.iface.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    fix.command(format!("export {VAR}=^docker,lo,virbr,{}", names.join(",")))
}

/// How many nodes hold each address that NCCL would pick by itself.
fn address_holders(input: &ClusterInput) -> HashMap<IpAddr, usize> {
    let mut holders: HashMap<IpAddr, usize> = HashMap::new();
    for (_, f) in input.nodes {
        let mut mine: Vec<IpAddr> = nccl_default_select(&f.net.interfaces)
            .iter()
            .filter_map(|i| nccl_address(i))
            .collect();
        mine.sort_unstable();
        mine.dedup();
        for a in mine {
            *holders.entry(a).or_default() += 1;
        }
    }
    holders
}

/// The summary's clauses: the shown groups, bootstrap ones first, one line per group.
fn summary_lines(input: &ClusterInput, order: &[(&GroupKey, &Vec<&BadPick>)]) -> Vec<String> {
    let line = |(_, iface, _): &GroupKey, members: &Vec<&BadPick>| {
        let ranks: Vec<u32> = members.iter().map(|b| b.rank).collect();
        let first = members[0];
        let addr = first
            .addr
            .map(|a| {
                if members.iter().any(|b| b.addr != first.addr) {
                    format!("{a}, ...")
                } else {
                    a.to_string()
                }
            })
            .unwrap_or_else(|| "no address".into());
        format!(
            "{iface} on {} ({addr}: {})",
            input.hosts_within(&ranks, HOSTS_CHARS),
            first.detail
        )
    };
    let shown = &order[..order.len().min(GROUPS_SHOWN)];
    let clause = |boot: bool| {
        let parts: Vec<String> = shown
            .iter()
            .filter(|(k, _)| k.2 == boot)
            .map(|(k, m)| line(k, m))
            .collect();
        (!parts.is_empty()).then(|| format!("{}: {}", parts.join("; "), consequence(boot)))
    };
    [clause(true), clause(false)]
        .into_iter()
        .flatten()
        .collect()
}

/// The evidence: every group with its first picks.
fn pick_evidence(input: &ClusterInput, order: &[(&GroupKey, &Vec<&BadPick>)]) -> Vec<Value> {
    order
        .iter()
        .map(|((cause, iface, boot), members)| {
            json!({
                "interface": iface,
                "cause": cause.key(),
                "bootstrap": boot,
                "nodes": members.len(),
                "picks": members.iter().take(NODES_SHOWN).map(|b| json!({
                    "rank": b.rank,
                    "host": input.host(b.rank),
                    "address": b.addr.map(|a| a.to_string()),
                    "detail": b.detail,
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// The judgment; `rec` is the advice, whose value the fix repeats.
pub fn nccl_auto_pick(input: &ClusterInput, rec: &Recommendation) -> Finding {
    let auto = auto_ranks(input);
    if auto.is_empty() {
        return Finding::new(
            ID,
            Status::Skip,
            VAR,
            "NCCL_SOCKET_IFNAME is set on every node: NCCL does not pick interfaces by itself",
        );
    }
    if input.nodes.len() < 2 {
        return Finding::new(
            ID,
            Status::Skip,
            VAR,
            "one node: no peer to reach what NCCL would pick",
        );
    }
    let auto_set: BTreeSet<u32> = auto.iter().copied().collect();
    let picks: BTreeMap<u32, Vec<&Interface>> = input
        .nodes
        .iter()
        .filter(|(r, _)| auto_set.contains(r))
        .map(|(r, f)| (*r, nccl_default_select(&f.net.interfaces)))
        .collect();
    let holders = address_holders(input);
    let dialled = DialIndex::of(&picks, input.links);
    let bad: Vec<BadPick> = picks
        .iter()
        .flat_map(|(r, p)| judge_node(input, *r, p, &holders, &dialled))
        .collect();
    let hosts = input.hosts_within(&auto, HOSTS_CHARS);
    if bad.is_empty() {
        let mut names: Vec<&str> = picks
            .values()
            .flat_map(|p| p.iter().map(|i| i.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        return Finding::new(
            ID,
            Status::Pass,
            VAR,
            format!(
                "NCCL_SOCKET_IFNAME is unset on {hosts}; what NCCL would pick by itself ({}) is reached by the peers",
                if names.is_empty() { "nothing".to_string() } else { names.join(", ") }
            ),
        )
        .with("nodes", auto.len());
    }
    // One group per (interface, cause, bootstrap): the summary reads one line per group at any size.
    let mut groups: BTreeMap<GroupKey, Vec<&BadPick>> = BTreeMap::new();
    for b in &bad {
        groups
            .entry((b.cause.clone(), b.iface.clone(), b.bootstrap))
            .or_default()
            .push(b);
    }
    let mut order: Vec<(&GroupKey, &Vec<&BadPick>)> = groups.iter().collect();
    order.sort_by_key(|(k, v)| (!k.2, std::cmp::Reverse(v.len())));
    let lines = summary_lines(input, &order);
    let more = order.len().saturating_sub(GROUPS_SHOWN);
    let evidence = pick_evidence(input, &order);
    let bootstrap = bad.iter().any(|b| b.bootstrap);
    let mut f = Finding::new(
        ID,
        Status::Warn,
        VAR,
        format!(
            "NCCL_SOCKET_IFNAME is unset on {hosts}, so NCCL picks interfaces by itself{}: {}{}",
            if bootstrap {
                ", starting with one the peers cannot reach"
            } else {
                ", and some the peers cannot use"
            },
            lines.join("; and "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ),
    )
    .with("auto_nodes", auto.len())
    .with("bad_picks", evidence)
    .fix(fix(rec, &bad));
    if let Some(v) = rec.env.get(VAR) {
        f = f.with("advised", v);
    }
    if bad.iter().all(|b| b.rank == bad[0].rank) {
        f = f.on_node(Some(bad[0].rank));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IfAddr, IfKind, LinkResult, NodeFacts};
    use crate::net::networks::{choose, discover, evaluate};
    use crate::testkit::*;

    fn judge(facts: &[NodeFacts], links: &[LinkResult], advised: Option<&str>) -> Finding {
        let nodes: Vec<(u32, &NodeFacts)> = facts
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f))
            .collect();
        let ranks: Vec<u32> = nodes.iter().map(|(r, _)| *r).collect();
        let evals = evaluate(&discover(&nodes, links), links, &ranks);
        let input = ClusterInput {
            nodes: &nodes,
            nnodes: facts.len() as u32,
            expected_hosts: &[],
            links: &crate::core::Links::borrowed(links),
            evals: &evals,
            chosen: choose(&evals),
            master_port: 29500,
            refused: &[],
            min_link_gbit: None,
            retested: &[],
        };
        let rec = Recommendation {
            env: advised
                .map(|v| [(VAR.to_string(), v.to_string())].into())
                .unwrap_or_default(),
            ..Default::default()
        };
        nccl_auto_pick(&input, &rec)
    }

    /// `n` healthy nodes on eno1 (10.0.x.y), each dialled by its ring neighbour: sizes past a /24.
    fn big(n: u32) -> Cluster {
        let mut c = Cluster::healthy(2);
        let addr = |r: u32| format!("10.0.{}.{}", r / 250, r % 250 + 1);
        c.facts = (0..n)
            .map(|r| {
                let mut f = node(0);
                f.hostname = format!("node{:04}", r + 1);
                f.host_id = f.hostname.clone();
                f.net.interfaces[0].ipv4[0].addr = addr(r).parse().unwrap();
                f
            })
            .collect();
        c.links = (0..n)
            .map(|r| link((r + 1) % n, r, &addr(r), LinkOutcome::Ok, Some(9.0)))
            .collect();
        c.nnodes = n;
        c
    }

    /// Every node gets `name` with `addr(rank)` (a /16 link-local or a /24).
    fn add(c: &mut Cluster, name: &str, addr: impl Fn(u32) -> String, prefix: u8) {
        for (r, f) in c.facts.iter_mut().enumerate() {
            let mut i = iface(name, &addr(r as u32), 1500, None, IfKind::Physical);
            i.index = 10;
            i.ipv4[0].prefix = prefix;
            f.net.interfaces.push(i);
        }
    }

    #[test]
    fn a_healthy_cluster_passes_and_a_set_value_skips() {
        let c = Cluster::healthy(3);
        let f = judge(&c.facts, &c.links, Some("eno1"));
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert!(f.summary.contains("(eno1)"), "{}", f.summary);
        let mut c = Cluster::healthy(3);
        for f in &mut c.facts {
            f.env.insert(VAR.into(), "eno1".into());
        }
        assert_eq!(judge(&c.facts, &c.links, None).status, Status::Skip);
    }

    #[test]
    fn a_link_local_address_on_every_node_is_named_with_the_advised_value() {
        for n in [2u32, 3, 4096] {
            let mut c = big(n);
            // Dell's iDRAC USB NIC: 169.254.0.2 on every node.
            add(&mut c, "usb0", |_| "169.254.0.2".into(), 16);
            let f = judge(&c.facts, &c.links, Some("eno1"));
            assert_eq!(f.status, Status::Warn, "{f:#?}");
            assert!(f.summary.contains("usb0 on node"), "{}", f.summary);
            assert!(
                f.summary.contains(&format!(
                    "(169.254.0.2: link-local, the same address on {n} nodes: never routed"
                )),
                "{}",
                f.summary
            );
            assert!(f.summary.contains("socket transport"), "{}", f.summary);
            assert_eq!(commands(&f), ["export NCCL_SOCKET_IFNAME=eno1"]);
            assert_eq!(f.evidence["bad_picks"][0]["cause"], "link-local");
            assert_eq!(f.evidence["bad_picks"][0]["nodes"], n);
            let listed = f.evidence["bad_picks"][0]["picks"]
                .as_array()
                .unwrap()
                .len();
            assert!(listed <= NODES_SHOWN, "{listed}");
            assert!(
                f.summary.len() < 600,
                "summary grows with n: {}",
                f.summary.len()
            );
        }
    }

    #[test]
    fn a_second_nic_the_peers_cannot_reach_is_named_with_what_they_got() {
        let mut c = Cluster::healthy(3);
        add(&mut c, "ens2f1", |r| format!("192.168.{r}.1"), 24);
        for from in 0..3u32 {
            for to in (0..3).filter(|t| *t != from) {
                c.links.push(link(
                    from,
                    to,
                    &format!("192.168.{to}.1"),
                    LinkOutcome::Timeout,
                    None,
                ));
            }
        }
        let f = judge(&c.facts, &c.links, Some("eno1"));
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert!(
            f.summary
                .contains("0 of 2 peers got through to it (timeout): no route or filtered"),
            "{}",
            f.summary
        );
        assert_eq!(f.evidence["bad_picks"][0]["nodes"], 3);
    }

    #[test]
    fn the_bootstrap_pick_is_said_to_hang_init_and_the_fix_excludes_without_advice() {
        let mut c = Cluster::healthy(2);
        for f in &mut c.facts {
            // A wireless NIC with a lower index than eno1: NCCL's first pick.
            let mut w = iface("wlp2s0", "192.168.50.7", 1500, None, IfKind::Physical);
            w.index = 0;
            f.net.interfaces[0].index = 5;
            f.net.interfaces.push(w);
        }
        // Addresses differ per node but were never dialled: a wireless NIC is named by its kind.
        c.facts[1].net.interfaces[2].ipv4[0].addr = "192.168.50.8".parse().unwrap();
        let f = judge(&c.facts, &c.links, None);
        assert_eq!(f.status, Status::Warn, "{f:#?}");
        assert!(f.summary.contains("wlp2s0"), "{}", f.summary);
        assert!(
            f.summary.contains("ncclCommInitRank hangs"),
            "{}",
            f.summary
        );
        assert_eq!(
            commands(&f),
            ["export NCCL_SOCKET_IFNAME=^docker,lo,virbr,wlp2s0"]
        );
    }

    #[test]
    fn ib_interfaces_come_first_and_only_they_are_judged() {
        let mut c = Cluster::healthy(3);
        // ib0 exists: NCCL takes only ib*, so the unreachable usb0 is never picked.
        add(&mut c, "usb0", |_| "169.254.0.2".into(), 16);
        for (r, f) in c.facts.iter_mut().enumerate() {
            f.net.interfaces.push(iface(
                "ib0",
                &format!("10.9.0.{}", r + 1),
                2044,
                None,
                IfKind::Ipoib,
            ));
        }
        for from in 0..3u32 {
            for to in (0..3).filter(|t| *t != from) {
                c.links.push(link(
                    from,
                    to,
                    &format!("10.9.0.{}", to + 1),
                    LinkOutcome::Ok,
                    Some(20.0),
                ));
            }
        }
        let f = judge(&c.facts, &c.links, Some("ib0"));
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert!(f.summary.contains("(ib0)"), "{}", f.summary);
    }

    #[test]
    fn nccl_advertises_ipv4_then_global_then_link_local_ipv6() {
        let mut i = iface("eth9", "10.0.0.1", 1500, None, IfKind::Physical);
        i.ipv6 = vec![
            IfAddr {
                addr: "fe80::1".parse().unwrap(),
                prefix: 64,
            },
            IfAddr {
                addr: "2001:db8::1".parse().unwrap(),
                prefix: 64,
            },
        ];
        assert_eq!(nccl_address(&i), Some("10.0.0.1".parse().unwrap()));
        i.ipv4.clear();
        assert_eq!(nccl_address(&i), Some("2001:db8::1".parse().unwrap()));
        i.ipv6.remove(1);
        assert_eq!(nccl_address(&i), Some("fe80::1".parse().unwrap()));
    }

    #[test]
    fn a_node_filtered_on_the_advised_network_is_link_unreachable_s_not_this() {
        let mut c = Cluster::healthy(4);
        for from in [0, 1, 3] {
            c.set(from, 2, LinkOutcome::Timeout);
        }
        let f = judge(&c.facts, &c.links, Some("eno1"));
        assert_eq!(f.status, Status::Pass, "{f:#?}");
    }
}

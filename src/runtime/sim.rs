//! A cluster of thousands of nodes in one process: the real throughput schedule, second-pass
//! selection, ring choice, advice and judgment run over a modelled network (per-link latency and
//! bandwidth, dead nodes, slow nodes, bad links, lossy links that need a retry), and the phase
//! times the real runtime would take on that fabric are predicted from the same constants it
//! uses (dial window, retries, timeouts, bulk duration). Every fault comes from a seed, so a run
//! is reproducible.

use super::advice::{self, Seen};
use super::budget::pings_per_link;
use super::coordinator::{self, verdict};
use super::dial::{self, CONNECT_WINDOW};
use super::job::{AllreduceMode, AllreducePlan, ClusterJob, Timing};
use super::phases::allreduce::working_ring;
use super::phases::retest::pick as second_pass_pick;
use super::phases::{Outcome, Traffic};
use super::rendezvous::Rendezvous;
use super::schedule;
use crate::transport::auth::{Secret, SecretSource};
use preflight_checks::model::{
    BindResult, BindStatus, CollectiveResult, CollectiveRow, DENSE_ABOVE, IfAddr, IfKind,
    Interface, Label, Labels, LinkOutcome, LinkResult, Links, Measurement, NetFacts, NodeFacts,
    PhaseTime, PortFacts, Report, SecondPass, SysFacts, Target,
};
use preflight_checks::networks;
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// The modelled fabric and its faults.
#[derive(Clone, Debug)]
pub struct Fabric {
    pub nodes: u32,
    /// One-way latency, microseconds.
    pub latency_us: f64,
    /// Rated and achieved bandwidth of a healthy NIC, Gbit/s.
    pub gbit: f64,
    /// Nodes that never start.
    pub dead: u32,
    /// Nodes whose NIC runs at a fifth of the rate.
    pub slow: u32,
    /// Ring neighbours whose path runs at a fifth of the rate both ways.
    pub slow_pairs: u32,
    /// The last `slow_cut` ranks sit behind an uplink at a fifth of the rate.
    pub slow_cut: u32,
    /// Ordered pairs whose connects time out (a filter on one link).
    pub bad_links: u32,
    /// Ordered pairs whose first connect is reset (they work on the retry).
    pub lossy_links: u32,
    pub seed: u64,
    /// Every node's facts beside its network (GPUs, InfiniBand, system): a real node's
    /// (`simulate --facts FILE`), so rank 0's memory is modelled with facts of a real size; else
    /// a bare node's.
    pub node_template: Option<Box<NodeFacts>>,
}

impl Default for Fabric {
    fn default() -> Fabric {
        Fabric {
            nodes: 1024,
            latency_us: 10.0,
            gbit: 100.0,
            dead: 0,
            slow: 0,
            slow_pairs: 0,
            slow_cut: 0,
            bad_links: 0,
            lossy_links: 0,
            seed: 1,
            node_template: None,
        }
    }
}

impl Faults {
    /// The rate `from -> to` gets: the slower end's NIC, a fifth of it on a slow pair or across
    /// the slow uplink.
    fn rate(&self, from: u32, to: u32, bw: impl Fn(u32) -> f64) -> f64 {
        let nic = bw(from).min(bw(to));
        let pair = self.slow_pairs.contains(&(from.min(to), from.max(to)));
        let across = self.cut.contains(&from) != self.cut.contains(&to);
        if pair || across { nic / 5.0 } else { nic }
    }
}

/// The faults drawn from the seed.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    pub dead: BTreeSet<u32>,
    pub slow: BTreeSet<u32>,
    /// Unordered (lower rank first).
    pub slow_pairs: BTreeSet<(u32, u32)>,
    /// The ranks behind the slow uplink.
    pub cut: BTreeSet<u32>,
    pub bad: HashSet<(u32, u32)>,
    pub lossy: HashSet<(u32, u32)>,
}

/// What a simulated run gives: the report the real judgment made, and the predicted times.
pub struct Simulated {
    pub report: Report,
    pub faults: Faults,
    /// Seconds the simulation itself took to compute (not a prediction).
    pub compute_seconds: f64,
}

/// Runs the simulation with the real `timing` (`--quick`, default or `--thorough`).
pub fn simulate(fabric: &Fabric, timing: Timing) -> Simulated {
    let started = Instant::now();
    let n = fabric.nodes.max(2);
    let faults = draw_faults(fabric);
    let template = fabric.node_template.as_deref();
    let facts: Vec<NodeFacts> = (0..n).map(|r| node_facts(r, template)).collect();
    let alive: Vec<u32> = (0..n).filter(|r| !faults.dead.contains(r)).collect();
    let rtt_s = 2.0 * fabric.latency_us / 1e6;
    let bw = |r: u32| {
        if faults.slow.contains(&r) {
            fabric.gbit / 5.0
        } else {
            fabric.gbit
        }
    };
    let mut phases = Vec::new();

    // Connectivity: every ordered pair among the nodes that joined, dialed as the agent does.
    let Dialled {
        mut links,
        addrs,
        seconds: probe_s,
    } = connectivity(fabric, timing, &faults, &alive, n);
    phases.push(phase("connectivity", probe_s));

    // Second pass: the real selection of nodes that failed with many peers (from the links
    // that failed, which are records).
    let second = second_pass(&alive, &links, &faults);
    if !second.is_empty() {
        let cost = rtt_s * (4.0 + timing.pings as f64) * second.len() as f64
            + if second.iter().any(|p| p.verdict == "node") {
                2.0 * timing.connect_timeout.as_secs_f64()
            } else {
                0.0
            };
        phases.push(phase("second pass", cost));
    }

    // Throughput: the real schedule; each pair gets the slower end's rate.
    let rounds = schedule::schedule(&alive, timing.matchings, n as u64);
    throughput(&mut links, &addrs, &rounds, &faults, bw);
    let per_round = timing.bulk.as_secs_f64() + rtt_s * 4.0 + 2.0 * fabric.latency_us / 1e6 * 10.0;
    phases.push(phase("throughput", rounds.len() as f64 * per_round));

    // Path MTU: a few DF probes per peer, the dial window at once.
    let mtu_costs = vec![rtt_s * 4.0; alive.len().saturating_sub(1)];
    phases.push(phase(
        "path MTU",
        list_schedule(&mtu_costs, CONNECT_WINDOW, CONNECT_WINDOW),
    ));

    // Judgment: the real advice, ring and checks.
    let cfg = rendezvous(n, timing);
    let seen: Vec<Seen> = alive
        .iter()
        .map(|r| Seen {
            rank: *r,
            facts: &facts[*r as usize],
            alive: true,
        })
        .collect();
    let recommendation = advice::advise(&seen, &links, &cfg, BTreeMap::new(), None);
    let evals = {
        let nodes = advice::alive_or_joined(&seen);
        networks::evaluate(&networks::discover(&nodes, &links), &links, &alive)
    };
    let (outcome, allreduce_s) = allreduce(&evals, &alive, fabric, &faults, &cfg.job.allreduce);
    phases.push(phase("all-reduce", allreduce_s));
    let links_total = links.len() as u64;
    let links_retried = links.records().filter(|l| l.retries > 0).count() as u64;
    drop(seen);
    let mut facts: Vec<Option<NodeFacts>> = facts.into_iter().map(Some).collect();
    let members = alive
        .iter()
        .map(|r| verdict::Member {
            rank: *r,
            facts: facts[*r as usize].take().unwrap_or_default(),
            alive: true,
        })
        .collect();
    let mut report = verdict::build_report(
        members,
        links,
        &cfg,
        recommendation,
        Traffic {
            allreduce: outcome,
            ..Default::default()
        },
        &[],
        &[],
    );
    // Rank 0 sends one copy to every node, in parallel from one NIC: above 64 nodes the shared
    // copy without the other nodes' facts and the links.
    let json = if report.nodes.len() > crate::report_compact::COMPACT_ABOVE {
        coordinator::json_size(&coordinator::shared_copy(&report))
    } else {
        coordinator::json_size(&report)
    } as f64;
    let deliver = json / 8.0 * alive.len() as f64 * 8.0 / (fabric.gbit * 1e9) + rtt_s;
    phases.push(phase("report", deliver));
    report.measurement = Some(Measurement {
        links_total,
        links_retried,
        connect_window: CONNECT_WINDOW as u32,
        throughput_schedule: schedule::describe(alive.len(), timing.matchings),
        throughput_rounds: rounds.len() as u32,
        second_pass: second,
        phases,
    });
    Simulated {
        report,
        faults,
        compute_seconds: started.elapsed().as_secs_f64(),
    }
}

/// The connectivity phase's links, each node's address label, and the phase's predicted
/// seconds.
struct Dialled {
    links: Links<'static>,
    addrs: Vec<Label>,
    seconds: f64,
}

/// The connectivity phase on the modelled fabric: every ordered pair among the `alive` nodes,
/// dialed in the agent's ring order and window, held as the coordinator holds them (a dense
/// table above 64 nodes, records for the rest: see `preflight_checks::model::Links`), with the
/// path MTU phase's answer (9000) on every link that connected.
fn connectivity(
    fabric: &Fabric,
    timing: Timing,
    faults: &Faults,
    alive: &[u32],
    n: u32,
) -> Dialled {
    let rtt_s = 2.0 * fabric.latency_us / 1e6;
    // Strings shared as the coordinator shares them (see `members::links::collect_links`).
    let mut labels = Labels::default();
    let eth0 = labels.get("eth0");
    let filtered = labels.get("timed out (modelled: a filter on this link)");
    // Each node's address, formatted and shared once (not once per link).
    let addrs: Vec<Label> = (0..n)
        .map(|r| labels.get(&address(r).to_string()))
        .collect();
    let mut links = empty_links(alive, n, &eth0, &addrs);
    // The faults, looked up per link in sorted lists (a handful each).
    let sorted = |set: &HashSet<(u32, u32)>| {
        let mut v: Vec<(u32, u32)> = set.iter().copied().collect();
        v.sort_unstable();
        v
    };
    let (bad, lossy) = (sorted(&faults.bad), sorted(&faults.lossy));
    let mut slowest_probe = 0.0f64;
    // The pings per link the coordinator orders for this many peers.
    let pings = pings_per_link(timing.pings, alive.len().saturating_sub(1));
    let (rtt, p99) = ((rtt_s * 1e6) as f32, (rtt_s * 1e6 * 1.5) as f32);
    let one = rtt_s * (4.0 + pings as f64);
    // A node whose every link is alike dials in the same time: scheduled once.
    let mut alike: Option<f64> = None;
    let mut targets: Vec<u32> = Vec::with_capacity(alive.len());
    let mut costs = Vec::with_capacity(alive.len());
    for &from in alive {
        let faulty = |list: &[(u32, u32)]| {
            let at = list.partition_point(|(f, _)| *f < from);
            list[at..].first().is_some_and(|(f, _)| *f == from)
        };
        let dense = links.is_dense();
        if dense && !faulty(&bad) && !faulty(&lossy) {
            links.fill_row_ok(from, rtt, p99, 9000);
            let seconds = *alike.get_or_insert_with(|| {
                let costs = vec![one; alive.len().saturating_sub(1)];
                list_schedule(&costs, dial::START_WINDOW, CONNECT_WINDOW)
            });
            slowest_probe = slowest_probe.max(seconds);
            continue;
        }
        // In ring order from `from` (dial::ring_offset): the higher ranks, then the lower ones
        // (`alive` is in rank order, so a rotation, not a sort per node).
        targets.clear();
        let at = alive.partition_point(|r| *r <= from);
        targets.extend(
            alive[at..]
                .iter()
                .chain(&alive[..at])
                .copied()
                .filter(|t| *t != from),
        );
        costs.clear();
        for &to in &targets {
            let (result, retries, cost) = if bad.binary_search(&(from, to)).is_ok() {
                let attempts = 2.0;
                (
                    LinkOutcome::Timeout,
                    1,
                    attempts * timing.connect_timeout.as_secs_f64() + 0.1,
                )
            } else if lossy.binary_search(&(from, to)).is_ok() {
                (LinkOutcome::Ok, 1, one + rtt_s + 0.1)
            } else {
                (LinkOutcome::Ok, 0, one)
            };
            costs.push(cost);
            let ok = result == LinkOutcome::Ok;
            if ok
                && retries == 0
                && (dense || links.push_ok(from, to, &addrs[to as usize], rtt, p99, 9000))
            {
                // With a table, the row's plain links are filled below at once.
                continue;
            }
            links.push(LinkResult {
                from,
                to,
                interface: eth0.clone(),
                address: addrs[to as usize].clone(),
                port: 40000,
                result,
                rtt_us: ok.then_some(rtt),
                rtt_p99_us: ok.then_some(p99),
                error: (!ok).then(|| filtered.clone()),
                retries,
                mtu: ok.then_some(9000),
                ..Default::default()
            });
        }
        links.fill_row_ok(from, rtt, p99, 9000);
        slowest_probe =
            slowest_probe.max(list_schedule(&costs, dial::START_WINDOW, CONNECT_WINDOW));
    }
    // Kept as the coordinator keeps them: in (from, to, address) order.
    links.settle();
    // The order to every node (all listeners, serialised once) leaves rank 0's NIC in parallel.
    let order_bytes = alive.len() as f64 * 60.0;
    let fan_out = order_bytes / 8.0 * alive.len() as f64 * 8.0 / (fabric.gbit * 1e9);
    Dialled {
        links,
        addrs,
        seconds: slowest_probe + fan_out + rtt_s,
    }
}

/// The links of `alive` dialling each other before any is dialled: above 64 nodes a dense
/// table of their targets (one per node: `eth0`, its address, the agent's port), else a list.
fn empty_links(alive: &[u32], n: u32, eth0: &Label, addrs: &[Label]) -> Links<'static> {
    if alive.len() > DENSE_ABOVE {
        let targets = alive
            .iter()
            .map(|&to| Target {
                to,
                interface: eth0.clone(),
                address: addrs[to as usize].clone(),
                port: 40000,
            })
            .collect();
        Links::dense(n, targets)
    } else {
        Links::owned(Vec::new())
    }
}

/// Each pair of `rounds` that connected gets the slower end's rate, both directions.
fn throughput(
    links: &mut Links,
    addrs: &[Label],
    rounds: &[Vec<(u32, u32)>],
    faults: &Faults,
    bw: impl Fn(u32) -> f64,
) {
    for round in rounds {
        for &(a, b) in round {
            for (from, to) in [(a, b), (b, a)] {
                let Some(addr) = addrs.get(to as usize) else {
                    continue;
                };
                links.update(from, to, addr, |l| {
                    if l.result == LinkOutcome::Ok {
                        l.throughput_gbit_s = Some(faults.rate(from, to, &bw) as f32);
                    }
                });
            }
        }
    }
}

fn phase(name: &str, seconds: f64) -> PhaseTime {
    PhaseTime {
        phase: name.into(),
        seconds: (seconds * 1000.0).round() / 1000.0,
    }
}

/// The time workers take over `costs` taken in order (each by the first free worker): `start`
/// of them at first, one more per fast one done, up to `window`.
fn list_schedule(costs: &[f64], start: usize, window: usize) -> f64 {
    // The agent's adaptive window: it starts at `start` places and each fast open adds one
    // (free from the moment it completed), up to `window`. The places are alike, so only when
    // each is free matters: those times kept in order (the soonest taken from the front, a new
    // time put back after every time not later than it: no scan of the window per link).
    let window = window.max(1);
    let mut free: VecDeque<f64> = std::iter::repeat_n(0.0, start.clamp(1, window)).collect();
    let put = |free: &mut VecDeque<f64>, t: f64| {
        let at = free.iter().rposition(|f| *f <= t).map_or(0, |p| p + 1);
        free.insert(at, t);
    };
    let mut end = 0.0f64;
    for c in costs {
        let Some(first) = free.pop_front() else {
            break;
        };
        let done = first + c;
        put(&mut free, done);
        end = end.max(done);
        if *c < dial::SLOW_OPEN.as_secs_f64() && free.len() < window {
            put(&mut free, done);
        }
    }
    end
}

/// 10.200.0.0/16 and up: node `r`'s address (never used on a wire; the model only names it).
fn address(r: u32) -> IpAddr {
    let host = r + 1;
    IpAddr::V4(Ipv4Addr::new(
        10,
        200 + (host >> 16) as u8,
        (host >> 8) as u8,
        host as u8,
    ))
}

/// Node `r`'s facts: its own hostname, address and healthy network, the rest from `template`.
fn node_facts(r: u32, template: Option<&NodeFacts>) -> NodeFacts {
    let hostname = format!("node{r:04}");
    let base = template.cloned().unwrap_or_default();
    NodeFacts {
        host_id: hostname.clone(),
        hostname,
        net: NetFacts {
            interfaces: vec![Interface {
                name: "eth0".into(),
                index: 2,
                kind: IfKind::Physical,
                oper_state: "up".into(),
                up: true,
                admin_up: Some(true),
                carrier: Some(true),
                mtu: Some(9000),
                speed_mbps: Some(100_000),
                ipv4: vec![IfAddr {
                    addr: address(r),
                    prefix: 12,
                }],
                default_route: true,
                ..Default::default()
            }],
            ..base.net.clone()
        },
        // A healthy node as the probes see one: the master port free, /dev/shm and memlock as
        // a GPU node has them, the hostname resolving to the node's own address.
        ports: PortFacts {
            port: crate::placement::DEFAULT_MASTER_PORT,
            ipv4: BindResult {
                status: BindStatus::Free,
                error: None,
            },
            ipv6: BindResult {
                status: BindStatus::Free,
                error: None,
            },
            ..Default::default()
        },
        sys: SysFacts {
            shm_bytes: Some(64 << 30),
            hostname_addrs: vec![address(r)],
            ..base.sys.clone()
        },
        ..base
    }
}

fn draw_faults(f: &Fabric) -> Faults {
    let n = f.nodes.max(2);
    let mut rng = f.seed.max(1);
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let pick_node = |taken: &BTreeSet<u32>, next: &mut dyn FnMut() -> u64| loop {
        // Rank 0 hosts the coordinator: a fault there is its own scenario.
        let r = 1 + (next() % (n as u64 - 1)) as u32;
        if !taken.contains(&r) {
            return r;
        }
    };
    let mut faults = Faults::default();
    let mut used = BTreeSet::new();
    for _ in 0..f.dead.min(n / 2) {
        let r = pick_node(&used, &mut next);
        used.insert(r);
        faults.dead.insert(r);
    }
    for _ in 0..f.slow.min(n / 2) {
        let r = pick_node(&used, &mut next);
        used.insert(r);
        faults.slow.insert(r);
    }
    // The rack behind the slow uplink: the last ranks (rank 0 stays on the healthy side).
    faults.cut = (n.saturating_sub(f.slow_cut)..n)
        .filter(|_| f.slow_cut > 0)
        .collect();
    // Slow pairs on ring neighbours, apart from dead nodes, slow nodes, each other and the cut.
    for _ in 0..f.slow_pairs.min(n / 4) {
        for _ in 0..64 {
            let a = (next() % n as u64) as u32;
            let b = (a + 1) % n;
            let busy = |r: u32| {
                used.contains(&r) || faults.slow_pairs.iter().any(|p| p.0 == r || p.1 == r)
            };
            // On one side of the slow uplink: a pair across it is the uplink's.
            if !busy(a) && !busy(b) && faults.cut.contains(&a) == faults.cut.contains(&b) {
                faults.slow_pairs.insert((a.min(b), a.max(b)));
                break;
            }
        }
    }
    let pair =
        |set: &mut HashSet<(u32, u32)>, dead: &BTreeSet<u32>, next: &mut dyn FnMut() -> u64| loop {
            let a = (next() % n as u64) as u32;
            let b = (next() % n as u64) as u32;
            if a != b && !dead.contains(&a) && !dead.contains(&b) && set.insert((a, b)) {
                return;
            }
        };
    for _ in 0..f.bad_links {
        pair(&mut faults.bad, &faults.dead.clone(), &mut next);
    }
    for _ in 0..f.lossy_links {
        pair(&mut faults.lossy, &faults.dead.clone(), &mut next);
    }
    faults
}

/// The runtime's selection for the second pass, with the model's answers.
fn second_pass(alive: &[u32], links: &Links, faults: &Faults) -> Vec<SecondPass> {
    let failed: Vec<LinkResult> = links
        .records()
        .filter(|l| l.result != LinkOutcome::Ok)
        .cloned()
        .collect();
    let Some((partner, bad)) = second_pass_pick(alive, &failed) else {
        return Vec::new();
    };
    bad.into_iter()
        .map(|(node, failed)| {
            let outbound = if faults.bad.contains(&(node, partner)) {
                LinkOutcome::Timeout
            } else {
                LinkOutcome::Ok
            };
            let inbound = if faults.bad.contains(&(partner, node)) {
                LinkOutcome::Timeout
            } else {
                LinkOutcome::Ok
            };
            SecondPass {
                node,
                partner,
                address: address(node).to_string(),
                failed_peers: failed as u32,
                outbound,
                inbound,
                verdict: if outbound == LinkOutcome::Ok && inbound == LinkOutcome::Ok {
                    "links"
                } else {
                    "node"
                }
                .into(),
            }
        })
        .collect()
}

/// The TCP ring all-reduce as the runtime runs it (the real ring choice), timed on the model:
/// 2(n-1) steps of bytes/n each at the slowest member's rate, plus latency per step.
fn allreduce(
    evals: &[networks::NetworkEval],
    alive: &[u32],
    fabric: &Fabric,
    faults: &Faults,
    plan: &AllreducePlan,
) -> (Outcome, f64) {
    let net = networks::choose(evals).or_else(|| evals.iter().max_by_key(|e| e.pairs_ok));
    let Some(net) = net else {
        return (
            Outcome {
                not_run: Some("not measured: no network".into()),
                ..Default::default()
            },
            0.0,
        );
    };
    let Some(order) = working_ring(net, alive) else {
        return (
            Outcome {
                not_run: Some(
                    "not measured: no ring of working links covers every node (modelled)".into(),
                ),
                ..Default::default()
            },
            0.0,
        );
    };
    let n = order.len() as f64;
    // The ring runs at its slowest step.
    let k = order.len();
    let slowest = (0..k)
        .map(|i| {
            faults.rate(order[i], order[(i + 1) % k], |r| {
                if faults.slow.contains(&r) {
                    fabric.gbit / 5.0
                } else {
                    fabric.gbit
                }
            })
        })
        .fold(fabric.gbit, f64::min);
    let mut total = 0.0;
    let rows: Vec<CollectiveRow> = plan
        .sizes
        .iter()
        .enumerate()
        .map(|(index, &bytes)| {
            let step = bytes as f64 / n * 8.0 / (slowest * 1e9) + fabric.latency_us / 1e6;
            let t = 2.0 * (n - 1.0) * step;
            // The ring warms up once, before the first size (see `RingConfig::warmup`).
            let warmup = if index == 0 { plan.warmup } else { 0 };
            total += t * (warmup + plan.iters) as f64;
            let algbw = bytes as f64 / t / 1e9;
            CollectiveRow {
                bytes,
                time_us: t * 1e6,
                algbw_gb_s: algbw,
                busbw_gb_s: algbw * 2.0 * (n - 1.0) / n,
                wrong: 0,
            }
        })
        .collect();
    let result = CollectiveResult {
        op: "allreduce".into(),
        transport: "tcp".into(),
        ranks: order.len() as u32,
        net: Some("modelled".into()),
        order,
        rows,
        network: Some(net.network.id.clone()),
        streams: Some(1),
        config: "advice".into(),
        ..Default::default()
    };
    (
        Outcome {
            results: vec![result],
            ..Default::default()
        },
        total,
    )
}

/// The rendezvous the simulated coordinator judges with: rank 0 at the first address, a TCP
/// all-reduce of three sizes, `train.py` as the script.
fn rendezvous(n: u32, timing: Timing) -> Rendezvous {
    let mut job = ClusterJob::standalone(
        timing,
        AllreducePlan {
            mode: AllreduceMode::Tcp,
            sizes: vec![1 << 20, 16 << 20, 64 << 20],
            compare_env: BTreeMap::new(),
            streams: 1,
            warmup: 1,
            iters: 5,
            step_timeout: Duration::from_secs(10),
            silence: Duration::from_secs(60),
        },
    );
    job.script = vec!["train.py".into()];
    Rendezvous::standalone(
        job,
        n,
        &address(0).to_string(),
        "simulation",
        Secret::token("simulated"),
        SecretSource::Token("simulation".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> Timing {
        Timing {
            connect_timeout: Duration::from_secs(1),
            pings: 20,
            bulk: Duration::from_millis(200),
            matchings: 1,
        }
    }

    #[test]
    fn a_healthy_simulated_cluster_passes_with_every_link() {
        let s = simulate(
            &Fabric {
                nodes: 64,
                ..Default::default()
            },
            quick(),
        );
        let r = &s.report;
        assert!(
            !r.findings
                .iter()
                .any(|f| f.status == preflight_checks::model::Status::Fail),
            "{:#?}",
            r.findings
                .iter()
                .filter(|f| f.status == preflight_checks::model::Status::Fail)
                .collect::<Vec<_>>()
        );
        assert_eq!(r.links.len(), 64 * 63);
        let m = r.measurement.as_ref().unwrap();
        assert_eq!(m.throughput_rounds, 3);
        assert_eq!(r.collectives.len(), 1);
    }

    #[test]
    fn a_dead_node_is_one_node_and_a_bad_link_is_one_link() {
        let s = simulate(
            &Fabric {
                nodes: 48,
                dead: 1,
                bad_links: 1,
                seed: 7,
                ..Default::default()
            },
            quick(),
        );
        let dead = *s.faults.dead.iter().next().unwrap();
        let fails: Vec<_> = s
            .report
            .findings
            .iter()
            .filter(|f| f.status == preflight_checks::model::Status::Fail)
            .collect();
        let rendezvous: Vec<_> = fails
            .iter()
            .filter(|f| f.id == "cluster.rendezvous")
            .collect();
        assert_eq!(rendezvous.len(), 1, "{fails:#?}");
        assert!(
            rendezvous[0].summary.contains(&format!("{dead}")),
            "{}",
            rendezvous[0].summary
        );
        let unreachable: Vec<_> = fails
            .iter()
            .filter(|f| f.id == "link.unreachable")
            .collect();
        assert_eq!(unreachable.len(), 1, "{unreachable:#?}");
        // The all-reduce still ran, over a ring around the bad link.
        assert_eq!(s.report.collectives.len(), 1);
    }

    /// Slow nodes, slow pairs and a rack behind a slow uplink at 1024 nodes: each named as its
    /// kind by the real judgment, no other node or pair, and the all-reduce told why.
    #[test]
    fn slow_nodes_pairs_and_a_slow_uplink_are_named_as_what_they_are_at_1024() {
        let s = simulate(
            &Fabric {
                nodes: 1024,
                slow: 2,
                slow_pairs: 3,
                slow_cut: 32,
                seed: 11,
                ..Default::default()
            },
            quick(),
        );
        let slow: Vec<_> = s
            .report
            .findings
            .iter()
            .filter(|f| f.id == "link.slow" && f.status == preflight_checks::model::Status::Warn)
            .collect();
        let kind = |f: &&preflight_checks::model::Finding| {
            f.evidence["kind"].as_str().unwrap_or_default().to_string()
        };
        let nodes: BTreeSet<u32> = slow
            .iter()
            .filter(|f| kind(f) == "node")
            .filter_map(|f| f.node)
            .collect();
        assert_eq!(nodes, s.faults.slow, "{slow:#?}");
        let pairs: BTreeSet<(u32, u32)> = slow
            .iter()
            .filter(|f| kind(f) == "pair")
            .map(|f| {
                let n = |k: &str| f.evidence[k].as_u64().unwrap_or(u64::MAX) as u32;
                (n("from"), n("to"))
            })
            .collect();
        assert_eq!(pairs, s.faults.slow_pairs, "{slow:#?}");
        let cuts: Vec<_> = slow.iter().filter(|f| kind(f) == "cut").collect();
        assert_eq!(cuts.len(), 1, "{slow:#?}");
        let b: BTreeSet<u32> = cuts[0].evidence["group_b"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_u64().map(|r| r as u32))
            .collect();
        assert_eq!(b, s.faults.cut, "the rack behind the uplink");
        assert_eq!(slow.len(), nodes.len() + pairs.len() + 1, "{slow:#?}");
        let busbw = s
            .report
            .findings
            .iter()
            .find(|f| f.id == "collective.busbw")
            .expect("busbw judged");
        assert!(
            busbw.summary.contains("The pairwise test found why"),
            "{}",
            busbw.summary
        );
    }

    /// The window scanned for its soonest free place, as list_schedule did before issue 47.
    fn list_schedule_by_scan(costs: &[f64], start: usize, window: usize) -> f64 {
        let window = window.max(1);
        let mut free = vec![0.0f64; start.clamp(1, window)];
        let mut end = 0.0f64;
        for c in costs {
            let mut i = 0;
            for (j, f) in free.iter().enumerate() {
                if *f < free[i] {
                    i = j;
                }
            }
            let done = free[i] + c;
            free[i] = done;
            end = end.max(done);
            if *c < dial::SLOW_OPEN.as_secs_f64() && free.len() < window {
                free.push(done);
            }
        }
        end
    }

    #[test]
    fn the_ordered_window_schedules_as_the_scan_did() {
        let slow = dial::SLOW_OPEN.as_secs_f64() * 2.0;
        // Fast and slow opens mixed (a slow one every seventh, costs of varied sizes).
        let costs: Vec<f64> = (0..500u32)
            .map(|i| {
                if i % 7 == 3 {
                    slow
                } else {
                    f64::from(i % 13 + 1) * 1e-4
                }
            })
            .collect();
        for (start, window) in [(1, 1), (1, 8), (4, 64), (64, 64), (0, 0)] {
            let got = list_schedule(&costs, start, window);
            let want = list_schedule_by_scan(&costs, start, window);
            assert!(
                (got - want).abs() < 1e-9,
                "start {start} window {window}: {got} vs {want}"
            );
        }
        assert_eq!(list_schedule(&[], 4, 64), 0.0);
    }
}

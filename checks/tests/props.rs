//! Property tests: arbitrary input to the checks crate's public decoders (firewall rulesets,
//! procfs/sysfs values, `CUDA_VISIBLE_DEVICES`) must not panic and must return in bounded time.
//! The private parsers have theirs beside the code (`probe/ports.rs`, `probe/net.rs`,
//! `probe/nccl.rs`).
//!
//! Cases per property: 256, or `PROPTEST_CASES` when set. Long run (see tests/it/props.rs):
//!     PROPTEST_CASES=1000000 cargo test -p preflight-checks --test props -- --test-threads=1

use preflight_checks::firewall::probe::{parse_iptables_save, parse_nft_json};
use preflight_checks::infra::parse_hex_u32;
use preflight_checks::model::{FirewallFacts, Gpu, NodeFacts};
use preflight_checks::rdma::probe::ib;
use preflight_checks::{CheckContext, check_node, firewall, visible_devices};
use preflight_checks::{
    gpu::probe as gpu, nccl::probe as nccl, net::probe as net, sys::probe as sys,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

#[path = "support/prop_kit.rs"]
mod prop_kit;
use prop_kit::{config, text, timed};

// ----- input strategies -----

fn words_of(texts: &[&str]) -> Vec<String> {
    let mut w: Vec<String> = texts
        .iter()
        .flat_map(|t| t.split_whitespace())
        .map(str::to_string)
        .collect();
    w.sort();
    w.dedup();
    w
}

fn lines_of(texts: &[&str]) -> Vec<String> {
    texts
        .iter()
        .flat_map(|t| t.lines())
        .map(str::to_string)
        .collect()
}

/// One line near a grammar: words from `vocab`, some noise, odd separators.
fn soup_line(vocab: Vec<String>) -> impl Strategy<Value = String> {
    let word = prop_oneof![
        8 => select(vocab),
        1 => "[ -~]{0,8}",
        1 => any::<char>().prop_map(String::from),
    ];
    let sep = select(vec![" ", " ", " ", "\t", "", "  ", "\r"]);
    vec((word, sep), 0..16).prop_map(|v| {
        v.into_iter().fold(String::new(), |mut s, (w, sep)| {
            s.push_str(&w);
            s.push_str(sep);
            s
        })
    })
}

/// Text near a line-based format: real lines (repeated, reordered), lines of its words, noise.
fn line_soup(
    lines: Vec<String>,
    vocab: Vec<String>,
    max_lines: usize,
) -> impl Strategy<Value = String> {
    let line = prop_oneof![
        4 => select(lines),
        3 => soup_line(vocab),
        1 => vec(any::<char>(), 0..64).prop_map(String::from_iter),
    ];
    vec(line, 0..max_lines).prop_map(|l| l.join("\n"))
}

/// Arbitrary JSON values, keys drawn from `keys` mostly so that objects look like the real ones.
fn json_value(keys: Vec<String>) -> impl Strategy<Value = Value> {
    let key = prop_oneof![4 => select(keys), 1 => "[a-z_]{0,8}"];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        select(vec![
            0i64,
            1,
            -1,
            22,
            6,
            17,
            29500,
            65535,
            65536,
            i64::MAX,
            i64::MIN
        ])
        .prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 256, 8, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(Value::Array),
            vec((key.clone(), inner), 0..8).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

// ----- firewall -----

const IPTABLES: &[&str] = &[
    include_str!("../../tests/fixtures/firewall/iptables-allow-29500.txt"),
    include_str!("../../tests/fixtures/firewall/iptables-drop-ssh.txt"),
    include_str!("../../tests/fixtures/firewall/iptables-empty.txt"),
    include_str!("../../tests/fixtures/firewall/iptables-range.txt"),
    include_str!("../../tests/fixtures/firewall/iptables-reject.txt"),
    include_str!("../../tests/fixtures/firewall/iptables-ufw.txt"),
];

const NFT: &[&str] = &[
    include_str!("../../tests/fixtures/firewall/nft-allow.json"),
    include_str!("../../tests/fixtures/firewall/nft-empty.json"),
    include_str!("../../tests/fixtures/firewall/nft-firewalld.json"),
    include_str!("../../tests/fixtures/firewall/nft-iptables-nft.json"),
];

/// Chains few enough that jumps often land on a defined chain, the chain itself included.
const CHAINS: &[&str] = &["INPUT", "a", "b", "ufw-before-input"];

/// `-A CHAIN [matches] -j TARGET` lines over a few chains, and their declarations.
fn iptables_rule() -> impl Strategy<Value = String> {
    let chain = select(CHAINS);
    let target = prop_oneof![
        select(CHAINS),
        select(&["ACCEPT", "DROP", "REJECT", "RETURN", "LOG"][..]),
    ];
    let matcher = select(
        &[
            "",
            "-p tcp",
            "-p udp",
            "! -p tcp",
            "-p 6 --dport 22",
            "-m tcp --dport 29500",
            "-m multiport --dports 1:65535,22,29400:29600",
            "--dports 0:100,50:,:7",
            "-s 10.0.0.0/8",
            "-i eth0",
            "-m conntrack --ctstate RELATED,ESTABLISHED",
            "-m addrtype --dst-type LOCAL",
            "-m comment --comment \"a \\\" b\"",
        ][..],
    );
    let jump = select(&["-j", "-g", "--jump", "--goto"][..]);
    prop_oneof![
        (chain.clone(), vec(matcher, 0..3), jump, target)
            .prop_map(|(c, m, j, t)| format!("-A {c} {} {j} {t}", m.join(" "))),
        (chain, select(&["ACCEPT", "DROP", "-"][..])).prop_map(|(c, p)| format!(":{c} {p} [0:0]")),
    ]
}

fn iptables_text() -> impl Strategy<Value = String> {
    let mut lines = lines_of(IPTABLES);
    lines.extend(["*filter", "*nat", "COMMIT", ":INPUT ACCEPT [0:0]"].map(String::from));
    let body = vec(
        prop_oneof![3 => iptables_rule(), 2 => line_soup(lines, words_of(IPTABLES), 4)],
        0..40,
    );
    (any::<bool>(), body).prop_map(|(header, body)| {
        let head = if header {
            "*filter\n:INPUT DROP [0:0]\n"
        } else {
            ""
        };
        format!("{head}{}", body.join("\n"))
    })
}

/// The judgment of a parsed ruleset on a node, as `preflight check` would run it.
fn judge_chain(chain: preflight_checks::model::InputChain) {
    for port in [0, 22, 29500, 65535] {
        let _ = firewall::decide(&chain, port);
    }
    let _ = firewall::is_filtered(&chain);
    let _ = firewall::range_open(&chain, 29400, 29600);
    let facts = NodeFacts {
        firewall: FirewallFacts {
            backend: Some("iptables".into()),
            input: Some(chain),
            ..Default::default()
        },
        ..Default::default()
    };
    let ctx = CheckContext {
        master_port: 29500,
        ..Default::default()
    };
    let _ = firewall::check(&facts, &ctx);
}

fn nft_keys() -> Vec<String> {
    let mut keys = Vec::new();
    for t in NFT {
        collect_keys(&serde_json::from_str(t).unwrap(), &mut keys);
    }
    keys.sort();
    keys.dedup();
    keys
}

fn collect_keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                out.push(k.clone());
                collect_keys(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_keys(v, out)),
        _ => {}
    }
}

/// One nftables JSON item: input/other base chains, rules with matches, jumps and verdicts, port sets.
fn nft_item() -> impl Strategy<Value = Value> {
    let family = select(&["ip", "inet", "ip6", "bridge"][..]);
    let table = select(&["filter", "firewalld"][..]);
    let chain = select(&["input", "a", "b"][..]);
    let port = prop_oneof![
        (0u64..70000).prop_map(Value::from),
        ((0u64..70000), (0u64..70000)).prop_map(|(a, b)| json!({"range": [a, b]})),
        Just(json!("@ports")),
        vec(0u64..70000, 0..6).prop_map(|p| json!({"set": p})),
    ];
    let expr = prop_oneof![
        (select(&["tcp", "udp", "ip", "ip6"][..]), select(&["dport", "saddr", "daddr", "protocol"][..]), port.clone(), select(&["==", "!=", "in"][..]))
            .prop_map(|(p, f, r, op)| json!({"match": {"op": op, "left": {"payload": {"protocol": p, "field": f}}, "right": r}})),
        (select(&["iifname", "l4proto", "nfproto"][..]), select(&["eth0", "tcp", "ipv4"][..]))
            .prop_map(|(k, r)| json!({"match": {"op": "==", "left": {"meta": {"key": k}}, "right": r}})),
        Just(json!({"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}})),
        select(&["accept", "drop", "reject", "return", "counter"][..]).prop_map(|v| json!({ v: null })),
        (select(&["jump", "goto"][..]), chain.clone()).prop_map(|(k, t)| json!({ k: {"target": t} })),
        Just(json!({"xt": {"type": "match", "name": "conntrack"}})),
    ];
    prop_oneof![
        (family.clone(), table.clone(), chain.clone(), select(&["input", "forward"][..]), select(vec![json!(0), json!(-150), json!("filter"), json!("raw"), json!(null)]), select(&["accept", "drop"][..]))
            .prop_map(|(f, t, n, hook, prio, policy)| json!({"chain": {"family": f, "table": t, "name": n, "hook": hook, "prio": prio, "policy": policy}})),
        (family.clone(), table.clone(), chain).prop_map(|(f, t, n)| json!({"chain": {"family": f, "table": t, "name": n}})),
        (family.clone(), table.clone(), chain_name(), vec(expr, 0..5))
            .prop_map(|(f, t, c, e)| json!({"rule": {"family": f, "table": t, "chain": c, "expr": e}})),
        (family, table, vec(0u64..70000, 0..8))
            .prop_map(|(f, t, e)| json!({"set": {"family": f, "table": t, "name": "ports", "elem": e}})),
    ]
}

fn chain_name() -> impl Strategy<Value = &'static str> {
    select(&["input", "a", "b"][..])
}

fn nft_text() -> impl Strategy<Value = String> {
    let fixtures: Vec<Vec<Value>> = NFT
        .iter()
        .map(|t| {
            let v: Value = serde_json::from_str(t).unwrap();
            v["nftables"].as_array().cloned().unwrap_or_default()
        })
        .collect();
    let real_items: Vec<Value> = fixtures.into_iter().flatten().collect();
    let item = prop_oneof![
        3 => nft_item(),
        2 => select(real_items),
        1 => json_value(nft_keys()),
    ];
    vec(item, 0..40).prop_map(|items| json!({ "nftables": items }).to_string())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn iptables_save_arbitrary_text(t in text()) {
        let chain = timed("parse_iptables_save", || parse_iptables_save(&t))?;
        if let Some(chain) = chain {
            timed("judging the chain", || judge_chain(chain))?;
        }
    }

    #[test]
    fn iptables_save_near_grammar(t in iptables_text()) {
        let chain = timed("parse_iptables_save", || parse_iptables_save(&t))?;
        if let Some(chain) = chain {
            timed("judging the chain", || judge_chain(chain))?;
        }
    }

    #[test]
    fn nft_json_arbitrary_text(t in text()) {
        let chain = timed("parse_nft_json", || parse_nft_json(&t))?;
        if let Ok(chain) = chain {
            timed("judging the chain", || judge_chain(chain))?;
        }
    }

    #[test]
    fn nft_json_arbitrary_values(v in json_value(nft_keys())) {
        let t = json!({ "nftables": v }).to_string();
        for t in [t, v.to_string()] {
            let chain = timed("parse_nft_json", || parse_nft_json(&t))?;
            if let Ok(chain) = chain {
                timed("judging the chain", || judge_chain(chain))?;
            }
        }
    }

    #[test]
    fn nft_json_near_grammar(t in nft_text()) {
        let chain = timed("parse_nft_json", || parse_nft_json(&t))?;
        prop_assert!(chain.is_ok(), "valid nft JSON refused: {chain:?}");
        timed("judging the chain", || judge_chain(chain.unwrap()))?;
    }
}

// ----- procfs / sysfs -----

const PROC_NET: &[&str] = &[
    include_str!("../../tests/fixtures/ib-node/proc/net/fib_trie"),
    include_str!("../../tests/fixtures/ib-node/proc/net/route"),
    include_str!("../../tests/fixtures/ib-node/proc/net/if_inet6"),
    include_str!("../../tests/fixtures/plain-vm/proc/net/fib_trie"),
    include_str!("../../tests/fixtures/plain-vm/proc/net/route"),
    include_str!("../../tests/fixtures/plain-vm/proc/net/if_inet6"),
];

const PROC_SYS: &[&str] = &[
    include_str!("../../tests/fixtures/ib-node/proc/self/limits"),
    include_str!("../../tests/fixtures/ib-node/proc/mounts"),
    include_str!("../../tests/fixtures/ib-node/etc/hosts"),
    include_str!("../../tests/fixtures/plain-vm/proc/self/limits"),
    include_str!("../../tests/fixtures/plain-vm/proc/mounts"),
];

/// Short sysfs-like values: numbers in several bases and signs, rates, states, junk.
fn sysfs_value() -> impl Strategy<Value = String> {
    prop_oneof![
        select(
            &[
                "0x1003",
                "0X0",
                "1003",
                "0x",
                "-1",
                "0",
                "4294967295",
                "4294967296",
                "ffffffff",
                "100000",
                "200 Gb/sec (4X HDR)",
                "2.5 Gb/sec (1X SDR)",
                "NaN Gb/sec",
                "inf Gb/sec",
                "-0 Gb/sec",
                "1e309 Gb/sec",
                "4: ACTIVE",
                "5: LinkUp",
                ":",
                "4:",
                " 4 : X ",
                "0100010A",
                "up",
                "unknown",
                "down",
            ][..]
        )
        .prop_map(String::from),
        "[0-9a-fA-FxX:+. -]{0,24}",
        "[ -~]{0,40}",
        text(),
    ]
}

fn proc_net_text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => line_soup(lines_of(PROC_NET), words_of(PROC_NET), 60),
        1 => text(),
    ]
}

fn proc_sys_text() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => line_soup(lines_of(PROC_SYS), words_of(PROC_SYS), 40),
        1 => text(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sysfs_values(s in sysfs_value()) {
        timed("the sysfs value parsers", || {
            let _ = parse_hex_u32(&s);
            let _ = net::parse_speed(&s);
            let _ = net::hex_le_ipv4(&s);
            let _ = net::is_up(parse_hex_u32(&s), &s, s.trim().parse().ok());
            let _ = ib::strip_state_number(&s);
            let rate = ib::parse_rate_gbps(&s);
            assert!(rate.is_none_or(|r| r.is_finite() && r >= 0.0), "rate {rate:?}");
            let _ = sys::parse_tmpfs_size(&s, || Some(u64::MAX));
            let _ = sys::parse_tmpfs_size(&s, || None);
            let _ = sys::parse_memlock(&s);
            if let Ok(v) = s.trim().parse::<i32>() {
                let _ = nccl::decode_version(v);
                let _ = gpu::format_cuda_version(v);
            }
        })?;
    }

    #[test]
    fn proc_net_files(t in proc_net_text(), t2 in proc_net_text()) {
        timed("the /proc/net parsers", || {
            let locals = net::parse_fib_trie_locals(&t);
            let routes = net::parse_route(&t2);
            let _ = net::assign_local_ipv4(&locals, &routes, "lo");
            let _ = net::parse_if_inet6(&t);
            let _ = net::parse_route(&t);
        })?;
    }

    #[test]
    fn proc_sys_files(t in proc_sys_text(), name in prop_oneof![select(words_of(PROC_SYS)), "[ -~]{0,12}"]) {
        timed("the limits/mounts/hosts parsers", || {
            let _ = sys::parse_memlock(&t);
            let _ = sys::lookup_in_hosts(&t, &name);
        })?;
    }
}

// ----- CUDA_VISIBLE_DEVICES -----

const UUIDS: &[&str] = &[
    "GPU-a",
    "GPU-ab",
    "GPU-abc-0001",
    "GPU-ABC-0001",
    "GPU-b",
    "MIG-1234",
    "MIG-GPU-a/1/0",
];

fn gpus() -> impl Strategy<Value = Vec<Gpu>> {
    let gpu =
        (0u32..10, select(UUIDS), vec(select(UUIDS), 0..3)).prop_map(|(index, uuid, migs)| Gpu {
            index,
            uuid: uuid.to_string(),
            mig_devices: migs.into_iter().map(String::from).collect(),
            ..Default::default()
        });
    vec(gpu, 0..9)
}

fn cvd_value() -> impl Strategy<Value = String> {
    let entry = prop_oneof![
        select(
            &[
                "0",
                "1",
                "7",
                "-1",
                "",
                " ",
                "+2",
                "3junk",
                "99999999999",
                "GPU-a",
                "gpu-a",
                "GPU-",
                "MIG-GPU-a/1/0",
                "MIG-GPU-a/x/0",
                "MIG-GPU-/1/2",
                "MIG-GPU-a/1/0/9",
                "MIG-1234",
                "MIG-12-34",
                "MIG-",
                "MIG-zz",
            ][..]
        )
        .prop_map(String::from),
        "[ -~]{0,10}",
    ];
    prop_oneof![
        3 => vec(entry, 0..12).prop_map(|e| e.join(",")),
        1 => text(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cuda_visible_devices(value in cvd_value(), gpus in gpus()) {
        let visible = timed("visible_devices::resolve", || {
            for entry in value.split(',') {
                let _ = visible_devices::classify(entry);
            }
            let _ = visible_devices::classify(&value);
            visible_devices::resolve(Some(&value), &gpus)
        })?;
        prop_assert!(visible.count() <= value.split(',').count());
        for p in &visible.problems {
            let _ = p.describe();
        }
        let facts = NodeFacts {
            env: [("CUDA_VISIBLE_DEVICES".to_string(), value.clone())].into(),
            gpu: preflight_checks::model::GpuFacts { gpus, ..Default::default() },
            ..Default::default()
        };
        let n = timed("visible_gpu_count", || visible_devices::visible_gpu_count(&facts))?;
        prop_assert_eq!(n as usize, visible.count());
        timed("check_node", || check_node(&facts, &CheckContext { nproc_per_node: Some(4), ..Default::default() }))?;
    }
}

// ----- fail-slow: planted slow parts named as what they are -----

#[path = "support/fail_slow_model.rs"]
mod fail_slow_model;
use fail_slow_model::{Plant, Rng};
use preflight_checks::fail_slow::Direction;

/// The sizes the judgment is held to (the issue's list).
const FAIL_SLOW_SIZES: &[u32] = &[2, 3, 4, 5, 8, 16, 64, 256, 1024, 4096];

/// The planted scenarios by name, for a size; None where the size cannot hold it (a cut needs
/// two groups of two, two slow nodes and a pair need a healthy majority).
fn planted(kind: &str, n: u32, rng: &mut Rng) -> Option<Plant> {
    let mut p = Plant::healthy(n);
    let mut pick = |taken: &mut Vec<u32>| {
        let off = rng.below(u64::from(n)) as u32;
        let r = (0..n)
            .map(|i| (i + off) % n)
            .find(|r| !taken.contains(r))
            .expect("fewer taken than nodes");
        taken.push(r);
        r
    };
    let mut taken = Vec::new();
    match kind {
        "healthy" => {}
        "node" | "node-sending" | "node-receiving" if n >= 3 => {
            let d = match kind {
                "node" => Direction::Both,
                "node-sending" => Direction::Sending,
                _ => Direction::Receiving,
            };
            p.nodes.push((pick(&mut taken), d));
        }
        // Pairs are planted on ring neighbours: above 8 nodes the schedule measures a pair
        // only if it is in the ring or a random matching, and an unmeasured pair is unseen.
        "pair" if n >= 3 => {
            let a = pick(&mut taken);
            p.pairs.push((a, (a + 1) % n));
        }
        "direction" => {
            let a = pick(&mut taken);
            p.directions.push((a, (a + 1) % n));
        }
        "cut" if n >= 5 => p.cut = (n / 3).max(2),
        "nodes-and-pair" if n >= 8 => {
            p.nodes.push((pick(&mut taken), Direction::Both));
            p.nodes.push((pick(&mut taken), Direction::Both));
            // A ring pair apart from both slow nodes.
            let slow = taken.clone();
            let off = pick(&mut taken);
            let a = (0..n)
                .map(|i| (i + off) % n)
                .find(|a| !slow.contains(a) && !slow.contains(&((a + 1) % n)))
                .expect("n >= 8 holds a ring pair apart from two nodes");
            p.pairs.push((a, (a + 1) % n));
        }
        _ => return None,
    }
    Some(p)
}

const FAIL_SLOW_KINDS: &[&str] = &[
    "healthy",
    "node",
    "node-sending",
    "node-receiving",
    "pair",
    "direction",
    "cut",
    "nodes-and-pair",
];

/// Every planted fault at every size, over seeds: named as its kind, nothing else named.
/// Seeds per case: 12 up to 256 nodes, 2 at 1024 and 4096.
#[test]
fn fail_slow_names_every_planted_fault_at_every_size() {
    let started = std::time::Instant::now();
    let mut cases = 0;
    for &n in FAIL_SLOW_SIZES {
        let seeds = if n <= 256 { 12 } else { 2 };
        for kind in FAIL_SLOW_KINDS {
            for seed in 0..seeds {
                let mut rng = Rng(u64::from(n) * 7919 + seed * 104_729 + kind.len() as u64);
                let Some(plant) = planted(kind, n, &mut rng) else {
                    continue;
                };
                let (verdict, _) = plant.run(seed);
                if *kind == "healthy" {
                    assert!(verdict.clean(), "healthy n={n} seed={seed}: {verdict:#?}");
                } else {
                    plant.assert_named(&verdict);
                }
                cases += 1;
            }
        }
    }
    eprintln!(
        "fail-slow: {cases} planted cases at sizes {FAIL_SLOW_SIZES:?} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

proptest! {
    #![proptest_config(config())]

    /// Random size, fault and seed: the same contract, with the retest counted and bounded.
    #[test]
    fn fail_slow_planted_fault_any_seed(
        n in select(FAIL_SLOW_SIZES.iter().copied().filter(|n| *n <= 256).collect::<Vec<_>>()),
        kind in select(FAIL_SLOW_KINDS.to_vec()),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed | 1);
        if let Some(plant) = planted(kind, n, &mut rng) {
            let (verdict, retested) = plant.run(seed);
            // Within the retest's budget, whatever n: rounds x pairs, both directions each.
            let budget = 2 * preflight_checks::fail_slow::RETEST_ROUNDS * preflight_checks::fail_slow::RETEST_PAIRS;
            prop_assert!(retested <= budget, "{retested} retests at n={n}");
            if kind == "healthy" {
                prop_assert!(verdict.clean(), "{verdict:#?}");
            } else {
                plant.assert_named(&verdict);
            }
        }
    }
}

/// Two nodes have no third partner: one slow way is a direction; both ways slow are judged
/// against the floor (the rated speed or --min-link-gbit) and named as the link, everywhere.
#[test]
fn fail_slow_two_nodes() {
    let mut p = Plant::healthy(2);
    p.directions.push((1, 0));
    let (v, _) = p.run(3);
    p.assert_named(&v);
    let mut p = Plant::healthy(2);
    p.factor = 0.1;
    p.pairs.push((0, 1));
    // Without a floor, two equal slow ways are all there is: nothing to call slow.
    assert!(p.run(3).0.clean());
    p.floor = 5.0;
    let (v, _) = p.run(3);
    let e = v.everywhere.expect("slow everywhere against the floor");
    assert!(e.max < 5.0 && e.floor == 5.0, "{e:?}");
}

// ----- Flight Recorder dumps and NCCL RAS status (issue 43) -----

fn fr_fixture(rel: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(rel);
    std::fs::read(p).unwrap()
}

/// A real input with bytes changed, inserted, or cut off: near the format, where bugs hide.
fn mutated(real: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let n = real.len().max(1);
    (vec((0..n, any::<u8>(), 0..3u8), 0..12), 0..=n).prop_map(move |(edits, cut)| {
        let mut b = real.clone();
        for (at, byte, how) in edits {
            let at = at.min(b.len().saturating_sub(1));
            match how {
                0 if !b.is_empty() => b[at] = byte,
                1 => b.insert(at, byte),
                _ if !b.is_empty() => {
                    b.remove(at);
                }
                _ => {}
            }
        }
        b.truncate(cut.max(b.len() / 2));
        b
    })
}

fn judge_dump(b: &[u8]) {
    use preflight_checks::explain::hang::{Budgets, answer, read_all};
    let files = vec![
        ("trace_0".to_string(), b.to_vec()),
        (
            "trace_1".to_string(),
            fr_fixture("flight-recorder/straggler/pickle/trace_1"),
        ),
    ];
    let (dumps, unread) = read_all(&files, None, &Budgets::default());
    let _ = answer::answer(&dumps, unread, None, &answer::LogHints::default());
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fr_dump_any_bytes(b in prop_kit::bytes()) {
        timed("a dump of arbitrary bytes", || judge_dump(&b))?;
        let mut p = vec![0x80, 2];
        p.extend_from_slice(&b);
        timed("a pickle of arbitrary opcodes", || judge_dump(&p))?;
    }

    #[test]
    fn fr_dump_near_real_pickles_and_json(
        p in mutated(fr_fixture("flight-recorder/subgroup/pickle/trace_nodeB_2")),
        j in mutated(fr_fixture("flight-recorder/straggler/json/trace_0.json")),
    ) {
        timed("a mutated pickle dump", || judge_dump(&p))?;
        timed("a mutated JSON dump", || judge_dump(&j))?;
    }

    #[test]
    fn ras_any_text_and_near_real(
        t in text(),
        m in mutated(fr_fixture("ras/nccl-2.24-dead-and-behind.txt")),
        j in mutated(fr_fixture("ras/nccl-2.29-dead.json")),
    ) {
        use preflight_checks::explain::hang::{answer, ras};
        for b in [t.as_bytes(), &m, &j] {
            let r = timed("RAS output", || ras::parse(b))?;
            if let Ok(r) = r {
                timed("RAS answer", || answer::answer(&[], vec![], Some((r, "-".into())), &answer::LogHints::default()))?;
            }
        }
    }
}

/// A pickle whose memo gets double the value each time: refused by the pre-scan, in bounded
/// time and memory, however few bytes it takes.
#[test]
fn fr_pickle_memo_bomb_is_refused() {
    use preflight_checks::explain::hang::pickle::{PickleBudget, PickleError, to_json};
    let mut b = b"\x80\x02]q\x00".to_vec();
    for i in 1..=255u8 {
        b.extend_from_slice(&[b']', b'(', b'h', i - 1, b'h', i - 1, b'e', b'q', i]);
    }
    b.push(b'.');
    let budget = PickleBudget {
        depth: 32,
        values: 50_000_000,
        bytes: 64 << 20,
    };
    let r = prop_kit::timed("memo bomb", || to_json(&b, budget)).unwrap();
    assert!(matches!(r, Err(PickleError::TooBig(_))), "{r:?}");
}

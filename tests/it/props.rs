//! Property tests: arbitrary input to every decoder of the binary crate must not panic and must
//! return in bounded time (each input under [`LIMIT`], inputs up to 64 KiB). Wire frames, facts
//! and report JSON (and the checks and advice on every facts value that decodes), torchrun
//! command lines, NCCL logs, job logs (`explain --log`), hostlists, endpoints and `--sizes`. The checks crate's decoders
//! (firewall rulesets, procfs/sysfs values, `CUDA_VISIBLE_DEVICES`) are in
//! `checks/tests/props.rs` and beside the private parsers in `checks/src/probe/`.
//!
//! Cases per property: 256, or `PROPTEST_CASES` when set. The long run, one property at a time
//! (NAME from `cargo test --test it props:: -- --list`):
//!
//!     cargo test --test it --no-run
//!     PROPTEST_CASES=1000000 timeout 1200 cargo test --test it props::NAME -- --exact --test-threads=1
//!     PROPTEST_CASES=1000000 timeout 1200 cargo test -p preflight-checks --test props NAME -- --exact
//!     PROPTEST_CASES=1000000 timeout 1200 cargo test -p preflight-checks --lib probe::MODULE::tests::NAME -- --exact
//!
//! The authentication handshake (`transport/auth.rs`) is not covered here.

use preflight::advise::{AdviceInput, advise_node};
use preflight::launchline::{self, args, validate};
use preflight::measure::nccl::log as nccl_log;
use preflight::measure::sizes::{MAX_SIZE, MAX_SIZES, parse_size, parse_sizes};
use preflight::placement::{MAX_HOSTLIST, expand_hostlist, split_endpoint};
use preflight::transport::wire::{MAX_FRAME, Msg, RankRow, RingOrder, WireError, read_msg};
use preflight_checks::model::{NodeFacts, Report};
use preflight_checks::{CheckContext, check_node, visible_devices};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[path = "../../checks/tests/support/prop_kit.rs"]
mod prop_kit;
use prop_kit::{bytes, config, text, timed};

// ----- the largest allocation, per thread -----

/// The system allocator, noting the largest block each thread asks for, so that a test can
/// tell that a decoder did not allocate what a frame header claims.
struct NotingAllocator;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is passed on unchanged to `System`; noting a size allocates nothing.
unsafe impl GlobalAlloc for NotingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: NotingAllocator = NotingAllocator;

/// `f`'s result and the largest block this thread allocated while it ran.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get))
}

// ----- input strategies -----

fn sorted_words<'a>(words: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut w: Vec<String> = words.map(str::to_string).collect();
    w.sort();
    w.dedup();
    w
}

/// Words from `vocab` (and noise) joined by spaces, tabs and nothing.
fn soup(vocab: Vec<String>, max_words: usize) -> impl Strategy<Value = String> {
    let word = prop_oneof![
        8 => select(vocab),
        1 => "[ -~]{0,8}",
        1 => any::<char>().prop_map(String::from),
    ];
    let sep = select(vec![" ", " ", " ", "\t", "", "  "]);
    vec((word, sep), 0..max_words).prop_map(|v| {
        v.into_iter().fold(String::new(), |mut s, (w, sep)| {
            s.push_str(&w);
            s.push_str(sep);
            s
        })
    })
}

/// Text near a line-based format: its real lines (repeated, reordered), lines of its words, noise.
fn line_soup(fixture: String, max_lines: usize) -> impl Strategy<Value = String> {
    let lines: Vec<String> = fixture.lines().map(str::to_string).collect();
    let line = prop_oneof![
        4 => select(lines),
        3 => soup(sorted_words(fixture.split_whitespace()), 16),
        1 => vec(any::<char>(), 0..64).prop_map(String::from_iter),
    ];
    vec(line, 0..max_lines).prop_map(|l| l.join("\n"))
}

/// Arbitrary JSON values, keys drawn mostly from `keys` so that objects look like the real ones.
fn json_value(keys: Vec<String>) -> impl Strategy<Value = Value> {
    let key = prop_oneof![4 => select(keys), 1 => "[a-z_]{0,8}"];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        select(vec![
            0i64,
            1,
            -1,
            2,
            4,
            8,
            22,
            1500,
            9000,
            29500,
            65535,
            65536,
            i64::MAX,
            i64::MIN
        ])
        .prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
        select(vec![
            "eth0", "ib0", "lo", "10.0.0.1", "fe80::1", "tcp", "pass", "warn", "fail", "error",
            "skip", "IB", "Socket", "GPU-a", "0,1", "2.21.5", "up", "down"
        ])
        .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 256, 8, move |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(Value::Array),
            vec((key.clone(), inner), 0..8).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
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

fn keys_of(docs: &[Value]) -> Vec<String> {
    let mut keys = Vec::new();
    docs.iter().for_each(|d| collect_keys(d, &mut keys));
    keys.sort();
    keys.dedup();
    keys
}

/// Replaces the subtree that `path` leads to (each step picks a child, modulo its count) with `new`.
fn replace_at(v: &mut Value, path: &[usize], new: Value) {
    let len = match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    };
    match path.split_first() {
        Some((step, rest)) if len > 0 => {
            let child = match v {
                Value::Array(a) => &mut a[step % len],
                Value::Object(o) => o.values_mut().nth(step % len).expect("in range"),
                _ => unreachable!("only containers have children"),
            };
            replace_at(child, rest, new)
        }
        _ => *v = new,
    }
}

/// A real document with one to four subtrees replaced by arbitrary values (keys from `keys`).
fn mutated(docs: Vec<Value>) -> impl Strategy<Value = Value> {
    let keys = keys_of(&docs);
    (
        select(docs),
        vec((vec(any::<usize>(), 0..8), json_value(keys)), 1..4),
    )
        .prop_map(|(mut doc, edits)| {
            for (path, new) in edits {
                replace_at(&mut doc, &path, new);
            }
            doc
        })
}

// ----- fixtures -----

const FACTS: &[&str] = &[
    include_str!("../fixtures/facts/docker-bond-host.json"),
    include_str!("../fixtures/facts/ib-node.json"),
    include_str!("../fixtures/facts/k8s-pod.json"),
    include_str!("../fixtures/facts/plain-vm.json"),
    include_str!("../fixtures/facts/roce-node.json"),
];

const REPORTS: &[&str] = &[
    include_str!("../fixtures/reports/cluster-2-nodes.json"),
    include_str!("../fixtures/reports/cluster-3-filtered-slow.json"),
    include_str!("../fixtures/reports/cluster-3-healthy.json"),
    include_str!("../fixtures/reports/cluster-8-nodes.json"),
    include_str!("../fixtures/reports/cluster-failed.json"),
];

const NCCL_LOGS: &[&str] = &[
    include_str!("../fixtures/nccl-logs/ib-2hca.log"),
    include_str!("../fixtures/nccl-logs/ib-disabled-socket.log"),
    include_str!("../fixtures/nccl-logs/ib-error-warn.log"),
    include_str!("../fixtures/nccl-logs/old-2.4-ib.log"),
    include_str!("../fixtures/nccl-logs/roce-ro.log"),
    include_str!("../fixtures/nccl-logs/single-host-p2p.log"),
    include_str!("../fixtures/nccl-logs/socket-2node.log"),
];

const TORCHRUN_COMMANDS: &str = include_str!("../fixtures/torchrun/commands.txt");

fn docs(texts: &[&str]) -> Vec<Value> {
    texts
        .iter()
        .map(|t| serde_json::from_str(t).expect("fixture JSON"))
        .collect()
}

// ----- wire frames -----

/// Messages as the coordinator and agents send them: small ones, a node's facts, a report.
fn sample_messages() -> Vec<Vec<u8>> {
    let facts: NodeFacts = serde_json::from_str(FACTS[1]).expect("facts fixture");
    let report: Report = serde_json::from_str(REPORTS[1]).expect("report fixture");
    let msgs = [
        Msg::PingReq { count: 7 },
        Msg::Reject {
            reason: "wrong secret".into(),
            kind: None,
        },
        Msg::Ring {
            order: RingOrder {
                sizes: vec![4, 1 << 20],
                ..Default::default()
            },
        },
        Msg::RingDone {
            rows: vec![RankRow::default()],
            error: None,
        },
        Msg::Join {
            facts: Box::new(facts),
            listeners: Vec::new(),
            whole_report: true,
        },
        Msg::Report {
            report: Box::new(report),
        },
    ];
    msgs.iter()
        .map(|m| serde_json::to_vec(m).expect("serialises"))
        .collect()
}

/// A real message's JSON, cut short, with bytes changed or spliced in.
fn mangled_message() -> impl Strategy<Value = Vec<u8>> {
    let edit = (any::<usize>(), any::<u8>(), 0u8..3);
    (
        select(sample_messages()),
        vec(edit, 0..6),
        any::<usize>(),
        any::<bool>(),
    )
        .prop_map(|(mut body, edits, cut, do_cut)| {
            for (at, byte, kind) in edits {
                let at = at % (body.len() + 1);
                match kind {
                    0 if at < body.len() => body[at] = byte,
                    1 => body.insert(at, byte),
                    _ if at < body.len() => {
                        body.remove(at);
                    }
                    _ => {}
                }
            }
            if do_cut {
                body.truncate(cut % (body.len() + 1));
            }
            body
        })
}

fn frame(len: u32, body: &[u8]) -> Vec<u8> {
    let mut f = len.to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

fn wire_keys() -> Vec<String> {
    let mut k = keys_of(&docs(FACTS));
    k.extend(
        [
            "type",
            "count",
            "reason",
            "facts",
            "listeners",
            "report",
            "order",
            "rows",
            "error",
        ]
        .map(String::from),
    );
    k
}

proptest! {
    #![proptest_config(config())]

    /// Any bytes: an error or a message, never more than the frame cap allocated at once.
    #[test]
    fn wire_arbitrary_bytes(input in bytes()) {
        let (r, largest) = timed("read_msg", || {
            largest_allocation(|| read_msg::<_, Msg>(&mut input.as_slice()))
        })?;
        prop_assert!(largest <= MAX_FRAME + (1 << 20), "allocated {largest} bytes at once");
        if input.len() >= 4 {
            // The length word's top bit says the body is deflated; the rest is the length.
            let declared = (u32::from_be_bytes(input[..4].try_into().unwrap()) & 0x7fff_ffff) as usize;
            if declared > MAX_FRAME {
                prop_assert!(matches!(r, Err(WireError::TooLarge { len: n, .. }) if n == declared), "{r:?}");
                prop_assert!(largest < 1 << 20, "allocated {largest} bytes for a refused frame");
            } else if input.len() - 4 < declared {
                prop_assert!(matches!(r, Err(WireError::Closed)), "{r:?}");
            }
        } else {
            prop_assert!(matches!(r, Err(WireError::Closed)), "{r:?}");
        }
    }

    /// A right length prefix before garbage, arbitrary JSON or a mangled real message:
    /// a message or `Malformed`, and what follows the frame is left unread.
    #[test]
    fn wire_valid_length_garbage_body(
        body in prop_oneof![
            bytes(),
            json_value(wire_keys()).prop_map(|v| v.to_string().into_bytes()),
            mangled_message(),
        ],
        trailer in vec(any::<u8>(), 0..16),
    ) {
        let mut input = frame(body.len() as u32, &body);
        input.extend_from_slice(&trailer);
        let mut rest = input.as_slice();
        let r = timed("read_msg", || read_msg::<_, Msg>(&mut rest))?;
        prop_assert!(matches!(r, Ok(_) | Err(WireError::Malformed(_))), "{r:?}");
        prop_assert_eq!(rest, trailer.as_slice());
    }

    /// Declared lengths past the cap (up to 4 GiB) are refused at once, nothing like them allocated.
    #[test]
    fn wire_huge_declared_length(
        len in prop_oneof![Just(u32::MAX), Just(MAX_FRAME as u32 + 1), (MAX_FRAME as u32 + 1)..=u32::MAX],
        tail in vec(any::<u8>(), 0..64),
    ) {
        let input = frame(len, &tail);
        let start = Instant::now();
        let (r, largest) = largest_allocation(|| read_msg::<_, Msg>(&mut input.as_slice()));
        let took = start.elapsed();
        // The top bit marks a deflated body; the length is the other 31 bits.
        let declared = (len & 0x7fff_ffff) as usize;
        if declared > MAX_FRAME {
            prop_assert!(matches!(r, Err(WireError::TooLarge { len: n, .. }) if n == declared), "{r:?}");
        } else {
            prop_assert!(r.is_err(), "{r:?}");
        }
        prop_assert!(largest < 1 << 20, "allocated {largest} bytes for a {len}-byte frame");
        prop_assert!(took < Duration::from_millis(100), "took {took:?}");
    }
}

// ----- facts and report JSON -----

/// The judgment `preflight check --facts` runs on facts that decoded.
fn judge_facts(facts: &NodeFacts) -> Result<(), TestCaseError> {
    timed("check_node and advise_node", || {
        let _ = check_node(facts, &CheckContext::default());
        let ctx = CheckContext {
            rank: Some(1),
            master_port: 29500,
            nproc_per_node: Some(8),
            expect_gpus: Some(8),
            nnodes: Some(64),
            world_size: Some(512),
            xid_window_s: Some(3600),
        };
        let _ = check_node(facts, &ctx);
        let _ = advise_node(facts, &AdviceInput::default());
        let _ = advise_node(
            facts,
            &AdviceInput {
                master_port: 29500,
                nproc_per_node: Some(8),
                script: vec!["train.py".into(), "--epochs".into(), "1".into()],
                nnodes: Some(4),
            },
        );
        let _ = visible_devices::visible_gpu_count(facts);
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn facts_arbitrary_bytes(input in bytes()) {
        let facts = timed("decoding facts", || serde_json::from_slice::<NodeFacts>(&input))?;
        if let Ok(facts) = facts {
            judge_facts(&facts)?;
        }
    }

    #[test]
    fn facts_arbitrary_json_values(v in json_value(keys_of(&docs(FACTS)))) {
        let text = v.to_string();
        let facts = timed("decoding facts", || serde_json::from_str::<NodeFacts>(&text))?;
        if let Ok(facts) = facts {
            judge_facts(&facts)?;
        }
    }

    #[test]
    fn facts_mutated_fixtures(v in mutated(docs(FACTS))) {
        let text = v.to_string();
        let facts = timed("decoding facts", || serde_json::from_str::<NodeFacts>(&text))?;
        if let Ok(facts) = facts {
            judge_facts(&facts)?;
        }
    }

    #[test]
    fn report_arbitrary_bytes(input in bytes()) {
        let _ = timed("decoding a report", || serde_json::from_slice::<Report>(&input))?;
    }

    #[test]
    fn report_arbitrary_json_values(v in json_value(keys_of(&docs(REPORTS)))) {
        let text = v.to_string();
        let _ = timed("decoding a report", || serde_json::from_str::<Report>(&text))?;
    }

    #[test]
    fn report_mutated_fixtures(v in mutated(docs(REPORTS))) {
        let text = v.to_string();
        let _ = timed("decoding a report", || serde_json::from_str::<Report>(&text))?;
    }
}

// ----- torchrun command lines -----

/// Option spellings, values and launcher words torchrun lines are made of.
fn torchrun_vocab() -> Vec<String> {
    let commands = TORCHRUN_COMMANDS
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(str::split_whitespace);
    let extra = [
        "torchrun",
        "python",
        "python3.11",
        "-m",
        "torch.distributed.run",
        "torch.distributed.launch",
        "--",
        "-",
        "--nnodes",
        "--nnodes=2:4",
        "--nnodes=0",
        "--nnodes=4:2",
        "--nnodes=a:b:c",
        "--node-rank",
        "--node_rank=99999999999",
        "--rdzv-endpoint",
        "--rdzv-endpoint=[::1]:0",
        "--rdzv-endpoint=[fe80::1",
        "--rdzv-endpoint=:",
        "--rdzv-backend=static",
        "--standalone",
        "--standalone=1",
        "--master-addr",
        "--master-port=0",
        "--master-port=65536",
        "-r3",
        "-r=",
        "--nproc-per-node=gpu",
        "--nproc_per_node",
        "--use-env",
        "--local-rank",
        "'",
        "\"",
        "\\",
        "\\\n",
        "$VAR",
        "$(hostname)",
        "'192.168.1.2'",
        "\"x y\"",
        "-1",
        "-1.5e3",
        "train.py",
    ];
    let mut v = sorted_words(commands.chain(extra));
    v.retain(|w| !w.starts_with('/'));
    v
}

/// Parses, reads the rendezvous and judges a command on a default node, unresolved (no network).
fn judge_words(words: Vec<args::Word>) -> Result<(), TestCaseError> {
    timed("parse, shape_of and judge", || {
        let parsed = args::parse(words);
        let _ = parsed.script_and_args();
        let _ = parsed.prefers_underscores();
        for p in &parsed.problems {
            if let args::Problem::Unknown { word, .. } = p {
                let _ = args::suggest(word);
            }
        }
        let shape = validate::shape_of(&parsed);
        let _ = launchline::probe_port(&shape);
        let judged = launchline::judge(parsed, &NodeFacts::default(), None, Default::default());
        let _ = launchline::command_finding(&judged, None);
        let _ = launchline::blocking_failures(&judged);
    })
}

fn judge_line(line: &str) -> Result<(), TestCaseError> {
    let words = timed("split_shell_words", || args::split_shell_words(line))?;
    if let Ok(words) = words {
        judge_words(words)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn torchrun_line_arbitrary_text(line in text()) {
        judge_line(&line)?;
    }

    #[test]
    fn torchrun_line_near_grammar(line in soup(torchrun_vocab(), 40)) {
        judge_line(&line)?;
    }

    #[test]
    fn torchrun_word_vectors(words in vec(prop_oneof![3 => select(torchrun_vocab()), 1 => "\\PC{0,16}", 1 => any::<String>()], 0..24)) {
        let words: Vec<args::Word> = words.into_iter().map(args::Word::plain).collect();
        judge_words(words)?;
    }
}

// ----- NCCL logs -----

proptest! {
    #![proptest_config(config())]

    #[test]
    fn nccl_log_arbitrary_text(text in text()) {
        judge_nccl_log(&text)?;
    }

    #[test]
    fn nccl_log_near_lines(text in line_soup(NCCL_LOGS.concat(), 80)) {
        judge_nccl_log(&text)?;
    }
}

// ----- job logs (`preflight explain --log`) -----

/// Every explain-log fixture, for lines near the real ones.
fn explain_logs() -> String {
    let dir = crate::common::fixture("explain-logs");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn explain_log_arbitrary_bytes(b in bytes()) {
        judge_explain_log(&b)?;
    }

    #[test]
    fn explain_log_near_lines(text in line_soup(explain_logs(), 80)) {
        judge_explain_log(text.as_bytes())?;
    }
}

fn judge_explain_log(b: &[u8]) -> Result<(), TestCaseError> {
    let e = timed("explain --log", || {
        preflight::commands::explain_log::explain_reader(b, "-").unwrap()
    })?;
    let lines = b.iter().filter(|&&c| c == b'\n').count() as u64;
    prop_assert!(e.answer.lines_read <= lines + 1);
    prop_assert!(e.answer.errors.iter().filter(|x| x.decisive).count() <= 1);
    for err in &e.answer.errors {
        prop_assert!(!err.causes.is_empty());
        prop_assert!(err.line.chars().count() <= 401);
    }
    timed("render explain --log", || {
        let _ = preflight::render::explain_log::render(
            &e,
            preflight::render::Style {
                color: false,
                width: 80,
                unicode: true,
                verbose: false,
            },
        );
        let _ = preflight::render::explain_log::json(&e);
    })?;
    Ok(())
}

fn judge_nccl_log(text: &str) -> Result<(), TestCaseError> {
    let net = timed("the NCCL log parser", || nccl_log::parse(text))?;
    timed("summary and differs_from_advice", || {
        let _ = net.summary();
        let _ = net.is_empty();
        for env in [
            BTreeMap::new(),
            BTreeMap::from([("NCCL_IB_DISABLE".to_string(), "1".to_string())]),
            BTreeMap::from([
                ("NCCL_IB_DISABLE".to_string(), "0".to_string()),
                ("NCCL_IB_HCA".to_string(), "=mlx5_0:1,mlx5_1".to_string()),
                ("NCCL_SOCKET_IFNAME".to_string(), "^docker,lo".to_string()),
            ]),
        ] {
            let _ = nccl_log::differs_from_advice(&net, &env);
        }
    })?;
    Ok(())
}

// ----- hostlists, endpoints, sizes -----

/// Numbers for bracket ranges: small, zero-padded (widely, too), at and past the cap, past u64.
fn bound() -> impl Strategy<Value = String> {
    let odd = vec![
        "99999",
        "100000",
        "99999999",
        "18446744073709551615",
        "18446744073709551616",
        "",
        " 1",
        "x",
    ];
    prop_oneof![
        4 => (0u64..20).prop_map(|n| n.to_string()),
        2 => (0usize..6, 0u64..1000).prop_map(|(zeros, n)| format!("{}{n}", "0".repeat(zeros))),
        1 => (1usize..4000).prop_map(|zeros| "0".repeat(zeros)),
        2 => select(odd).prop_map(String::from),
        2 => (0u64..200_000).prop_map(|n| n.to_string()),
    ]
}

fn hostlist_near_grammar() -> impl Strategy<Value = String> {
    let range = prop_oneof![
        (bound(), bound()).prop_map(|(a, b)| format!("{a}-{b}")),
        (bound(), 10_000u64..100_000).prop_map(|(a, b)| format!("{a}-{b}")),
        bound(),
    ];
    let brackets = vec(range, 0..4).prop_map(|r| format!("[{}]", r.join(",")));
    let text = prop_oneof![
        6 => "[a-z0-9.-]{0,8}",
        1 => select(vec!["[", "]", "[[", ",", " ", "-"]).prop_map(String::from),
        1 => "[a-z]{0,4000}",
    ];
    let item = vec(prop_oneof![text, brackets], 0..5).prop_map(|p| p.concat());
    vec(item, 0..6).prop_map(|items| items.join(","))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostlist_arbitrary_text(s in text()) {
        let r = timed("expand_hostlist", || expand_hostlist(&s))?;
        if let Ok(hosts) = r {
            prop_assert!(!hosts.is_empty() && hosts.len() <= MAX_HOSTLIST);
        }
    }

    #[test]
    fn hostlist_near_grammar_stays_bounded(s in hostlist_near_grammar()) {
        let r = timed("expand_hostlist", || expand_hostlist(&s))?;
        if let Ok(hosts) = r {
            prop_assert!(!hosts.is_empty() && hosts.len() <= MAX_HOSTLIST);
        }
    }

    /// Ranges past the cap are refused by counting, not by expanding them.
    #[test]
    fn hostlist_huge_ranges_are_refused_fast(
        prefix in "[a-z]{1,6}",
        hi in (MAX_HOSTLIST as u64)..=u64::MAX,
        more in vec((MAX_HOSTLIST as u64)..=u64::MAX, 0..3),
    ) {
        let mut s = format!("{prefix}[0-{hi}]");
        for m in more {
            s.push_str(&format!(",{prefix}[1-{m}]"));
        }
        let start = Instant::now();
        let r = expand_hostlist(&s);
        let took = start.elapsed();
        prop_assert!(r.is_err(), "{s} expanded");
        prop_assert!(took < Duration::from_millis(100), "{s} took {took:?}");
    }

    #[test]
    fn endpoints_and_sizes(
        s in prop_oneof![
            text(),
            soup(
                ["host", "10.0.0.1", "[", "]", "::1", "fe80::1%eth0", ":", "29500", "0", "65536", "1M", "256M", "4",
                 "16G", "17G", "k", "KiB", "MB", "iB", "b", "99999999999999999999", "1", "2", "-3"]
                    .map(String::from).to_vec(),
                8,
            ),
        ],
    ) {
        let endpoint = timed("split_endpoint", || split_endpoint(&s))?;
        if let Ok((host, port)) = endpoint {
            prop_assert!(!host.is_empty());
            prop_assert!(port != Some(0));
        }
        let size = timed("parse_size", || parse_size(&s))?;
        if let Ok(size) = size {
            prop_assert!(size > 0 && size <= MAX_SIZE && size % 4 == 0, "{size}");
        }
        let sizes = timed("parse_sizes", || parse_sizes(&s))?;
        if let Ok(sizes) = sizes {
            prop_assert!(!sizes.is_empty() && sizes.len() <= MAX_SIZES);
            prop_assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
            prop_assert!(sizes.iter().all(|s| *s > 0 && *s <= MAX_SIZE));
        }
    }
}

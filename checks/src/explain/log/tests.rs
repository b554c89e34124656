use super::SIGNATURES;
use super::answer::explain;
use super::*;
use std::io::{BufReader, Read};

fn fixture_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/explain-logs")
        .join(name)
}

fn scan_fixture(name: &str) -> Scan {
    let f = std::fs::File::open(fixture_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    scan(BufReader::new(f), Limits::default()).unwrap()
}

fn scan_text(s: &str) -> Scan {
    scan(s.as_bytes(), Limits::default()).unwrap()
}

#[test]
fn every_signature_has_a_fixture_that_it_matches() {
    assert!(
        SIGNATURES.len() <= 64,
        "the scanner's bit set holds 64 signatures"
    );
    for s in SIGNATURES.iter() {
        let name = format!("{}.log", s.id.replacen('.', "-", 1));
        let scan = scan_fixture(&name);
        assert!(
            scan.found.iter().any(|f| f.signature == s.id),
            "{name} does not match {}: {:?}",
            s.id,
            scan.found
        );
        if s.tier == Tier::Cause {
            assert_eq!(scan.decisive().unwrap().0.signature, s.id, "{name}");
        }
    }
}

#[test]
fn the_decisive_error_is_the_cause_not_the_watchdog_or_the_task_exit() {
    let scan = scan_fixture("nccl-no-socket-interface.log");
    let (f, h) = scan.decisive().unwrap();
    assert_eq!(f.signature, "nccl.no-socket-interface");
    assert_eq!(f.count, 3); // two WARN lines and PyTorch's "Last error:" copy
    assert_eq!(h.host.as_deref(), Some("gpu-b"));
    assert_eq!(h.device, Some(0));
    // The first error line is the same NCCL WARN; the DistBackendError and srun lines follow.
    assert_eq!(scan.first().unwrap().1.line_no, h.line_no);
    assert!(scan.found.iter().any(|f| f.signature == "c10d.nccl-error"));
    assert!(scan.found.iter().any(|f| f.signature == "slurm.task-exit"));
    assert_eq!(scan.job.master_port, Some(29500));
    assert_eq!(scan.job.master_addr.as_deref(), Some("10.0.0.1"));
    assert_eq!(scan.job.nnodes.as_deref(), Some("2"));
    assert_eq!(scan.job.nproc_per_node.as_deref(), Some("8"));
    assert_eq!(scan.job.env["NCCL_SOCKET_IFNAME"], "bond0");
}

#[test]
fn a_connect_timeout_points_at_the_master_with_the_jobs_flags() {
    let a = explain(&scan_fixture("c10d-connect-timeout.log"));
    let e = &a.errors[0];
    assert_eq!(e.signature, "c10d.connect-timeout");
    assert!(e.decisive);
    assert_eq!(e.rank, Some(2));
    assert_eq!(e.count, 3);
    assert_eq!(e.values["addr"], "10.0.0.1");
    let ids: Vec<&str> = e.causes.iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        [
            crate::firewall::ids::RULES.as_str(),
            crate::link::ids::UNREACHABLE.as_str(),
            crate::rendezvous::ids::RENDEZVOUS.as_str()
        ]
    );
    assert_eq!(e.causes[0].node, "10.0.0.1");
    assert_eq!(e.causes[0].confirm, "preflight check --master-port 29500");
    assert_eq!(
        e.causes[1].confirm,
        "preflight cluster --nnodes 4 --master-addr 10.0.0.1 --master-port 29500 --nproc-per-node 8"
    );
    assert!(e.causes[0].fix.contains("firewall") || !e.causes[0].fix.is_empty());
    let slurm = a
        .errors
        .iter()
        .find(|e| e.signature == "slurm.task-exit")
        .unwrap();
    assert_eq!(slurm.host.as_deref(), Some("node3"));
    assert_eq!(slurm.also[0].host.as_deref(), Some("node4"));
}

#[test]
fn a_loopback_address_blames_the_hostname_first() {
    for name in ["c10d-connect-failed.log", "gloo-connect-full-mesh.log"] {
        let a = explain(&scan_fixture(name));
        let e = &a.errors[0];
        assert_eq!(
            e.causes[0].id,
            crate::sys::ids::HOSTNAME_LOOPBACK.as_str(),
            "{name}"
        );
        assert!(
            !e.causes
                .iter()
                .any(|c| c.id == crate::firewall::ids::RULES.as_str()),
            "{name}"
        );
    }
    let a = explain(&scan_fixture("gloo-connect-full-mesh.log"));
    // torchrun's agent printed the master: that is the node whose name resolves to loopback.
    assert_eq!(a.errors[0].causes[0].node, "oem96");
    assert_eq!(
        a.errors[0].causes[0].confirm,
        "preflight check --master-port 17300"
    );
}

#[test]
fn a_log_with_no_known_error_names_the_lines_it_read_as_errors() {
    let scan = scan_fixture("no-known-error.log");
    assert!(scan.found.is_empty());
    let lines: Vec<u64> = scan.unmatched.iter().map(|u| u.line_no).collect();
    assert_eq!(lines, [3, 6, 7]);
    assert_eq!(scan.unmatched_count, 3);
}

#[test]
fn cut_lines_and_binary_noise_are_counted_not_kept() {
    let mut text = "x".repeat(100_000);
    text.push_str(" NCCL WARN Bootstrap : no socket interface found\n\u{0}\u{1}\u{ff}binary\n");
    let limits = Limits {
        max_line: 1024,
        ..Limits::default()
    };
    let s = scan(text.as_bytes(), limits).unwrap();
    assert_eq!(s.lines_read, 2);
    assert_eq!(s.lines_cut, 1);
    // The marker was past the cut: not seen.
    assert!(s.found.is_empty());
    assert_eq!(s.bytes_read, text.len() as u64);
}

#[test]
fn matches_per_signature_are_bounded_and_counted() {
    let line = "h:1:2 [0] NCCL WARN Bootstrap : no socket interface found\n";
    let s = scan_text(&line.repeat(1000));
    assert_eq!(s.found[0].count, 1000);
    assert_eq!(s.found[0].hits.len(), Limits::default().per_signature);
}

/// A reader that makes `total` bytes of realistic interleaved log on the fly, with an error
/// line every `every` lines, and counts what was read.
struct Generated {
    total: u64,
    made: u64,
    line: u64,
    pending: Vec<u8>,
    at: usize,
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at >= self.pending.len() {
            if self.made >= self.total {
                return Ok(0);
            }
            self.line += 1;
            let n = self.line;
            let text = match n % 5000 {
                0 => format!(
                    "{}: [rank{}]:[E302 socket.cpp:1011] [c10d] The client socket has timed out after 900000ms while trying to connect to (10.0.0.1, 29500).\n",
                    n % 8,
                    n % 8
                ),
                1234 => format!(
                    "gpu-{}:{}:{} [{}] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer gpu-2<53112>\n",
                    n % 16,
                    1000 + n % 7,
                    2000 + n % 13,
                    n % 8
                ),
                _ if n % 3 == 0 => format!(
                    "gpu-{}:{}:{} [{}] NCCL INFO Channel {:02}/0 : {}[{}] -> {}[{}] via NET/Socket/{}\n",
                    n % 16,
                    1000 + n % 7,
                    2000 + n % 13,
                    n % 8,
                    n % 32,
                    n % 64,
                    n % 8,
                    (n + 8) % 64,
                    n % 8,
                    n % 4
                ),
                _ if n % 3 == 1 => format!(
                    "\u{1b}[32m[rank{}]: step {} | loss {:.3} | lr 3e-4 | tokens/s 181234\u{1b}[0m\n",
                    n % 8,
                    n,
                    10.0 / (n as f64)
                ),
                _ => format!(
                    "{}: Epoch 3 iter {}: grad-norm 0.9{} throughput ok\n",
                    n % 8,
                    n,
                    n % 100
                ),
            };
            self.pending = text.into_bytes();
            self.at = 0;
        }
        let k = buf.len().min(self.pending.len() - self.at);
        buf[..k].copy_from_slice(&self.pending[self.at..self.at + k]);
        self.at += k;
        self.made += k as u64;
        Ok(k)
    }
}

#[test]
fn a_200_mb_log_streams_in_bounded_memory_and_time() {
    let total: u64 = 200 << 20;
    let reader = BufReader::with_capacity(
        64 << 10,
        Generated {
            total,
            made: 0,
            line: 0,
            pending: Vec::new(),
            at: 0,
        },
    );
    let started = std::time::Instant::now();
    let limits = Limits::default();
    let mut lines = LineReader::new(reader, limits.max_line);
    let mut scanner = Scanner::new(limits);
    let mut max_buffer = 0;
    while let Some(raw) = lines.next_line().unwrap() {
        scanner.line(raw, &mut |_| {});
        max_buffer = max_buffer.max(lines.buffer_capacity());
    }
    let scan = scanner.finish();
    let took = started.elapsed();
    assert!(lines.bytes >= total, "read {} bytes", lines.bytes);
    assert!(scan.lines_read > 2_000_000);
    let timeouts = scan
        .found
        .iter()
        .find(|f| f.signature == "c10d.connect-timeout")
        .unwrap();
    assert!(timeouts.count > 400, "{}", timeouts.count);
    assert_eq!(timeouts.hits.len(), limits.per_signature);
    // Memory: the line buffer never grows past a line, the state past its bounds.
    assert!(
        max_buffer <= 4 * limits.max_line,
        "line buffer {max_buffer} bytes"
    );
    let kept = scan.retained_bytes();
    assert!(kept < 64 << 10, "scan state {kept} bytes");
    eprintln!(
        "200 MiB log: {} lines in {:.2?} ({:.0} MB/s), line buffer {} B, state {} B",
        scan.lines_read,
        took,
        total as f64 / 1e6 / took.as_secs_f64(),
        max_buffer,
        kept
    );
    // Generous for an unoptimised test build on a shared machine; a release build is ~10x faster.
    assert!(took < std::time::Duration::from_secs(120), "took {took:?}");
}

/// One real error text: its body, where it came from, and the causes that count as right.
struct Real {
    name: String,
    source: String,
    accepted: Vec<String>,
    body: String,
}

/// The error texts of one folder under `tests/fixtures/explain-logs/` (`real` or `heldout`).
fn real_texts(folder: &str) -> Vec<Real> {
    let dir = fixture_path(folder);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(dir.join(&name)).unwrap();
            let header = |key: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .unwrap_or_else(|| panic!("{name}: no `{key}` line"))
                    .trim()
                    .to_string()
            };
            let source = header("# source:");
            let accepted = header("# cause:")
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let body = text
                .lines()
                .filter(|l| !l.starts_with("# "))
                .collect::<Vec<_>>()
                .join("\n");
            Real {
                name,
                source,
                accepted,
                body,
            }
        })
        .collect()
}

/// What the scanner names first for a text: the decisive error's first cause.
fn named(body: &str) -> (Option<&'static str>, Option<&'static str>) {
    let a = explain(&scan_text(body));
    let e = a.errors.iter().find(|e| e.decisive);
    (
        e.map(|e| e.signature),
        e.and_then(|e| e.causes.first()).map(|c| c.id),
    )
}

/// Scans every text of `folder`, prints the table, and returns (named right, total).
fn count_named(folder: &str) -> (usize, usize) {
    let texts = real_texts(folder);
    let mut right = 0;
    for t in &texts {
        assert!(t.source.starts_with("https://github.com/"), "{}", t.name);
        let (sig, cause) = named(&t.body);
        let ok = cause.is_some_and(|c| t.accepted.iter().any(|a| a == c));
        right += usize::from(ok);
        eprintln!(
            "{} {:<44} {:<34} {}",
            if ok { "ok  " } else { "MISS" },
            t.name,
            sig.unwrap_or("-"),
            cause.unwrap_or("-")
        );
    }
    eprintln!(
        "{folder} error texts named right: {right} of {}",
        texts.len()
    );
    (right, texts.len())
}

#[test]
fn real_error_texts_are_named() {
    let (right, total) = count_named("real");
    assert!(total >= 40, "{total} real texts");
    // 30 of 51 before the source inventory (commit fb9c2fb); 49 after; 50 once watchdog lines
    // are read across ranks (a mismatch at one SeqNum). Keep it from sliding.
    assert!(right >= 50, "{right} of {total} named right");
}

#[test]
fn held_out_error_texts_are_named() {
    // Collected after the scanner was tuned, from threads not in `real/` (see its README.md).
    // 12 of 16 before any scanner change for them (commit 72e4a83); 14 after (two NCCL/CUDA
    // format strings the needles missed: "Error while creating shared memory segment", and
    // cudaGetErrorString(217) cut before its last letter). Four more added after that change
    // and not tuned on: 3 of 4 (gloo 2019's `connect [127.0.1.1]:port: Connection refused` is
    // not a format the inventory read), so 17 of 20.
    let (right, total) = count_named("heldout");
    assert!(total >= 12, "{total} held-out texts");
    assert!(right >= HELD_OUT_FLOOR, "{right} of {total} named right");
}

/// Held-out texts named right, measured (see the explain docs); raise it, never lower it.
const HELD_OUT_FLOOR: usize = 17;

#[test]
fn the_automaton_of_needles_and_format_anchors_stays_small() {
    let p = patterns();
    let bytes = p.ac.memory_usage();
    eprintln!(
        "automaton: {} literals, {} KiB",
        p.marks.len(),
        bytes / 1024
    );
    assert!(bytes < 8 << 20, "{bytes} bytes");
}

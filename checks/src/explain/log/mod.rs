//! Reads a failed job's output (torchrun and torch.distributed, NCCL's log, gloo, Slurm's srun)
//! and names the known errors in it: pure functions over text, streamed line by line with
//! bounded memory, whatever the log's size. [`answer`] turns what was found into causes.

pub mod answer;
pub mod clean;
pub mod coverage;
mod generated_signatures;
use generated_signatures as generated;
pub mod signatures;
pub mod signatures_sources;

use aho_corasick::AhoCorasick;
use serde::Serialize;
use signatures::{Signature, Tier, Values};
use std::collections::BTreeMap;
use std::io::BufRead;

/// Every signature, in the order a line tries them: the ones the source inventory added
/// (most specific) first, then these. A line that matches several takes the first.
pub static SIGNATURES: std::sync::LazyLock<Vec<&'static Signature>> =
    std::sync::LazyLock::new(|| {
        signatures_sources::FIRST
            .iter()
            .chain(signatures::BASE.iter())
            .collect()
    });

use std::sync::OnceLock;

/// The bounds that keep a scan's memory independent of the log's size.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longer lines are cut here (and counted).
    pub max_line: usize,
    /// Matches kept per signature; the rest are counted.
    pub per_signature: usize,
    /// Error-looking lines no signature matched, kept.
    pub unmatched: usize,
    /// Characters of a line kept in a match.
    pub keep_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line: 16 * 1024,
            per_signature: 4,
            unmatched: 10,
            keep_chars: 400,
        }
    }
}

/// One line a signature matched.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// 1-based line number in the input.
    pub line_no: u64,
    /// The message, prefixes and escapes removed, cut to [`Limits::keep_chars`].
    pub line: String,
    /// The host NCCL's prefix or Slurm named.
    pub host: Option<String>,
    /// The rank torchrun's prefix, Slurm's label or the message named.
    pub rank: Option<u32>,
    /// NCCL's `[N]`: the process's CUDA device.
    pub device: Option<u32>,
    pub values: BTreeMap<String, String>,
}

/// Every line of one signature: the first few kept, all counted.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub signature: &'static str,
    pub tier: Tier,
    pub count: u64,
    pub hits: Vec<Hit>,
}

/// An error-looking line that no signature matched.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Unmatched {
    pub line_no: u64,
    pub line: String,
}

pub use super::JobSeen;

/// Everything a scan found, with its counts.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    pub lines_read: u64,
    pub bytes_read: u64,
    /// Lines longer than [`Limits::max_line`], cut.
    pub lines_cut: u64,
    /// In the order each signature was first seen.
    pub found: Vec<Found>,
    pub unmatched: Vec<Unmatched>,
    pub unmatched_count: u64,
    pub job: JobSeen,
}

impl Scan {
    /// The earliest matched line: (signature, hit).
    pub fn first(&self) -> Option<(&Found, &Hit)> {
        self.found
            .iter()
            .filter_map(|f| f.hits.first().map(|h| (f, h)))
            .min_by_key(|(_, h)| h.line_no)
    }

    /// The root cause: the lowest tier seen, the earliest line among it.
    pub fn decisive(&self) -> Option<(&Found, &Hit)> {
        self.found
            .iter()
            .filter_map(|f| f.hits.first().map(|h| (f, h)))
            .min_by_key(|(f, h)| (f.tier, h.line_no))
    }

    /// Bytes this scan holds (strings), for the memory bound.
    pub fn retained_bytes(&self) -> usize {
        let hits: usize = self
            .found
            .iter()
            .flat_map(|f| &f.hits)
            .map(|h| {
                h.line.len()
                    + h.host.as_ref().map_or(0, String::len)
                    + h.values
                        .iter()
                        .map(|(k, v)| k.len() + v.len())
                        .sum::<usize>()
            })
            .sum();
        let un: usize = self.unmatched.iter().map(|u| u.line.len()).sum();
        let job: usize = self.job.command.as_ref().map_or(0, String::len)
            + self
                .job
                .env
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        hits + un + job
    }
}

/// What a pattern of the automaton stands for.
#[derive(Clone, Copy)]
enum Mark {
    /// A needle of the signature at this index of [`SIGNATURES`].
    Signature(usize),
    /// The anchor of this generated pattern of [`coverage::PATTERNS`].
    Pattern(usize),
    /// A context marker of some signature's `near` (index into `Patterns::near`).
    Near(usize),
    ErrorLike,
    Job,
}

struct Patterns {
    ac: AhoCorasick,
    marks: Vec<Mark>,
    /// The signature index of each generated pattern.
    pattern_sig: Vec<usize>,
    /// Every distinct `near` marker.
    near: Vec<&'static str>,
}

/// Lines a `near` marker stays in force after the line it was seen on.
const NEAR_LINES: u64 = 8;

/// Words that make a line look like an error when no signature matched it.
const ERROR_LIKE: &[&str] = &[
    "NCCL WARN",
    "Error:",
    "Error(",
    "error:",
    "ERROR",
    "Traceback (most recent call last)",
    "FAILED",
    "Exception",
    "fatal:",
    "FATAL",
    "Segmentation fault",
    "core dumped",
];

/// Markers of lines that say how the job was launched.
const JOB_MARKS: &[&str] = &[
    "torchrun",
    "torch.distributed.run",
    "torch.distributed.launch",
    "master_addr=",
    "master_port=",
    "group_world_size=",
    "set by environment to",
];

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let mut words: Vec<&str> = Vec::new();
        let mut marks = Vec::new();
        let mut near: Vec<&'static str> = Vec::new();
        for (i, s) in SIGNATURES.iter().enumerate() {
            for n in s.needles {
                words.push(n);
                marks.push(Mark::Signature(i));
            }
            for n in s.near {
                if !near.contains(n) {
                    near.push(n);
                }
            }
        }
        for (i, n) in near.iter().enumerate() {
            words.push(n);
            marks.push(Mark::Near(i));
        }
        let mut pattern_sig = Vec::with_capacity(coverage::PATTERNS.len());
        for (i, p) in coverage::PATTERNS.iter().enumerate() {
            // A pattern naming no signature cannot match (the coverage test checks there is none).
            pattern_sig.push(
                SIGNATURES
                    .iter()
                    .position(|s| s.id == p.signature)
                    .unwrap_or(usize::MAX),
            );
            words.push(p.anchor());
            marks.push(Mark::Pattern(i));
        }
        for w in ERROR_LIKE {
            words.push(w);
            marks.push(Mark::ErrorLike);
        }
        for w in JOB_MARKS {
            words.push(w);
            marks.push(Mark::Job);
        }
        Patterns {
            // A DFA: a few hundred literals stay small as one, and it scans fastest.
            ac: AhoCorasick::builder()
                .kind(Some(aho_corasick::AhoCorasickKind::DFA))
                .build(words)
                .expect("literal patterns build"),
            marks,
            pattern_sig,
            near,
        }
    })
}

/// Scans a whole log; `each` sees every line without escapes (the NCCL parser's input).
pub fn scan_with<R: BufRead>(
    reader: R,
    limits: Limits,
    mut each: impl FnMut(&str),
) -> std::io::Result<Scan> {
    let mut lines = LineReader::new(reader, limits.max_line);
    let mut scanner = Scanner::new(limits);
    while let Some(raw) = lines.next_line()? {
        scanner.line(raw, &mut each);
    }
    let mut scan = scanner.finish();
    scan.bytes_read = lines.bytes;
    scan.lines_cut = lines.cut;
    Ok(scan)
}

/// [`scan_with`] with nobody else reading the lines.
pub fn scan<R: BufRead>(reader: R, limits: Limits) -> std::io::Result<Scan> {
    scan_with(reader, limits, |_| {})
}

/// Reads `\n`-ended lines, each cut to `max` bytes, so no line grows the buffer past it.
pub struct LineReader<R> {
    inner: R,
    max: usize,
    buf: Vec<u8>,
    text: String,
    pub bytes: u64,
    pub cut: u64,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            max: max.max(1),
            buf: Vec::with_capacity(max.clamp(1, 1 << 16)),
            text: String::new(),
            bytes: 0,
            cut: 0,
        }
    }

    /// The next line (lossy UTF-8, without its newline); None at the end.
    pub fn next_line(&mut self) -> std::io::Result<Option<&str>> {
        self.buf.clear();
        let mut any = false;
        let mut was_cut = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match memchr_nl(chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let room = self.max.saturating_sub(self.buf.len());
            let body = if done { take - 1 } else { take };
            if body > room {
                was_cut = true;
            }
            self.buf.extend_from_slice(&chunk[..body.min(room)]);
            self.inner.consume(take);
            self.bytes += take as u64;
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        if was_cut {
            self.cut += 1;
        }
        self.text = String::from_utf8_lossy(&self.buf).into_owned();
        Ok(Some(&self.text))
    }

    /// The largest the line buffer has grown (bytes).
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity() + self.text.capacity()
    }
}

fn memchr_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

/// The scanner's state: bounded by [`Limits`], whatever it is fed.
pub struct Scanner {
    limits: Limits,
    lines: u64,
    found: Vec<Found>,
    unmatched: Vec<Unmatched>,
    unmatched_count: u64,
    job: JobSeen,
    /// The last line each `near` marker was seen on (0: never).
    near_seen: Vec<u64>,
}

impl Scanner {
    pub fn new(limits: Limits) -> Self {
        Scanner {
            limits,
            lines: 0,
            found: Vec::new(),
            unmatched: Vec::new(),
            unmatched_count: 0,
            job: JobSeen::default(),
            near_seen: vec![0; patterns().near.len()],
        }
    }

    /// True when one of the signature's `near` markers was seen within [`NEAR_LINES`].
    fn near_ok(&self, s: &Signature) -> bool {
        let p = patterns();
        s.near.is_empty()
            || s.near.iter().any(|n| {
                p.near.iter().position(|m| m == n).is_some_and(|i| {
                    let at = self.near_seen[i];
                    at > 0 && self.lines - at <= NEAR_LINES
                })
            })
    }

    /// Takes one raw line (already cut); `each` sees it without escapes.
    pub fn line(&mut self, raw: &str, each: &mut impl FnMut(&str)) {
        self.lines += 1;
        let p = patterns();
        let mut sigs: u64 = 0;
        let mut anchors: u64 = 0;
        let mut maybe: Vec<usize> = Vec::new();
        let mut error_like = false;
        let mut job = false;
        for m in p.ac.find_overlapping_iter(raw) {
            match p.marks[m.pattern().as_usize()] {
                Mark::Signature(i) => sigs |= 1 << i,
                Mark::Pattern(i) => {
                    let s = p.pattern_sig[i];
                    if s < 64 && maybe.len() < 16 && !maybe.contains(&i) {
                        anchors |= 1 << s;
                        maybe.push(i);
                    }
                }
                Mark::Near(i) => self.near_seen[i] = self.lines,
                Mark::ErrorLike => error_like = true,
                Mark::Job => job = true,
            }
        }
        let needs_clean = sigs != 0 || anchors != 0 || error_like || job;
        if !needs_clean {
            // Most lines: no escapes to show anyone but the NCCL parser.
            if raw.bytes().any(|b| b == 0x1b) {
                each(&clean::strip_escapes(raw));
            } else {
                each(raw);
            }
            return;
        }
        let c = clean::clean(raw);
        each(&c.plain);
        if job {
            self.job_line(c.msg());
        }
        let msg = c.msg();
        // A generated pattern matches when all its pieces are there, in order.
        let mut formats: u64 = 0;
        for &i in &maybe {
            if coverage::PATTERNS[i].matches(msg) {
                formats |= 1 << p.pattern_sig[i];
            }
        }
        let chosen = SIGNATURES
            .iter()
            .enumerate()
            .filter(|(i, _)| (sigs | formats) & (1 << i) != 0)
            .map(|(i, s)| (i, *s))
            .find(|(i, s)| {
                let by_needle = sigs & (1 << i) != 0
                    && s.requires.iter().all(|r| msg.contains(r))
                    && s.needles.iter().any(|n| msg.contains(n));
                (by_needle || formats & (1 << i) != 0) && self.near_ok(s)
            })
            .map(|(_, s)| s);
        match chosen {
            Some(sig) => self.hit(sig, &c),
            None if error_like => {
                self.unmatched_count += 1;
                if self.unmatched.len() < self.limits.unmatched {
                    self.unmatched.push(Unmatched {
                        line_no: self.lines,
                        line: cut(msg, self.limits.keep_chars),
                    });
                }
            }
            None => {}
        }
    }

    fn hit(&mut self, sig: &'static Signature, c: &clean::Clean) {
        let at = match self.found.iter().position(|f| f.signature == sig.id) {
            Some(i) => i,
            None => {
                self.found.push(Found {
                    signature: sig.id,
                    tier: sig.tier,
                    count: 0,
                    hits: Vec::new(),
                });
                self.found.len() - 1
            }
        };
        let f = &mut self.found[at];
        f.count += 1;
        if f.hits.len() >= self.limits.per_signature {
            return;
        }
        let msg = c.msg();
        let mut v = Values::new();
        (sig.extract)(msg, &mut v);
        if !v.contains_key("errno") {
            if let Some((n, _)) = signatures::errno_of(msg) {
                v.insert("errno", n.to_string());
            }
        }
        let rank = c
            .rank
            .or_else(|| v.get("rank").and_then(|r| r.parse().ok()))
            .or_else(|| rank_in(msg));
        let host = c.host.clone().or_else(|| v.get("host").cloned());
        f.hits.push(Hit {
            line_no: self.lines,
            line: cut(msg, self.limits.keep_chars),
            host: host.map(|h| cut(&h, 120)),
            rank,
            device: c.device,
            values: v.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        });
    }

    /// torchrun's command line and its agent's `master_addr=`/`master_port=` lines; NCCL's
    /// `NCCL_X set by environment to Y`.
    fn job_line(&mut self, msg: &str) {
        let msg = msg.trim();
        if let Some((name, value)) = msg.split_once(" set by environment to ") {
            let name = name.split_whitespace().last().unwrap_or("");
            if name.starts_with("NCCL_") && self.job.env.len() < 32 {
                let value = value.trim().trim_end_matches('.');
                self.job
                    .env
                    .entry(cut(name, 64))
                    .or_insert_with(|| cut(value, 200));
            }
            return;
        }
        for (key, slot) in [
            ("master_addr=", 0),
            ("master_port=", 1),
            ("group_world_size=", 2),
        ] {
            if let Some(r) = msg.strip_prefix(key) {
                let v = r.split([' ', ',']).next().unwrap_or("").trim();
                match slot {
                    0 if self.job.master_addr.is_none() && !v.is_empty() => {
                        self.job.master_addr = Some(cut(v, 200))
                    }
                    1 if self.job.master_port.is_none() => self.job.master_port = v.parse().ok(),
                    2 if self.job.nnodes.is_none() && v.parse::<u32>().is_ok() => {
                        self.job.nnodes = Some(v.to_string())
                    }
                    _ => {}
                }
                return;
            }
        }
        let launcher = [
            "torchrun",
            "torch.distributed.run",
            "torch.distributed.launch",
        ]
        .iter()
        .find_map(|w| msg.find(w));
        let Some(at) = launcher else { return };
        let words: Vec<&str> = msg[at..].split_whitespace().collect();
        if !words.iter().any(|w| w.starts_with("--")) || self.job.command.is_some() {
            return;
        }
        self.job.command = Some(cut(&msg[at..], 400));
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            let (flag, inline) = match w.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (w, None),
            };
            let flag = flag.trim_start_matches('-').replace('_', "-");
            let value = inline
                .map(str::to_string)
                .or_else(|| words.get(i + 1).map(|s| s.to_string()));
            let value = value.map(|v| v.trim_matches(['"', '\'']).to_string());
            match flag.as_str() {
                "master-addr" => self.job.master_addr = value.map(|v| cut(&v, 200)),
                "master-port" => self.job.master_port = value.and_then(|v| v.parse().ok()),
                "nnodes" => self.job.nnodes = value.map(|v| cut(&v, 40)),
                "nproc-per-node" => self.job.nproc_per_node = value.map(|v| cut(&v, 40)),
                "rdzv-endpoint" => self.job.rdzv_endpoint = value.map(|v| cut(&v, 200)),
                _ => {}
            }
            i += 1;
        }
    }

    pub fn finish(self) -> Scan {
        Scan {
            lines_read: self.lines,
            found: self.found,
            unmatched: self.unmatched,
            unmatched_count: self.unmatched_count,
            job: self.job,
            ..Scan::default()
        }
    }
}

/// `[Rank 3]` or `rank 3` in a message.
fn rank_in(m: &str) -> Option<u32> {
    let i = m.find("[Rank ")?;
    let d: String = m[i + 6..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    d.parse().ok()
}

/// At most `n` characters.
pub(crate) fn cut(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests;
mod watchdog;

//! `preflight explain --dumps ... --ras ... [--log ...]`: finds the Flight Recorder dump files
//! (a folder, files, a glob), reads them within their budgets, reads NCCL RAS's status from a
//! file, standard input or a live job's RAS port (bounded connect, read and size), explains the
//! log if given, and hands all three to `flight_recorder::answer` to be judged together.

use crate::config::{HangJob, RasSource};
use preflight_checks::explain::hang::answer::{self, LogHints, Watchdog};
use preflight_checks::explain::hang::{self as fr, Budgets, Unread, ras};
use preflight_checks::explain_log::answer::Explanation;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Most bytes of RAS output read (a status of thousands of ranks is a few MiB).
const RAS_MAX: u64 = 16 << 20;
/// Connecting to RAS's port, and each reply before the status.
const RAS_CONNECT: Duration = Duration::from_secs(5);
/// RAS's own collective timeout asked for, and the whole status read.
const RAS_TIMEOUT_S: u64 = 5;
const RAS_READ: Duration = Duration::from_secs(RAS_TIMEOUT_S + 15);

/// Runs the job into the explain document (its log part empty when no log is given).
pub fn explain(job: &HangJob) -> anyhow::Result<Explanation> {
    let budgets = Budgets::default();
    let mut e = match &job.log {
        Some(p) => super::explain_log::explain_log_file(p)?,
        None => super::explain_log::explain_reader(std::io::empty(), "")
            .map_err(|e| anyhow::anyhow!("{e}"))?,
    };
    let (files, mut unread) = gather(&job.dumps, &budgets)?;
    let (dumps, bad) = fr::read_all(&files, job.prefix.as_deref(), &budgets);
    unread.extend(bad);
    let ras = match &job.ras {
        None => None,
        Some(src) => {
            let (bytes, name) = ras_bytes(src)?;
            match ras::parse(&bytes) {
                Ok(r) => Some((r, name)),
                Err(why) => {
                    unread.push(Unread {
                        file: name,
                        rank: None,
                        why,
                    });
                    None
                }
            }
        }
    };
    let hints = hints(&e);
    e.hang = Some(Box::new(answer::answer(&dumps, unread, ras, &hints)));
    Ok(e)
}

/// Hosts by rank and the watchdog's collective, from the log's answer.
fn hints(e: &Explanation) -> LogHints {
    let mut h = LogHints {
        job: e.answer.job.clone(),
        ..LogHints::default()
    };
    for err in &e.answer.errors {
        if let (Some(r), Some(host)) = (err.rank, &err.host) {
            h.hosts.entry(r).or_insert_with(|| host.clone());
        }
        for a in &err.also {
            if let (Some(r), Some(host)) = (a.rank, &a.host) {
                h.hosts.entry(r).or_insert_with(|| host.clone());
            }
        }
        if err.signature == "c10d.watchdog-timeout" {
            let v = &err.values;
            let mut ranks: Vec<u32> = err
                .rank
                .into_iter()
                .chain(err.also.iter().filter_map(|a| a.rank))
                .collect();
            ranks.sort_unstable();
            ranks.dedup();
            h.watchdog = Some(Watchdog {
                rank: err.rank,
                seq: v.get("seq").and_then(|s| s.parse().ok()),
                op: v.get("op").cloned(),
                timeout_ms: v.get("timeout_ms").and_then(|s| s.parse().ok()),
                ranks,
            });
        }
    }
    h
}

/// `*` and `?` in one file name.
fn glob_match(pat: &[u8], name: &[u8]) -> bool {
    match (pat.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pat[1..], name) || (!name.is_empty() && glob_match(pat, &name[1..]))
        }
        (Some(b'?'), Some(_)) => glob_match(&pat[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => glob_match(&pat[1..], &name[1..]),
        _ => false,
    }
}

/// A name that can be a dump: ends in a rank, maybe with `.json`/`.pkl`.
fn dump_like(name: &str) -> bool {
    let stem = name
        .strip_suffix(".json")
        .or_else(|| name.strip_suffix(".pkl"))
        .or_else(|| name.strip_suffix(".pickle"))
        .unwrap_or(name);
    stem.ends_with(|c: char| c.is_ascii_digit())
}

fn list_dir(dir: &Path, pat: Option<&str>) -> anyhow::Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?;
    let mut out: Vec<PathBuf> = rd
        .filter_map(Result::ok)
        .filter(|d| d.file_type().is_ok_and(|t| t.is_file()))
        .map(|d| d.path())
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match pat {
                Some(g) => glob_match(g.as_bytes(), n.as_bytes()),
                None => dump_like(&n),
            }
        })
        .collect();
    out.sort();
    Ok(out)
}

/// A file's name and its bytes.
type NamedBytes = (String, Vec<u8>);

/// Every dump file the arguments name, read within the per-file budget. A path that does not
/// exist is an error (exit 2); a file over budget is a line of the answer.
fn gather(specs: &[String], b: &Budgets) -> anyhow::Result<(Vec<NamedBytes>, Vec<Unread>)> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for s in specs {
        let p = Path::new(s);
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.contains(['*', '?']) {
            anyhow::ensure!(
                name.matches('*').count() <= 8,
                "--dumps {s}: more than 8 `*` in one name"
            );
            let dir = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let found = list_dir(dir, Some(&name))?;
            anyhow::ensure!(!found.is_empty(), "--dumps {s}: no file matches");
            paths.extend(found);
        } else if p.is_dir() {
            let found = list_dir(p, None)?;
            anyhow::ensure!(
                !found.is_empty(),
                "--dumps {s}: no file named <prefix><rank> in this folder"
            );
            paths.extend(found);
        } else {
            anyhow::ensure!(p.exists(), "--dumps {s}: no such file or folder");
            paths.push(p.to_path_buf());
        }
    }
    paths.dedup();
    anyhow::ensure!(
        paths.len() <= b.files,
        "--dumps: {} files, more than the {} one run reads",
        paths.len(),
        b.files
    );
    let mut files = Vec::new();
    let mut unread = Vec::new();
    for p in paths {
        let name = p.display().to_string();
        match read_capped(&p, b.file_bytes) {
            Ok(bytes) => files.push((name, bytes)),
            Err(why) => unread.push(Unread {
                file: name,
                rank: None,
                why,
            }),
        }
    }
    Ok((files, unread))
}

fn read_capped(p: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(p).map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!("over the {cap} byte budget for one dump"));
    }
    Ok(bytes)
}

/// RAS's output and where it came from.
fn ras_bytes(src: &RasSource) -> anyhow::Result<(Vec<u8>, String)> {
    let mut bytes = Vec::new();
    match src {
        RasSource::Stdin => {
            std::io::stdin()
                .lock()
                .take(RAS_MAX)
                .read_to_end(&mut bytes)?;
            Ok((bytes, "-".into()))
        }
        RasSource::File(p) => {
            let f = std::fs::File::open(p)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
            f.take(RAS_MAX).read_to_end(&mut bytes)?;
            Ok((bytes, p.display().to_string()))
        }
        RasSource::Query { host, port } => {
            let name = preflight_checks::net::host_port(host, port.to_string());
            query(host, *port).map(|b| (b, name.clone())).map_err(|e| {
                anyhow::anyhow!(
                    "cannot query NCCL's RAS at {name}: {e}; RAS listens on localhost:28028 on every node of a \
                     running NCCL 2.24+ job (NCCL_RAS_ENABLE=1, the default; NCCL_RAS_ADDR moves it)"
                )
            })
        }
    }
}

/// The `ncclras` exchange: protocol, timeout, `VERBOSE STATUS` (every rank named), read to EOF.
pub fn query(host: &str, port: u16) -> anyhow::Result<Vec<u8>> {
    let addrs: Vec<_> = (host, port).to_socket_addrs()?.take(8).collect();
    let mut last = None;
    let mut sock = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, RAS_CONNECT) {
            Ok(s) => {
                sock = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let sock = match (sock, last) {
        (Some(s), _) => s,
        (None, Some(e)) => return Err(e.into()),
        (None, None) => anyhow::bail!("{host} has no address"),
    };
    sock.set_read_timeout(Some(RAS_CONNECT))?;
    sock.set_write_timeout(Some(RAS_CONNECT))?;
    let mut w = sock.try_clone()?;
    let mut r = BufReader::new(sock.try_clone()?.take(RAS_MAX));
    let mut line = String::new();
    w.write_all(b"CLIENT PROTOCOL 2\n")?;
    r.read_line(&mut line)?;
    anyhow::ensure!(
        line.starts_with("SERVER PROTOCOL"),
        "not NCCL's RAS: it answered {}",
        preflight_checks::shellword::quoted(line.trim())
    );
    line.clear();
    w.write_all(format!("TIMEOUT {RAS_TIMEOUT_S}\n").as_bytes())?;
    r.read_line(&mut line)?;
    anyhow::ensure!(
        line.trim() == "OK",
        "RAS refused the timeout: {}",
        preflight_checks::shellword::quoted(line.trim())
    );
    w.write_all(b"VERBOSE STATUS\n")?;
    let deadline = Instant::now() + RAS_READ;
    let mut out = Vec::new();
    let mut buf = [0u8; 64 << 10];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        anyhow::ensure!(
            !left.is_zero(),
            "RAS sent no end of its status within {} s",
            RAS_READ.as_secs()
        );
        sock.set_read_timeout(Some(left))?;
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        anyhow::ensure!(
            (out.len() as u64) < RAS_MAX,
            "RAS's status is over {RAS_MAX} bytes"
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_dump_names() {
        assert!(glob_match(b"trace_*", b"trace_12"));
        assert!(glob_match(b"t?ace_*.json", b"trace_1.json"));
        assert!(!glob_match(b"trace_*", b"other_1"));
        assert!(
            dump_like("trace_nodeA_3") && dump_like("trace_3.json") && !dump_like("fr_trace.txt")
        );
    }
}

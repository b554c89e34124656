//! The kernel log's NVIDIA XID records (`NVRM: Xid (PCI:0000:3b:00): 79, ...`), with their age.
//!
//! Read from `/dev/kmsg` (non-blocking: it stops at the newest record), else `journalctl -k`,
//! else `dmesg`, each bounded in bytes and time. In a fixture tree, `/dev/kmsg` is a plain
//! file of kmsg records and `/proc/uptime` gives "now"; the tools are not run there.

use crate::core::{KernelLog, XidEvent};
use crate::infra::root::Root;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// Most bytes of kernel log read (the ring buffer is 128 KiB to a few MiB).
pub const MAX_BYTES: usize = 32 << 20;
/// Longest time spent reading it.
pub const MAX_TIME: Duration = Duration::from_millis(1500);
/// XIDs kept (the newest); a storm of one XID repeats the same line.
const MAX_XIDS: usize = 256;
const MESSAGE_CHARS: usize = 300;

/// Reads the kernel log of `root`; never fails, a reason lands in `error`.
pub fn probe(root: &Root) -> KernelLog {
    let now_s = root
        .attr("/proc/uptime")
        .and_then(|u| u.split_whitespace().next()?.parse::<f64>().ok());
    let mut scan = Scan::new(now_s);
    if !root.is_system() {
        return match root.read("/dev/kmsg") {
            Ok(text) => {
                for line in text.lines() {
                    scan.kmsg_record(line);
                }
                scan.finish("/dev/kmsg", false)
            }
            Err(e) => KernelLog {
                error: Some(format!("/dev/kmsg: {e}")),
                ..Default::default()
            },
        };
    }
    let kmsg_error = match read_kmsg_device(Path::new("/dev/kmsg"), &mut scan) {
        Ok(truncated) => return scan.finish("/dev/kmsg", truncated),
        Err(e) => format!("/dev/kmsg: {e}"),
    };
    let tools: [(&str, &[&str]); 2] = [
        (
            "journalctl",
            &["-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"],
        ),
        ("dmesg", &[]),
    ];
    let mut errors = vec![kmsg_error];
    for (tool, args) in tools {
        let mut scan = Scan::new(now_s);
        match run_bounded(tool, args) {
            Ok((text, truncated)) => {
                for line in text.lines() {
                    scan.text_line(line);
                }
                return scan.finish(format!("{tool} {}", args.join(" ")).trim(), truncated);
            }
            Err(e) => errors.push(format!("{tool}: {e}")),
        }
    }
    KernelLog {
        error: Some(errors.join("; ")),
        ..Default::default()
    }
}

/// Collects XIDs and the oldest timestamp while records stream by.
struct Scan {
    now_s: Option<f64>,
    oldest_s: Option<f64>,
    xids: Vec<XidEvent>,
    dropped: bool,
}

impl Scan {
    fn new(now_s: Option<f64>) -> Self {
        Scan {
            now_s,
            oldest_s: None,
            xids: Vec::new(),
            dropped: false,
        }
    }

    /// One kmsg record: `PRI,SEQ,TS_USEC,FLAGS;MESSAGE` (continuation lines start with a space).
    fn kmsg_record(&mut self, record: &str) {
        let Some((head, msg)) = record.split_once(';') else {
            return;
        };
        let ts = head
            .split(',')
            .nth(2)
            .and_then(|t| t.parse::<u64>().ok())
            .map(|us| us as f64 / 1e6);
        self.record(ts, msg.lines().next().unwrap_or(""));
    }

    /// One line of `dmesg` or `journalctl -o short-monotonic`: `[  123.456] ...`.
    fn text_line(&mut self, line: &str) {
        let ts = line
            .trim_start()
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .and_then(|(t, _)| t.trim().parse::<f64>().ok());
        self.record(ts, line);
    }

    fn record(&mut self, ts: Option<f64>, msg: &str) {
        if let Some(t) = ts {
            self.oldest_s = Some(self.oldest_s.map_or(t, |o: f64| o.min(t)));
        }
        let Some((xid, pci)) = parse_xid(msg) else {
            return;
        };
        if self.xids.len() >= MAX_XIDS {
            self.xids.remove(0);
            self.dropped = true;
        }
        let age_s = match (self.now_s, ts) {
            (Some(now), Some(t)) => Some((now - t).max(0.0) as u64),
            _ => None,
        };
        self.xids.push(XidEvent {
            xid,
            pci,
            age_s,
            message: msg.trim().chars().take(MESSAGE_CHARS).collect(),
        });
    }

    fn finish(self, source: &str, truncated: bool) -> KernelLog {
        KernelLog {
            source: Some(source.to_string()),
            error: None,
            covers_s: match (self.now_s, self.oldest_s) {
                (Some(now), Some(o)) => Some((now - o).max(0.0) as u64),
                _ => None,
            },
            truncated: truncated || self.dropped,
            xids: self.xids,
        }
    }
}

/// `NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.` -> (79, "0000:3b:00").
pub fn parse_xid(msg: &str) -> Option<(u32, String)> {
    let at = msg.find("NVRM: Xid (")?;
    let rest = &msg[at + "NVRM: Xid (".len()..];
    let (inside, after) = rest.split_once(')')?;
    let pci = inside.strip_prefix("PCI:").unwrap_or(inside).trim();
    let after = after.strip_prefix(':')?.trim_start();
    let digits: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
    let xid = digits.parse().ok()?;
    Some((xid, pci.to_ascii_lowercase()))
}

/// Reads `/dev/kmsg` without blocking until it has no more records, or a bound is hit.
/// Ok(true) when a bound stopped it.
fn read_kmsg_device(path: &Path, scan: &mut Scan) -> std::io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let deadline = Instant::now() + MAX_TIME;
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0usize;
    loop {
        if Instant::now() >= deadline || total >= MAX_BYTES {
            return Ok(true);
        }
        match f.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                total += n;
                scan.kmsg_record(&String::from_utf8_lossy(&buf[..n]));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // EPIPE: records were overwritten while reading; the next read goes on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(e) if total == 0 => return Err(e),
            Err(_) => return Ok(true),
        }
    }
}

/// Runs a log tool with `LC_ALL=C` for at most [`MAX_TIME`], keeping at most [`MAX_BYTES`].
fn run_bounded(tool: &str, args: &[&str]) -> Result<(String, bool), String> {
    let program = crate::infra::child::SYSTEM_DIRS
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
        .ok_or_else(|| "not installed".to_string())?;
    let out = crate::infra::child::run(&program, args, MAX_TIME, MAX_BYTES)?;
    match out.status {
        Some(s) if s.success() => Ok((out.stdout, out.stdout_truncated)),
        Some(s) => Err(format!(
            "exited with {s} (no permission to read the kernel log?)"
        )),
        None => Err(format!("timed out after {} ms", MAX_TIME.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_xid_lines_of_every_driver_generation() {
        assert_eq!(
            parse_xid(
                "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
            ),
            Some((79, "0000:3b:00".into()))
        );
        assert_eq!(
            parse_xid(
                "[ 12.5] host kernel: NVRM: Xid (PCI:0000:B1:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error"
            ),
            Some((48, "0000:b1:00".into()))
        );
        assert_eq!(
            parse_xid("NVRM: loading NVIDIA UNIX x86_64 Kernel Module"),
            None
        );
        assert_eq!(parse_xid("NVRM: Xid (PCI:0000:3b:00): , junk"), None);
        assert_eq!(parse_xid("NVRM: Xid (PCI:0000:3b:00"), None);
    }

    #[test]
    fn kmsg_records_give_xids_with_their_age() {
        let mut s = Scan::new(Some(10_000.0));
        s.kmsg_record("6,1,1000000,-;Linux version 6.1");
        s.kmsg_record(
            "3,900,9400000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
        );
        s.kmsg_record("garbage without a semicolon");
        let log = s.finish("/dev/kmsg", false);
        assert_eq!(log.covers_s, Some(9_999));
        assert_eq!(log.xids.len(), 1);
        assert_eq!(log.xids[0].xid, 79);
        assert_eq!(log.xids[0].age_s, Some(600));
    }

    #[test]
    fn dmesg_lines_give_xids_with_their_age() {
        let mut s = Scan::new(Some(100.0));
        s.text_line("[   40.000000] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception");
        let log = s.finish("dmesg", false);
        assert_eq!(log.xids[0].age_s, Some(60));
    }

    #[test]
    fn a_storm_keeps_the_newest_and_says_so() {
        let mut s = Scan::new(None);
        for i in 0..(MAX_XIDS + 10) {
            s.kmsg_record(&format!(
                "3,{i},{i},-;NVRM: Xid (PCI:0000:3b:00): 31, fault"
            ));
        }
        let log = s.finish("/dev/kmsg", false);
        assert_eq!(log.xids.len(), MAX_XIDS);
        assert!(log.truncated);
    }

    #[test]
    fn real_kernel_log_read_is_bounded() {
        let t = Instant::now();
        let log = probe(&Root::system());
        // Readable or not (no root, no tools), it answers within the bounds.
        assert!(log.source.is_some() || log.error.is_some(), "{log:?}");
        assert!(
            t.elapsed() < MAX_TIME * 3 + Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
    }
}

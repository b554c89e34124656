//! One line of a job's output made plain: ANSI escapes and control characters gone, the
//! launcher's and NCCL's prefixes taken off and kept (host, pid, CUDA device, rank, task).

/// What the prefixes of a line said, and the message after them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Clean {
    /// The line without escapes, with its prefixes.
    pub plain: String,
    /// Byte offset in `plain` where the message starts (after the prefixes).
    pub msg_at: usize,
    /// NCCL's `host:pid:tid` host.
    pub host: Option<String>,
    pub pid: Option<u32>,
    /// NCCL's `[N]`: the CUDA device of the process (not its rank).
    pub device: Option<u32>,
    /// torchrun's `[rankN]:` prefix, or Slurm's `srun -l` task label.
    pub rank: Option<u32>,
}

impl Clean {
    /// The message after the prefixes.
    pub fn msg(&self) -> &str {
        &self.plain[self.msg_at..]
    }
}

/// Strips escapes and prefixes from one raw line (already cut to a bounded length).
pub fn clean(raw: &str) -> Clean {
    let mut plain = strip_escapes(raw);
    // A terminal shows what follows the last carriage return (progress bars rewrite a line).
    if let Some(i) = plain.trim_end_matches('\r').rfind('\r') {
        plain = plain[i + 1..].to_string();
    }
    let plain = plain.trim_end_matches(['\r', '\n']).to_string();
    let mut c = Clean {
        plain,
        ..Clean::default()
    };
    let mut at = 0;
    // At most a few prefixes; each step consumes one.
    for _ in 0..6 {
        let rest = &c.plain[at..];
        let skipped = rest.len() - rest.trim_start().len();
        let rest = rest.trim_start();
        if let Some((n, used)) = slurm_label(rest) {
            c.rank.get_or_insert(n);
            at += skipped + used;
        } else if let Some((n, used)) = torchrun_prefix(rest) {
            c.rank.get_or_insert(n);
            at += skipped + used;
        } else if let Some(used) = nccl_timestamp(rest) {
            at += skipped + used;
        } else if let Some((host, pid, dev, used)) = nccl_prefix(rest) {
            c.host.get_or_insert(host);
            c.pid.get_or_insert(pid);
            if let Some(d) = dev {
                c.device.get_or_insert(d);
            }
            at += skipped + used;
        } else {
            break;
        }
    }
    c.msg_at = at.min(c.plain.len());
    c
}

/// Removes ANSI CSI/OSC sequences and control characters (tabs kept as spaces).
pub fn strip_escapes(s: &str) -> String {
    if !s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(ch) = it.next() {
        match ch {
            '\u{1b}' => match it.peek() {
                Some('[') => {
                    it.next();
                    // Parameters and intermediates, then one final byte in @..~.
                    for c in it.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    it.next();
                    // Ends at BEL or ESC '\'.
                    while let Some(c) = it.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            if it.peek() == Some(&'\\') {
                                it.next();
                            }
                            break;
                        }
                    }
                }
                Some(_) => {
                    it.next();
                }
                None => {}
            },
            '\t' => out.push(' '),
            '\r' => out.push('\r'),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `srun -l`'s `12: ` label.
fn slurm_label(s: &str) -> Option<(u32, usize)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 6 || !s[digits..].starts_with(": ") {
        return None;
    }
    Some((s[..digits].parse().ok()?, digits + 2))
}

/// torchrun's `[rank3]:` / `[default3]:` (and `[rank3]: ` with a space).
fn torchrun_prefix(s: &str) -> Option<(u32, usize)> {
    let rest = s.strip_prefix('[')?;
    let word = ["rank", "default"]
        .into_iter()
        .find(|w| rest.starts_with(w))?;
    let rest = &rest[word.len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].starts_with("]:") {
        return None;
    }
    let n = rest[..digits].parse().ok()?;
    Some((n, 1 + word.len() + digits + 2))
}

/// NCCL_DEBUG_TIMESTAMP_FORMAT's default `[2026-01-02 03:04:05] `.
fn nccl_timestamp(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.len() < 22 || b[0] != b'[' || b[20] != b']' || b[5] != b'-' || b[11] != b' ' {
        return None;
    }
    Some(if b.get(21) == Some(&b' ') { 22 } else { 21 })
}

/// NCCL's `host:pid:tid [dev] ` (debug.cc: `"%s:%d:%d "` then `"[%d] "`).
fn nccl_prefix(s: &str) -> Option<(String, u32, Option<u32>, usize)> {
    let end = s.find(' ')?;
    let head = &s[..end];
    let mut parts = head.rsplitn(3, ':');
    let tid = parts.next()?;
    let pid = parts.next()?;
    let host = parts.next()?;
    let is_num = |x: &str| !x.is_empty() && x.len() <= 10 && x.bytes().all(|b| b.is_ascii_digit());
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
    if !is_num(tid) || !is_num(pid) || !host_ok {
        return None;
    }
    let mut used = end + 1;
    let rest = &s[used..];
    let mut dev = None;
    if let Some(r) = rest.strip_prefix('[') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && r[digits..].starts_with(']') {
            dev = r[..digits].parse().ok();
            used += 1 + digits + 1;
            if s[used..].starts_with(' ') {
                used += 1;
            }
        }
    }
    Some((host.to_string(), pid.parse().ok()?, dev, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_prefix_gives_host_pid_and_device() {
        let c = clean("gpu-12:7716:7803 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : x");
        assert_eq!(c.host.as_deref(), Some("gpu-12"));
        assert_eq!(c.pid, Some(7716));
        assert_eq!(c.device, Some(0));
        assert_eq!(c.msg(), "transport/net_ib.cc:1696 NCCL WARN NET/IB : x");
    }

    #[test]
    fn colours_labels_and_rank_prefixes_go() {
        let c = clean("3: [rank3]:\u{1b}[31m[E1218 20:27:21 socket.cpp:1011] boom\u{1b}[0m\r\n");
        assert_eq!(c.rank, Some(3));
        assert_eq!(c.msg(), "[E1218 20:27:21 socket.cpp:1011] boom");
        let c = clean("[default1]:node2:11:12 [1] NCCL INFO x");
        assert_eq!(
            (c.rank, c.host.as_deref(), c.device),
            (Some(1), Some("node2"), Some(1))
        );
    }

    #[test]
    fn plain_text_is_left_alone() {
        for s in [
            "Traceback (most recent call last):",
            "a:b:c [x] y",
            "12:30 lunch",
            "",
        ] {
            let c = clean(s);
            assert_eq!(c.msg(), s);
            assert_eq!(c.host, None);
        }
        assert_eq!(clean("progress 10%\rprogress 90%\rdone").msg(), "done");
    }
}

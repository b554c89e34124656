//! A per-rail NCCL child's `NCCL_DEBUG=INFO` log: the path its channels took (`via
//! NET/IB/0/GDRDMA` proves InfiniBand/RoCE with GPUDirect RDMA), the HCA NCCL said it uses, and
//! the `NET/IB` completion error naming the peer and both GIDs. Line shapes from NCCL's source
//! (`transport/net.cc`, `transport/net_ib.cc`, 2.19 to 2.27):
//! - `Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s` (`/GDRDMA`, `(PCI)`, `/Shared`)
//! - `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>`
//! - `NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d (%s)%s%s%s%s hca %s`
//! - `NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d) vendor_err=%u %s%s%s%s hca %s`

/// What one rail child's log proves.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RailLog {
    /// Distinct `via` paths, in order seen: "NET/IB/0/GDRDMA", "NET/Socket/0".
    pub paths: Vec<String>,
    /// Every network channel went over NET/IB.
    pub ib: bool,
    /// Every NET/IB channel used GPUDirect RDMA.
    pub gdr: bool,
    /// HCA ports from `NET/IB : Using` ("mlx5_7:1").
    pub hcas: Vec<String>,
    /// `NET/IB : No device found.`
    pub ib_no_device: bool,
    pub error: Option<IbError>,
    pub version: Option<String>,
}

/// A `NET/IB` completion error.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct IbError {
    /// The peer's socket address as NCCL prints it ("10.0.0.1<47613>").
    pub peer: String,
    /// The ibv_wc status number (12: retry exceeded, 13: RNR retry exceeded).
    pub status: Option<u32>,
    pub vendor_err: Option<u32>,
    pub local_gid: Option<String>,
    pub remote_gid: Option<String>,
    pub hca: Option<String>,
    /// The message as NCCL wrote it (cut at 300 characters).
    pub message: String,
}

impl IbError {
    /// "peer 10.0.0.1<47613>: status 12 (retry exceeded) ... local GID .., remote GID .. on mlx5_7".
    pub fn summary(&self) -> String {
        let status = match self.status {
            Some(12) => {
                "status 12: transport retry exceeded (the peer never acknowledged)".to_string()
            }
            Some(13) => "status 13: receiver-not-ready retry exceeded".to_string(),
            Some(s) => format!("status {s}"),
            None => "an error".to_string(),
        };
        let mut s = format!("NET/IB completion error from peer {}: {status}", self.peer);
        if let Some(v) = self.vendor_err {
            s.push_str(&format!(", vendor err {v}"));
        }
        if let (Some(l), Some(r)) = (&self.local_gid, &self.remote_gid) {
            s.push_str(&format!(", local GID {l}, remote GID {r}"));
        }
        if let Some(h) = &self.hca {
            s.push_str(&format!(" on {h}"));
        }
        s
    }
}

/// The word after `key` up to the next space (or the end).
fn word_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = &text[text.find(key)? + key.len()..];
    rest.split_whitespace().next()
}

/// "12" or "IBV_WC_RETRY_EXC_ERR(12)" -> 12.
fn number(word: &str) -> Option<u32> {
    let w = word.trim_end_matches(',');
    if let Some(open) = w.rfind('(') {
        return w[open + 1..].trim_end_matches(')').parse().ok();
    }
    w.parse().ok()
}

pub fn parse_ib_error(msg: &str) -> Option<IbError> {
    let key = "Got completion from peer ";
    let at = msg.find(key)?;
    let rest = &msg[at + key.len()..];
    let peer = rest.split(" with ").next()?.trim().to_string();
    let gid = |k: &str| {
        let rest = &rest[rest.find(k)? + k.len()..];
        let w = rest.split_whitespace().next()?;
        Some(w.to_string())
    };
    Some(IbError {
        peer,
        status: word_after(rest, "status=").and_then(number),
        vendor_err: word_after(rest, "vendor err ")
            .or_else(|| word_after(rest, "vendor_err="))
            .and_then(number),
        local_gid: gid("localGid "),
        remote_gid: gid("remoteGids"),
        hca: word_after(rest, " hca ").map(String::from),
        message: msg.trim().chars().take(300).collect(),
    })
}

pub fn parse(text: &str) -> RailLog {
    let mut log = RailLog::default();
    let mut net_channels = 0;
    let mut ib_channels = 0;
    let mut gdr_channels = 0;
    for line in text.lines() {
        if log.version.is_none()
            && let Some(v) = line.split("NCCL version ").nth(1)
        {
            log.version = v.split_whitespace().next().map(String::from);
        }
        if line.contains("NCCL WARN") {
            if log.error.is_none()
                && let Some(e) = parse_ib_error(line)
            {
                log.error = Some(e);
            }
            continue;
        }
        let Some(msg) = line.split("NCCL INFO ").nth(1) else {
            continue;
        };
        if msg.starts_with("NET/IB : No device found") {
            log.ib_no_device = true;
        } else if let Some(rest) = msg.strip_prefix("NET/IB : Using ") {
            for w in rest.split(';').next().unwrap_or("").split_whitespace() {
                if let Some(dev) = w.strip_prefix('[').and_then(|w| w.split_once(']')) {
                    let name = dev.1.split('/').next().unwrap_or(dev.1);
                    if !name.is_empty() && !log.hcas.iter().any(|h| h == name) {
                        log.hcas.push(name.to_string());
                    }
                }
            }
        } else if let Some(via) = msg.split(" via ").nth(1) {
            let path = via.split_whitespace().next().unwrap_or("").to_string();
            if path.starts_with("NET/") {
                net_channels += 1;
                if path.starts_with("NET/IB/") {
                    ib_channels += 1;
                    if path.contains("/GDRDMA") {
                        gdr_channels += 1;
                    }
                }
            }
            if !path.is_empty() && !log.paths.contains(&path) {
                log.paths.push(path);
            }
        }
    }
    log.ib = net_channels > 0 && ib_channels == net_channels;
    log.gdr = log.ib && gdr_channels == ib_channels;
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> RailLog {
        parse(&crate::infra::testutil::fixture_text(&format!(
            "nccl-logs/rails/{name}"
        )))
    }

    #[test]
    fn the_path_proves_ib_with_gpudirect() {
        let l = fixture("ib-gdr-ok.log");
        assert!(l.ib && l.gdr && l.error.is_none());
        assert_eq!(l.paths, ["NET/IB/0/GDRDMA"]);
        assert_eq!(l.hcas, ["mlx5_7:1"]);
        assert_eq!(l.version.as_deref(), Some("2.21.5+cuda12.4"));
        let l = fixture("ib-no-gdr.log");
        assert!(l.ib && !l.gdr);
        let l = fixture("fell-back-to-socket.log");
        assert!(!l.ib && l.ib_no_device);
        assert_eq!(l.paths, ["NET/Socket/0"]);
    }

    /// Real logs: the pair test's child run twice on one H200 as two hosts (distinct
    /// NCCL_HOSTID) over sockets, NCCL 2.28.9 (`STEPS=rails scripts/device-gpu-check.sh`,
    /// 2026-11-27). The path is read, and it is not InfiniBand.
    #[test]
    fn real_logs_of_two_ranks_over_sockets_show_their_path() {
        for rank in [0, 1] {
            let l = fixture(&format!("h200-two-hosts-socket-rank{rank}.log"));
            assert_eq!(l.paths, ["NET/Socket/0"], "rank {rank}");
            assert!(!l.ib && !l.gdr && l.error.is_none() && !l.ib_no_device);
            assert_eq!(l.version.as_deref(), Some("2.28.9+cuda13.0"));
        }
    }

    #[test]
    fn completion_errors_name_the_peer_and_both_gids_in_old_and_new_formats() {
        let e = fixture("ib-completion-error-old.log").error.expect("error");
        assert_eq!(e.peer, "10.0.0.1<47613>");
        assert_eq!((e.status, e.vendor_err), (Some(12), Some(129)));
        assert_eq!(e.local_gid.as_deref(), Some("::ffff:10.0.0.3"));
        assert_eq!(e.remote_gid.as_deref(), Some("::ffff:10.0.0.1"));
        assert_eq!(e.hca.as_deref(), Some("mlx5_7"));
        assert!(e.summary().starts_with(
            "NET/IB completion error from peer 10.0.0.1<47613>: status 12: transport retry exceeded"
        ));
        let e = fixture("ib-completion-error-new.log").error.expect("error");
        assert_eq!(e.peer, "10.0.0.2<53311>");
        assert_eq!((e.status, e.vendor_err), (Some(12), Some(129)));
        assert_eq!(e.local_gid.as_deref(), Some("fe80::a288:c2ff:fe1f:7a10"));
        assert_eq!(e.remote_gid.as_deref(), Some("fe80::a288:c2ff:fe1f:7b22"));
        assert_eq!(e.hca.as_deref(), Some("mlx5_7"));
    }

    #[test]
    fn garbage_never_panics() {
        for t in [
            "",
            "NCCL WARN Got completion from peer ",
            "x via ",
            "NCCL INFO NET/IB : Using [",
            "status=((",
        ] {
            let _ = parse(t);
            let _ = parse_ib_error(t);
        }
    }
}

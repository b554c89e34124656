//! Reads an `NCCL_DEBUG=INFO` log and says which network NCCL used, and whether that is what the advice asked for.
//!
//! Line shapes (NCCL 2.4 .. 2.2x, `host:pid:tid [dev] NCCL INFO ...`):
//! - `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>`
//! - `NET/Socket : Using [0]eth0:10.1.0.11<0> [1]eth1:10.2.0.11<0>`
//! - `Using network IB` / `Using network Socket` (2.12+: the network NCCL picked)
//! - `Bootstrap : Using eth0:10.0.0.1<0>` (older: `Bootstrap : Using [0]eth0:...`)
//! - `Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0` (`/GDRDMA` may follow),
//!   `Channel 00 : 0[0] -> 1[1] via P2P/IPC`, `... via SHM/direct/direct`
//! - `NET/IB : No device found.`, `NCCL WARN ...`, `NCCL version 2.21.5+cuda12.4`

use preflight_checks::ifname::IfnameSpec;
use serde::Serialize;
use std::collections::BTreeMap;

/// At most this many warnings are kept.
const MAX_WARNINGS: usize = 20;

/// What an NCCL log says about the network NCCL used.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct NetUsed {
    /// "IB", "Socket", or a plugin's name; empty when the log names none.
    pub transport: String,
    /// IB ports ("mlx5_0:1") or socket interfaces ("eth0") NCCL said it uses.
    pub devices: Vec<String>,
    /// The interface of IB's out-of-band socket, or of the bootstrap when IB is not used.
    pub oob_interface: Option<String>,
    /// "2.21.5+cuda12.4"
    pub version: Option<String>,
    /// `NCCL WARN` messages (without the line prefix), first ones first.
    pub warnings: Vec<String>,
    /// How channels connected ranks, distinct, in order seen: "NET/Socket", "P2P/IPC", "SHM".
    pub paths: Vec<String>,
    /// The log said `NET/IB : No device found.`
    pub ib_no_device: bool,
}

impl NetUsed {
    /// The `collectives[].net` string: "NET/Socket eth0", "NET/IB mlx5_0:1,mlx5_1:1".
    pub fn summary(&self) -> String {
        let local_only =
            !self.paths.is_empty() && !self.paths.iter().any(|p| p.starts_with("NET/"));
        if local_only {
            return format!(
                "no network (all ranks on one host: {})",
                self.paths.join(", ")
            );
        }
        if self.transport.is_empty() {
            return "unknown (the NCCL log names no network)".to_string();
        }
        let mut s = format!("NET/{}", self.transport);
        if !self.devices.is_empty() {
            s.push(' ');
            s.push_str(&self.devices.join(","));
        }
        s
    }

    /// True when the log named no network and no channel.
    pub fn is_empty(&self) -> bool {
        self.transport.is_empty() && self.paths.is_empty() && self.devices.is_empty()
    }
}

/// Parses a whole NCCL log (several ranks' logs may be concatenated).
pub fn parse(text: &str) -> NetUsed {
    let mut p = Parser::default();
    for line in text.lines() {
        p.line(line);
    }
    p.finish()
}

/// Reads a log line by line (`preflight explain --log` streams one through it); [`parse`] is
/// this over a whole text.
#[derive(Default)]
pub struct Parser {
    chosen: Option<String>,
    ib: Option<(Vec<String>, Option<String>)>,
    socket: Option<Vec<String>>,
    bootstrap: Option<String>,
    channel_net: Option<String>,
    used: NetUsed,
}

impl Parser {
    pub fn line(&mut self, line: &str) {
        if let Some(v) = after(line, "NCCL version ") {
            if self.used.version.is_none() {
                self.used.version = v.split_whitespace().next().map(str::to_string);
            }
        }
        if let Some(w) = after(line, "NCCL WARN ") {
            if self.used.warnings.len() < MAX_WARNINGS {
                self.used.warnings.push(w.trim().to_string());
            }
            return;
        }
        let Some(msg) = after(line, "NCCL INFO ") else {
            return;
        };
        let msg = msg.trim();
        if msg.starts_with("NET/IB : No device found") {
            self.used.ib_no_device = true;
        } else if let Some(net) = msg.strip_prefix("Using network ") {
            self.chosen = Some(net.trim().to_string());
        } else if let Some(rest) = msg.strip_prefix("NET/IB : Using ") {
            self.ib = Some(parse_ib_using(rest));
        } else if let Some(rest) = msg.strip_prefix("NET/Socket : Using ") {
            self.socket = Some(device_list(rest).iter().map(|d| iface_of(d)).collect());
        } else if let Some(rest) = msg.strip_prefix("Bootstrap : Using ") {
            self.bootstrap = device_list(rest).first().map(|d| iface_of(d));
        } else if msg.starts_with("Channel ") || msg.starts_with("Ring ") {
            self.channel(msg);
        }
    }

    fn channel(&mut self, msg: &str) {
        let Some(via) = msg.split(" via ").nth(1) else {
            return;
        };
        let mut parts = via.split_whitespace().next().unwrap_or("").split('/');
        let kind = parts.next().unwrap_or("");
        let path = match kind {
            "NET" | "P2P" | "COLLNET" => match parts.next() {
                Some(sub) => format!("{kind}/{sub}"),
                None => kind.to_string(),
            },
            "" => return,
            other => other.to_string(),
        };
        if let Some(net) = path.strip_prefix("NET/") {
            self.channel_net.get_or_insert_with(|| net.to_string());
        }
        if !self.used.paths.contains(&path) {
            self.used.paths.push(path);
        }
    }

    pub fn finish(mut self) -> NetUsed {
        // The network NCCL picked: its own statement, else what channels ran over, else what initialised.
        let transport = self
            .chosen
            .or(self.channel_net)
            .or_else(|| self.ib.as_ref().map(|_| "IB".to_string()))
            .or_else(|| self.socket.as_ref().map(|_| "Socket".to_string()));
        let transport = transport.unwrap_or_default();
        match transport.as_str() {
            "IB" => {
                if let Some((devices, oob)) = self.ib {
                    self.used.devices = devices;
                    self.used.oob_interface = oob;
                }
            }
            "Socket" => {
                self.used.devices = self.socket.unwrap_or_default();
            }
            _ => {}
        }
        if self.used.oob_interface.is_none() {
            self.used.oob_interface = self.bootstrap;
        }
        self.used.transport = transport;
        self.used
    }
}

/// The text after `marker`, if the line holds it.
fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|i| &line[i + marker.len()..])
}

/// `[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>` to (["mlx5_0:1","mlx5_1:1"], Some("eth0")).
fn parse_ib_using(rest: &str) -> (Vec<String>, Option<String>) {
    let (devs, oob) = match rest.split_once("OOB ") {
        Some((d, o)) => (d, Some(o)),
        None => (rest, None),
    };
    let devices = device_list(devs)
        .iter()
        .map(|d| d.split('/').next().unwrap_or(d).to_string())
        .collect();
    let oob = oob.and_then(|o| o.split_whitespace().next()).map(iface_of);
    (devices, oob)
}

/// Entries of a `[0]a [1]b` list (an unnumbered single entry is accepted too); `[RO]` and `;` dropped.
fn device_list(rest: &str) -> Vec<String> {
    rest.split_whitespace()
        .map(|t| t.trim_end_matches(';'))
        .filter(|t| !t.is_empty() && *t != "[RO]")
        .map(
            |t| match t.strip_prefix('[').and_then(|r| r.split_once(']')) {
                Some((_, name)) => name.to_string(),
                None => t.to_string(),
            },
        )
        .filter(|t| !t.is_empty())
        .collect()
}

/// `eth0:10.0.0.1<0>` to `eth0` (interface names hold no ':').
fn iface_of(entry: &str) -> String {
    entry.split(':').next().unwrap_or(entry).to_string()
}

/// Explains how the network NCCL used differs from what `env` (the advice) asked for; None when it agrees.
pub fn differs_from_advice(net: &NetUsed, env: &BTreeMap<String, String>) -> Option<String> {
    let mut problems = Vec::new();
    let ib_disable = env.get("NCCL_IB_DISABLE").map(|v| v.trim());
    match (net.transport.as_str(), ib_disable) {
        ("IB", Some(v)) if v != "0" => problems.push(format!(
            "the advice sets NCCL_IB_DISABLE={v} but NCCL used NET/IB ({})",
            net.devices.join(",")
        )),
        ("Socket", Some("0")) => problems.push(format!(
            "the advice sets NCCL_IB_DISABLE=0{} but NCCL fell back to NET/Socket ({}){}",
            env.get("NCCL_IB_HCA")
                .map(|h| format!(" with NCCL_IB_HCA={h}"))
                .unwrap_or_default(),
            net.devices.join(","),
            ib_reason(net)
        )),
        _ => {}
    }
    if net.transport == "IB" {
        if let Some(hca) = env.get("NCCL_IB_HCA") {
            let spec = IfnameSpec::parse(hca);
            let off: Vec<&str> = net
                .devices
                .iter()
                .map(String::as_str)
                .filter(|d| !spec.matches(d.split(':').next().unwrap_or(d)))
                .collect();
            if !off.is_empty() {
                problems.push(format!(
                    "NCCL used {} although the advice sets NCCL_IB_HCA={hca}",
                    off.join(",")
                ));
            }
        }
    }
    if let Some(ifname) = env.get("NCCL_SOCKET_IFNAME") {
        let spec = IfnameSpec::parse(ifname);
        if !spec.ignored {
            let mut off: Vec<String> = Vec::new();
            if net.transport == "Socket" {
                off.extend(net.devices.iter().filter(|d| !spec.matches(d)).cloned());
            }
            if let Some(oob) = net.oob_interface.as_ref().filter(|o| !spec.matches(o)) {
                if !off.contains(oob) {
                    off.push(format!("{oob} (bootstrap/out-of-band)"));
                }
            }
            if !off.is_empty() {
                problems.push(format!(
                    "NCCL used {} although the advice sets NCCL_SOCKET_IFNAME={ifname}",
                    off.join(", ")
                ));
            }
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Why IB was not used, from the log: "NET/IB : No device found." or the first IB warning.
fn ib_reason(net: &NetUsed) -> String {
    if net.ib_no_device {
        return ": NCCL said \"NET/IB : No device found\"".into();
    }
    net.warnings
        .iter()
        .find(|w| w.contains("IB"))
        .map(|w| format!(": NCCL warned {w:?}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/nccl-logs/{name}.log",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn socket_two_nodes_names_interface_and_version() {
        let n = parse(&fixture("socket-2node"));
        assert_eq!(n.transport, "Socket");
        assert_eq!(n.devices, ["eth0"]);
        assert_eq!(n.oob_interface.as_deref(), Some("eth0"));
        assert_eq!(n.version.as_deref(), Some("2.21.5+cuda12.4"));
        assert_eq!(n.paths, ["NET/Socket"]);
        assert_eq!(n.summary(), "NET/Socket eth0");
    }

    #[test]
    fn ib_with_two_hcas_and_oob() {
        let n = parse(&fixture("ib-2hca"));
        assert_eq!(n.transport, "IB");
        assert_eq!(n.devices, ["mlx5_0:1", "mlx5_1:1"]);
        assert_eq!(n.oob_interface.as_deref(), Some("ib0"));
        assert_eq!(n.summary(), "NET/IB mlx5_0:1,mlx5_1:1");
        assert!(n.paths.contains(&"NET/IB".to_string()));
        assert!(n.paths.contains(&"P2P/IPC".to_string()));
    }

    #[test]
    fn roce_with_relaxed_ordering_marker() {
        let n = parse(&fixture("roce-ro"));
        assert_eq!(n.transport, "IB");
        assert_eq!(n.devices, ["mlx5_10:1", "mlx5_11:1"]);
        assert_eq!(n.oob_interface.as_deref(), Some("enp220s0np0"));
        assert_eq!(n.version.as_deref(), Some("2.19.3+cuda12.3"));
    }

    #[test]
    fn old_nccl_prints_socket_and_ib_but_channels_tell() {
        // NCCL 2.4 prints NET/Socket for bootstrap and NET/IB for data; no "Using network" line.
        let n = parse(&fixture("old-2.4-ib"));
        assert_eq!(n.transport, "IB");
        assert_eq!(n.devices, ["mlx5_0:1"]);
        assert_eq!(n.version.as_deref(), Some("2.4.7+cuda10.0"));
    }

    #[test]
    fn ib_disabled_falls_back_to_socket_with_two_interfaces() {
        let n = parse(&fixture("ib-disabled-socket"));
        assert_eq!(n.transport, "Socket");
        assert_eq!(n.devices, ["bond0", "eno2"]);
        assert_eq!(n.summary(), "NET/Socket bond0,eno2");
        assert_eq!(n.oob_interface.as_deref(), Some("bond0"));
    }

    #[test]
    fn warnings_are_collected_without_prefix() {
        let n = parse(&fixture("ib-error-warn"));
        assert_eq!(n.transport, "IB");
        assert!(
            n.warnings
                .iter()
                .any(|w| w.starts_with("NET/IB : Got completion from peer")),
            "{:?}",
            n.warnings
        );
        assert!(n.warnings.iter().all(|w| !w.contains("NCCL WARN")));
    }

    #[test]
    fn a_socket_fallback_against_ib_advice_cites_no_device_found() {
        let net = parse(
            "h:1:1 [0] NCCL INFO NET/IB : No device found.\n\
             h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n\
             h:1:1 [0] NCCL INFO Using network Socket\n",
        );
        assert!(net.ib_no_device);
        let env = BTreeMap::from([("NCCL_IB_DISABLE".to_string(), "0".to_string())]);
        let why = differs_from_advice(&net, &env).expect("a mismatch");
        assert!(why.contains("fell back to NET/Socket (eth0)"), "{why}");
        assert!(why.contains("No device found"), "{why}");
    }

    #[test]
    fn single_host_uses_no_network() {
        let n = parse(&fixture("single-host-p2p"));
        assert_eq!(n.transport, "Socket");
        assert_eq!(n.paths, ["P2P/IPC"]);
        assert!(n.summary().starts_with("no network"), "{}", n.summary());
        assert!(n.ib_no_device);
    }

    #[test]
    fn empty_or_garbage_log_names_nothing() {
        let n = parse("garbage\n\u{0}\u{1}binary\n[0] NCCL INFO Channel 00 : via\n");
        assert!(n.is_empty());
        assert!(n.summary().starts_with("unknown"));
    }

    #[test]
    fn advice_ib_disabled_but_ib_used() {
        let n = parse(&fixture("ib-2hca"));
        let why = differs_from_advice(&n, &env(&[("NCCL_IB_DISABLE", "1")])).expect("differs");
        assert!(
            why.contains("NCCL_IB_DISABLE=1") && why.contains("mlx5_0:1"),
            "{why}"
        );
        assert_eq!(
            differs_from_advice(
                &n,
                &env(&[
                    ("NCCL_IB_DISABLE", "0"),
                    ("NCCL_IB_HCA", "mlx5_0,mlx5_1"),
                    ("NCCL_SOCKET_IFNAME", "ib0")
                ])
            ),
            None
        );
    }

    #[test]
    fn advice_ib_hca_excludes_a_port_that_was_used() {
        let n = parse(&fixture("ib-2hca"));
        let why = differs_from_advice(&n, &env(&[("NCCL_IB_HCA", "=mlx5_0")])).expect("differs");
        assert!(
            why.contains("mlx5_1:1") && !why.contains("mlx5_0:1"),
            "{why}"
        );
    }

    #[test]
    fn advice_socket_ifname_honours_prefix_exact_and_exclude() {
        let n = parse(&fixture("socket-2node"));
        assert_eq!(
            differs_from_advice(&n, &env(&[("NCCL_SOCKET_IFNAME", "eth")])),
            None
        );
        assert_eq!(
            differs_from_advice(&n, &env(&[("NCCL_SOCKET_IFNAME", "=eth0")])),
            None
        );
        let why =
            differs_from_advice(&n, &env(&[("NCCL_SOCKET_IFNAME", "eth1")])).expect("differs");
        assert!(
            why.contains("eth0") && why.contains("NCCL_SOCKET_IFNAME=eth1"),
            "{why}"
        );
        assert!(differs_from_advice(&n, &env(&[("NCCL_SOCKET_IFNAME", "^eth")])).is_some());
        assert!(differs_from_advice(&n, &env(&[("NCCL_SOCKET_IFNAME", "=eth")])).is_some());
        // NCCL ignores one-byte values, so they cannot be contradicted.
        assert_eq!(
            differs_from_advice(&n, &env(&[("NCCL_SOCKET_IFNAME", "x")])),
            None
        );
    }

    #[test]
    fn advice_wants_ib_but_socket_used() {
        let n = parse(&fixture("ib-disabled-socket"));
        let why = differs_from_advice(
            &n,
            &env(&[("NCCL_IB_DISABLE", "0"), ("NCCL_IB_HCA", "mlx5_0")]),
        )
        .expect("differs");
        assert!(why.contains("fell back to NET/Socket"), "{why}");
        assert_eq!(
            differs_from_advice(
                &n,
                &env(&[
                    ("NCCL_IB_DISABLE", "1"),
                    ("NCCL_SOCKET_IFNAME", "bond0,eno")
                ])
            ),
            None
        );
    }
}

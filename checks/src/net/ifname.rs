//! NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME syntax: parse and match against interface names.
//!
//! NCCL (`ncclFindInterfaces`, `parseStringList`, `matchIfList`): a leading `^`
//! turns the whole list into an exclude list, a following `=` makes every entry
//! an exact name instead of a prefix; entries are comma separated, a `:port`
//! suffix is skipped, empty entries are dropped, matching is case-sensitive.
//! NCCL ignores the variable when it is one byte or shorter and picks an
//! interface itself (`ib*`, then anything but `docker*`/`lo*`/`virbr*`, then
//! `docker*`, `lo*`, `virbr*`), using only interfaces that are running and
//! have an address. Gloo (PyTorch) takes a comma list of exact names.

use crate::core::Interface;

/// NCCL reads at most this many entries (`MAX_IFS`); later ones are ignored.
pub const NCCL_MAX_IFS: usize = 16;
/// Longest possible Linux interface name (`IFNAMSIZ - 1`).
pub const IFNAME_MAX: usize = 15;

/// A parsed `NCCL_SOCKET_IFNAME` (or `GLOO_SOCKET_IFNAME`) value.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IfnameSpec {
    /// The value as given.
    pub raw: String,
    /// Leading `^`: the list says which interfaces NOT to use.
    pub exclude: bool,
    /// `=` after the optional `^`: entries are whole names, not prefixes.
    pub exact: bool,
    /// Name prefixes (or names when `exact`), `:port` suffixes removed.
    pub entries: Vec<String>,
    /// NCCL ignores values of one byte or less and auto-selects instead.
    pub ignored: bool,
    /// Oddities worth telling the user (whitespace, empty entries, ports, ...).
    pub warnings: Vec<String>,
}

impl IfnameSpec {
    /// Parses a value exactly as NCCL does. Never fails; oddities become `warnings`.
    pub fn parse(raw: &str) -> IfnameSpec {
        let mut spec = IfnameSpec {
            raw: raw.to_string(),
            ..Default::default()
        };
        // NCCL: `if (env && strlen(env) > 1)`, otherwise auto-select.
        if raw.len() <= 1 {
            spec.ignored = true;
            spec.warnings.push(format!(
                "value {} is {} byte(s) long; NCCL ignores values of 1 byte or less and auto-selects",
                crate::infra::shellword::quoted(raw),
                raw.len()
            ));
            return spec;
        }
        let mut rest = raw;
        if let Some(r) = rest.strip_prefix('^') {
            spec.exclude = true;
            rest = r;
        }
        if let Some(r) = rest.strip_prefix('=') {
            spec.exact = true;
            rest = r;
        }
        // parseStringList skips one more leading '^' or '=' silently.
        if let Some(r) = rest.strip_prefix(['^', '=']) {
            spec.warnings.push(format!(
                "NCCL silently drops the second leading {:?} in {}",
                &rest[..1],
                crate::infra::shellword::quoted(raw)
            ));
            rest = r;
        }
        spec.entries = split_entries(rest, &mut spec.warnings);
        if spec.entries.len() > NCCL_MAX_IFS {
            spec.warnings.push(format!(
                "NCCL reads only the first {NCCL_MAX_IFS} entries; {} ignored",
                spec.entries.len() - NCCL_MAX_IFS
            ));
            spec.entries.truncate(NCCL_MAX_IFS);
        }
        if spec.entries.is_empty() {
            spec.warnings.push(if spec.exclude {
                "the exclude list has no names, so NCCL matches no interface at all".to_string()
            } else {
                "the list has no names, so NCCL matches every interface".to_string()
            });
        }
        spec
    }

    /// Parses `GLOO_SOCKET_IFNAME`: comma separated exact names (PyTorch splits on ',').
    pub fn parse_gloo(raw: &str) -> IfnameSpec {
        let mut spec = IfnameSpec {
            raw: raw.to_string(),
            exact: true,
            ..Default::default()
        };
        for part in raw.split(',') {
            if part.is_empty() {
                spec.warnings
                    .push("empty entry: Gloo will fail to find an interface named \"\"".into());
                continue;
            }
            if part.trim() != part {
                spec.warnings.push(format!(
                    "entry {} has surrounding whitespace; Gloo uses it verbatim",
                    crate::infra::shellword::quoted(part)
                ));
            }
            if part.starts_with(['^', '=']) {
                spec.warnings.push(format!(
                    "entry {}: GLOO_SOCKET_IFNAME takes plain names; '^' and '=' are NCCL syntax",
                    crate::infra::shellword::quoted(part)
                ));
            }
            spec.entries.push(part.to_string());
        }
        spec
    }

    /// True when NCCL would accept an interface of this name (ignoring state and addresses).
    pub fn matches(&self, name: &str) -> bool {
        // matchIfList: an empty list matches everything; the result is XOR-ed with `^`.
        let listed = self.entries.is_empty()
            || self.entries.iter().any(|e| {
                if self.exact {
                    name == e
                } else {
                    name.starts_with(e.as_str())
                }
            });
        listed != self.exclude
    }

    /// The interfaces whose names match, in the given order (state and addresses not judged).
    pub fn select<'a>(&self, ifaces: &'a [Interface]) -> Vec<&'a Interface> {
        ifaces.iter().filter(|i| self.matches(&i.name)).collect()
    }

    /// Which entries (prefix mode only) match more than one name, with the names they match.
    pub fn ambiguous_prefixes<'a>(&self, ifaces: &'a [Interface]) -> Vec<(String, Vec<&'a str>)> {
        if self.exact || self.exclude {
            return Vec::new();
        }
        self.entries
            .iter()
            .filter_map(|e| {
                let hits: Vec<&str> = ifaces
                    .iter()
                    .map(|i| i.name.as_str())
                    .filter(|n| n.starts_with(e.as_str()))
                    .collect();
                (hits.len() > 1 && hits.contains(&e.as_str())).then(|| (e.clone(), hits))
            })
            .collect()
    }
}

/// Splits the list part of an NCCL value: commas, `:port` suffixes dropped, empty entries ignored.
fn split_entries(list: &str, warnings: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for part in list.split(',') {
        let name = match part.split_once(':') {
            Some((name, port)) => {
                warnings.push(format!(
                    "entry {}: the \":{port}\" suffix is ignored when choosing interfaces",
                    crate::infra::shellword::quoted(part)
                ));
                name
            }
            None => part,
        };
        if name.is_empty() {
            warnings.push("empty entry ignored".into());
            continue;
        }
        if name.chars().any(char::is_whitespace) {
            warnings.push(format!(
                "entry {} contains whitespace; NCCL compares it verbatim, so it matches no interface",
                crate::infra::shellword::quoted(name)
            ));
        }
        if name.len() > IFNAME_MAX {
            warnings.push(format!(
                "entry {} is longer than any Linux interface name ({IFNAME_MAX} bytes)",
                crate::infra::shellword::quoted(name)
            ));
        }
        out.push(name.to_string());
    }
    out
}

/// The NCCL_SOCKET_IFNAME value that selects exactly `chosen`: its name, or `=name` when another interface's name starts with it.
pub fn suggest_nccl_value(chosen: &str, all: &[Interface]) -> String {
    let shadowed = all
        .iter()
        .any(|i| i.name != chosen && i.name.starts_with(chosen));
    if shadowed {
        format!("={chosen}")
    } else {
        chosen.to_string()
    }
}

/// NCCL's own rule for an interface it may use: running (up with carrier) and holding an address other than ::1.
pub fn nccl_usable(iface: &Interface) -> bool {
    iface.up
        && (!iface.ipv4.is_empty()
            || iface
                .ipv6
                .iter()
                .any(|a| a.addr != std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)))
}

/// The interfaces NCCL uses when NCCL_SOCKET_IFNAME is unset, in NCCL's order; the first is its bootstrap interface.
///
/// Stages, first non-empty wins: `ib`, `^docker,lo,virbr`, `docker`, `lo`,
/// `virbr` (NCCL_COMM_ID subnet matching is not modelled). Within a stage,
/// getifaddrs order: interfaces with IPv4 first, by index.
pub fn nccl_default_select(ifaces: &[Interface]) -> Vec<&Interface> {
    let mut usable: Vec<&Interface> = ifaces.iter().filter(|i| nccl_usable(i)).collect();
    usable.sort_by_key(|i| (i.ipv4.is_empty(), i.index));
    for stage in ["ib", "^docker,lo,virbr", "docker", "lo", "virbr"] {
        let spec = IfnameSpec::parse(stage);
        let picked: Vec<&Interface> = usable
            .iter()
            .copied()
            .filter(|i| spec.matches(&i.name))
            .collect();
        if !picked.is_empty() {
            return picked;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{IfAddr, IfKind};

    fn iface(name: &str, index: u32, up: bool, ipv4: Option<&str>) -> Interface {
        Interface {
            name: name.into(),
            index,
            up,
            kind: IfKind::Physical,
            ipv4: ipv4
                .map(|a| IfAddr {
                    addr: a.parse().expect("addr"),
                    prefix: 24,
                })
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    /// NCCL's C logic (ncclOsFindInterfaces + parseStringList + matchIfList), ported byte by byte.
    fn nccl_reference(env: &str, name: &str) -> Option<bool> {
        if env.len() <= 1 {
            return None;
        }
        let b = env.as_bytes();
        let at = |p: usize| b.get(p).copied().unwrap_or(0);
        let mut p = 0;
        let not = at(p) == b'^';
        if not {
            p += 1;
        }
        let exact = at(p) == b'=';
        if exact {
            p += 1;
        }
        if at(p) == b'^' || at(p) == b'=' {
            p += 1;
        }
        let mut list: Vec<Vec<u8>> = Vec::new();
        let mut cur = Vec::new();
        loop {
            let mut c = at(p);
            if c == b':' {
                if !cur.is_empty() {
                    list.push(std::mem::take(&mut cur));
                }
                while c != b',' && c != 0 {
                    p += 1;
                    c = at(p);
                }
            } else if c == b',' || c == 0 {
                if !cur.is_empty() {
                    list.push(std::mem::take(&mut cur));
                }
            } else {
                cur.push(c);
            }
            p += 1;
            if !(list.len() < NCCL_MAX_IFS && c != 0) {
                break;
            }
        }
        let n = name.as_bytes();
        let listed = list.is_empty()
            || list.iter().any(|r| {
                if exact {
                    n == r.as_slice()
                } else {
                    n.starts_with(r)
                }
            });
        Some(listed != not)
    }

    /// Every value up to 5 characters over NCCL's special characters agrees with the C logic.
    #[test]
    fn matches_nccl_reference_exhaustively() {
        let alphabet = ['^', '=', ',', ':', 'e', 'b', '0', ' '];
        let names = ["e", "e0", "e1", "eb", "b0", "b", "0e", "ee0", "e 0"];
        let mut values = vec![String::new()];
        let mut frontier = vec![String::new()];
        for _ in 0..5 {
            frontier = frontier
                .iter()
                .flat_map(|v| alphabet.iter().map(move |c| format!("{v}{c}")))
                .collect();
            values.extend(frontier.iter().cloned());
        }
        let many = vec!["b"; 20].join(",") + ",e";
        values.push(many);
        for v in &values {
            let spec = IfnameSpec::parse(v);
            for n in names {
                match nccl_reference(v, n) {
                    None => assert!(spec.ignored, "{v:?} should be ignored"),
                    Some(want) => assert_eq!(spec.matches(n), want, "value {v:?} name {n:?}"),
                }
            }
        }
    }

    #[test]
    fn prefix_list_matches_prefixes() {
        let s = IfnameSpec::parse("eth,ib");
        assert!(!s.exclude && !s.exact);
        assert_eq!(s.entries, ["eth", "ib"]);
        assert!(s.matches("eth0") && s.matches("ib1") && s.matches("eth"));
        assert!(!s.matches("eno1") && !s.matches("Eth0"));
        assert!(s.warnings.is_empty());
    }

    #[test]
    fn caret_excludes_whole_list_and_equals_is_exact() {
        let s = IfnameSpec::parse("^docker,lo");
        assert!(s.exclude);
        assert!(!s.matches("docker0") && !s.matches("lo") && s.matches("eth0"));
        let e = IfnameSpec::parse("=bond0");
        assert!(e.exact && !e.exclude);
        assert!(e.matches("bond0") && !e.matches("bond0.100"));
        let both = IfnameSpec::parse("^=bond0,eth0");
        assert!(both.exclude && both.exact);
        assert!(!both.matches("bond0") && both.matches("bond0.100") && !both.matches("eth0"));
        // NCCL strips '=' first, then parseStringList silently strips one more '^' or '='.
        let odd = IfnameSpec::parse("=^eth0");
        assert!(odd.exact && !odd.exclude);
        assert!(odd.matches("eth0"));
        assert!(!odd.warnings.is_empty());
    }

    #[test]
    fn ports_and_empty_entries_are_dropped() {
        let s = IfnameSpec::parse("eth0:1234,,ib0");
        assert_eq!(s.entries, ["eth0", "ib0"]);
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    }

    #[test]
    fn short_values_are_ignored_by_nccl() {
        for v in ["", "e", "^"] {
            let s = IfnameSpec::parse(v);
            assert!(s.ignored, "{v:?}");
            assert!(!s.warnings.is_empty());
        }
        assert!(!IfnameSpec::parse("ib").ignored);
    }

    #[test]
    fn empty_lists_match_everything_or_nothing_like_nccl() {
        let all = IfnameSpec::parse(",,");
        assert!(all.entries.is_empty() && all.matches("eth0"));
        let none = IfnameSpec::parse("^=");
        assert!(none.entries.is_empty() && !none.matches("eth0"));
    }

    #[test]
    fn whitespace_and_long_names_warn() {
        let s = IfnameSpec::parse(" eth0");
        assert!(!s.matches("eth0"));
        assert!(s.warnings.iter().any(|w| w.contains("whitespace")));
        let long = IfnameSpec::parse("averyveryverylongname");
        assert!(long.warnings.iter().any(|w| w.contains("longer")));
        let many = IfnameSpec::parse(&vec!["e"; 20].join(","));
        assert_eq!(many.entries.len(), NCCL_MAX_IFS);
    }

    #[test]
    fn ambiguous_prefix_finds_bond_vlan() {
        let ifs = [
            iface("bond0", 4, true, Some("10.4.0.31")),
            iface("bond0.100", 5, true, Some("10.100.0.31")),
        ];
        let amb = IfnameSpec::parse("bond0").ambiguous_prefixes(&ifs);
        assert_eq!(amb, vec![("bond0".to_string(), vec!["bond0", "bond0.100"])]);
        assert!(
            IfnameSpec::parse("=bond0")
                .ambiguous_prefixes(&ifs)
                .is_empty()
        );
        assert_eq!(IfnameSpec::parse("bond0").select(&ifs).len(), 2);
        assert_eq!(suggest_nccl_value("bond0", &ifs), "=bond0");
        assert_eq!(suggest_nccl_value("bond0.100", &ifs), "bond0.100");
    }

    #[test]
    fn gloo_takes_exact_names() {
        let g = IfnameSpec::parse_gloo("eth0,ib0");
        assert!(g.exact && g.matches("eth0") && !g.matches("eth01"));
        assert!(g.warnings.is_empty());
        let bad = IfnameSpec::parse_gloo("^eth0,");
        assert_eq!(bad.warnings.len(), 2, "{:?}", bad.warnings);
    }

    #[test]
    fn nccl_default_prefers_ib_then_non_docker_then_docker_then_lo() {
        let mut lo = iface("lo", 1, true, Some("127.0.0.1"));
        lo.kind = IfKind::Loopback;
        let docker = iface("docker0", 5, true, Some("172.17.0.1"));
        let eno1 = iface("eno1", 2, true, Some("10.1.0.11"));
        let ib0 = iface("ib0", 3, true, Some("192.168.100.11"));
        let ib1_down = iface("ib1", 4, false, None);

        let all = [lo.clone(), eno1.clone(), ib0, ib1_down, docker.clone()];
        let names = |v: Vec<&Interface>| v.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(nccl_default_select(&all)), ["ib0"]);
        let no_ib = [lo.clone(), eno1, docker.clone()];
        assert_eq!(names(nccl_default_select(&no_ib)), ["eno1"]);
        let only_docker = [lo.clone(), docker];
        assert_eq!(names(nccl_default_select(&only_docker)), ["docker0"]);
        assert_eq!(names(nccl_default_select(&[lo])), ["lo"]);
        assert!(nccl_default_select(&[]).is_empty());
    }

    #[test]
    fn nccl_default_orders_ipv4_before_ipv6_only() {
        let mut v6only = iface("eth0", 2, true, None);
        v6only.ipv6.push(IfAddr {
            addr: "fd00::2".parse().expect("v6"),
            prefix: 64,
        });
        let v4 = iface("eth1", 3, true, Some("10.0.0.3"));
        let both = [v6only, v4];
        let picked = nccl_default_select(&both);
        assert_eq!(picked[0].name, "eth1");
        assert_eq!(picked.len(), 2);
    }
}

//! Where each address of a resolved name came from: the first `/etc/hosts` line that maps the
//! name to it (glibc's files backend returns every such line, in file order, before the RFC
//! 6724 sort), else the next source `/etc/nsswitch.conf` lists for hosts (DNS on most nodes).

use crate::core::AddressOrigin;
use crate::infra::root::Root;
use std::net::IpAddr;

/// The hosts file glibc's files backend reads.
pub const HOSTS: &str = "/etc/hosts";
/// Longest line text kept in an origin.
const TEXT_CAP: usize = 256;

/// The origin of each of `addrs` (the resolver's answer for `name`), read through `root`.
pub fn origins(root: &Root, name: &str, addrs: &[IpAddr]) -> Vec<AddressOrigin> {
    let hosts = root.read(HOSTS).unwrap_or_default();
    let nsswitch = root.read("/etc/nsswitch.conf").unwrap_or_default();
    origins_in(&hosts, &nsswitch, name, addrs)
}

/// [`origins`] over the texts of `/etc/hosts` and `/etc/nsswitch.conf`.
pub fn origins_in(hosts: &str, nsswitch: &str, name: &str, addrs: &[IpAddr]) -> Vec<AddressOrigin> {
    let name = name.trim_end_matches('.');
    let lines: Vec<(u32, IpAddr, &str)> = hosts
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let body = line.split('#').next().unwrap_or("");
            let mut fields = body.split_whitespace();
            let addr: IpAddr = fields.next()?.parse().ok()?;
            fields
                .any(|n| n.eq_ignore_ascii_case(name))
                .then(|| (i as u32 + 1, addr, line))
        })
        .collect();
    let other = other_source(nsswitch);
    addrs
        .iter()
        .map(|a| match lines.iter().find(|(_, addr, _)| addr == a) {
            Some((n, _, text)) => AddressOrigin {
                address: a.to_string(),
                source: "files".into(),
                file: Some(HOSTS.into()),
                line: Some(*n),
                text: Some(
                    text.split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                        .chars()
                        .take(TEXT_CAP)
                        .collect(),
                ),
            },
            None => AddressOrigin {
                address: a.to_string(),
                source: other.clone(),
                ..Default::default()
            },
        })
        .collect()
}

/// The first source after `files` on nsswitch's `hosts:` line (`dns` when there is no such
/// line, as glibc defaults to `dns [!UNAVAIL=return] files`).
fn other_source(nsswitch: &str) -> String {
    nsswitch
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find_map(|l| l.strip_prefix("hosts:"))
        .and_then(|rest| {
            rest.split_whitespace()
                .filter(|w| !w.starts_with('[') && !w.ends_with(']'))
                .find(|w| *w != "files")
                .map(|w| w.chars().take(32).collect())
        })
        .unwrap_or_else(|| "dns".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(v: &[&str]) -> Vec<IpAddr> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn each_address_is_traced_to_its_first_hosts_line_or_to_dns() {
        let hosts = "127.0.0.1 localhost\n# 10.0.0.7 fake-host\n10.0.0.9\tfake-host # stale\n10.0.0.1 FAKE-HOST node0\n10.0.0.9 fake-host\n";
        let o = origins_in(
            hosts,
            "hosts: files mdns4_minimal [NOTFOUND=return] dns\n",
            "fake-host.",
            &ips(&["10.0.0.9", "10.0.0.1", "10.0.0.5"]),
        );
        assert_eq!(o[0].line, Some(3));
        assert_eq!(o[0].text.as_deref(), Some("10.0.0.9 fake-host # stale"));
        assert_eq!(o[0].describe(), "/etc/hosts line 3");
        assert_eq!(o[1].line, Some(4));
        assert_eq!(o[2].source, "mdns4_minimal");
        assert_eq!(o[2].file, None);
    }

    #[test]
    fn without_nsswitch_the_other_source_is_dns() {
        let o = origins_in("", "", "node0", &ips(&["fd00::1"]));
        assert_eq!(o[0].describe(), "DNS");
        assert_eq!(o[0].address, "fd00::1");
        let o = origins_in(
            "",
            "hosts: files dns myhostname",
            "node0",
            &ips(&["10.0.0.1"]),
        );
        assert_eq!(o[0].source, "dns");
    }

    #[test]
    fn an_ipv6_line_matches_however_it_is_written() {
        let o = origins_in("fd00:0::0001 n6\n", "", "n6", &ips(&["fd00::1"]));
        assert_eq!(o[0].line, Some(1));
    }
}

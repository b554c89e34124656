//! The other names of the master's host that this node knows: the lines of /etc/hosts whose
//! names start with the same first label, the resolver's search domains, and rank 0's host from
//! a host list. A node whose master name leads to an address that fails tries these to tell "the
//! name leads elsewhere" from "rank 0 is not there".

use preflight_checks::root::Root;

/// Most other names tried.
const MAX_OTHER_NAMES: usize = 8;

/// The other names of `master`'s host in `/etc/hosts` and `/etc/resolv.conf` (read through
/// `root`), then `rank0_host` when it differs; none for an IP address.
pub fn other_names(root: &Root, master: &str, rank0_host: Option<&str>) -> Vec<String> {
    let hosts = root.read("/etc/hosts").unwrap_or_default();
    let resolv = root.read("/etc/resolv.conf").unwrap_or_default();
    other_names_in(master, &hosts, &resolv, rank0_host)
}

/// [`other_names`] over the files' text.
pub fn other_names_in(
    master: &str,
    hosts: &str,
    resolv: &str,
    rank0_host: Option<&str>,
) -> Vec<String> {
    let bare = master.trim().trim_matches(|c| c == '[' || c == ']');
    if bare.is_empty() || bare.parse::<std::net::IpAddr>().is_ok() {
        return Vec::new();
    }
    let short = first_label(bare);
    let mut out: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        let name = name.trim().trim_end_matches('.');
        if !name.is_empty()
            && !name.eq_ignore_ascii_case(bare)
            && !out.iter().any(|o| o.eq_ignore_ascii_case(name))
            && out.len() < MAX_OTHER_NAMES
        {
            out.push(name.to_string());
        }
    };
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        if fields
            .next()
            .and_then(|a| a.parse::<std::net::IpAddr>().ok())
            .is_none()
        {
            continue;
        }
        for name in fields.filter(|n| first_label(n).eq_ignore_ascii_case(short)) {
            add(name);
        }
    }
    if bare.contains('.') {
        add(short);
    } else {
        for line in resolv.lines() {
            let mut words = line.split_whitespace();
            if matches!(words.next(), Some("search" | "domain")) {
                for domain in words {
                    add(&format!("{short}.{}", domain.trim_end_matches('.')));
                }
            }
        }
    }
    if let Some(h) = rank0_host {
        add(h);
    }
    out
}

fn first_label(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_lines_with_the_same_first_label_search_domains_and_rank_0s_host() {
        let hosts = "127.0.0.1 localhost\n10.0.2.1 node0 # admin\n10.0.1.1 node0.data node0-data\n10.0.1.2 node1.data\n";
        let resolv = "nameserver 10.0.0.53\nsearch admin.cluster data.cluster.\n";
        assert_eq!(
            other_names_in("node0", hosts, resolv, Some("gpu0")),
            [
                "node0.data",
                "node0.admin.cluster",
                "node0.data.cluster",
                "gpu0"
            ]
        );
        // An FQDN: its short name too, and no search domains; the name itself never.
        assert_eq!(
            other_names_in("node0.data", hosts, resolv, Some("node0.data")),
            ["node0"]
        );
    }

    #[test]
    fn an_address_or_an_empty_name_has_no_other_names() {
        assert!(other_names_in("10.0.0.1", "10.0.0.1 x", "search a", Some("h")).is_empty());
        assert!(other_names_in("[fd00::1]", "", "", None).is_empty());
        assert!(other_names_in(" ", "", "", Some("h")).is_empty());
    }
}

//! System limits: /dev/shm size, RLIMIT_MEMLOCK, and what the hostname resolves to.

use crate::core::SysFacts;
use crate::infra::root::Root;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Duration;

/// How long the system resolver may take before the lookup is given up.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

pub fn probe(root: &Root, hostname: &str) -> SysFacts {
    let mut facts = SysFacts::default();
    match shm_size(root) {
        Ok(b) => facts.shm_bytes = Some(b),
        Err(e) => facts.shm_error = Some(e),
    }
    match memlock_limits(root) {
        Ok((soft, hard)) => {
            facts.memlock_soft = soft;
            facts.memlock_hard = hard;
        }
        Err(e) => facts.memlock_error = Some(e),
    }
    let resolved = if root.is_system() {
        resolve_with_system(hostname)
    } else {
        resolve_from_hosts_file(root, hostname)
    };
    match resolved {
        Ok(addrs) => facts.hostname_addrs = addrs,
        Err(e) => facts.hostname_error = Some(e),
    }
    facts.fqdn = if root.is_system() {
        fqdn_with_system(hostname)
    } else {
        root.read("/etc/hosts")
            .ok()
            .and_then(|h| fqdn_in_hosts(&h, hostname))
    }
    .or_else(|| (!hostname.is_empty()).then(|| hostname.to_string()));
    facts.conntrack_established_s = root.attr_num(CONNTRACK_ESTABLISHED);
    facts
}

/// How long this node's connection tracking keeps an established, silent TCP connection
/// (absent where the conntrack module is not loaded).
pub const CONNTRACK_ESTABLISHED: &str =
    "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established";

/// What this node's resolver gives for `name`, within [`RESOLVE_TIMEOUT`]; at most 16
/// addresses are kept.
pub fn lookup(name: &str) -> crate::core::NameLookup {
    let mut out = crate::core::NameLookup {
        name: name.to_string(),
        ..Default::default()
    };
    match resolve_with_system(name) {
        Ok(mut addrs) => {
            addrs.truncate(16);
            out.addresses = addrs;
        }
        Err(e) => out.error = Some(e),
    }
    out
}

/// [`lookup`], with where each address came from on this node (its `/etc/hosts` line, or
/// DNS), read through `root`.
pub fn lookup_traced(root: &Root, name: &str) -> crate::core::NameLookup {
    let mut out = lookup(name);
    out.origins = super::name_origin::origins(root, name, &out.addresses);
    out
}

/// `socket.getfqdn()`'s answer for this host, as CPython computes it: `gethostbyaddr(name)`,
/// which takes the first address getaddrinfo gives the hostname and asks for that address's
/// name (the reverse entry: the first /etc/hosts line with the address, or DNS's PTR record),
/// then the first of that name and its aliases containing a dot, else that name; the hostname
/// itself when a step fails. Bounded by [`RESOLVE_TIMEOUT`].
fn fqdn_with_system(hostname: &str) -> Option<String> {
    let name = std::ffi::CString::new(hostname).ok()?;
    if hostname.is_empty() {
        return None;
    }
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("resolve-fqdn".into())
        .spawn(move || {
            let _ = tx.send(reverse_names(&name));
        })
        .ok()?;
    let names = rx.recv_timeout(RESOLVE_TIMEOUT).ok().flatten()?;
    pick_fqdn(&names).filter(|c| c.len() <= 255)
}

/// The name the reverse entry of the IP address `ip` gives here (what torchrun's c10d prints
/// for an address in its connect errors, pytorch#85300), within [`RESOLVE_TIMEOUT`]; None for a
/// name, or when there is no entry.
pub fn reverse_name(ip: &str) -> Option<String> {
    let bare = ip.trim().trim_matches(|c| c == '[' || c == ']');
    bare.parse::<IpAddr>().ok()?;
    let c = std::ffi::CString::new(bare).ok()?;
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("reverse-name".into())
        .spawn(move || {
            let _ = tx.send(reverse_names(&c));
        })
        .ok()?;
    let names = rx.recv_timeout(RESOLVE_TIMEOUT).ok().flatten()?;
    names
        .into_iter()
        .next()
        .filter(|n| !n.is_empty() && n.len() <= 255 && n != bare)
}

/// CPython's choice among the reverse entry's names (`[h_name] + h_aliases`): the first with a
/// dot, else the first.
pub fn pick_fqdn(names: &[String]) -> Option<String> {
    names
        .iter()
        .find(|n| n.contains('.'))
        .or_else(|| names.first())
        .filter(|n| !n.is_empty())
        .cloned()
}

unsafe extern "C" {
    /// glibc's reentrant reverse lookup (not in the libc crate).
    fn gethostbyaddr_r(
        addr: *const libc::c_void,
        len: libc::socklen_t,
        family: libc::c_int,
        ret: *mut libc::hostent,
        buf: *mut libc::c_char,
        buflen: libc::size_t,
        result: *mut *mut libc::hostent,
        h_errnop: *mut libc::c_int,
    ) -> libc::c_int;
}

/// The reverse entry of the first address getaddrinfo gives `name`: its name, then its aliases.
fn reverse_names(name: &std::ffi::CStr) -> Option<Vec<String>> {
    // SAFETY: hints is zeroed plain data; getaddrinfo allocates the list freed below, and the
    // first address is copied out before the free.
    let (family, bytes): (libc::c_int, Vec<u8>) = unsafe {
        let mut hints: libc::addrinfo = std::mem::zeroed();
        hints.ai_family = libc::AF_UNSPEC;
        let mut res: *mut libc::addrinfo = std::ptr::null_mut();
        if libc::getaddrinfo(name.as_ptr(), std::ptr::null(), &hints, &mut res) != 0
            || res.is_null()
        {
            return None;
        }
        let ai = &*res;
        let got = match ai.ai_family {
            libc::AF_INET if !ai.ai_addr.is_null() => {
                let sa = &*(ai.ai_addr as *const libc::sockaddr_in);
                Some((libc::AF_INET, sa.sin_addr.s_addr.to_ne_bytes().to_vec()))
            }
            libc::AF_INET6 if !ai.ai_addr.is_null() => {
                let sa = &*(ai.ai_addr as *const libc::sockaddr_in6);
                Some((libc::AF_INET6, sa.sin6_addr.s6_addr.to_vec()))
            }
            _ => None,
        };
        libc::freeaddrinfo(res);
        got?
    };
    let mut buf = vec![0u8; 8192];
    loop {
        // SAFETY: every pointer is to a live local or to `buf` with its true length; the names
        // are copied out of `buf` before it is dropped.
        let (rc, names) = unsafe {
            let mut ent: libc::hostent = std::mem::zeroed();
            let mut result: *mut libc::hostent = std::ptr::null_mut();
            let mut herr: libc::c_int = 0;
            let rc = gethostbyaddr_r(
                bytes.as_ptr().cast(),
                bytes.len() as libc::socklen_t,
                family,
                &mut ent,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
                &mut herr,
            );
            let mut names = Vec::new();
            if rc == 0 && !result.is_null() {
                let h = &*result;
                if !h.h_name.is_null() {
                    names.push(
                        std::ffi::CStr::from_ptr(h.h_name)
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
                let mut p = h.h_aliases;
                while !p.is_null() && !(*p).is_null() && names.len() < 64 {
                    names.push(std::ffi::CStr::from_ptr(*p).to_string_lossy().into_owned());
                    p = p.add(1);
                }
            }
            (rc, names)
        };
        if rc == libc::ERANGE && buf.len() < 1 << 16 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        return (!names.is_empty()).then_some(names);
    }
}

/// `socket.getfqdn()` over an /etc/hosts file alone: the first line naming `hostname` gives its
/// address; the first line with that address gives the reverse entry (its first name, then its
/// aliases), of which the first with a dot wins, else its first name.
pub fn fqdn_in_hosts(hosts: &str, hostname: &str) -> Option<String> {
    let lines: Vec<(IpAddr, Vec<&str>)> = hosts
        .lines()
        .filter_map(|line| {
            let line = line.split('#').next().unwrap_or("");
            let mut fields = line.split_whitespace();
            let addr = fields.next()?.parse::<IpAddr>().ok()?;
            let names: Vec<&str> = fields.collect();
            (!names.is_empty()).then_some((addr, names))
        })
        .collect();
    let addr = lines
        .iter()
        .find(|(_, names)| names.iter().any(|n| n.eq_ignore_ascii_case(hostname)))?
        .0;
    let reverse = &lines.iter().find(|(a, _)| *a == addr)?.1;
    pick_fqdn(&reverse.iter().map(|n| n.to_string()).collect::<Vec<_>>())
}

// ----- /dev/shm -----

/// Size of /dev/shm in bytes: statvfs on the real system, else (or when that
/// fails) the tmpfs `size=` option in /proc/mounts.
fn shm_size(root: &Root) -> Result<u64, String> {
    let statvfs_err = if root.is_system() {
        match statvfs_size("/dev/shm") {
            Ok(b) => return Ok(b),
            Err(e) => Some(e),
        }
    } else {
        None
    };
    shm_size_from_mounts(root).map_err(|e| match statvfs_err {
        Some(s) => format!("{s}; {e}"),
        None => e,
    })
}

fn statvfs_size(path: &str) -> Result<u64, String> {
    let c_path = std::ffi::CString::new(path).map_err(|e| e.to_string())?;
    // SAFETY: `st` is plain old data and fully written by statvfs on success; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(format!(
            "statvfs {path}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok((st.f_blocks as u64).saturating_mul(st.f_frsize as u64))
}

fn shm_size_from_mounts(root: &Root) -> Result<u64, String> {
    let mounts = root
        .read("/proc/mounts")
        .map_err(|e| format!("cannot read /proc/mounts: {e}"))?;
    // The last mount on /dev/shm is the one in effect.
    let options = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1] == "/dev/shm").then(|| f[3].to_string())
        })
        .next_back()
        .ok_or("/dev/shm is not a mount point in /proc/mounts")?;
    let size = options
        .split(',')
        .find_map(|o| o.strip_prefix("size="))
        .ok_or_else(|| "/dev/shm has no size= option (tmpfs default: half of RAM)".to_string());
    let size = match size {
        Ok(s) => s,
        Err(e) => return half_of_ram(root).ok_or(e),
    };
    parse_tmpfs_size(size, || mem_total(root))
        .ok_or_else(|| format!("cannot parse /dev/shm size={size}"))
}

/// tmpfs `size=`: bytes with an optional k/m/g/t suffix, or a percentage of RAM.
pub fn parse_tmpfs_size(s: &str, mem_total: impl FnOnce() -> Option<u64>) -> Option<u64> {
    let s = s.trim();
    if let Some(pct) = s.strip_suffix('%') {
        let pct: u64 = pct.parse().ok()?;
        return Some(mem_total()?.checked_mul(pct)? / 100);
    }
    let (digits, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        (i, 't' | 'T') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

fn mem_total(root: &Root) -> Option<u64> {
    let meminfo = root.read("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

fn half_of_ram(root: &Root) -> Option<u64> {
    mem_total(root).map(|m| m / 2)
}

// ----- memlock -----

/// (soft, hard) RLIMIT_MEMLOCK in bytes from /proc/self/limits; None = unlimited.
fn memlock_limits(root: &Root) -> Result<(Option<u64>, Option<u64>), String> {
    let text = root
        .read("/proc/self/limits")
        .map_err(|e| format!("cannot read /proc/self/limits: {e}"))?;
    parse_memlock(&text)
        .ok_or_else(|| "no parsable 'Max locked memory' line in /proc/self/limits".into())
}

/// Parses the `Max locked memory` line of /proc/<pid>/limits.
pub fn parse_memlock(limits: &str) -> Option<(Option<u64>, Option<u64>)> {
    let rest = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max locked memory"))?;
    let mut words = rest.split_whitespace();
    let soft = parse_limit(words.next()?)?;
    let hard = parse_limit(words.next()?)?;
    Some((soft, hard))
}

/// "unlimited" -> Some(None); a number -> Some(Some(n)); anything else -> None.
fn parse_limit(word: &str) -> Option<Option<u64>> {
    if word == "unlimited" {
        Some(None)
    } else {
        word.parse().ok().map(Some)
    }
}

// ----- hostname resolution -----

/// Resolves with getaddrinfo (so /etc/hosts, then DNS per nsswitch), on a thread,
/// giving up after [`RESOLVE_TIMEOUT`].
fn resolve_with_system(hostname: &str) -> Result<Vec<IpAddr>, String> {
    if hostname.is_empty() {
        return Err("hostname is empty".into());
    }
    let (tx, rx) = mpsc::channel();
    let name = hostname.to_string();
    let spawned = std::thread::Builder::new()
        .name("resolve-hostname".into())
        .spawn(move || {
            let result = (name.as_str(), 0)
                .to_socket_addrs()
                .map(|it| it.map(|sa| sa.ip()).collect::<Vec<_>>());
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start resolver thread: {e}"));
    }
    match rx.recv_timeout(RESOLVE_TIMEOUT) {
        Ok(Ok(addrs)) if addrs.is_empty() => Err(format!("{hostname} resolved to no address")),
        Ok(Ok(addrs)) => Ok(dedup_in_order(addrs)),
        Ok(Err(e)) => Err(format!("cannot resolve {hostname}: {e}")),
        Err(_) => Err(format!(
            "resolving {hostname} took longer than {} s (slow or unreachable DNS)",
            RESOLVE_TIMEOUT.as_secs()
        )),
    }
}

fn dedup_in_order(addrs: Vec<IpAddr>) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::with_capacity(addrs.len());
    for a in addrs {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// Resolves from the root's /etc/hosts only (fixture roots: no DNS).
fn resolve_from_hosts_file(root: &Root, hostname: &str) -> Result<Vec<IpAddr>, String> {
    let hosts = root
        .read("/etc/hosts")
        .map_err(|e| format!("cannot read /etc/hosts: {e}"))?;
    let addrs = lookup_in_hosts(&hosts, hostname);
    if addrs.is_empty() {
        Err(format!("{hostname} not found in /etc/hosts"))
    } else {
        Ok(addrs)
    }
}

/// Every address /etc/hosts gives `hostname` (canonical name or alias,
/// case-insensitive), in file order. Comments, blank lines, tabs and bad
/// addresses are handled as glibc does.
pub fn lookup_in_hosts(hosts: &str, hostname: &str) -> Vec<IpAddr> {
    let addrs = hosts.lines().filter_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let addr: IpAddr = fields.next()?.parse().ok()?;
        fields
            .any(|name| name.eq_ignore_ascii_case(hostname))
            .then_some(addr)
    });
    dedup_in_order(addrs.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getfqdn_takes_the_reverse_entry_of_the_hostnames_address() {
        let hosts = "127.0.0.1 localhost\n# 10.0.0.9 gpu01\n10.0.0.1\tgpu01.cluster.local gpu01 # rack 1\n10.0.0.2 gpu02\n";
        assert_eq!(
            fqdn_in_hosts(hosts, "gpu01").as_deref(),
            Some("gpu01.cluster.local")
        );
        assert_eq!(fqdn_in_hosts(hosts, "GPU02").as_deref(), Some("gpu02"));
        assert_eq!(fqdn_in_hosts(hosts, "gpu03"), None);
        // A stale line for the same address comes first: its name is what getfqdn() gives,
        // though the hostname's own line names another FQDN.
        let stale = "10.0.0.1 old-master.lab.example\n10.0.0.1 gpu01.cluster.local gpu01\n";
        assert_eq!(
            fqdn_in_hosts(stale, "gpu01").as_deref(),
            Some("old-master.lab.example")
        );
        // No name with a dot: the reverse entry's first name, not the hostname.
        let short = "10.0.0.1 m0 gpu01\n";
        assert_eq!(fqdn_in_hosts(short, "gpu01").as_deref(), Some("m0"));
        // The first alias with a dot wins over a dotless first name.
        let alias = "10.0.0.1 gpu01 gpu01.c.example\n";
        assert_eq!(
            fqdn_in_hosts(alias, "gpu01").as_deref(),
            Some("gpu01.c.example")
        );
        assert_eq!(pick_fqdn(&[]), None);
    }

    fn fixture(name: &str) -> Root {
        crate::infra::testutil::fixture_root(name)
    }

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    #[test]
    fn fixtures_give_the_agreed_limits_and_names() {
        let cases: [(&str, &str, u64, Option<u64>, &str); 5] = [
            ("ib-node", "gpu-ib-01", 64 * GIB, Some(8 * MIB), "127.0.1.1"),
            ("roce-node", "gpu-roce-01", 32 * GIB, None, "10.2.0.21"),
            (
                "docker-bond-host",
                "node07",
                16 * GIB,
                Some(65536),
                "10.4.0.31",
            ),
            ("k8s-pod", "trainer-0", 64 * MIB, None, "10.244.1.17"),
            ("plain-vm", "vm", 12 * GIB, Some(8 * MIB), "127.0.0.1"),
        ];
        for (node, host, shm, memlock, addr) in cases {
            let root = fixture(node);
            assert_eq!(
                root.attr("/proc/sys/kernel/hostname").as_deref(),
                Some(host)
            );
            let f = probe(&root, host);
            assert_eq!(f.shm_bytes, Some(shm), "{node}");
            assert_eq!(f.shm_error, None, "{node}");
            assert_eq!(f.memlock_soft, memlock, "{node}");
            assert_eq!(f.memlock_hard, memlock, "{node}");
            assert_eq!(f.memlock_error, None, "{node}");
            let want: IpAddr = addr.parse().unwrap();
            assert_eq!(f.hostname_addrs, vec![want], "{node}");
            // Docker's NAT loads conntrack; the other nodes have no conntrack module.
            let conntrack = (node == "docker-bond-host").then_some(432_000);
            assert_eq!(f.conntrack_established_s, conntrack, "{node}");
        }
    }

    #[test]
    fn unknown_hostname_in_fixture_is_an_error_not_a_guess() {
        let f = probe(&fixture("roce-node"), "nosuchhost");
        assert!(f.hostname_addrs.is_empty());
        assert!(f.hostname_error.unwrap().contains("nosuchhost"));
    }

    #[test]
    fn hosts_parsing_handles_comments_aliases_tabs_and_case() {
        let hosts = "# 10.9.9.9 gpu\n\
                     127.0.0.1\tlocalhost\n\
                     bogus gpu\n\
                     10.0.0.5 gpu-a.example.com\tGPU  # primary\n\
                     fe80::1%eth0 gpu\n\
                     10.0.0.6 other #gpu\n\
                     2001:db8::5 gpu\n\
                     10.0.0.5 gpu\n";
        let got = lookup_in_hosts(hosts, "gpu");
        let want: Vec<IpAddr> = vec!["10.0.0.5".parse().unwrap(), "2001:db8::5".parse().unwrap()];
        assert_eq!(got, want);
        assert!(lookup_in_hosts(hosts, "gpu-a").is_empty());
        assert_eq!(lookup_in_hosts(hosts, "gpu-a.example.com").len(), 1);
    }

    #[test]
    fn tmpfs_size_units_and_percent() {
        let ram = || Some(100 * GIB);
        assert_eq!(parse_tmpfs_size("65536k", ram), Some(64 * MIB));
        assert_eq!(parse_tmpfs_size("16g", ram), Some(16 * GIB));
        assert_eq!(parse_tmpfs_size("512M", ram), Some(512 * MIB));
        assert_eq!(parse_tmpfs_size("4096", ram), Some(4096));
        assert_eq!(parse_tmpfs_size("50%", ram), Some(50 * GIB));
        assert_eq!(parse_tmpfs_size("50%", || None), None);
        assert_eq!(parse_tmpfs_size("lots", ram), None);
        assert_eq!(parse_tmpfs_size("", ram), None);
        assert_eq!(parse_tmpfs_size("99999999999999999999t", ram), None);
    }

    #[test]
    fn shm_without_size_option_is_half_of_ram_and_missing_mount_is_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        std::fs::write(
            d.path().join("proc/mounts"),
            "tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("proc/meminfo"),
            "MemTotal:       16384000 kB\nMemFree:  1 kB\n",
        )
        .unwrap();
        let root = Root::at(d.path());
        assert_eq!(shm_size(&root), Ok(16384000 * 1024 / 2));
        std::fs::write(d.path().join("proc/mounts"), "proc /proc proc rw 0 0\n").unwrap();
        let f = probe(&root, "x");
        assert_eq!(f.shm_bytes, None);
        assert!(f.shm_error.unwrap().contains("/dev/shm"));
        // No /proc/self/limits and no /etc/hosts: errors, not panics.
        assert!(f.memlock_error.is_some());
        assert!(f.hostname_error.is_some());
    }

    #[test]
    fn memlock_line_parsing() {
        let l = "Max locked memory         65536                unlimited            bytes     \n";
        assert_eq!(parse_memlock(l), Some((Some(65536), None)));
        assert_eq!(parse_memlock("Max locked memory  x y bytes\n"), None);
        assert_eq!(parse_memlock("Max locked memory\n"), None);
        assert_eq!(parse_memlock(""), None);
    }

    #[test]
    fn memlock_from_system_proc_matches_getrlimit() {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) };
        assert_eq!(rc, 0);
        // rlim_t is u64 on 64-bit Linux but not everywhere.
        #[allow(clippy::unnecessary_cast)]
        let as_opt = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v as u64);
        let f = probe(&Root::system(), "localhost");
        assert_eq!(f.memlock_error, None);
        assert_eq!(f.memlock_soft, as_opt(rl.rlim_cur));
        assert_eq!(f.memlock_hard, as_opt(rl.rlim_max));
    }

    #[test]
    fn system_shm_uses_statvfs_and_localhost_resolves_to_loopback() {
        let f = probe(&Root::system(), "localhost");
        if std::path::Path::new("/dev/shm").exists() {
            assert!(f.shm_bytes.is_some_and(|b| b > 0), "{:?}", f.shm_error);
            // tmpfs reports exactly its size= through statvfs.
            if let Ok(from_mounts) = shm_size_from_mounts(&Root::system()) {
                assert_eq!(f.shm_bytes, Some(from_mounts));
            }
        }
        assert!(!f.hostname_addrs.is_empty(), "{:?}", f.hostname_error);
        assert!(f.hostname_addrs.iter().all(|a| a.is_loopback()));
    }

    #[test]
    fn system_resolver_rejects_an_empty_name() {
        // No lookup of unknown names here: that would send DNS queries.
        assert!(resolve_with_system("").is_err());
    }
}

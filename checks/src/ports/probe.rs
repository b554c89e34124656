//! The master port: can it be bound (IPv4 and IPv6 wildcard), and who holds it (as `lsof -i`).
//!
//! The bind test always runs on the live machine (sockets have no root path); the
//! holders come from `/proc/net/tcp{,6}` and `/proc/<pid>/fd` read through [`Root`], so
//! fixture trees can stand in for `/proc`.

use crate::core::{BindResult, BindStatus, PortFacts, PortHolder};
use crate::infra::root::Root;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// How many ports above the master port are tried for `suggested_free`.
const SUGGEST_SPAN: u16 = 100;
/// TCP state `LISTEN` as `/proc/net/tcp` prints it.
const TCP_LISTEN: &str = "0A";

/// Binds the port on both wildcard addresses, finds its holders, and suggests a free port nearby.
pub fn probe(root: &Root, port: u16) -> PortFacts {
    let mut ipv4 = bind_ipv4(port);
    let mut ipv6 = bind_ipv6(port);
    let mut held = holders(root, port);
    // A port refused with no holder to be found may be another process's own bind test of a
    // moment (two agents starting at once on one host): look again before calling it taken.
    for _ in 0..BIND_RETRIES {
        if is_free(&ipv4, &ipv6) || !held.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        ipv4 = bind_ipv4(port);
        ipv6 = bind_ipv6(port);
        held = holders(root, port);
    }
    let suggested_free = if is_free(&ipv4, &ipv6) {
        None
    } else {
        suggest_free_port(port)
    };
    PortFacts {
        port,
        ipv4,
        ipv6,
        holders: held,
        suggested_free,
    }
}

/// Bind tests repeated, 100 ms apart, when the port is refused and no holder is found.
const BIND_RETRIES: u32 = 3;

/// Free on IPv4 and on IPv6 (or IPv6 missing on this host).
fn is_free(v4: &BindResult, v6: &BindResult) -> bool {
    v4.status == BindStatus::Free && matches!(v6.status, BindStatus::Free | BindStatus::Unsupported)
}

/// The first port in port+1..=port+100 that binds on both families.
fn suggest_free_port(port: u16) -> Option<u16> {
    let last = port.saturating_add(SUGGEST_SPAN);
    (port.saturating_add(1)..=last)
        .filter(|p| *p > port)
        .find(|p| is_free(&bind_ipv4(*p), &bind_ipv6(*p)))
}

/// Binds and listens on 0.0.0.0:port with SO_REUSEADDR, then releases it.
pub fn bind_ipv4(port: u16) -> BindResult {
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    classify(try_listen(Domain::IPV4, &addr.into(), false), false)
}

/// Binds and listens on [::]:port dual-stack (IPV6_V6ONLY off, as torchrun's TCPStore), then releases it.
pub fn bind_ipv6(port: u16) -> BindResult {
    let addr = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
    classify(try_listen(Domain::IPV6, &addr.into(), true), true)
}

/// The socket calls a Linux server makes; the socket is closed when it drops here.
fn try_listen(domain: Domain, addr: &SockAddr, dual_stack: bool) -> io::Result<()> {
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if dual_stack {
        socket.set_only_v6(false)?;
    }
    socket.bind(addr)?;
    socket.listen(1)
}

/// Maps the OS error of a bind attempt to a [`BindStatus`].
fn classify(result: io::Result<()>, ipv6: bool) -> BindResult {
    let err = match result {
        Ok(()) => {
            return BindResult {
                status: BindStatus::Free,
                error: None,
            };
        }
        Err(e) => e,
    };
    let status = match err.raw_os_error() {
        Some(libc::EADDRINUSE) => BindStatus::InUse,
        Some(libc::EACCES) | Some(libc::EPERM) => BindStatus::Denied,
        Some(libc::EAFNOSUPPORT) | Some(libc::EADDRNOTAVAIL) if ipv6 => BindStatus::Unsupported,
        _ => BindStatus::Error,
    };
    BindResult {
        status,
        error: Some(err.to_string()),
    }
}

/// Listening sockets on the port and the processes holding them, as `lsof -i :port` shows.
pub fn holders(root: &Root, port: u16) -> Vec<PortHolder> {
    let sockets = listening_sockets(root, port);
    if sockets.is_empty() {
        return Vec::new();
    }
    let owners = socket_owners(root, sockets.iter().map(|s| s.inode).collect());
    let mut out = Vec::new();
    for socket in sockets {
        match owners.get(&socket.inode) {
            Some(pids) => out.extend(pids.iter().map(|pid| {
                let (slurm_job, job_running) = slurm_job_of(root, *pid);
                PortHolder {
                    pid: Some(*pid),
                    command: command_of(root, *pid),
                    local_address: socket.local_address.clone(),
                    inode: socket.inode,
                    slurm_job,
                    job_running,
                }
            })),
            None => out.push(PortHolder {
                pid: None,
                command: None,
                local_address: socket.local_address,
                inode: socket.inode,
                ..PortHolder::default()
            }),
        }
    }
    out
}

/// One LISTEN line of `/proc/net/tcp{,6}`.
#[derive(Debug, PartialEq)]
struct ListeningSocket {
    local_address: String,
    inode: u64,
}

fn listening_sockets(root: &Root, port: u16) -> Vec<ListeningSocket> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| root.read(path).ok())
        .flat_map(|text| parse_proc_net_tcp(&text, port))
        .collect()
}

/// Parses `/proc/net/tcp` or `tcp6` text, keeping sockets in LISTEN state on `port`.
fn parse_proc_net_tcp(text: &str, port: u16) -> Vec<ListeningSocket> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if fields.len() < 10 || fields[3] != TCP_LISTEN {
                return None;
            }
            let (addr_hex, port_hex) = fields[1].split_once(':')?;
            if u16::from_str_radix(port_hex, 16).ok()? != port {
                return None;
            }
            let ip = decode_proc_addr(addr_hex)?;
            Some(ListeningSocket {
                local_address: format_socket_addr(ip, port),
                inode: fields[9].parse().ok()?,
            })
        })
        .collect()
}

/// Decodes the kernel's hex address: 8 hex digits (IPv4) or 32 (IPv6), each 32-bit word in host order.
fn decode_proc_addr(hex: &str) -> Option<std::net::IpAddr> {
    let words: Option<Vec<u32>> = (0..hex.len() / 8)
        .map(|i| {
            hex.get(i * 8..i * 8 + 8)
                .and_then(|w| u32::from_str_radix(w, 16).ok())
        })
        .collect();
    let words = words?;
    match (hex.len(), words.as_slice()) {
        (8, [w]) => Some(Ipv4Addr::from(w.to_ne_bytes()).into()),
        (32, [a, b, c, d]) => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
            let v6 = Ipv6Addr::from(bytes);
            Some(match v6.to_ipv4_mapped() {
                Some(v4) => v4.into(),
                None => v6.into(),
            })
        }
        _ => None,
    }
}

fn format_socket_addr(ip: std::net::IpAddr, port: u16) -> String {
    SocketAddr::new(ip, port).to_string()
}

/// Maps socket inodes to the pids holding them, scanning `/proc/<pid>/fd/*` links.
/// Pids whose fds cannot be read (other users' processes when not root) are skipped.
fn socket_owners(root: &Root, inodes: Vec<u64>) -> BTreeMap<u64, Vec<u32>> {
    let mut owners: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let pids = root
        .list("/proc")
        .into_iter()
        .filter_map(|n| n.parse::<u32>().ok());
    for pid in pids {
        let fd_dir = format!("/proc/{pid}/fd");
        for fd in root.list(&fd_dir) {
            let Some(inode) = root
                .link_name(format!("{fd_dir}/{fd}"))
                .and_then(|t| socket_inode(&t))
            else {
                continue;
            };
            if inodes.contains(&inode) {
                let pids = owners.entry(inode).or_default();
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
    }
    owners
}

/// `socket:[123456]` -> 123456.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The command line as a shell user would type it (each NUL-separated argument quoted when it
/// needs it, `$'...'` for a newline or another control character), else `comm`.
/// The Slurm job `pid` belongs to, and whether it is known to run: Slurm's cgroup for the job
/// (`/slurm/uid_0/job_42/step_0` with cgroup v1, `/system.slice/slurmstepd.scope/job_42/...`
/// with v2) exists only while the job runs; an environment's `SLURM_JOB_ID` outlives its job,
/// so it names the job but not whether it still runs.
pub fn slurm_job_of(root: &Root, pid: u32) -> (Option<String>, Option<bool>) {
    if let Ok(text) = root.read(format!("/proc/{pid}/cgroup"))
        && let Some(job) = job_in_cgroup(&text)
    {
        return (Some(job), Some(true));
    }
    let env = root
        .read_bytes(format!("/proc/{pid}/environ"))
        .unwrap_or_default();
    let job = env
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"SLURM_JOB_ID="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .filter(|v| !v.is_empty() && v.len() <= 32 && v.bytes().all(|b| b.is_ascii_digit()));
    (job, None)
}

/// The job id in a `/proc/<pid>/cgroup` text, from a Slurm path (one naming `slurm`) with a
/// `job_<digits>` component.
pub fn job_in_cgroup(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .filter(|path| path.contains("slurm"))
        .find_map(|path| {
            path.split('/')
                .filter_map(|c| c.strip_prefix("job_"))
                .find(|id| {
                    !id.is_empty() && id.len() <= 32 && id.bytes().all(|b| b.is_ascii_digit())
                })
                .map(str::to_string)
        })
}

fn command_of(root: &Root, pid: u32) -> Option<String> {
    let cmdline = root.read(format!("/proc/{pid}/cmdline")).ok().map(|raw| {
        crate::infra::shellword::command_line(raw.split('\0').filter(|a| !a.is_empty()))
    });
    match cmdline {
        Some(c) if !c.is_empty() => Some(c),
        _ => root.attr(format!("/proc/{pid}/comm")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_slurm_jobs_cgroup_names_the_job_with_v1_and_v2_layouts() {
        let v2 = "0::/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0\n";
        assert_eq!(job_in_cgroup(v2).as_deref(), Some("4711"));
        let v1 = "12:pids:/slurm/uid_1000/job_42/step_0/task_1\n11:memory:/slurm/uid_1000/job_42/step_0\n";
        assert_eq!(job_in_cgroup(v1).as_deref(), Some("42"));
        assert_eq!(
            job_in_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n"),
            None
        );
        assert_eq!(job_in_cgroup("0::/docker/job_12\n"), None, "not Slurm's");
        assert_eq!(job_in_cgroup("garbage\n0::/slurm/job_x/\n"), None);
    }

    proptest::proptest! {
        #![proptest_config(crate::infra::testutil::proptest_config())]

        /// Any `/proc/net/tcp{,6}` text: no panic, bounded time, only LISTEN sockets on the port.
        #[test]
        fn proc_net_tcp_parser_takes_any_text(
            text in crate::infra::testutil::near_lines(concat!(
                include_str!("../../../tests/fixtures/ports/held/proc/net/tcp"),
                include_str!("../../../tests/fixtures/ports/held/proc/net/tcp6"),
            )),
            port in proptest::prop_oneof![proptest::strategy::Just(22u16), proptest::strategy::Just(29500), proptest::arbitrary::any::<u16>()],
            hex in "[0-9a-fA-F:x+-]{0,40}",
        ) {
            let start = std::time::Instant::now();
            let found = parse_proc_net_tcp(&text, port);
            for word in text.split_whitespace().chain([hex.as_str()]) {
                let _ = decode_proc_addr(word);
                let _ = socket_inode(word);
            }
            let took = start.elapsed();
            proptest::prop_assert!(took < crate::infra::testutil::PROP_LIMIT, "took {took:?}");
            for s in found {
                proptest::prop_assert!(s.local_address.ends_with(&format!(":{port}")), "{}", s.local_address);
            }
        }
    }

    fn held() -> Root {
        Root::at(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/ports/held"
        ))
    }

    #[test]
    fn decodes_kernel_hex_addresses() {
        assert_eq!(
            decode_proc_addr("0100007F"),
            Some(Ipv4Addr::LOCALHOST.into())
        );
        assert_eq!(
            decode_proc_addr("00000000000000000000000000000000"),
            Some(Ipv6Addr::UNSPECIFIED.into())
        );
        // ::ffff:10.1.0.11 is shown as the IPv4 address.
        assert_eq!(
            decode_proc_addr("0000000000000000FFFF00000B00010A"),
            Some(Ipv4Addr::new(10, 1, 0, 11).into())
        );
        assert_eq!(
            decode_proc_addr("000080FE00000000FF005450B6AC25FE"),
            Some(
                "fe80::5054:ff:fe25:acb6"
                    .parse::<Ipv6Addr>()
                    .unwrap()
                    .into()
            )
        );
        assert_eq!(decode_proc_addr("XYZ"), None);
        assert_eq!(decode_proc_addr("0100007"), None);
    }

    #[test]
    fn parses_only_listening_sockets_on_the_port() {
        let text = held().read("/proc/net/tcp").unwrap();
        let socks = parse_proc_net_tcp(&text, 29500);
        assert_eq!(
            socks,
            vec![ListeningSocket {
                local_address: "0.0.0.0:29500".into(),
                inode: 3141592,
            }]
        );
        // 22 is listening too, 29500's ESTABLISHED peers are not listed.
        assert_eq!(parse_proc_net_tcp(&text, 22).len(), 1);
        assert!(parse_proc_net_tcp(&text, 29501).is_empty());
        assert!(parse_proc_net_tcp("garbage\n1: zz\n", 29500).is_empty());
    }

    #[test]
    fn finds_the_torchrun_holder_in_the_fixture() {
        let found = holders(&held(), 29500);
        assert_eq!(found.len(), 2, "{found:?}");
        let v4 = &found[0];
        assert_eq!(v4.pid, Some(4242));
        assert_eq!(v4.local_address, "0.0.0.0:29500");
        assert_eq!(
            v4.command.as_deref(),
            Some(
                "/usr/bin/python3 -m torch.distributed.run --nnodes=2 --nproc-per-node=8 --master-addr=10.1.0.11 --master-port=29500 train.py"
            )
        );
        // The IPv6 listener belongs to nobody readable: kept, without a pid.
        assert_eq!(found[1].local_address, "[::]:29500");
        assert_eq!(found[1].pid, None);
        assert!(holders(&held(), 29501).is_empty());
    }

    #[test]
    fn falls_back_to_comm_when_cmdline_is_empty() {
        assert_eq!(command_of(&held(), 777).as_deref(), Some("kworker/0:1"));
        assert_eq!(command_of(&held(), 999_999), None);
    }

    #[test]
    fn a_command_line_reads_as_a_shell_user_types_it() {
        // /proc/5151/cmdline: python3 -c "<newline>import socket; ..." (issue 37).
        let c = command_of(&held(), 5151).unwrap();
        assert_eq!(c, r"python3 -c $'\nimport socket; s = socket.socket()'");
        assert!(!c.contains('\n') && !c.contains("\\u{"), "{c}");
    }

    #[test]
    fn classifies_bind_errors() {
        let e = |code| Err(io::Error::from_raw_os_error(code));
        assert_eq!(
            classify(e(libc::EADDRINUSE), false).status,
            BindStatus::InUse
        );
        assert_eq!(classify(e(libc::EACCES), false).status, BindStatus::Denied);
        assert_eq!(
            classify(e(libc::EAFNOSUPPORT), true).status,
            BindStatus::Unsupported
        );
        assert_eq!(
            classify(e(libc::EAFNOSUPPORT), false).status,
            BindStatus::Error
        );
        let other = classify(e(libc::ENOBUFS), false);
        assert_eq!(other.status, BindStatus::Error);
        assert!(other.error.is_some());
        assert_eq!(classify(Ok(()), false).status, BindStatus::Free);
    }

    #[test]
    fn a_port_held_in_this_process_is_in_use_and_a_free_one_is_suggested() {
        let Ok(listener) = TcpListener::bind("0.0.0.0:0") else {
            return; // no IPv4 at all here: nothing to test
        };
        let Ok(port) = listener.local_addr().map(|a| a.port()) else {
            return;
        };
        let facts = probe(&Root::system(), port);
        assert_eq!(facts.ipv4.status, BindStatus::InUse, "{facts:?}");
        assert!(matches!(
            facts.ipv6.status,
            BindStatus::InUse | BindStatus::Unsupported
        ));
        let suggested = facts.suggested_free.expect("a free port nearby");
        assert!(suggested > port && suggested <= port.saturating_add(SUGGEST_SPAN));
        assert!(
            facts
                .holders
                .iter()
                .any(|h| h.pid == Some(std::process::id())),
            "{:?}",
            facts.holders
        );
        drop(listener);
        let after = probe(&Root::system(), port);
        assert_eq!(after.ipv4.status, BindStatus::Free);
        assert_eq!(after.suggested_free, None);
    }

    #[test]
    fn a_child_process_holding_the_port_is_named() {
        let Some(mut child) = spawn_python_listener() else {
            eprintln!("skipped: python3 not available");
            return;
        };
        let port = read_port(&mut child);
        let facts = port.map(|p| probe(&Root::system(), p));
        let _ = child.kill();
        let _ = child.wait();
        let facts = facts.expect("child printed its port");
        assert_eq!(facts.ipv4.status, BindStatus::InUse, "{facts:?}");
        let holder = facts
            .holders
            .iter()
            .find(|h| h.pid == Some(child.id()))
            .expect("child listed as holder");
        assert!(holder.command.as_deref().unwrap_or("").contains("python3"));
    }

    fn spawn_python_listener() -> Option<std::process::Child> {
        let script = "import socket,sys,time\n\
s=socket.socket()\n\
s.bind(('0.0.0.0',0))\n\
s.listen(1)\n\
print(s.getsockname()[1],flush=True)\n\
time.sleep(30)\n";
        std::process::Command::new("python3")
            .args(["-c", script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()
    }

    fn read_port(child: &mut std::process::Child) -> Option<u16> {
        use std::io::BufRead;
        let out = child.stdout.take()?;
        let mut line = String::new();
        std::io::BufReader::new(out).read_line(&mut line).ok()?;
        line.trim().parse().ok()
    }
}

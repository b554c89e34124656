//! Issue 55, point 1: the fix `firewall.rules` prints clears its own warning. For each firewall
//! the probe reads (iptables legacy and nft, nftables, ufw), host 1 of two gets the demo's
//! firewall (the master port accepted, every other new connection from outside dropped); the
//! cluster run fails `link.unreachable` and warns `firewall.rules`; every command of the
//! warning's fix is run on host 1 as printed (its persistence into host 1's own `/etc` copy);
//! the next run passes the link and the warning is gone. firewalld needs a system D-Bus and its
//! daemon, which these namespaces do not run: its fix is judged from its rules in the unit tests.

use crate::netns::Cluster;
use std::path::Path;

#[derive(Clone, Copy, Debug)]
enum Fw {
    IptablesLegacy,
    IptablesNft,
    Nftables,
    Ufw,
}

/// A folder whose `iptables`, `iptables-save` and `iptables-restore` are the legacy tools: on
/// its PATH first, host 1 is a node whose iptables is the legacy one.
fn legacy_bin(dir: &Path) -> String {
    let bin = dir.join("legacy-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for t in ["iptables", "iptables-save", "iptables-restore"] {
        let target = format!("/usr/sbin/{}", t.replacen("iptables", "iptables-legacy", 1));
        let _ = std::os::unix::fs::symlink(target, bin.join(t));
    }
    bin.display().to_string()
}

fn sh(c: &Cluster, rank: usize, path: &str, cmd: &str) {
    let o = c.exec(rank, &["env", &format!("PATH={path}"), "sh", "-c", cmd]);
    assert!(
        o.status.success(),
        "`{cmd}` on host {rank}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The demo's firewall on `rank`, written with `fw`'s own tool.
fn demo_firewall(c: &Cluster, rank: usize, fw: Fw, path: &str) {
    let iptables = |cmd: &str| {
        sh(
            c,
            rank,
            path,
            &format!("iptables -A INPUT -p tcp --dport 29500 -j ACCEPT && {cmd}"),
        )
    };
    match fw {
        Fw::IptablesLegacy | Fw::IptablesNft => {
            iptables("iptables -A INPUT ! -i lo -p tcp --syn --dport 1024:65535 -j DROP")
        }
        Fw::Nftables => sh(
            c,
            rank,
            path,
            "nft add table ip filter && \
             nft add chain ip filter INPUT '{ type filter hook input priority 0; policy accept; }' && \
             nft add rule ip filter INPUT tcp dport 29500 accept && \
             nft add rule ip filter INPUT iifname != lo ct state new tcp dport 1024-65535 drop",
        ),
        Fw::Ufw => sh(
            c,
            rank,
            path,
            "ufw default deny incoming && ufw allow 29500/tcp && ufw --force enable",
        ),
    }
}

/// Host `rank`'s own copies of what its firewall's fix may write: `/etc/ufw`, `/etc/default`
/// and `/etc/nftables.conf` (mounted over the real ones for its commands only).
fn private_etc(c: &Cluster, rank: usize) {
    let etc = c.etc_of(rank);
    let copy = |from: &str| {
        let o = std::process::Command::new("cp")
            .args(["-a", from])
            .arg(&etc)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "cp {from}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    for d in ["/etc/ufw", "/etc/default"] {
        if Path::new(d).exists() {
            copy(d);
        }
    }
    std::fs::write(etc.join("nftables.conf"), "#!/usr/sbin/nft -f\n").unwrap();
}

fn run_and_fix(fw: Fw) {
    let tools: &[&'static str] = match fw {
        Fw::Ufw => &["ufw"],
        Fw::IptablesLegacy => &["iptables-legacy"],
        _ => &["nft"],
    };
    let Some(c) = Cluster::flat(&format!("fwfix{}", fw as u8), 2, "eth0")
        .needs(tools)
        .build()
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = match fw {
        Fw::IptablesLegacy => format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", legacy_bin(dir.path())),
        _ => "/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
    };
    private_etc(&c, 1);
    demo_firewall(&c, 1, fw, &path);
    let run = || {
        let mut p = c.preflight().timeout(4);
        p = p.env_on(1, "PATH", &path);
        p.run()
    };
    let before = run();
    let r0 = &before[0];
    let failing = |r: &crate::netns::NodeRun, id: &str| {
        r.findings(id)
            .into_iter()
            .filter(|f| f["status"] != "pass" && f["status"] != "skip")
            .count()
    };
    assert!(
        failing(r0, "link.unreachable") > 0,
        "{fw:?}: {}",
        r0.describe()
    );
    let warn: Vec<_> = r0
        .findings("firewall.rules")
        .into_iter()
        .filter(|f| f["status"] == "warn" && f["node"] == 1)
        .collect();
    let all: Vec<_> = r0.findings("firewall.rules");
    assert_eq!(warn.len(), 1, "{fw:?}: {all:?}");
    let commands: Vec<String> = warn[0]["fix"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    println!(
        "{fw:?}: firewall.rules on node1 printed:\n  {}",
        commands.join("\n  ")
    );
    let subnet = c.addr(1, "data");
    let net = format!("{}.0/24", subnet.rsplit_once('.').unwrap().0);
    assert!(
        commands.iter().any(|c| c.contains(&net)),
        "{fw:?}: the node's own network {net}: {commands:?}"
    );
    assert!(
        !commands.iter().any(|c| c.contains("<cluster-subnet>")),
        "{commands:?}"
    );
    assert!(
        !commands.iter().any(|c| c.contains("list ruleset >")),
        "never overwrites the operator's file: {commands:?}"
    );
    for cmd in &commands {
        // iptables-persistent's file, written into this test's folder (host 1 has no
        // /etc/iptables of its own).
        let cmd = cmd.replace(
            "/etc/iptables/rules.v4",
            &dir.path().join("rules.v4").display().to_string(),
        );
        sh(&c, 1, &path, &cmd);
    }
    let after = run();
    let r0 = &after[0];
    assert_eq!(
        failing(r0, "link.unreachable"),
        0,
        "{fw:?} after its fix: {}",
        r0.describe()
    );
    let still: Vec<_> = r0
        .findings("firewall.rules")
        .into_iter()
        .filter(|f| f["status"] != "pass" && f["status"] != "skip")
        .collect();
    assert!(
        still.is_empty(),
        "{fw:?}: the fix did not clear its warning: {still:?}"
    );
    if matches!(fw, Fw::Nftables) {
        let kept = std::fs::read_to_string(c.etc_of(1).join("nftables.conf")).unwrap();
        assert!(
            kept.starts_with("#!/usr/sbin/nft -f\n") && kept.contains(&net),
            "{kept}"
        );
    }
}

#[test]
fn the_iptables_nft_fix_clears_its_own_warning() {
    run_and_fix(Fw::IptablesNft);
}

#[test]
fn the_iptables_legacy_fix_clears_its_own_warning() {
    run_and_fix(Fw::IptablesLegacy);
}

#[test]
fn the_nftables_fix_clears_its_own_warning() {
    run_and_fix(Fw::Nftables);
}

#[test]
fn the_ufw_fix_clears_its_own_warning() {
    run_and_fix(Fw::Ufw);
}

//! Whether ufw and firewalld are on: ufw from its config file, firewalld from its pid file, else `firewall-cmd --state`.

use super::runner::{find_tool, run_with_timeout};
use crate::root::Root;

/// `active`/`inactive` from `/etc/ufw/ufw.conf` (`ENABLED=yes`); None when ufw is not installed.
pub(super) fn ufw_state(root: &Root) -> Option<String> {
    let conf = root.read("/etc/ufw/ufw.conf").ok()?;
    let enabled = conf.lines().any(|l| {
        let l = l.trim();
        !l.starts_with('#')
            && l.split_once('=').is_some_and(|(k, v)| {
                k.trim() == "ENABLED" && v.trim().trim_matches('"').eq_ignore_ascii_case("yes")
            })
    });
    Some(if enabled { "active" } else { "inactive" }.into())
}

/// `running` when firewalld's pid file names a live process; else `firewall-cmd --state`
/// (live system only); None when firewalld is not installed.
pub(super) fn firewalld_state(root: &Root) -> Option<String> {
    let pid = root
        .attr("/var/run/firewalld/firewalld.pid")
        .or_else(|| root.attr("/run/firewalld/firewalld.pid"));
    if let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) {
        if root.exists(format!("/proc/{pid}")) {
            return Some("running".into());
        }
    }
    if !root.is_system() {
        return root
            .exists("/usr/lib/firewalld")
            .then(|| "not running".to_string());
    }
    let cmd = find_tool("firewall-cmd")?;
    let out = run_with_timeout(&cmd, &["--state"]).ok()?;
    let state = if out.stdout.trim().is_empty() {
        out.stderr.trim()
    } else {
        out.stdout.trim()
    };
    Some(
        if state.is_empty() {
            "not running"
        } else {
            state
        }
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::firewall::probe;

    #[test]
    fn ufw_and_firewalld_state_from_files() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = Root::at(d.path());
        assert_eq!(ufw_state(&root), None);
        assert_eq!(firewalld_state(&root), None);
        std::fs::create_dir_all(d.path().join("etc/ufw")).expect("mkdir");
        std::fs::write(
            d.path().join("etc/ufw/ufw.conf"),
            "# /etc/ufw/ufw.conf\n#\n\n# Set to yes to start on boot.\nENABLED=yes\n\nLOGLEVEL=low\n",
        )
        .expect("write");
        assert_eq!(ufw_state(&root).as_deref(), Some("active"));
        std::fs::write(
            d.path().join("etc/ufw/ufw.conf"),
            "#ENABLED=yes\nENABLED=no\n",
        )
        .expect("write");
        assert_eq!(ufw_state(&root).as_deref(), Some("inactive"));
        std::fs::create_dir_all(d.path().join("var/run/firewalld")).expect("mkdir");
        std::fs::create_dir_all(d.path().join("proc/812")).expect("mkdir");
        std::fs::write(d.path().join("var/run/firewalld/firewalld.pid"), "812\n").expect("write");
        assert_eq!(firewalld_state(&root).as_deref(), Some("running"));
        let facts = probe(&root);
        assert!(facts.read_error.is_some());
        assert_eq!(facts.input, None);
    }
}

//! Whether ufw and firewalld are on: ufw from its config file, firewalld from its pid file, else `firewall-cmd --state`.

use super::runner::{find_tool, run_with_timeout};
use crate::infra::root::Root;

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

/// ufw's default policy for outgoing connections (`DEFAULT_OUTPUT_POLICY="ACCEPT"` in
/// /etc/default/ufw), lower case; None when the file or the key is missing.
pub(super) fn ufw_outgoing(root: &Root) -> Option<String> {
    let conf = root.read("/etc/default/ufw").ok()?;
    conf.lines().find_map(|l| {
        let l = l.trim();
        let (k, v) = l.split_once('=')?;
        (!l.starts_with('#') && k.trim() == "DEFAULT_OUTPUT_POLICY")
            .then(|| v.trim().trim_matches('"').to_ascii_lowercase())
    })
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
    use crate::firewall::probe::probe;

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
        assert_eq!(ufw_outgoing(&root), None);
        std::fs::create_dir_all(d.path().join("etc/default")).expect("mkdir");
        std::fs::write(
            d.path().join("etc/default/ufw"),
            "# comment\nDEFAULT_INPUT_POLICY=\"DROP\"\nDEFAULT_OUTPUT_POLICY=\"REJECT\"\n",
        )
        .expect("write");
        assert_eq!(ufw_outgoing(&root).as_deref(), Some("reject"));
        std::fs::create_dir_all(d.path().join("var/run/firewalld")).expect("mkdir");
        std::fs::create_dir_all(d.path().join("proc/812")).expect("mkdir");
        std::fs::write(d.path().join("var/run/firewalld/firewalld.pid"), "812\n").expect("write");
        assert_eq!(firewalld_state(&root).as_deref(), Some("running"));
        let facts = probe(&root);
        assert!(facts.read_error.is_some());
        assert_eq!(facts.input, None);
    }
}

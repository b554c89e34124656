//! The commands that set a sysctl now and on every boot.

/// `sysctl -w` for each setting, then a file under /etc/sysctl.d/ that keeps them.
pub fn sysctl_fix(name: &str, settings: &[(&str, String)]) -> Vec<String> {
    let mut cmds: Vec<String> = settings
        .iter()
        .map(|(k, v)| format!("sysctl -w {k}={}", shell_value(v)))
        .collect();
    let lines: Vec<String> = settings.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    cmds.push(format!(
        "printf '{}\\n' > /etc/sysctl.d/90-preflight-{name}.conf",
        lines.join("\\n")
    ));
    cmds
}

fn shell_value(v: &str) -> String {
    if v.is_empty() || v.contains(char::is_whitespace) {
        format!("\"{v}\"")
    } else {
        v.to_string()
    }
}

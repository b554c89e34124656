//! Shell words: quoting a word for a POSIX shell and an environment prefix, for every command preflight prints.

use std::collections::BTreeMap;

/// Quoting for commands and scripts: one quoter for the whole tool (`quote` here keeps a
/// newline inside the single quotes, as a script reads it; the terminal escapes it).
pub use preflight_checks::infra::shellword::{is_control, quote_verbatim as quote};

/// `KEY=value KEY2=value2` in a stable order (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, NCCL_IB_DISABLE, then the rest).
pub fn env_prefix(env: &BTreeMap<String, String>) -> String {
    const FIRST: [&str; 3] = [
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "NCCL_IB_DISABLE",
    ];
    let mut parts: Vec<String> = FIRST
        .iter()
        .filter_map(|k| env.get(*k).map(|v| format!("{k}={}", quote(v))))
        .collect();
    parts.extend(
        env.iter()
            .filter(|(k, _)| !FIRST.contains(&k.as_str()))
            .map(|(k, v)| format!("{k}={}", quote(v))),
    );
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(quote("train.py"), "train.py");
        assert_eq!(quote("--lr=0.1"), "--lr=0.1");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn env_prefix_puts_the_three_main_variables_first() {
        let mut env = BTreeMap::new();
        env.insert("NCCL_IB_HCA".to_string(), "mlx5_0:1".to_string());
        env.insert("NCCL_IB_DISABLE".to_string(), "0".to_string());
        env.insert("NCCL_SOCKET_IFNAME".to_string(), "=bond0".to_string());
        env.insert("GLOO_SOCKET_IFNAME".to_string(), "bond0".to_string());
        assert_eq!(
            env_prefix(&env),
            "NCCL_SOCKET_IFNAME==bond0 GLOO_SOCKET_IFNAME=bond0 NCCL_IB_DISABLE=0 NCCL_IB_HCA=mlx5_0:1"
        );
    }
}

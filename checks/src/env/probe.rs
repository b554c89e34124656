//! The process environment and host identity (hostname, boot id, NCCL_HOSTID).

use crate::infra::root::Root;
use std::collections::BTreeMap;

/// Prefixes and names of the variables a torchrun/NCCL job reads.
const PREFIXES: &[&str] = &[
    "NCCL_",
    "GLOO_",
    "TORCH_",
    "TORCHELASTIC_",
    "CUDA_",
    "SLURM_",
    "PREFLIGHT_",
];
const NAMES: &[&str] = &[
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "NODE_RANK",
    "NODE_NAME",
    "GROUP_RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "LD_LIBRARY_PATH",
    "UCX_NET_DEVICES",
    "USE_LIBUV",
];
/// Never copied into facts: secrets.
const SECRET: &[&str] = &["PREFLIGHT_TOKEN"];

/// The whole process environment, lossily decoded (garbage bytes never abort).
pub fn all() -> BTreeMap<String, String> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// The subset of `env` that matters to the job, without secrets.
pub fn relevant(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(k, _)| !SECRET.contains(&k.as_str()))
        .filter(|(k, _)| NAMES.contains(&k.as_str()) || PREFIXES.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Hostname, boot id and kernel release, read from /proc through `root`.
pub fn identity(root: &Root) -> (String, Option<String>, Option<String>) {
    let hostname = root
        .attr("/proc/sys/kernel/hostname")
        .or_else(|| root.attr("/etc/hostname"))
        .unwrap_or_else(|| "unknown".to_string());
    let boot_id = root.attr("/proc/sys/kernel/random/boot_id");
    let kernel = root.attr("/proc/sys/kernel/osrelease");
    (hostname, boot_id, kernel)
}

/// NCCL's host identity: `NCCL_HOSTID` when set, else hostname plus boot id.
pub fn host_id(env: &BTreeMap<String, String>, hostname: &str, boot_id: Option<&str>) -> String {
    match env
        .get("NCCL_HOSTID")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        Some(id) => id.to_string(),
        None => format!("{}{}", hostname, boot_id.unwrap_or("")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevant_keeps_job_vars_and_drops_secrets() {
        let mut env = BTreeMap::new();
        for (k, v) in [
            ("NCCL_DEBUG", "INFO"),
            ("HOME", "/root"),
            ("PREFLIGHT_TOKEN", "s3cret"),
            ("MASTER_ADDR", "10.0.0.1"),
        ] {
            env.insert(k.to_string(), v.to_string());
        }
        let r = relevant(&env);
        assert_eq!(
            r.keys().collect::<Vec<_>>(),
            vec!["MASTER_ADDR", "NCCL_DEBUG"]
        );
    }

    #[test]
    fn host_id_prefers_nccl_hostid() {
        let mut env = BTreeMap::new();
        assert_eq!(host_id(&env, "n1", Some("abc")), "n1abc");
        env.insert("NCCL_HOSTID".into(), "h7".into());
        assert_eq!(host_id(&env, "n1", Some("abc")), "h7");
    }
}

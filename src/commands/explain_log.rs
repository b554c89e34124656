//! `preflight explain --log`: a failed job's output read for its known errors, with what NCCL's
//! own log says of the transport it used.

use crate::measure::nccl::log as nccl_log;
use preflight_checks::explain_log::{self, Limits, answer};
use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::Path;

/// Reads the log (a file, or standard input for `-`) and explains it.
pub fn explain_log_file(path: &Path) -> anyhow::Result<answer::Explanation> {
    let name = path.display().to_string();
    if name == "-" {
        let stdin = std::io::stdin();
        return explain_reader(stdin.lock(), "-")
            .map_err(|e| anyhow::anyhow!("cannot read the log from standard input: {e}"));
    }
    let meta = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("cannot read {name}: {e}"))?;
    anyhow::ensure!(!meta.is_dir(), "cannot read {name}: it is a directory");
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("cannot read {name}: {e}"))?;
    explain_reader(BufReader::with_capacity(256 << 10, file), &name)
        .map_err(|e| anyhow::anyhow!("cannot read {name}: {e}"))
}

/// Streams the log once: the scanner and NCCL's INFO parser see every line.
pub fn explain_reader(
    reader: impl std::io::BufRead,
    name: &str,
) -> std::io::Result<answer::Explanation> {
    let mut nccl = nccl_log::Parser::default();
    let mut gdrdma = false;
    let scan = explain_log::scan_with(reader, Limits::default(), |line| {
        if line.contains("NCCL ") {
            nccl.line(line);
            gdrdma |= line.contains("/GDRDMA");
        }
    })?;
    let used = nccl.finish();
    let answer = answer::explain(&scan);
    let nccl = (!used.is_empty() || used.version.is_some())
        .then(|| evidence(&used, gdrdma, &answer.job.env));
    Ok(answer::Explanation {
        schema: answer::EXPLAIN_SCHEMA,
        log: name.to_string(),
        answer,
        nccl,
        hang: None,
    })
}

/// What NCCL chose, compared with what preflight would advise: a physical interface that every
/// node reaches, InfiniBand where every node has it, and the job's own NCCL settings honoured.
fn evidence(
    used: &nccl_log::NetUsed,
    gdrdma: bool,
    job_env: &BTreeMap<String, String>,
) -> answer::NcclEvidence {
    let mut notes = Vec::new();
    let mut ifaces: Vec<&str> = Vec::new();
    if used.transport == "Socket" {
        ifaces.extend(used.devices.iter().map(String::as_str));
    }
    ifaces.extend(used.oob_interface.as_deref());
    for i in ifaces {
        if preflight_checks::net::is_virtual_name(i)
            && !notes.iter().any(|n: &answer::NcclNote| n.text.contains(i))
        {
            notes.push(answer::NcclNote {
                id: preflight_checks::env::ids::SOCKET_IFNAME.as_str(),
                text: format!(
                    "NCCL used {i}, a virtual interface that other nodes usually cannot reach; \
                     preflight advises a physical interface every node reaches \
                     (`preflight cluster` on every node prints NCCL_SOCKET_IFNAME for it)"
                ),
            });
        }
    }
    let ib_warned = used.warnings.iter().any(|w| w.contains("IB"));
    if used.transport == "Socket" && ib_warned {
        notes.push(answer::NcclNote {
            id: preflight_checks::rdma::ids::PORT_DOWN.as_str(),
            text: format!(
                "NCCL fell back to NET/Socket ({}) after InfiniBand failed: {}; preflight \
                 advises NCCL_IB_DISABLE=0 only where every node has an ACTIVE port",
                used.devices.join(","),
                preflight_checks::shellword::quoted(
                    used.warnings
                        .iter()
                        .find(|w| w.contains("IB"))
                        .map_or("", |w| w.as_str())
                )
            ),
        });
    }
    if let Some(why) = nccl_log::differs_from_advice(used, job_env) {
        notes.push(answer::NcclNote {
            id: if why.contains("NCCL_IB") {
                preflight_checks::env::ids::IB_DISABLE.as_str()
            } else {
                preflight_checks::env::ids::SOCKET_IFNAME.as_str()
            },
            text: format!("{why} (the job's own setting, as NCCL logged it)"),
        });
    }
    answer::NcclEvidence {
        version: used.version.clone(),
        transport: used.transport.clone(),
        devices: used.devices.clone(),
        oob_interface: used.oob_interface.clone(),
        paths: used.paths.clone(),
        gdrdma,
        ib_no_device: used.ib_no_device,
        summary: used.summary(),
        notes,
    }
}

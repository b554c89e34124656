//! `preflight explain ID` / `--list`: looks the id up in the finding catalog.
//! `preflight explain --log FILE`: names the known errors in a failed job's output, their
//! causes and the commands that confirm them, with what NCCL's log says about its network.

use super::Outcome;
use crate::cli::ExplainFormat;
use crate::config::ExplainJob;
use crate::measure::nccl::log as nccl_log;
use preflight_checks::catalog;
use preflight_checks::explain_log::{self, Limits, answer};
use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::Path;

/// The entry or the list; an unknown id is an error (exit 2) naming the closest ids. A log
/// that cannot be read is an error too; a log with no known error is an answer.
pub fn explain(job: &ExplainJob) -> anyhow::Result<Outcome> {
    match job {
        ExplainJob::List => Ok(Outcome::ExplainList),
        ExplainJob::One(id) => catalog::get(id)
            .map(Outcome::Explain)
            .ok_or_else(|| anyhow::anyhow!("{}", unknown_id_message(id))),
        ExplainJob::Log { path, format } => Ok(Outcome::ExplainLog(
            Box::new(explain_log_file(path)?),
            *format == ExplainFormat::Json,
        )),
        ExplainJob::Hang(h) => Ok(Outcome::ExplainLog(
            Box::new(super::hang::explain(h)?),
            h.format == ExplainFormat::Json,
        )),
    }
}

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
                id: "env.socket-ifname",
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
            id: "ib.port-down",
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
                "env.ib-disable"
            } else {
                "env.socket-ifname"
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

/// What to say about an id the catalog does not know.
pub fn unknown_id_message(id: &str) -> String {
    let near = catalog::closest(id, 5);
    let hint = if near.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", near.join(", "))
    };
    format!(
        "unknown finding id {}{hint} (`preflight explain --list` lists every id)",
        preflight_checks::shellword::quoted(id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_id_suggests_the_closest() {
        let m = unknown_id_message("port.inuse");
        assert!(m.contains("did you mean port.in-use"), "{m}");
        assert!(!unknown_id_message("qqqqqqqqqq").contains("did you mean"));
    }

    fn fixture(name: &str) -> answer::Explanation {
        let path = format!(
            "{}/tests/fixtures/explain-logs/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        explain_log_file(Path::new(&path)).unwrap()
    }

    #[test]
    fn explain_log_reads_nccls_choice_beside_the_error() {
        let e = fixture("nccl-ib-completion-error.log");
        assert_eq!(e.answer.errors[0].signature, "nccl.ib-completion-error");
        let n = e.nccl.expect("NCCL evidence");
        assert_eq!(n.transport, "IB");
        assert_eq!(n.devices, ["mlx5_0:1"]);
        assert!(n.gdrdma);
        assert_eq!(n.version.as_deref(), Some("2.28.9+cuda12.9"));
    }

    #[test]
    fn explain_log_notes_a_socket_fallback_after_ib_failed() {
        let text = "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n\
                    h:1:1 [0] transport/net_ib.cc:400 NCCL WARN NET/IB : Unable to open device mlx5_0\n\
                    h:1:1 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>\n\
                    h:1:1 [0] NCCL INFO Using network Socket\n";
        let e = explain_reader(text.as_bytes(), "-").unwrap();
        let n = e.nccl.unwrap();
        let ids: Vec<&str> = n.notes.iter().map(|x| x.id).collect();
        assert_eq!(ids, ["env.socket-ifname", "ib.port-down"], "{:?}", n.notes);
    }

    #[test]
    fn a_missing_log_is_an_error() {
        let err = explain_log_file(Path::new("/nonexistent/job.log")).unwrap_err();
        assert!(
            err.to_string().contains("cannot read /nonexistent/job.log"),
            "{err}"
        );
        assert!(explain_log_file(Path::new("/")).is_err());
    }
}

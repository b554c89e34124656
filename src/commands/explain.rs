//! `preflight explain ID` / `--list`: looks the id up in the finding catalog, then among the
//! errors `--log` names (its signatures and the job's own faults).
//! `preflight explain --log FILE`: names the known errors in a failed job's output, their
//! causes and the commands that confirm them, with what NCCL's log says about its network.

use super::Outcome;
use super::explain_log::explain_log_file;
use crate::cli::ExplainFormat;
use crate::config::ExplainJob;
use preflight_checks::catalog;
use preflight_checks::explain_log::{signatures, signatures_sources};

/// The entry or the list; an unknown id is an error (exit 2) naming the closest ids. A log
/// that cannot be read is an error too; a log with no known error is an answer.
pub fn explain(job: &ExplainJob) -> anyhow::Result<Outcome> {
    match job {
        ExplainJob::List => Ok(Outcome::ExplainList),
        ExplainJob::Coverage { json } => Ok(Outcome::ExplainCoverage(*json)),
        ExplainJob::One { id, root } => catalog::get(id)
            .map(|e| Outcome::Explain(e, this_host(e, root)))
            .or_else(|| signatures::get(id).map(Outcome::ExplainSignature))
            .or_else(|| signatures_sources::job(id).map(Outcome::ExplainJobCause))
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

/// For an entry about this host's own setup (`net.hostname-loopback`: its /etc/hosts line),
/// this host's finding, so the entry names what this host has rather than a typical layout.
fn this_host(
    e: &catalog::Entry,
    root: &std::path::Path,
) -> Option<preflight_checks::model::Finding> {
    let id = preflight_checks::sys::ids::HOSTNAME_LOOPBACK;
    if e.id != id {
        return None;
    }
    let facts = crate::runtime::node::probe_facts(
        &preflight_checks::root::Root::at(root),
        crate::placement::DEFAULT_MASTER_PORT,
        true,
        crate::runtime::seams::real().as_ref(),
    );
    preflight_checks::sys::check(&facts, &Default::default())
        .into_iter()
        .find(|f| f.id == id)
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
    use crate::commands::explain_log::explain_reader;
    use preflight_checks::explain_log::answer;
    use std::path::Path;

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

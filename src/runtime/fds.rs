//! File descriptors for a run of `nnodes`: rank 0 holds a socket per node, and every node a
//! bounded window of connects plus its listeners. The soft limit is raised toward the hard one
//! when the run needs more, and a limit that stays too low is said before the run, not
//! discovered as "Too many open files" halfway.

use crate::runtime::dial::CONNECT_WINDOW;
use crate::transport::gate::MAX_SERVED;

/// Descriptors a node of a cluster of `nnodes` may hold at once: the coordinator's member
/// sockets (rank 0), the dial window and the connections its listeners serve (per listener),
/// and room for files, pipes and the NCCL worker.
pub fn needed(nnodes: u32, rank0: bool, listeners: usize) -> u64 {
    let members = if rank0 { nnodes as u64 * 2 } else { 0 };
    members + CONNECT_WINDOW as u64 * 2 + (listeners.max(1) * (MAX_SERVED + 2)) as u64 + 128
}

/// Raises the soft `RLIMIT_NOFILE` to `need` (at most the hard limit); says why when it cannot.
pub fn ensure(need: u64) -> Result<u64, String> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!(
            "cannot read the open-file limit: {}",
            std::io::Error::last_os_error()
        ));
    }
    // What the job's own workers will get is this limit, not the one raised here.
    preflight_checks::probe::scale::note_started_nofile(
        (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur),
    );
    if lim.rlim_cur >= need {
        return Ok(lim.rlim_cur);
    }
    let want = need.min(lim.rlim_max);
    let raised = libc::rlimit {
        rlim_cur: want,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we own; raising the soft limit up to the hard one needs no privilege.
    if want > lim.rlim_cur && unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        lim.rlim_cur = want;
    }
    if lim.rlim_cur >= need {
        Ok(lim.rlim_cur)
    } else {
        Err(format!(
            "this run may need {need} open files but the limit is {} (hard {}): raise it with `ulimit -n {need}` (or LimitNOFILE= in the service, or Slurm's PropagateResourceLimits) before starting preflight",
            lim.rlim_cur, lim.rlim_max
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_need_grows_linearly_and_a_modest_need_is_met() {
        assert!(needed(4096, true, 2) > needed(1024, true, 2));
        assert_eq!(needed(4096, false, 2), needed(8, false, 2));
        assert!(ensure(64).is_ok());
        let e = ensure(u64::MAX / 2).unwrap_err();
        assert!(e.contains("ulimit -n"), "{e}");
    }
}

//! The local group's detection, files and verdicts, with real processes and files.

use super::*;
use crate::cleanup;
use crate::runtime::group_files::GroupFiles;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn group_in(dir: &Path, local_rank: u32) -> LocalGroup {
    LocalGroup {
        local_rank,
        local_world_size: 2,
        launcher: Launcher::Slurm,
        host: "node2".into(),
        node_index: Some(1),
        vars: [("SLURM_LOCALID".to_string(), local_rank.to_string())].into(),
        base: dir.join(format!("{PREFIX}{}-test", current_uid())),
        agent_pid: std::os::unix::process::parent_id(),
    }
}

fn quick() -> Limits {
    Limits {
        claim_wait: Duration::from_millis(300),
        total: Duration::from_secs(5),
        poll: Duration::from_millis(10),
    }
}

/// A pid whose process has ended and been reaped.
fn dead_proc() -> Proc {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = child.id();
    let start = proc_start(pid).unwrap_or(1);
    child.wait().expect("wait");
    Proc { pid, start }
}

#[test]
fn detects_torchrun_local_ranks_only() {
    let g = detect(&env(&[
        ("TORCHELASTIC_RUN_ID", "job1"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "4"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!((g.local_rank, g.local_world_size), (1, 4));
    assert!(
        g.base
            .to_string_lossy()
            .starts_with(&format!("/tmp/{PREFIX}{}-", current_uid()))
    );
    // Not torchrun, alone on the node, or no LOCAL_RANK: no group.
    assert_eq!(detect(&env(&[("LOCAL_RANK", "1")])).unwrap(), None);
    let alone = [
        ("GROUP_RANK", "0"),
        ("LOCAL_RANK", "0"),
        ("LOCAL_WORLD_SIZE", "1"),
    ];
    assert_eq!(detect(&env(&alone)).unwrap(), None);
    assert_eq!(detect(&env(&[("LOCAL_WORLD_SIZE", "2")])).unwrap(), None);
    // Garbage is named.
    let e = detect(&env(&[("LOCAL_WORLD_SIZE", "2"), ("LOCAL_RANK", "x")])).unwrap_err();
    assert!(e.to_string().contains("LOCAL_RANK=\"x\""), "{e}");
    let e = detect(&env(&[("LOCAL_WORLD_SIZE", "2"), ("LOCAL_RANK", "2")])).unwrap_err();
    assert!(
        e.to_string().contains(
            "local rank 2 (LOCAL_RANK) is not below the node's 2 tasks (LOCAL_WORLD_SIZE)"
        ),
        "{e}"
    );
}

#[test]
fn key_changes_with_agent_and_run() {
    let agent = |pid, start| Proc { pid, start };
    let k = group_key(1000, agent(42, 777), "0 job");
    assert!(k.starts_with("1000-42-777-"), "{k}");
    assert_ne!(k, group_key(1000, agent(42, 778), "0 job"));
    assert_ne!(k, group_key(1000, agent(42, 777), "1 job"));
    assert_eq!(k, group_key(1000, agent(42, 777), "0 job"));
}

#[test]
fn detects_slurm_and_mpi_groups_keyed_by_run_and_host() {
    let slurm = |localid: &str, step: &str| {
        env(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", step),
            ("SLURM_LOCALID", localid),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "4(x3)"),
        ])
    };
    let a = detect(&slurm("0", "0")).unwrap().unwrap();
    let b = detect(&slurm("3", "0")).unwrap().unwrap();
    let c = detect(&slurm("3", "1")).unwrap().unwrap();
    assert_eq!(
        (a.launcher, a.local_rank, a.local_world_size),
        (Launcher::Slurm, 0, 4)
    );
    assert_eq!(b.local_rank, 3);
    // Every task of one step on one node meets in one place; the next step elsewhere.
    assert_eq!(a.base, b.base);
    assert_ne!(a.base, c.base);
    assert_eq!(a.host, hostname());
    let m = detect(&env(&[
        ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!((m.launcher, m.local_rank), (Launcher::OpenMpi, 2));
    let e = detect(&env(&[
        ("PMI_LOCAL_RANK", "1"),
        ("MPI_LOCALRANKID", "1"),
        ("MPI_LOCALNRANKS", "2"),
    ]))
    .unwrap_err();
    assert!(e.to_string().contains("PMI_LOCAL_SIZE is missing"), "{e}");
    let f = layout_finding(&e, Some(2));
    assert_eq!(
        (f.id.as_str(), f.status, f.node),
        (TASKS_PER_NODE.as_str(), Status::Fail, Some(2))
    );
    assert_eq!(
        f.evidence["variables"],
        "MPI_LOCALNRANKS=2 MPI_LOCALRANKID=1 PMI_LOCAL_RANK=1"
    );
    let fix = f.fix.unwrap();
    assert_eq!(
        fix.commands,
        vec!["mpiexec -ppn 1 preflight cluster --hosts HOSTLIST"]
    );
}

#[test]
fn the_launchers_process_is_found_among_the_ancestors() {
    // This test runs under cargo's test harness: its parent chain holds no slurmstepd.
    assert_eq!(launcher_daemon(&["slurmstepd"]), None);
    let parent = std::os::unix::process::parent_id();
    let comm = std::fs::read_to_string(format!("/proc/{parent}/comm")).unwrap();
    let found = launcher_daemon(&[comm.trim()]).unwrap();
    assert_eq!(found.pid, parent);
}

#[test]
fn a_second_leader_and_a_duplicate_rank_are_named_and_reach_the_leader() {
    let dir = tempfile::tempdir().unwrap();
    let leader = group_in(dir.path(), 0);
    let _files = leader.claim().unwrap();
    // Another live process already holds the claim (this test's process is the leader;
    // a child stands in for a second task that also says local rank 0).
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let op = Proc {
        pid: other.id(),
        start: proc_start(other.id()).unwrap(),
    };
    std::fs::remove_file(leader.leader_file()).unwrap();
    std::fs::write(leader.leader_file(), format!("{} {}\n", op.pid, op.start)).unwrap();
    match leader.claim() {
        Err(JoinError::Taken { rank: 0, other_pid }) => assert_eq!(other_pid, op.pid),
        other => panic!("{other:?}"),
    }
    // A dead holder is an earlier, finished claim: replaced.
    other.kill().unwrap();
    other.wait().unwrap();
    assert!(leader.claim().is_ok());
    // Two followers with one local rank: the second live one is refused.
    let f = group_in(dir.path(), 1);
    f.register().unwrap();
    assert!(
        f.register().is_ok(),
        "the same process registering again is itself"
    );
    std::fs::write(
        f.task_file(1),
        format!(
            "{} {}\n",
            std::os::unix::process::parent_id(),
            proc_start(std::os::unix::process::parent_id()).unwrap()
        ),
    )
    .unwrap();
    assert!(matches!(
        f.register(),
        Err(JoinError::Taken { rank: 1, .. })
    ));
    f.note_conflict("two tasks on node2 claim local rank 1");
    assert_eq!(leader.missing_followers(Duration::ZERO), Vec::<u32>::new());
    let finding = leader
        .mismatch_finding(leader.conflict().as_deref(), &[], Some(1))
        .unwrap();
    assert!(
        finding
            .summary
            .contains("two tasks on node2 claim local rank 1"),
        "{}",
        finding.summary
    );
    assert!(!finding.summary.contains("firewall"));
}

#[test]
fn followers_that_never_start_are_missing_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = group_in(dir.path(), 0);
    leader.local_world_size = 4;
    let _files = leader.claim().unwrap();
    group_in(dir.path(), 2).register().unwrap();
    let t = Instant::now();
    assert_eq!(
        leader.missing_followers(Duration::from_millis(300)),
        vec![1, 3]
    );
    assert!(t.elapsed() < Duration::from_secs(3));
    let f = leader.mismatch_finding(None, &[1, 3], Some(0)).unwrap();
    assert!(
        f.summary
            .contains("announce 4 tasks on node2, but local ranks 1, 3 never started"),
        "{}",
        f.summary
    );
    assert!(leader.mismatch_finding(None, &[], Some(0)).is_none());
}

#[test]
fn reads_its_own_start_time_and_sees_itself_alive() {
    let me = own_proc();
    assert!(me.start > 0);
    assert!(is_alive(me));
    assert!(!is_alive(Proc {
        start: me.start + 1,
        ..me
    }));
    assert!(!is_alive(dead_proc()));
}

#[test]
fn follower_gets_the_leaders_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let leader = group_in(dir.path(), 0);
    let _files = leader.claim().unwrap();
    let follower = group_in(dir.path(), 1);
    let line_of = follower.clone();
    let waiter = std::thread::spawn(move || follower.follow(quick()));
    std::thread::sleep(Duration::from_millis(50));
    leader.publish(1, "fail").unwrap();
    let verdict = waiter.join().unwrap().unwrap();
    assert_eq!((verdict.code, verdict.status.as_str()), (1, "fail"));
    let line = line_of.verdict_line(&verdict);
    assert!(
        line.starts_with("node2 task 1: same verdict as task 0: fail (exit code 1;"),
        "{line}"
    );
}

#[test]
fn an_exit_file_from_another_leader_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let g = group_in(dir.path(), 1);
    let dead = dead_proc();
    // The claim names this (live) process; the exit file was written by someone else.
    let me = own_proc();
    std::fs::write(g.leader_file(), format!("{} {}\n", me.pid, me.start)).unwrap();
    std::fs::write(g.exit_file(), format!("0 {} {}\n", dead.pid, dead.start)).unwrap();
    let e = g
        .follow(Limits {
            total: Duration::from_millis(200),
            ..quick()
        })
        .unwrap_err();
    assert!(e.to_string().contains("still running"), "{e}");
}

#[test]
fn a_leader_that_died_silently_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let g = group_in(dir.path(), 1);
    let dead = dead_proc();
    std::fs::write(g.leader_file(), format!("{} {}\n", dead.pid, dead.start)).unwrap();
    let t = Instant::now();
    let e = g.follow(quick()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2));
    let s = e.to_string();
    assert!(s.contains(&format!("pid {}", dead.pid)), "{s}");
    assert!(s.contains("without reporting its exit code"), "{s}");
}

#[test]
fn the_claim_registers_both_files_for_an_interrupted_leader() {
    let dir = tempfile::tempdir().unwrap();
    let g = group_in(dir.path(), 0);
    let files = g.claim().unwrap();
    assert!(g.leader_file().is_file());
    assert_eq!(
        files.entries(),
        vec![
            cleanup::Undo::Path(g.leader_file()),
            cleanup::Undo::Path(g.exit_file())
        ]
    );
    g.publish(0, "pass").unwrap();
    // Dropped after the publication: the files stay for the followers.
    drop(files);
    assert!(g.leader_file().is_file() && g.exit_file().is_file());
}

#[test]
fn a_leader_whose_file_vanished_is_judged_by_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let g = group_in(dir.path(), 1);
    let mut leader = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let pid = leader.id();
    let start = proc_start(pid).expect("start time");
    std::fs::write(g.leader_file(), format!("{pid} {start}\n")).unwrap();
    let file = g.leader_file();
    let follower = std::thread::spawn(move || g.follow(quick()));
    std::thread::sleep(Duration::from_millis(100));
    // As an interrupted leader does: remove the file, then exit.
    std::fs::remove_file(&file).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    leader.kill().unwrap();
    leader.wait().unwrap();
    let t = Instant::now();
    let e = follower.join().unwrap().unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(
        e.to_string()
            .contains(&format!("local rank 0 (pid {pid}) ended without reporting")),
        "{e}"
    );
}

#[test]
fn without_the_launchers_process_an_old_leader_is_an_earlier_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = group_in(dir.path(), 1);
    // pid 1 started at boot, long before this test: a leader of an earlier run.
    let init = Proc {
        pid: 1,
        start: proc_start(1).unwrap(),
    };
    if own_proc().start <= init.start + 120 * 100 {
        eprintln!("pid 1 started under 2 minutes ago; nothing to tell apart");
        return;
    }
    std::fs::write(g.leader_file(), format!("1 {}\n", init.start)).unwrap();
    std::fs::write(g.exit_file(), format!("0 1 {}\n", init.start)).unwrap();
    // With the launcher's process in the key the name is this run's: the code is read.
    assert_eq!(g.follow(quick()).unwrap().code, 0);
    g.agent_pid = 0;
    let e = g.follow(quick()).unwrap_err();
    assert!(e.to_string().contains("no local rank 0"), "{e}");
}

#[test]
fn no_leader_at_all_ends_after_the_claim_wait() {
    let dir = tempfile::tempdir().unwrap();
    let e = group_in(dir.path(), 1).follow(quick()).unwrap_err();
    assert!(e.to_string().contains("no local rank 0"), "{e}");
    assert!(e.to_string().contains("exec preflight"), "{e}");
    assert!(
        e.to_string()
            .starts_with("node2 task 1: no local rank 0 of srun"),
        "{e}"
    );
}

#[test]
fn files_of_finished_agents_are_removed_and_live_ones_kept() {
    let dir = tempfile::tempdir().unwrap();
    let uid = current_uid();
    let dead = dead_proc();
    let me = own_proc();
    let stale = dir.path().join(format!(
        "{PREFIX}{uid}-{}-{}-abc.exit",
        dead.pid, dead.start
    ));
    let live = dir
        .path()
        .join(format!("{PREFIX}{uid}-{}-{}-abc.exit", me.pid, me.start));
    let other = dir.path().join("unrelated.txt");
    for f in [&stale, &live, &other] {
        std::fs::write(f, "0 1 1\n").unwrap();
    }
    remove_finished_runs(dir.path());
    assert!(!stale.exists());
    assert!(live.exists());
    assert!(other.exists());
}

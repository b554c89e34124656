//! The parent side against fake workers (shell scripts speaking the protocol); no GPU needed.

use super::*;

fn fake() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-worker/fake-worker.sh")
}

fn job(first_rank: u32, mode: &str, timeout_s: u64) -> NcclJob {
    NcclJob {
        nranks: 2,
        first_rank,
        gpus: 1,
        sizes: vec![1024, 1 << 20],
        warmup: 1,
        iters: 2,
        env: BTreeMap::from([
            ("FAKE_MODE".to_string(), mode.to_string()),
            ("NCCL_SOCKET_IFNAME".to_string(), "eth0".to_string()),
        ]),
        timeout: Duration::from_secs(timeout_s),
        lib: None,
        program: Some(fake()),
    }
}

fn id_hex() -> String {
    "cd".repeat(128)
}

#[test]
fn success_parses_rows_and_the_net_from_the_log() {
    let real = libdir::TempDir::new().expect("tmp");
    let lib = real.path().join("libnccl.so.2");
    std::fs::write(&lib, b"x").expect("write");
    let mut j = job(0, "ok", 20);
    j.lib = Some(lib);
    let mut w = start(&j).expect("start");
    let id = w.unique_id(Duration::from_secs(10)).expect("id");
    assert_eq!(id.len(), 256);
    w.give_id(&id).expect("give");
    let out = w.finish().expect("finish");
    assert_eq!(
        out.rows,
        vec![
            RankRow {
                bytes: 1024,
                time_us: 8.5,
                wrong: 0
            },
            RankRow {
                bytes: 1 << 20,
                time_us: 1055.5,
                wrong: 0
            },
        ]
    );
    assert_eq!(out.net.as_deref(), Some("NET/Socket eth0"));
    let used = out.net_used.expect("parsed");
    assert_eq!(used.version.as_deref(), Some("2.21.5+cuda12.4"));
    assert_eq!(differs_from_advice(&used, &j.env), None);
    assert!(
        out.log_excerpt
            .iter()
            .any(|l| l.contains("Using network Socket"))
    );
    // The fake logs this only when LD_LIBRARY_PATH's first dir held the libnccl.so link.
    let text = out.log_excerpt.join("\n");
    assert!(!text.is_empty());
}

#[test]
fn libnccl_link_is_first_in_ld_library_path() {
    let real = libdir::TempDir::new().expect("tmp");
    let lib = real.path().join("libnccl.so.2");
    std::fs::write(&lib, b"x").expect("write");
    let mut j = job(1, "ok", 20);
    j.lib = Some(lib);
    let mut w = start(&j).expect("start");
    w.give_id(&id_hex()).expect("give");
    let text = w.read_logs_after_finish_for_test();
    assert!(text.contains("fake: libnccl.so link found"), "{text}");
}

impl Worker {
    /// Waits for the end, then returns the raw log (the temp dir lives as long as the worker).
    fn read_logs_after_finish_for_test(mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.done {
            match self.next_event(deadline) {
                Ok(Event::Done) => self.done = true,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.read_logs()
    }
}

#[test]
fn a_missing_library_is_reported_before_spawning() {
    let mut j = job(0, "ok", 5);
    j.lib = Some(PathBuf::from("/nonexistent/libnccl.so.2"));
    match start(&j) {
        Err(NcclError::LibraryMissing(m)) => {
            assert!(m.contains("/nonexistent/libnccl.so.2"), "{m}")
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("started without a library"),
    }
}

#[test]
fn a_hung_worker_is_killed_by_the_watchdog_in_time() {
    let mut w = start(&job(1, "hang", 2)).expect("start");
    let t0 = Instant::now();
    w.give_id(&id_hex()).ok();
    let err = w.finish().expect_err("must time out");
    let took = t0.elapsed();
    // The 2 s watchdog plus slack for a loaded 2-core machine; a missed kill would hang for minutes.
    assert!(took < Duration::from_secs(5), "took {took:?}");
    match &err {
        NcclError::TimedOut { after_s, phase, .. } => {
            assert!(*after_s >= 2, "{err}");
            assert!(phase.contains("init"), "{phase}");
        }
        other => panic!("wrong error {other}"),
    }
    assert!(err.to_string().contains("killed after 2 s"), "{err}");
}

#[test]
fn a_worker_hung_in_a_child_process_is_killed_with_its_group() {
    // The fake's `sleep` holds stdout open; only a group kill ends the read.
    let mut w = start(&job(1, "hang-init", 1)).expect("start");
    let t0 = Instant::now();
    w.give_id(&id_hex()).expect("give");
    let err = w.finish().expect_err("must time out");
    assert!(
        // The 1 s watchdog plus slack for a loaded machine; without the group kill it hangs.
        t0.elapsed() < Duration::from_secs(4),
        "took {:?}",
        t0.elapsed()
    );
    match err {
        NcclError::TimedOut { phase, .. } => assert_eq!(phase, "init"),
        other => panic!("wrong error {other}"),
    }
}

#[test]
fn garbage_before_the_id_is_an_error() {
    let mut w = start(&job(0, "garbage", 30)).expect("start");
    let err = w.unique_id(Duration::from_secs(5)).expect_err("garbage");
    assert!(
        matches!(err, NcclError::Garbage { ref line, .. } if line.contains("not the protocol")),
        "{err}"
    );
}

#[test]
fn an_aborting_worker_is_reported_as_crashed_with_stderr_and_nccl_warnings() {
    let mut w = start(&job(1, "abort", 20)).expect("start");
    w.give_id(&id_hex()).expect("give");
    let err = w.finish().expect_err("crash");
    match &err {
        NcclError::Crashed { how, evidence, .. } => {
            assert!(how.contains("signal 6") && how.contains("SIGABRT"), "{how}");
            assert!(
                evidence
                    .stderr
                    .iter()
                    .any(|l| l.contains("unhandled system error")),
                "{err}"
            );
            assert!(
                evidence
                    .nccl_warnings
                    .iter()
                    .any(|l| l.contains("shutdown")),
                "{err}"
            );
        }
        other => panic!("wrong error {other}"),
    }
}

#[test]
fn a_reported_error_names_what_failed_and_the_nccl_warning() {
    let mut w = start(&job(1, "error", 20)).expect("start");
    w.give_id(&id_hex()).expect("give");
    let err = w.finish().expect_err("error");
    match &err {
        NcclError::Failed {
            message,
            phase,
            evidence,
        } => {
            assert!(message.starts_with("ncclCommInitRank"), "{message}");
            assert_eq!(phase, "init");
            assert!(
                evidence
                    .nccl_warnings
                    .iter()
                    .any(|w| w.contains("Connection refused")),
                "{err}"
            );
        }
        other => panic!("wrong error {other}"),
    }
}

#[test]
fn garbage_and_overlong_lines_are_errors_not_panics() {
    for mode in ["garbage", "long-line"] {
        let mut w = start(&job(1, mode, 20)).expect("start");
        let _ = w.give_id(&id_hex());
        let err = w.finish().expect_err("garbage");
        assert!(matches!(err, NcclError::Garbage { .. }), "{mode}: {err}");
    }
}

/// The worker printed garbage and exited before the id was handed over: give_id finds it gone
/// and reads how it ended; finish() tells the same, not "did not exit" (a race that failed CI).
#[test]
fn a_worker_gone_before_the_id_is_told_the_same_by_give_id_and_finish() {
    let mut w = start(&job(1, "garbage", 20)).expect("start");
    std::thread::sleep(Duration::from_millis(500));
    let given = w.give_id(&id_hex());
    let finished = w.finish().expect_err("garbage");
    assert!(matches!(finished, NcclError::Garbage { .. }), "{finished}");
    if let Err(e) = given {
        assert_eq!(e, finished);
    }
}

#[test]
fn unique_id_travels_from_rank0_to_rank1_through_the_api() {
    let mut w0 = start(&job(0, "echo-id", 20)).expect("start 0");
    let mut w1 = start(&job(1, "echo-id", 20)).expect("start 1");
    assert!(matches!(
        w1.unique_id(Duration::from_millis(10)),
        Err(NcclError::Usage(_))
    ));
    let hex = w0.unique_id(Duration::from_secs(10)).expect("id");
    w1.give_id(&hex).expect("give 1");
    w0.give_id(&hex).expect("give 0");
    let r0 = w0.finish().expect("finish 0");
    let r1 = w1.finish().expect("finish 1");
    // echo-id reports the first 4 id bytes (rank 0's fake pid) as time_us: rank 1 got rank 0's id.
    let want = u32::from_str_radix(&hex[..8], 16).expect("hex") as f64 + 0.5;
    assert_eq!(r1.rows[0].time_us, want);
    assert_eq!(r0.rows[0].time_us, want);
}

#[test]
fn bad_ids_and_double_give_are_usage_errors() {
    let mut w = start(&job(1, "ok", 20)).expect("start");
    assert!(matches!(w.give_id("zz"), Err(NcclError::Usage(_))));
    w.give_id(&id_hex()).expect("give");
    assert!(matches!(w.give_id(&id_hex()), Err(NcclError::Usage(_))));
    assert_eq!(w.finish().expect("finish").rows.len(), 2);
}

#[test]
fn a_missing_program_is_a_spawn_error() {
    let mut j = job(0, "ok", 5);
    j.program = Some(PathBuf::from("/nonexistent/worker"));
    assert!(matches!(start(&j), Err(NcclError::Spawn { .. })));
}

#[test]
fn sizes_parse_with_suffixes() {
    use crate::measure::sizes::parse_size;
    assert_eq!(parse_size("1048576"), Ok(1 << 20));
    assert_eq!(parse_size("64K"), Ok(64 << 10));
    assert_eq!(parse_size("1M"), Ok(1 << 20));
    assert_eq!(parse_size("2GiB"), Ok(2 << 30));
    assert_eq!(parse_size("256MB"), Ok(256 << 20));
    for bad in ["", "0", "M", "-1", "1T", "99999999999999999999G"] {
        assert!(parse_size(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn availability_needs_gpus_and_a_loadable_library() {
    let mut facts = NodeFacts::default();
    assert!(available(&facts).unwrap_err().contains("no GPU"));
    facts.gpu.gpus.push(Default::default());
    assert!(available(&facts).unwrap_err().contains("pip install"));
    let tmp = libdir::TempDir::new().expect("tmp");
    let lib = tmp.path().join("libnccl.so.2");
    std::fs::write(&lib, b"x").expect("write");
    facts.nccl.library = Some(lib.display().to_string());
    assert_eq!(available(&facts), Ok(lib.clone()));
    facts.nccl.error = Some("ncclGetVersion failed (bad ELF); version unknown".into());
    assert!(
        available(&facts)
            .unwrap_err()
            .contains("could not be loaded")
    );
    facts.nccl.error = None;
    facts.nccl.library = Some("/nonexistent/libnccl.so.2".into());
    assert!(available(&facts).unwrap_err().contains("no longer exists"));
}

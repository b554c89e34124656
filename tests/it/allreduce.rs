//! All-reduce scenarios: real `preflight cluster` processes in network namespaces run the TCP ring
//! (and the NCCL path with a fake worker), and the report's `collectives[]` and verdicts are checked.

use crate::netns::{Cluster, Net, NodeRun};
use serde_json::Value;
use std::time::{Duration, Instant};

const TIMEOUT: u64 = 20;

fn collectives(run: &NodeRun) -> Vec<&Value> {
    run.report()["collectives"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn only_finding<'a>(run: &'a NodeRun, id: &str) -> &'a Value {
    let all = run.findings(id);
    assert_eq!(all.len(), 1, "{id}: {all:#?}\n{}", run.describe());
    all[0]
}

fn tcp_result(run: &NodeRun) -> &Value {
    let all = collectives(run);
    let tcp: Vec<&&Value> = all.iter().filter(|c| c["transport"] == "tcp").collect();
    assert_eq!(tcp.len(), 1, "{all:#?}\n{}", run.describe());
    tcp[0]
}

/// Every row is verified, timed, and follows nccl-tests' definitions.
fn assert_rows_sound(c: &Value, n: usize, sizes: &[u64]) {
    let rows = c["rows"].as_array().expect("rows");
    let got: Vec<u64> = rows
        .iter()
        .map(|r| r["bytes"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(got, sizes, "{c:#}");
    for r in rows {
        assert_eq!(r["wrong"], 0, "{r}");
        let t = r["time_us"].as_f64().unwrap_or(0.0);
        let algbw = r["algbw_gb_s"].as_f64().unwrap_or(0.0);
        let busbw = r["busbw_gb_s"].as_f64().unwrap_or(0.0);
        assert!(t > 0.0 && algbw > 0.0 && busbw > 0.0, "{r}");
        let bytes = r["bytes"].as_f64().unwrap_or(0.0);
        let expect_alg = bytes / t / 1e3;
        assert!(
            (algbw - expect_alg).abs() <= 0.002 + 0.01 * expect_alg,
            "{r}"
        );
        let factor = 2.0 * (n as f64 - 1.0) / n as f64;
        assert!(
            (busbw - algbw * factor).abs() <= 0.003 + 0.01 * busbw,
            "{r}"
        );
    }
    assert_eq!(c["ranks"], n as u64, "{c:#}");
    assert_eq!(c["op"], "allreduce");
    assert!(c["error"].is_null(), "{c:#}");
}

fn ring_on(n: usize) {
    let tag = format!("ring{n}");
    let Some(c) = Cluster::flat(&tag, n, "eth0").build() else {
        return;
    };
    // 12K is 3072 floats: not a multiple of 5 ranks.
    let runs = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=tcp", "--sizes=12K:3M:4"])
        .run();
    for run in &runs {
        assert_eq!(run.exit_code, Some(0), "{}", run.describe());
        let tcp = tcp_result(run);
        assert_rows_sound(tcp, n, &[12 << 10, 48 << 10, 192 << 10, 768 << 10, 3 << 20]);
        assert_eq!(tcp["order"].as_array().map(Vec::len), Some(n), "{tcp:#}");
        assert_eq!(only_finding(run, "collective.wrong")["status"], "pass");
        let busbw = only_finding(run, "collective.busbw");
        assert!(
            busbw["status"] == "pass" || busbw["status"] == "warn",
            "{busbw:#}"
        );
    }
}

#[test]
fn tcp_ring_two_nodes() {
    ring_on(2);
}

#[test]
fn tcp_ring_five_nodes() {
    ring_on(5);
}

#[test]
fn tcp_ring_eight_nodes() {
    ring_on(8);
}

#[test]
fn tiny_size_with_fewer_elements_than_ranks_is_still_exact() {
    let Some(c) = Cluster::flat("ringtiny", 3, "eth0").build() else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=tcp", "--sizes=4:8"])
        .run();
    for run in &runs {
        assert_eq!(run.exit_code, Some(0), "{}", run.describe());
        let tcp = tcp_result(run);
        let rows = tcp["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 2, "{tcp:#}");
        assert!(rows.iter().all(|r| r["wrong"] == 0), "{tcp:#}");
    }
}

#[test]
fn a_corrupted_chunk_is_reported_as_collective_wrong() {
    let Some(c) = Cluster::flat("ringbad", 3, "eth0").build() else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=tcp", "--sizes=64K:256K"])
        .env_on(1, "PREFLIGHT_TEST_CORRUPT_ALLREDUCE", "1")
        .run();
    let r0 = &runs[0];
    assert_eq!(r0.exit_code, Some(1), "{}", r0.describe());
    let tcp = tcp_result(r0);
    let rows = tcp["rows"].as_array().expect("rows");
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["wrong"].as_u64() > Some(0)),
        "{tcp:#}"
    );
    let f = only_finding(r0, "collective.wrong");
    assert_eq!(f["status"], "fail", "{f:#}");
    assert!(
        !f["evidence"]["ranks"]
            .as_array()
            .map(Vec::is_empty)
            .unwrap_or(true),
        "{f:#}"
    );
    assert!(
        f["fix"]["commands"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{f:#}"
    );
}

#[test]
fn min_busbw_above_what_the_ring_reaches_fails() {
    let Some(c) = Cluster::flat("ringmin", 2, "eth0").build() else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=tcp", "--sizes=1M:2M", "--min-busbw=100000"])
        .run();
    for run in &runs {
        assert_eq!(run.exit_code, Some(1), "{}", run.describe());
        let f = only_finding(run, "collective.busbw");
        assert_eq!(f["status"], "fail", "{f:#}");
        assert_eq!(f["evidence"]["min_busbw_gb_s"], 100000.0, "{f:#}");
        assert_eq!(f["evidence"]["bytes"], 2 << 20, "{f:#}");
    }
}

#[test]
fn ring_on_a_shaped_link_runs_at_the_shaped_rate() {
    let Some(c) = Cluster::new("ringtbf")
        .network(Net::new("data", 1).rate("200mbit"))
        .host(crate::netns::Host::new("node0").on("data", "eth0"))
        .host(crate::netns::Host::new("node1").on("data", "eth0"))
        .build()
    else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=tcp", "--sizes=4M:4M"])
        .run();
    let r0 = &runs[0];
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    let row = &tcp_result(r0)["rows"][0];
    let busbw = row["busbw_gb_s"].as_f64().unwrap_or(0.0);
    // 200 Mbit/s = 0.025 GB/s; a 2-rank ring moves the whole buffer over each direction once.
    assert!(
        (0.015..=0.0275).contains(&busbw),
        "busbw {busbw} GB/s on a 200mbit link: {row}"
    );
    assert_eq!(only_finding(r0, "collective.busbw")["status"], "pass");
}

#[test]
fn allreduce_off_measures_nothing_and_says_so() {
    let Some(c) = Cluster::flat("ringoff", 2, "eth0").build() else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=off"])
        .run();
    let r0 = &runs[0];
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    assert!(collectives(r0).is_empty());
    let f = only_finding(r0, "collective.busbw");
    assert_eq!(f["status"], "skip");
    assert!(
        f["summary"]
            .as_str()
            .unwrap_or_default()
            .contains("--allreduce off")
    );
}

#[test]
fn bad_sizes_exit_2_before_any_rendezvous() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_preflight"))
        .args([
            "cluster",
            "--nnodes=1",
            "--sizes=256M:1M",
            "--master-port=1",
        ])
        .output()
        .expect("run preflight");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--sizes"), "{err}");
}

fn fake_worker() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nccl-worker/fake-worker.sh"
    )
    .to_string()
}

/// Runs a 2-node `--allreduce nccl` with fake GPUs and the fake NCCL worker on every node.
fn nccl_with_fakes(tag: &str, iface_on_rank1: &str) -> Option<Vec<NodeRun>> {
    let c = Cluster::flat(tag, 2, "eth0").build()?;
    let mut run = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=nccl", "--sizes=1M:4M"]);
    for rank in 0..2 {
        run = run
            .env_on(rank, "PREFLIGHT_TEST_FAKE_GPUS", "1")
            .env_on(rank, "PREFLIGHT_NCCL_WORKER", &fake_worker())
            .env_on(
                rank,
                "FAKE_IFACE",
                if rank == 1 { iface_on_rank1 } else { "eth0" },
            );
    }
    Some(run.run())
}

#[test]
fn sigint_and_sigterm_on_nodes_hung_in_nccl_init_leave_nothing_behind() {
    let Some(c) = Cluster::flat("ncclsig", 2, "eth0").build() else {
        return;
    };
    let mut run = c
        .preflight()
        .timeout(30)
        .args(&["--allreduce=nccl", "--sizes=1M"]);
    for rank in 0..2 {
        run = run
            .env_on(rank, "PREFLIGHT_TEST_FAKE_GPUS", "1")
            .env_on(rank, "PREFLIGHT_NCCL_WORKER", &fake_worker())
            .env_on(rank, "FAKE_MODE", "hang-init");
    }
    let mut running = run.start();
    // preflight, the worker and the worker's `sleep` on each host: both hang in NCCL init.
    for rank in 0..2 {
        assert!(
            running.wait_processes(rank, 3, Duration::from_secs(40)),
            "rank {rank}'s worker never hung in init"
        );
    }
    let t0 = Instant::now();
    running.signal(0, libc::SIGINT);
    running.signal(1, libc::SIGTERM);
    let runs = running.finish();
    let took = t0.elapsed();
    for (rank, code) in [(0, 130), (1, 143)] {
        let r = &runs[rank];
        assert_eq!(r.exit_code, Some(code), "{}", r.describe());
        assert!(
            r.stderr
                .contains("stopped 1 child process group(s), removed "),
            "{}",
            r.describe()
        );
    }
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // Dropping the cluster asserts that no process, socket or preflight-* file is left.
}

#[test]
fn nccl_path_with_fake_workers_exchanges_the_id_and_reports_rows_and_net() {
    let Some(runs) = nccl_with_fakes("ncclfake", "eth0") else {
        return;
    };
    let r0 = &runs[0];
    let all = collectives(r0);
    let nccl: Vec<&&Value> = all.iter().filter(|c| c["transport"] == "nccl").collect();
    assert_eq!(nccl.len(), 1, "{all:#?}\n{}", r0.describe());
    let c = nccl[0];
    assert!(c["error"].is_null(), "{c:#}\n{}", r0.describe());
    // The fake reports time = bytes/1000 + 7.5 us per size; the coordinator merges the two nodes.
    let rows = c["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3, "{c:#}");
    assert_eq!(rows[0]["bytes"], 1 << 20);
    assert_eq!(rows[0]["time_us"], 1055.5, "1048576 / 1000 + 7.5: {c:#}");
    assert_eq!(c["ranks"], 2, "one GPU per node: {c:#}");
    assert_eq!(c["net"], "NET/Socket eth0", "{c:#}");
    assert_eq!(c["env"]["NCCL_SOCKET_IFNAME"], "eth0", "{c:#}");
    assert_eq!(only_finding(r0, "collective.net")["status"], "pass");
    assert_eq!(only_finding(r0, "collective.wrong")["status"], "pass");
}

#[test]
fn nccl_on_another_interface_than_advised_is_flagged() {
    let Some(runs) = nccl_with_fakes("ncclnet", "eth9") else {
        return;
    };
    let r0 = &runs[0];
    let f = only_finding(r0, "collective.net");
    assert_eq!(f["status"], "warn", "{f:#}\n{}", r0.describe());
    assert!(
        f["summary"].as_str().unwrap_or_default().contains("eth9"),
        "{f:#}"
    );
}

#[test]
fn compare_env_runs_the_ring_on_the_other_network_and_keeps_the_faster_advice() {
    let built = Cluster::new("ringcmp")
        .network(Net::new("mgmt", 1).rate("100mbit"))
        .network(Net::new("data", 2));
    let built = (0..2).fold(built, |b, i| {
        b.host(
            crate::netns::Host::new(&format!("node{i}"))
                .on("mgmt", "eno1")
                .on("data", "ens2f0"),
        )
    });
    let Some(c) = built.build() else {
        return;
    };
    let runs = c
        .preflight()
        .timeout(TIMEOUT)
        .master_net("data")
        .args(&[
            "--allreduce=tcp",
            "--sizes=2M:2M",
            "--compare-env=NCCL_SOCKET_IFNAME=eno1",
        ])
        .run();
    let r0 = &runs[0];
    assert_eq!(r0.exit_code, Some(0), "{}", r0.describe());
    let all = collectives(r0);
    assert_eq!(all.len(), 2, "{all:#?}");
    let advice = all
        .iter()
        .find(|c| c["config"] == "advice")
        .expect("advice run");
    let compare = all
        .iter()
        .find(|c| c["config"] == "compare")
        .expect("compare run");
    assert!(
        advice["network"]
            .as_str()
            .unwrap_or_default()
            .contains("ens2f0"),
        "{advice:#}"
    );
    assert!(
        compare["network"]
            .as_str()
            .unwrap_or_default()
            .contains("eno1"),
        "{compare:#}"
    );
    assert_eq!(compare["env"]["NCCL_SOCKET_IFNAME"], "eno1");
    let busbw = |c: &Value| c["rows"][0]["busbw_gb_s"].as_f64().unwrap_or(0.0);
    assert!(
        busbw(advice) > 2.0 * busbw(compare),
        "{advice:#}\n{compare:#}"
    );
    let rec = r0.recommendation();
    assert_eq!(rec["env"]["NCCL_SOCKET_IFNAME"], "ens2f0", "{rec:#}");
    let reasons = rec["reasons"].to_string();
    assert!(
        reasons.contains("kept the advice") && reasons.contains("NCCL_SOCKET_IFNAME=eno1"),
        "{reasons}"
    );
}

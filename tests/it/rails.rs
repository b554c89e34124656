//! Per-rail NCCL pair tests across real `preflight cluster` processes in network namespaces
//! (issue 34): each node's RDMA inventory is a fixture sysfs tree (`PREFLIGHT_TEST_RDMA_ROOT`),
//! its GPUs are fakes with PCI addresses in that tree, and the fake NCCL worker plays the
//! per-rail children. One node's rail fails with NET/IB errors (and its port's `link_downed`
//! grows while it does): the report names that node's rail, with the fix, and the counters that
//! grew between the two snapshots.

use crate::netns::{Cluster, NodeRun};
use serde_json::Value;
use std::os::unix::fs::symlink;
use std::path::Path;

const TIMEOUT: u64 = 20;

fn fake_worker() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/nccl-worker/fake-worker.sh"
    )
    .to_string()
}

fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
    std::fs::write(p, format!("{text}\n")).expect("write");
}

fn link(base: &Path, rel: &str, target: &str) {
    let p = base.join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
    symlink(target, p).expect("symlink");
}

/// A PCI device under `pci0000:00` with its /sys/bus/pci/devices link; returns its sysfs dir.
fn pci(base: &Path, path: &[&str]) -> String {
    let dir = format!("/sys/devices/pci0000:00/{}", path.join("/"));
    std::fs::create_dir_all(base.join(dir.trim_start_matches('/'))).expect("mkdir");
    let bdf = path.last().expect("a bdf");
    link(
        base,
        &format!("/sys/bus/pci/devices/{bdf}"),
        &format!("../../../..{dir}"),
    );
    dir
}

/// One node's RDMA inventory: two PCIe switches, each with a GPU and an HCA (400 Gb/s NDR,
/// ACTIVE). GPU 0 sits beside mlx5_1 and GPU 1 beside mlx5_0, so rail 1 is mlx5_0 (NCCL's
/// mapping, not enumeration order).
fn rdma_tree(base: &Path) {
    for (gpu_path, hca_path, hca, uverbs) in [
        (
            ["0000:00:01.0", "0000:10:00.0", "0000:11:00.0"],
            ["0000:00:01.0", "0000:10:00.0", "0000:12:00.0"],
            "mlx5_1",
            1,
        ),
        (
            ["0000:00:02.0", "0000:20:00.0", "0000:21:00.0"],
            ["0000:00:02.0", "0000:20:00.0", "0000:22:00.0"],
            "mlx5_0",
            0,
        ),
    ] {
        pci(base, &gpu_path);
        let dev = pci(base, &hca_path);
        let ib = format!("{dev}/infiniband/{hca}");
        link(
            base,
            &format!("/sys/class/infiniband/{hca}"),
            &format!("../../..{ib}"),
        );
        link(base, &format!("{ib}/device"), "../..");
        link(
            base,
            &format!("{dev}/driver"),
            "../../../../../bus/pci/drivers/mlx5_core",
        );
        write(base, "/sys/module/mlx5_core/version", "24.10-1.1.4");
        write(base, &format!("{ib}/fw_ver"), "28.39.1002");
        write(base, &format!("{ib}/hca_type"), "MT4129");
        let port = format!("{ib}/ports/1");
        write(base, &format!("{port}/state"), "4: ACTIVE");
        write(base, &format!("{port}/phys_state"), "5: LinkUp");
        write(base, &format!("{port}/rate"), "400 Gb/sec (4X NDR)");
        write(base, &format!("{port}/link_layer"), "InfiniBand");
        for c in [
            "symbol_error",
            "link_error_recovery",
            "link_downed",
            "port_rcv_errors",
            "excessive_buffer_overrun_errors",
            "local_link_integrity_errors",
        ] {
            write(base, &format!("{port}/counters/{c}"), "0");
        }
        std::fs::create_dir_all(
            base.join(format!("{dev}/infiniband_verbs/uverbs{uverbs}").trim_start_matches('/')),
        )
        .expect("mkdir");
        write(base, &format!("/dev/infiniband/uverbs{uverbs}"), "");
    }
    write(base, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", "");
}

const GPU_BUSES: &str = "00000000:11:00.0,00000000:21:00.0";

fn only<'a>(run: &'a NodeRun, id: &str) -> Vec<&'a Value> {
    run.findings(id)
        .into_iter()
        .filter(|f| f["status"] != "pass")
        .collect()
}

#[test]
fn a_bad_rail_on_one_node_is_named_across_real_nodes_with_its_counters() {
    let Some(c) = Cluster::flat("rails", 3, "eth0").build() else {
        return;
    };
    let trees: Vec<tempfile::TempDir> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    for t in &trees {
        rdma_tree(t.path());
    }
    let mut run = c
        .preflight()
        .timeout(TIMEOUT)
        .args(&["--allreduce=nccl", "--sizes=1M"]);
    for (rank, t) in trees.iter().enumerate() {
        let dir = t.path().to_string_lossy().into_owned();
        run = run
            .env_on(rank, "PREFLIGHT_TEST_FAKE_GPUS", "2")
            .env_on(rank, "PREFLIGHT_TEST_FAKE_GPU_BUSES", GPU_BUSES)
            .env_on(rank, "PREFLIGHT_TEST_RDMA_ROOT", &dir)
            .env_on(rank, "PREFLIGHT_NCCL_WORKER", &fake_worker());
        if rank == 2 {
            run = run
                .env_on(rank, "FAKE_BAD_HCA", "mlx5_0")
                .env_on(rank, "FAKE_SYSFS", &dir)
                .env_on(rank, "FAKE_PEER", "10.200.0.1<43210>");
        }
    }
    let runs = run.run();
    let r0 = &runs[0];
    if let Ok(path) = std::env::var("PREFLIGHT_SAVE_RAILS_CLUSTER_REPORT") {
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(r0.report()).unwrap_or_default(),
        )
        .expect("save the report");
    }
    let host2 = r0.report()["nodes"][2]["hostname"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The rail: node 2's rail 1 (mlx5_0 beside GPU 1), confirmed by the retest, with the fix.
    let faults = only(r0, "ib.rail-fault");
    assert_eq!(faults.len(), 1, "{faults:#?}\n{}", r0.describe());
    let f = faults[0];
    assert_eq!(f["status"], "fail", "{f:#}");
    assert_eq!(f["node"], 2, "{f:#}");
    assert_eq!(
        f["subject"],
        format!("{host2} rail 1 (mlx5_0/1, GPU 1)"),
        "{f:#}"
    );
    let summary = f["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("confirmed by a retest")
            && summary.contains("NET/IB completion error from peer 10.200.0.1<43210>"),
        "{summary}"
    );
    assert_eq!(f["evidence"]["kind"], "node-rail", "{f:#}");
    assert_eq!(
        f["evidence"]["bad_with"],
        serde_json::json!([0, 1]),
        "{f:#}"
    );
    let fix = f["fix"].to_string();
    assert!(
        fix.contains(&format!("ssh {host2} ibstat mlx5_0 1"))
            && fix.contains("export NCCL_IB_HCA==mlx5_1:1"),
        "{fix}"
    );
    // The advice leaves the bad rail out.
    let hca = r0.report()["recommendation"]["env"]["NCCL_IB_HCA"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        hca.contains("mlx5_1") && !hca.contains("mlx5_0"),
        "NCCL_IB_HCA={hca}"
    );
    // The counters: node 2's mlx5_0 port went down while the children ran; the others did not.
    let grew = only(r0, "ib.counters-grew");
    assert_eq!(grew.len(), 1, "{grew:#?}\n{}", r0.describe());
    let g = grew[0];
    assert_eq!(
        (&g["status"], &g["node"]),
        (&"fail".into(), &2.into()),
        "{g:#}"
    );
    assert_eq!(g["subject"], format!("{host2} mlx5_0/1"), "{g:#}");
    let by = g["evidence"]["counters"]["link_downed"]["grew_by"]
        .as_u64()
        .unwrap_or(0);
    assert!(by >= 2, "{g:#}");
    assert!(
        r0.findings("ib.counters-grew")
            .iter()
            .any(|f| f["status"] == "pass"
                && f["summary"].as_str().unwrap_or("").contains("on 2 node(s)")),
        "{}",
        r0.describe()
    );
    // Every node got the same verdict.
    for r in &runs[1..] {
        assert_eq!(only(r, "ib.rail-fault").len(), 1, "{}", r.describe());
    }
}

#[test]
fn healthy_rails_pass_and_nodes_without_gpus_skip_with_the_reason() {
    let Some(c) = Cluster::flat("railok", 3, "eth0").build() else {
        return;
    };
    let tree = tempfile::tempdir().expect("tempdir");
    rdma_tree(tree.path());
    let dir = tree.path().to_string_lossy().into_owned();
    // Every node has the rails, nodes 0 and 1 have GPUs: their pair tests pass over NET/IB,
    // and node 2 is named as left out, with why.
    let with_gpus = |gpus: &[usize]| {
        let mut run = c
            .preflight()
            .timeout(TIMEOUT)
            .args(&["--allreduce=nccl", "--sizes=1M"]);
        for rank in 0..3 {
            run = run.env_on(rank, "PREFLIGHT_TEST_RDMA_ROOT", &dir).env_on(
                rank,
                "PREFLIGHT_NCCL_WORKER",
                &fake_worker(),
            );
        }
        for &rank in gpus {
            run = run.env_on(rank, "PREFLIGHT_TEST_FAKE_GPUS", "2").env_on(
                rank,
                "PREFLIGHT_TEST_FAKE_GPU_BUSES",
                GPU_BUSES,
            );
        }
        run.run()
    };
    let runs = with_gpus(&[0, 1]);
    let all = runs[0].findings("ib.rail-fault");
    assert_eq!(all.len(), 2, "{all:#?}\n{}", runs[0].describe());
    assert_eq!(all[0]["status"], "pass", "{:#}", all[0]);
    assert!(
        all[0]["summary"]
            .as_str()
            .unwrap_or("")
            .starts_with("2 per-rail NCCL pair tests passed"),
        "{:#}",
        all[0]
    );
    let host2 = runs[0].report()["nodes"][2]["hostname"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(all[1]["status"], "skip", "{:#}", all[1]);
    assert_eq!(all[1]["node"], 2, "{:#}", all[1]);
    let why = all[1]["summary"].as_str().unwrap_or("");
    assert!(
        why.starts_with(&format!(
            "rank 2 ({host2}) took no part in the per-rail NCCL pair tests: cannot run NCCL: no GPU visible"
        )),
        "{why}"
    );
    // With GPUs on node 0 alone the tests cannot pair anything: one skip that says why.
    let runs = with_gpus(&[0]);
    let all = runs[0].findings("ib.rail-fault");
    assert_eq!(all.len(), 1, "{all:#?}\n{}", runs[0].describe());
    assert_eq!(all[0]["status"], "skip", "{:#}", all[0]);
    let why = all[0]["summary"].as_str().unwrap_or("");
    assert!(
        why.contains("1 node(s) have GPUs with RDMA rails") && why.contains("rank 1"),
        "{why}"
    );
}

/// A rail child that hangs in NCCL init is killed by its watchdog within `--timeout`, the pair
/// is reported with the watchdog's words, the other rail still passes, every node prints its
/// report in time, and no child is left behind (the cluster's drop checks).
#[test]
fn a_rail_child_hung_in_init_is_bounded_by_the_timeout_and_leaves_nothing_behind() {
    let Some(c) = Cluster::flat("railhang", 2, "eth0").build() else {
        return;
    };
    let tree = tempfile::tempdir().expect("tempdir");
    rdma_tree(tree.path());
    let dir = tree.path().to_string_lossy().into_owned();
    let mut run = c
        .preflight()
        .timeout(8)
        .args(&["--allreduce=nccl", "--sizes=1M"]);
    for rank in 0..2 {
        run = run
            .env_on(rank, "PREFLIGHT_TEST_FAKE_GPUS", "2")
            .env_on(rank, "PREFLIGHT_TEST_FAKE_GPU_BUSES", GPU_BUSES)
            .env_on(rank, "PREFLIGHT_TEST_RDMA_ROOT", &dir)
            .env_on(rank, "PREFLIGHT_NCCL_WORKER", &fake_worker());
    }
    let started = std::time::Instant::now();
    let runs = run.env_on(1, "FAKE_HANG_HCA", "mlx5_0").run();
    let took = started.elapsed();
    for r in &runs {
        assert!(r.json.is_object(), "{}", r.describe());
    }
    let faults = only(&runs[0], "ib.rail-fault");
    assert_eq!(faults.len(), 1, "{faults:#?}\n{}", runs[0].describe());
    let f = faults[0];
    assert_eq!(f["evidence"]["kind"], "pair", "{f:#}");
    assert_eq!(f["evidence"]["rail"], 1, "{f:#}");
    let error = f["evidence"]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("the NCCL worker timed out: killed after 8 s while init"),
        "{error}"
    );
    // Two rounds (the test and its retest) of at most --timeout each, plus the rest.
    assert!(took < std::time::Duration::from_secs(40), "took {took:?}");
}

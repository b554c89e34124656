//! Issue 21: the gang preflight before a Kubeflow PyTorchJob, `preflight cluster` with no
//! placement flags in three namespace "pods" that carry exactly the variables the training
//! operator sets (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE and PET_*), the token from the Secret.

use crate::netns::Cluster;
use std::time::Duration;

#[test]
fn pytorchjob_pods_place_themselves_from_the_operators_variables() {
    let Some(c) = Cluster::flat("k8spj", 3, "eth0").build() else {
        return;
    };
    // The operator's master Service name, as every pod resolves it.
    let master = "train-master-0";
    for r in 0..3 {
        c.map_host(r, master, &c.addr(0, "data"));
    }
    let mut run = c
        .preflight()
        .no_token()
        .command(&["cluster", "--quick", "--format=json"]);
    for r in 0..3 {
        let rank = r.to_string();
        for (k, v) in [
            ("MASTER_ADDR", master),
            ("MASTER_PORT", "23456"),
            ("WORLD_SIZE", "3"),
            ("RANK", rank.as_str()),
            ("PET_MASTER_ADDR", master),
            ("PET_MASTER_PORT", "23456"),
            ("PET_NNODES", "3"),
            ("PET_NODE_RANK", rank.as_str()),
            ("PET_NPROC_PER_NODE", "1"),
            ("PREFLIGHT_TOKEN", "from-the-secret"),
        ] {
            run = run.env_on(r, k, v);
        }
    }
    let runs = run.deadline(Duration::from_secs(150)).run();
    for n in &runs {
        assert_eq!(
            n.exit_code,
            Some(0),
            "pod {}: {}\n{}",
            n.rank,
            n.stdout,
            n.stderr
        );
        let r = &n.json;
        let not_pass: Vec<String> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["status"] != "pass" && f["status"] != "skip")
            .map(|f| format!("{} {}: {}", f["status"], f["id"], f["summary"]))
            .collect();
        assert!(
            matches!(r["status"].as_str(), Some("pass" | "warn")),
            "pod {}: {not_pass:#?}",
            n.rank
        );
        assert_eq!(r["nodes"].as_array().unwrap().len(), 3);
        assert_eq!(r["recommendation"]["master_port"], 23456);
        assert_eq!(r["recommendation"]["env"]["NCCL_SOCKET_IFNAME"], "eth0");
        assert!(
            r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["id"] != "cluster.auth" || f["status"] == "pass"),
            "the Secret's token was not used"
        );
        assert!(
            n.stderr.contains(&format!("rank {} of 3", n.rank)),
            "{}",
            n.stderr
        );
    }
    println!("pod 1 said:\n{}", runs[1].stderr);
    println!("placement: {}", runs[1].json["placement"]);
}

/// examples/kubernetes/jobset.yaml's pods: JobSet's completion index is the rank; the node
/// count and the master come from the manifest's PET_NNODES and MASTER_ADDR/MASTER_PORT.
#[test]
fn jobset_pods_take_their_rank_from_the_completion_index() {
    let Some(c) = Cluster::flat("k8sjs", 3, "eth0").build() else {
        return;
    };
    let master = "train-workers-0-0.train";
    for r in 0..3 {
        c.map_host(r, master, &c.addr(0, "data"));
    }
    let mut run = c
        .preflight()
        .no_token()
        .command(&["cluster", "--quick", "--format=json"]);
    for r in 0..3 {
        let index = r.to_string();
        for (k, v) in [
            ("JOB_COMPLETION_INDEX", index.as_str()),
            ("PET_NNODES", "3"),
            ("MASTER_ADDR", master),
            ("MASTER_PORT", "29500"),
            ("PREFLIGHT_TOKEN", "from-the-secret"),
        ] {
            run = run.env_on(r, k, v);
        }
    }
    let runs = run.deadline(Duration::from_secs(150)).run();
    for n in &runs {
        assert_eq!(
            n.exit_code,
            Some(0),
            "pod {}: {}\n{}",
            n.rank,
            n.stdout,
            n.stderr
        );
        assert_eq!(n.json["nodes"].as_array().unwrap().len(), 3);
        assert!(
            n.stderr.contains(&format!("rank {} of 3", n.rank)),
            "{}",
            n.stderr
        );
        assert!(
            n.stderr.contains(&format!("master {master}:29500")),
            "{}",
            n.stderr
        );
    }
}

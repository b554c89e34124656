//! Tests of `resolve`, the layers, endpoints and hostlists.

use super::*;
use crate::cli::{Cli, Command};
use clap::Parser;

fn args(flags: &[&str]) -> PlacementFlags {
    let argv = ["preflight", "cluster"].iter().chain(flags.iter());
    match Cli::try_parse_from(argv).expect("flags parse").command {
        Command::Cluster(c) => crate::config::placement_flags(&c),
        other => panic!("not cluster: {other:?}"),
    }
}

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn me(hostname: &str, addrs: &[&str]) -> LocalIdentity {
    LocalIdentity {
        hostname: hostname.into(),
        addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
    }
}

fn nobody() -> LocalIdentity {
    me("somewhere", &[])
}

fn ok(flags: &[&str], vars: &[(&str, &str)], who: &LocalIdentity) -> Placement {
    resolve(&args(flags), &env(vars), who).unwrap_or_else(|e| panic!("{e}"))
}

fn err(flags: &[&str], vars: &[(&str, &str)], who: &LocalIdentity) -> LauncherError {
    match resolve(&args(flags), &env(vars), who) {
        Ok(p) => panic!("expected an error, got {p:?}"),
        Err(e) => e,
    }
}

// ----- expand_hostlist -----

#[test]
fn expands_ranges_padding_lists_and_suffixes() {
    assert_eq!(
        expand_hostlist("node[1-3]").unwrap(),
        ["node1", "node2", "node3"]
    );
    assert_eq!(
        expand_hostlist("gpu[01-04,07]").unwrap(),
        ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
    );
    assert_eq!(expand_hostlist("a[1-2]-ib").unwrap(), ["a1-ib", "a2-ib"]);
    assert_eq!(expand_hostlist("n[08-10]").unwrap(), ["n08", "n09", "n10"]);
    assert_eq!(
        expand_hostlist("node1, node2,gpu[7,9]").unwrap(),
        ["node1", "node2", "gpu7", "gpu9"]
    );
    assert_eq!(
        expand_hostlist("r[1-2]n[1-2]").unwrap(),
        ["r1n1", "r1n2", "r2n1", "r2n2"]
    );
    assert_eq!(
        expand_hostlist("10.0.0.[1-2],host_a").unwrap(),
        ["10.0.0.1", "10.0.0.2", "host_a"]
    );
}

#[test]
fn keeps_order_and_duplicates() {
    assert_eq!(expand_hostlist("b,a,b").unwrap(), ["b", "a", "b"]);
    assert_eq!(expand_hostlist("n[3,1]").unwrap(), ["n3", "n1"]);
}

#[test]
fn rejects_malformed_lists_with_the_reason() {
    for (bad, reason) in [
        ("node[1-3", "without ']'"),
        ("node1-3]", "without '['"),
        ("n[[1]]", "nested"),
        ("n[]", "empty brackets"),
        ("n[a-b]", "not a number"),
        ("n[3-1]", "backwards"),
        ("n[1-]", "not a number"),
        (" , ", "no host"),
        ("n[99999999999999999999]", "too large"),
    ] {
        let e = expand_hostlist(bad).expect_err(bad).to_string();
        assert!(e.contains(reason), "{bad}: {e}");
        assert!(e.contains("Slurm syntax"), "{e}");
    }
}

#[test]
fn caps_the_expansion_without_allocating_it() {
    let e = expand_hostlist("n[0-18446744073709551615]").unwrap_err();
    assert!(e.to_string().contains("more than 100000"), "{e}");
    let e = expand_hostlist("a[1-1000]b[1-1000]").unwrap_err();
    assert!(e.to_string().contains("more than 100000"), "{e}");
    assert_eq!(expand_hostlist("n[1-100000]").unwrap().len(), 100_000);
    assert!(expand_hostlist("n[1-100000],x").is_err());
}

/// Found by the property tests (tests/it/props.rs, `hostlist_near_grammar_stays_bounded`):
/// 100,000 names each carrying a long prefix or zero padding took seconds and gigabytes
/// (`n[<10,000 zeros>0-99999]`, 10 KB, expanded to 1 GB in 13 s).
#[test]
fn refuses_names_longer_than_a_host_name_before_expanding() {
    for bad in [
        format!("n[{}0-99999]", "0".repeat(10_000)),
        format!("{}[0-99999]", "a".repeat(1000)),
        format!(
            "{}16bk[{}-33406,1-65552]",
            "e".repeat(1200),
            "0".repeat(1600)
        ),
        "a".repeat(256),
    ] {
        let start = std::time::Instant::now();
        let e = expand_hostlist(&bad).expect_err("too long").to_string();
        assert!(e.contains("longer than 255"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_millis(100));
    }
    let longest = format!("{}[1-2]", "a".repeat(254));
    assert_eq!(expand_hostlist(&longest).unwrap()[1].len(), 255);
    assert_eq!(expand_hostlist("n[0001-2]").unwrap(), ["n0001", "n0002"]);
}

// ----- flags -----

#[test]
fn torchrun_flags_alone() {
    let p = ok(
        &[
            "--nnodes=3",
            "--node_rank=2",
            "--master-addr=10.0.0.1",
            "--master_port=29600",
            "--rdzv-id=job7",
        ],
        &[],
        &nobody(),
    );
    assert_eq!(
        p,
        Placement {
            nnodes: 3,
            rank: 2,
            master_addr: "10.0.0.1".into(),
            master_port: 29600,
            job_id: Some("job7".into()),
            job_id_source: Some("--rdzv-id"),
            expected_hosts: vec![],
            source: "flags",
            c10d: None,
            coordinator_port: 29600,
            coordinator_note: None,
        }
    );
}

#[test]
fn rdzv_endpoint_gives_host_and_port_including_ipv6() {
    let p = ok(
        &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01:29555"],
        &[],
        &nobody(),
    );
    assert_eq!((p.master_addr.as_str(), p.master_port), ("gpu01", 29555));
    let p = ok(
        &[
            "--nnodes=2",
            "--node-rank=1",
            "--rdzv_endpoint=[fd00::1]:29555",
        ],
        &[],
        &nobody(),
    );
    assert_eq!((p.master_addr.as_str(), p.master_port), ("fd00::1", 29555));
    // No port: torchrun's c10d default, not MASTER_PORT.
    let p = ok(
        &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01"],
        &[("MASTER_PORT", "1234")],
        &nobody(),
    );
    assert_eq!(p.master_port, DEFAULT_RDZV_PORT);
    let p = ok(
        &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=fd00::2"],
        &[],
        &nobody(),
    );
    assert_eq!(p.master_addr, "fd00::2");
}

#[test]
fn bad_or_conflicting_endpoints_are_named() {
    let e = err(
        &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01:http"],
        &[],
        &nobody(),
    );
    assert!(e.to_string().contains("--rdzv-endpoint"), "{e}");
    let e = err(
        &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=gpu01:0"],
        &[],
        &nobody(),
    );
    assert!(e.to_string().contains("port number"), "{e}");
    let e = err(
        &["--nnodes=2", "--node-rank=1", "--rdzv-endpoint=[fd00::1"],
        &[],
        &nobody(),
    );
    assert!(e.to_string().contains("--rdzv-endpoint"), "{e}");
    let e = err(
        &[
            "--nnodes=2",
            "--node-rank=1",
            "--rdzv-endpoint=a:1",
            "--master-addr=b",
        ],
        &[],
        &nobody(),
    );
    assert!(matches!(e, LauncherError::Conflict { .. }), "{e}");
    let e = err(
        &[
            "--nnodes=2",
            "--node-rank=1",
            "--rdzv-endpoint=a:1",
            "--master-port=2",
        ],
        &[],
        &nobody(),
    );
    assert!(e.to_string().contains("--master-port says 2"), "{e}");
}

#[test]
fn one_node_needs_no_rank_or_master() {
    let p = ok(&["--nnodes=1"], &[], &nobody());
    assert_eq!(
        (p.rank, p.master_addr.as_str(), p.master_port),
        (0, "127.0.0.1", 29500)
    );
}

#[test]
fn missing_pieces_say_which_flag_fixes_them() {
    let e = err(&[], &[], &nobody());
    assert_eq!(e, LauncherError::MissingNnodes);
    assert!(e.to_string().contains("--nnodes"));
    let e = err(&["--nnodes=4", "--master-addr=x"], &[], &nobody());
    assert!(e.to_string().contains("--node-rank R (0..3)"), "{e}");
    let e = err(&["--nnodes=4", "--node-rank=1"], &[], &nobody());
    assert!(e.to_string().contains("--master-addr"), "{e}");
}

#[test]
fn rank_must_be_below_nnodes_and_says_where_each_came_from() {
    let e = err(
        &["--nnodes=2", "--node-rank=2", "--master-addr=x"],
        &[],
        &nobody(),
    );
    let s = e.to_string();
    assert!(s.contains("rank 2 (from --node-rank)"), "{s}");
    assert!(s.contains("nodes 2 (from --nnodes)"), "{s}");
    let e = err(
        &["--master-addr=x"],
        &[("NODE_RANK", "5"), ("WORLD_SIZE", "4")],
        &nobody(),
    );
    assert!(e.to_string().contains("from NODE_RANK"), "{e}");
}

// ----- --hosts -----

#[test]
fn hosts_find_this_node_by_name_short_name_fqdn_or_address() {
    let flags = ["--hosts=gpu[01-03]"];
    let p = ok(&flags, &[], &me("gpu02", &[]));
    assert_eq!((p.rank, p.nnodes, p.source), (1, 3, "--hosts"));
    assert_eq!(p.master_addr, "gpu01");
    assert_eq!(p.expected_hosts, ["gpu01", "gpu02", "gpu03"]);
    // FQDN hostname, short names in the list.
    assert_eq!(ok(&flags, &[], &me("gpu03.cluster.local", &[])).rank, 2);
    // Short hostname, FQDNs in the list.
    let p = ok(&["--hosts=a.x,b.x"], &[], &me("B", &[]));
    assert_eq!(p.rank, 1);
    // Found by address.
    let p = ok(
        &["--hosts=10.0.0.[1-3]"],
        &[],
        &me("unrelated", &["10.0.0.3"]),
    );
    assert_eq!((p.rank, p.master_addr.as_str()), (2, "10.0.0.1"));
    // Different domains are not the same host.
    assert!(resolve(&args(&["--hosts=n1.a,n2.a"]), &env(&[]), &me("n1.b", &[])).is_err());
}

#[test]
fn hosts_port_comes_from_flag_then_master_port_then_default() {
    let who = me("gpu01", &[]);
    assert_eq!(ok(&["--hosts=gpu01,gpu02"], &[], &who).master_port, 29500);
    assert_eq!(
        ok(&["--hosts=gpu01,gpu02"], &[("MASTER_PORT", "29700")], &who).master_port,
        29700
    );
    assert_eq!(
        ok(
            &["--hosts=gpu01,gpu02", "--master-port=29800"],
            &[("MASTER_PORT", "29700")],
            &who
        )
        .master_port,
        29800
    );
    let e = err(&["--hosts=gpu01,gpu02"], &[("MASTER_PORT", "70000")], &who);
    assert!(e.to_string().contains("MASTER_PORT=\"70000\""), "{e}");
}

#[test]
fn hosts_errors_list_the_hosts() {
    let e = err(
        &["--hosts=gpu[01-03]"],
        &[],
        &me("login1", &["192.168.1.5"]),
    );
    let s = e.to_string();
    assert!(s.contains("login1"), "{s}");
    assert!(s.contains("192.168.1.5"), "{s}");
    assert!(s.contains("gpu01,gpu02,gpu03"), "{s}");
    let e = err(&["--hosts=gpu01,gpu02,gpu01"], &[], &me("gpu01", &[]));
    assert!(
        matches!(e, LauncherError::FoundTwice { count: 2, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("ranks 0, 2"), "{e}");
    // --node-rank settles it.
    assert_eq!(
        ok(
            &["--hosts=gpu01,gpu02,gpu01", "--node-rank=2"],
            &[],
            &me("gpu01", &[])
        )
        .rank,
        2
    );
    let e = err(&["--hosts=gpu[1-3", "--node-rank=0"], &[], &nobody());
    assert!(e.to_string().starts_with("--hosts: cannot expand"), "{e}");
    let e = err(&["--hosts=a,b", "--nnodes=3"], &[], &me("a", &[]));
    assert!(matches!(e, LauncherError::Conflict { .. }), "{e}");
}

#[test]
fn hosts_win_over_slurm_and_torchrun_env() {
    let p = ok(
        &["--hosts=x1,x2"],
        &[
            ("SLURM_JOB_NODELIST", "s[1-4]"),
            ("SLURM_NODEID", "3"),
            ("MASTER_ADDR", "m"),
            ("NODE_RANK", "0"),
        ],
        &me("x2", &[]),
    );
    assert_eq!(
        (p.rank, p.nnodes, p.master_addr.as_str(), p.source),
        (1, 2, "x1", "--hosts")
    );
}

// ----- Slurm -----

#[test]
fn slurm_gives_everything_under_srun() {
    let p = ok(
        &[],
        &[
            ("SLURM_JOB_NODELIST", "gpu[07-09]"),
            ("SLURM_NODEID", "2"),
            ("SLURM_NNODES", "3"),
            ("SLURM_JOB_ID", "4242"),
        ],
        &nobody(),
    );
    assert_eq!(
        p,
        Placement {
            nnodes: 3,
            rank: 2,
            master_addr: "gpu07".into(),
            master_port: 29500,
            job_id: Some("4242".into()),
            job_id_source: Some("SLURM_JOB_ID"),
            expected_hosts: vec!["gpu07".into(), "gpu08".into(), "gpu09".into()],
            source: "slurm",
            c10d: None,
            coordinator_port: 29500,
            coordinator_note: None,
        }
    );
    // SLURM_NODELIST spelling, and the node finds itself without SLURM_NODEID (sbatch script).
    let p = ok(
        &[],
        &[("SLURM_NODELIST", "a,b"), ("SLURMD_NODENAME", "b")],
        &nobody(),
    );
    assert_eq!((p.rank, p.nnodes), (1, 2));
}

#[test]
fn slurm_errors_name_the_variable() {
    let e = err(
        &[],
        &[("SLURM_JOB_NODELIST", "n[1-2]"), ("SLURM_NODEID", "abc")],
        &nobody(),
    );
    assert!(e.to_string().contains("SLURM_NODEID=\"abc\""), "{e}");
    let e = err(
        &[],
        &[
            ("SLURM_JOB_NODELIST", "n[1-2]"),
            ("SLURM_NODEID", "0"),
            ("SLURM_NNODES", "3"),
        ],
        &nobody(),
    );
    assert!(e.to_string().contains("SLURM_NNODES says 3"), "{e}");
    let e = err(
        &[],
        &[("SLURM_JOB_NODELIST", "n[2-1]"), ("SLURM_NODEID", "0")],
        &nobody(),
    );
    assert!(e.to_string().starts_with("SLURM_JOB_NODELIST:"), "{e}");
}

#[test]
fn flags_override_slurm_values_one_by_one() {
    let vars = [
        ("SLURM_JOB_NODELIST", "n[1-4]"),
        ("SLURM_NODEID", "garbage"),
        ("SLURM_JOB_ID", "77"),
    ];
    let p = ok(
        &["--node-rank=3", "--master-addr=10.9.0.1"],
        &vars,
        &nobody(),
    );
    assert_eq!(
        (p.rank, p.nnodes, p.master_addr.as_str()),
        (3, 4, "10.9.0.1")
    );
    assert_eq!((p.source, p.job_id.as_deref()), ("slurm", Some("77")));
    // --rdzv-id beats SLURM_JOB_ID.
    let p = ok(&["--node-rank=3", "--rdzv-id=mine"], &vars, &nobody());
    assert_eq!(p.job_id.as_deref(), Some("mine"));
}

#[test]
fn complete_flags_do_not_read_the_environment() {
    let p = ok(
        &["--nnodes=2", "--node-rank=0", "--master-addr=h"],
        &[
            ("SLURM_JOB_NODELIST", "n[1-"),
            ("NODE_RANK", "abc"),
            ("WORLD_SIZE", "x"),
        ],
        &nobody(),
    );
    assert_eq!((p.source, p.rank), ("flags", 0));
    assert!(p.expected_hosts.is_empty());
}

// ----- torchrun / Kubernetes env -----

#[test]
fn kubernetes_style_env() {
    let p = ok(
        &[],
        &[
            ("MASTER_ADDR", "trainer-0"),
            ("MASTER_PORT", "23456"),
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
        ],
        &nobody(),
    );
    assert_eq!(
        (
            p.nnodes,
            p.rank,
            p.master_addr.as_str(),
            p.master_port,
            p.source
        ),
        (2, 1, "trainer-0", 23456, "torchrun-env")
    );
    // NODE_RANK beats RANK.
    let p = ok(
        &[],
        &[
            ("MASTER_ADDR", "m"),
            ("NODE_RANK", "0"),
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
        ],
        &nobody(),
    );
    assert_eq!(p.rank, 0);
}

#[test]
fn under_torchrun_world_size_counts_processes() {
    let p = ok(
        &[],
        &[
            ("TORCHELASTIC_RUN_ID", "run9"),
            ("MASTER_ADDR", "m"),
            ("GROUP_RANK", "1"),
            ("RANK", "13"),
            ("WORLD_SIZE", "16"),
            ("LOCAL_WORLD_SIZE", "8"),
        ],
        &nobody(),
    );
    assert_eq!(
        (p.nnodes, p.rank, p.job_id.as_deref()),
        (2, 1, Some("run9"))
    );
    let e = err(
        &[],
        &[
            ("TORCHELASTIC_RUN_ID", "r"),
            ("MASTER_ADDR", "m"),
            ("GROUP_RANK", "0"),
            ("WORLD_SIZE", "16"),
        ],
        &nobody(),
    );
    assert!(e.to_string().contains("LOCAL_WORLD_SIZE"), "{e}");
    let e = err(
        &[],
        &[
            ("TORCHELASTIC_RUN_ID", "r"),
            ("MASTER_ADDR", "m"),
            ("GROUP_RANK", "0"),
            ("WORLD_SIZE", "12"),
            ("LOCAL_WORLD_SIZE", "8"),
        ],
        &nobody(),
    );
    assert!(
        e.to_string().contains("WORLD_SIZE / LOCAL_WORLD_SIZE"),
        "{e}"
    );
    // torchrun's placeholder id is no id.
    let p = ok(
        &["--nnodes=2"],
        &[
            ("TORCHELASTIC_RUN_ID", "none"),
            ("MASTER_ADDR", "m"),
            ("GROUP_RANK", "1"),
        ],
        &nobody(),
    );
    assert_eq!(p.job_id, None);
}

#[test]
fn torchrun_is_detected_by_any_of_its_markers() {
    // No TORCHELASTIC_RUN_ID (torch.distributed.launch of some versions): GROUP_RANK and
    // LOCAL_WORLD_SIZE still say WORLD_SIZE counts processes.
    let p = ok(
        &[],
        &[
            ("MASTER_ADDR", "m"),
            ("MASTER_PORT", "29500"),
            ("GROUP_RANK", "1"),
            ("RANK", "5"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_WORLD_SIZE", "4"),
        ],
        &nobody(),
    );
    assert_eq!((p.nnodes, p.rank), (2, 1));
    assert_eq!(p.coordinator_port, 29501);
    assert!(under_torchrun(&env(&[("LOCAL_WORLD_SIZE", "4")])));
    assert!(!under_torchrun(&env(&[("RANK", "4"), ("WORLD_SIZE", "8")])));
}

#[test]
fn coordinator_port_rule() {
    let torch = [
        ("TORCHELASTIC_RUN_ID", "r"),
        ("MASTER_ADDR", "m"),
        ("MASTER_PORT", "29500"),
        ("GROUP_RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_WORLD_SIZE", "1"),
    ];
    // Under torchrun: MASTER_PORT + 1, and the note says why and how to change it.
    let p = ok(&[], &torch, &nobody());
    assert_eq!((p.master_port, p.coordinator_port), (29500, 29501));
    let note = p.coordinator_note.clone().unwrap();
    assert!(note.contains("MASTER_PORT + 1"), "{note}");
    assert!(note.contains("--coordinator-port"), "{note}");
    assert_eq!(p.for_rendezvous().master_port, 29501);
    // Elsewhere: the master port itself, no note.
    let p = ok(
        &["--nnodes=2", "--node-rank=0", "--master-addr=m"],
        &[],
        &nobody(),
    );
    assert_eq!((p.coordinator_port, p.coordinator_note), (29500, None));
    // The flag, then the variable, override both.
    let p = ok(&["--coordinator-port=30000"], &torch, &nobody());
    assert_eq!(p.coordinator_port, 30000);
    assert!(p.coordinator_note.unwrap().contains("--coordinator-port"));
    let mut with_var = torch.to_vec();
    with_var.push((COORDINATOR_PORT_VAR, "30001"));
    assert_eq!(ok(&[], &with_var, &nobody()).coordinator_port, 30001);
    let p = ok(&["--nnodes=1", "--coordinator-port=29500"], &[], &nobody());
    assert_eq!(p.coordinator_note, None);
    // Garbage, and no room above 65535.
    let mut bad = torch.to_vec();
    bad.push((COORDINATOR_PORT_VAR, "x"));
    assert!(
        err(&[], &bad, &nobody())
            .to_string()
            .contains(COORDINATOR_PORT_VAR)
    );
    let mut top = torch.to_vec();
    top.retain(|(k, _)| *k != "MASTER_PORT");
    top.push(("MASTER_PORT", "65535"));
    let e = err(&[], &top, &nobody());
    assert!(e.to_string().contains("--coordinator-port"), "{e}");
}

#[test]
fn kubernetes_indexed_job_rank_and_nnodes() {
    let p = ok(
        &[],
        &[
            ("JOB_COMPLETION_INDEX", "2"),
            ("NNODES", "3"),
            ("MASTER_ADDR", "pf-0.pf"),
        ],
        &nobody(),
    );
    assert_eq!(
        (p.nnodes, p.rank, p.master_addr.as_str(), p.source),
        (3, 2, "pf-0.pf", "torchrun-env")
    );
    // A rank the user set explicitly wins over the pod index; NNODES wins over WORLD_SIZE.
    let p = ok(
        &[],
        &[
            ("JOB_COMPLETION_INDEX", "2"),
            ("NODE_RANK", "1"),
            ("NNODES", "3"),
            ("WORLD_SIZE", "24"),
            ("MASTER_ADDR", "m"),
        ],
        &nobody(),
    );
    assert_eq!((p.nnodes, p.rank), (3, 1));
    let e = err(
        &[],
        &[
            ("JOB_COMPLETION_INDEX", "x"),
            ("NNODES", "3"),
            ("MASTER_ADDR", "m"),
        ],
        &nobody(),
    );
    assert!(e.to_string().contains("JOB_COMPLETION_INDEX=\"x\""), "{e}");
}

#[test]
fn torchrun_pet_variables_are_read() {
    let p = ok(
        &[],
        &[
            ("PET_NNODES", "3:3"),
            ("PET_NODE_RANK", "2"),
            ("PET_MASTER_ADDR", "h0"),
            ("PET_MASTER_PORT", "29511"),
        ],
        &nobody(),
    );
    assert_eq!(
        (p.nnodes, p.rank, p.master_addr.as_str(), p.master_port),
        (3, 2, "h0", 29511)
    );
    let e = err(
        &[],
        &[
            ("PET_NNODES", "1:4"),
            ("PET_NODE_RANK", "0"),
            ("MASTER_ADDR", "m"),
        ],
        &nobody(),
    );
    assert!(e.to_string().contains("PET_NNODES"), "{e}");
}

#[test]
fn flag_plus_env_combine_and_the_flag_wins() {
    let p = ok(
        &["--nnodes=4"],
        &[
            ("NODE_RANK", "3"),
            ("MASTER_ADDR", "m"),
            ("WORLD_SIZE", "99"),
        ],
        &nobody(),
    );
    assert_eq!((p.nnodes, p.rank, p.source), (4, 3, "torchrun-env"));
    let p = ok(
        &["--nnodes=4", "--master-addr=flag"],
        &[("NODE_RANK", "1"), ("MASTER_ADDR", "env")],
        &nobody(),
    );
    assert_eq!(p.master_addr, "flag");
}

#[test]
fn garbage_env_numbers_name_the_variable() {
    let e = err(
        &["--nnodes=2", "--master-addr=m"],
        &[("NODE_RANK", "abc")],
        &nobody(),
    );
    assert_eq!(
        e.to_string(),
        "NODE_RANK=\"abc\" is not a node rank (a whole number from 0): set it to this node's rank, or give --node-rank"
    );
    let e = err(
        &[],
        &[
            ("NODE_RANK", "0"),
            ("MASTER_ADDR", "m"),
            ("WORLD_SIZE", "-1"),
        ],
        &nobody(),
    );
    assert!(e.to_string().contains("WORLD_SIZE=\"-1\""), "{e}");
    let e = err(
        &[],
        &[
            ("NODE_RANK", "0"),
            ("MASTER_ADDR", "m"),
            ("WORLD_SIZE", "0"),
        ],
        &nobody(),
    );
    assert!(e.to_string().contains("WORLD_SIZE=\"0\""), "{e}");
    let e = err(
        &[],
        &[
            ("NODE_RANK", "0"),
            ("MASTER_ADDR", "m"),
            ("WORLD_SIZE", "100000"),
        ],
        &nobody(),
    );
    assert!(matches!(e, LauncherError::TooManyNodes { .. }), "{e}");
    let e = err(&["--nnodes=1"], &[("MASTER_PORT", "http")], &nobody());
    assert!(e.to_string().contains("MASTER_PORT=\"http\""), "{e}");
    // An empty master variable is said empty (the command meant to fill it printed nothing).
    let e = err(
        &["--nnodes=2", "--node-rank=1"],
        &[("MASTER_ADDR", " ")],
        &nobody(),
    );
    assert_eq!(
        e,
        LauncherError::EmptyMaster {
            name: "MASTER_ADDR".into()
        }
    );
    assert!(
        e.to_string()
            .contains("MASTER_ADDR is set but empty (MASTER_ADDR='')"),
        "{e}"
    );
    let e = err(
        &["--nnodes=2", "--node-rank=1", "--master-addr="],
        &[],
        &nobody(),
    );
    assert!(
        e.to_string().contains("--master-addr is set but empty"),
        "{e}"
    );
    // Nothing at all is still unknown.
    let e = err(&["--nnodes=2", "--node-rank=1"], &[], &nobody());
    assert_eq!(e, LauncherError::MissingMaster);
}

#[test]
fn with_every_flag_given_slurms_node_list_still_names_the_hosts() {
    let flags = ["--nnodes=2", "--node-rank=1", "--master-addr=node1"];
    let p = ok(
        &flags,
        &[("SLURM_JOB_NODELIST", "node[0-1]"), ("SLURM_NODEID", "1")],
        &nobody(),
    );
    assert_eq!(p.expected_hosts, ["node0", "node1"]);
    assert_eq!(p.source, "flags");
    assert_eq!(p.master_addr, "node1");
    // A list of another length (or a bad one) is left out; nothing fails.
    let p = ok(&flags, &[("SLURM_JOB_NODELIST", "node[0-2]")], &nobody());
    assert!(p.expected_hosts.is_empty());
    let p = ok(&flags, &[("SLURM_JOB_NODELIST", "node[")], &nobody());
    assert!(p.expected_hosts.is_empty());
}

// ----- c10d: ranks assigned at join -----

#[test]
fn c10d_without_a_rank_is_assigned_at_join_and_the_endpoint_owner_is_rank_0() {
    let flags = [
        "--nnodes=3",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.200.1.1:29500",
        "--rdzv-id=j1",
    ];
    // Not the owner: the rank waits for the coordinator.
    let p = ok(&flags, &[], &me("b", &["10.200.1.2"]));
    assert_eq!(p.rank, RANK_AT_JOIN);
    assert!(p.rank_pending());
    assert_eq!(p.source, C10D_JOIN);
    let join = p.c10d.as_ref().expect("assigned at join");
    assert!(!join.owner);
    assert_eq!(join.endpoint, "10.200.1.1");
    assert_eq!(
        (p.master_addr.as_str(), p.master_port),
        ("10.200.1.1", 29500)
    );
    // The owner (one of its addresses is the endpoint's) is rank 0.
    let p = ok(&flags, &[], &me("a", &["192.168.9.9", "10.200.1.1"]));
    assert_eq!((p.rank, p.source), (0, C10D_JOIN));
    assert!(p.c10d.as_ref().is_some_and(|j| j.owner));
    assert!(!p.rank_pending());
    // torchrun's underscore spelling.
    let p = ok(
        &[
            "--nnodes=3",
            "--rdzv_backend=c10d",
            "--rdzv_endpoint=10.200.1.1:29500",
        ],
        &[],
        &me("b", &["10.200.1.2"]),
    );
    assert!(p.rank_pending());
}

#[test]
fn c10d_with_a_rank_from_any_source_keeps_that_rank() {
    let base = [
        "--nnodes=3",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.200.1.1:29500",
    ];
    let mut flags = base.to_vec();
    flags.push("--node-rank=2");
    let p = ok(&flags, &[], &me("a", &["10.200.1.1"]));
    assert_eq!((p.rank, p.source, p.c10d.is_none()), (2, "flags", true));
    let p = ok(&base, &[("NODE_RANK", "1")], &me("b", &["10.200.1.2"]));
    assert_eq!(
        (p.rank, p.source, p.c10d.is_none()),
        (1, "torchrun-env", true)
    );
    let p = ok(
        &base,
        &[("SLURM_NODELIST", "a,b,c"), ("SLURM_NODEID", "1")],
        &nobody(),
    );
    assert_eq!((p.rank, p.source), (1, "slurm"));
    // The static backend (or none) still needs a rank.
    assert!(matches!(
        err(
            &[
                "--nnodes=3",
                "--rdzv-backend=static",
                "--rdzv-endpoint=10.200.1.1:29500"
            ],
            &[],
            &nobody()
        ),
        LauncherError::MissingRank { .. }
    ));
    let e = err(&["--nnodes=3", "--master-addr=10.200.1.1"], &[], &nobody());
    assert!(e.to_string().contains("--rdzv-backend=c10d"), "{e}");
}

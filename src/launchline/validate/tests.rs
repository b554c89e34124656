//! The `launch.*` checks run end to end through [`check`](super::check) on a saved node's facts.

use super::*;
use crate::launchline::args::{parse, split_shell_words};
use preflight_checks::model::{BindResult, BindStatus, PortHolder};

fn ib_node() -> NodeFacts {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/facts/ib-node.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn held(mut facts: NodeFacts, port: u16) -> NodeFacts {
    facts.ports.port = port;
    facts.ports.ipv4 = BindResult {
        status: BindStatus::InUse,
        error: None,
    };
    facts.ports.suggested_free = Some(port + 1);
    facts.ports.holders = vec![PortHolder {
        pid: Some(4242),
        command: Some("python train.py".into()),
        local_address: format!("0.0.0.0:{port}"),
        inode: 1,
        ..Default::default()
    }];
    facts
}

/// Judges one command line on `facts`, resolving the endpoint host to `addrs`.
fn judge(line: &str, facts: &NodeFacts, addrs: &[&str]) -> Vec<(Finding, Option<Correction>)> {
    let p = parse(split_shell_words(line).unwrap());
    let pl = shape_of(&p);
    let resolved = pl.endpoint.as_ref().map(|(host, _)| Resolved {
        host: host.clone(),
        addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        error: None,
    });
    let ctx = Context {
        facts,
        resolved,
        script_text: None,
        this_addr: Some("192.168.100.11".into()),
        job: Default::default(),
    };
    check(&p, &ctx)
}

fn get<'a>(
    all: &'a [(Finding, Option<Correction>)],
    id: &str,
) -> &'a (Finding, Option<Correction>) {
    all.iter().find(|(f, _)| f.id == id).unwrap_or_else(|| {
        panic!(
            "no {id} in {:#?}",
            all.iter().map(|(f, _)| &f.id).collect::<Vec<_>>()
        )
    })
}

fn status(all: &[(Finding, Option<Correction>)], id: &str) -> Status {
    get(all, id).0.status
}

#[test]
fn a_healthy_two_node_command_passes_everything() {
    let all = judge(
        "torchrun --nnodes=2 --nproc_per_node=8 --node-rank=0 --master-addr=10.1.0.11 --master-port=29500 train.py",
        &ib_node(),
        &["10.1.0.11"],
    );
    for (f, c) in &all {
        assert_eq!(f.status, Status::Pass, "{f:#?}");
        assert!(c.is_none());
        assert_eq!(f.node, Some(0));
    }
}

#[test]
fn more_workers_than_gpus_is_lowered_to_the_visible_count() {
    let all = judge(
        "torchrun --nproc-per-node=16 --standalone t.py",
        &ib_node(),
        &[],
    );
    let (f, c) = get(&all, "launch.nproc");
    assert_eq!(f.status, Status::Fail);
    assert_eq!(f.evidence["visible_gpus"], 8);
    assert!(f.fix.as_ref().unwrap().hint.contains("--nproc-per-node=8"));
    assert_eq!(
        c,
        &Some(Correction::SetValue {
            name: "nproc-per-node",
            value: "8".into()
        })
    );
    assert_eq!(
        status(
            &judge(
                "torchrun --nproc-per-node=gpu --standalone t.py",
                &ib_node(),
                &[]
            ),
            "launch.nproc"
        ),
        Status::Pass
    );
    assert_eq!(
        status(
            &judge(
                "torchrun --nproc-per-node=four --standalone t.py",
                &ib_node(),
                &[]
            ),
            "launch.nproc"
        ),
        Status::Fail
    );
    assert_eq!(
        status(
            &judge("torchrun --standalone t.py", &ib_node(), &[]),
            "launch.nproc"
        ),
        Status::Warn
    );
}

/// Found by the property tests (tests/it/props.rs, `torchrun_word_vectors`), shrunk to
/// one word: the rank check computed `max - 1` with max 0 and overflowed.
#[test]
fn zero_nodes_fails_nnodes_without_overflowing_the_rank_range() {
    for line in [
        "--nnodes=0",
        "torchrun --nnodes=0 t.py",
        "torchrun --nnodes=2:0 --node-rank=1 t.py",
    ] {
        let all = judge(line, &ib_node(), &[]);
        assert_eq!(get(&all, "launch.nnodes").0.status, Status::Fail, "{line}");
        assert!(
            !get(&all, "launch.node-rank")
                .0
                .summary
                .contains("ranks run"),
            "{line}"
        );
    }
}

#[test]
fn node_rank_beyond_nnodes_one_is_reset_to_zero() {
    // github.com/FoundationVision/VAR/issues/108: "stuck for a long time".
    let all = judge(
        "torchrun --nproc_per_node=4 --nnodes=1 --node_rank=3 --master_addr=192.168.1.1 --master_port=12345 train.py",
        &ib_node(),
        &["192.168.1.1"],
    );
    let (f, c) = get(&all, "launch.node-rank");
    assert_eq!(f.status, Status::Fail);
    assert_eq!(f.node, Some(3));
    assert_eq!(
        c,
        &Some(Correction::SetValue {
            name: "node-rank",
            value: "0".into()
        })
    );
}

#[test]
fn static_multi_node_without_node_rank_or_nnodes() {
    let all = judge(
        "torchrun --nnodes=2 --master-addr=10.1.0.11 t.py",
        &ib_node(),
        &["10.1.0.11"],
    );
    assert_eq!(status(&all, "launch.node-rank"), Status::Fail);
    let all = judge(
        "torchrun --node-rank=1 --master-addr=10.9.0.1 t.py",
        &ib_node(),
        &["10.9.0.1"],
    );
    let (f, _) = get(&all, "launch.nnodes");
    assert_eq!(f.status, Status::Fail);
    assert!(f.fix.as_ref().unwrap().hint.contains("at least 2"));
    let all = judge("torchrun --nnodes=4:2 --standalone t.py", &ib_node(), &[]);
    assert_eq!(
        get(&all, "launch.nnodes").1,
        Some(Correction::SetValue {
            name: "nnodes",
            value: "2:4".into()
        })
    );
    assert_eq!(
        status(
            &judge("torchrun --nnodes=x t.py", &ib_node(), &[]),
            "launch.nnodes"
        ),
        Status::Fail
    );
    assert_eq!(
        status(
            &judge(
                "torchrun --nnodes=1:4 --node-rank=0 t.py",
                &ib_node(),
                &["127.0.0.1"]
            ),
            "launch.nnodes"
        ),
        Status::Warn
    );
}

#[test]
fn standalone_with_multi_node_flags_is_dropped() {
    let all = judge(
        "torchrun --standalone --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.1.0.11 t.py",
        &ib_node(),
        &["10.1.0.11"],
    );
    let (f, c) = get(&all, "launch.standalone");
    assert_eq!(f.status, Status::Fail);
    assert_eq!(c, &Some(Correction::Remove { name: "standalone" }));
    let alone = judge("torchrun --standalone --rdzv-id=5 t.py", &ib_node(), &[]);
    assert_eq!(status(&alone, "launch.standalone"), Status::Warn);
}

#[test]
fn loopback_endpoint_in_a_multi_node_job_and_a_foreign_master_on_rank_0() {
    // github.com/jamesafranke/ViT_clouds: --nnodes=1:2 --rdzv_endpoint=localhost:6000
    let all = judge(
        "torchrun --nnodes=1:2 --nproc_per_node=4 --rdzv_id=100 --rdzv_backend=c10d --rdzv_endpoint=localhost:6000 t.py",
        &ib_node(),
        &["127.0.0.1"],
    );
    let (f, _) = get(&all, "launch.endpoint");
    assert_eq!(f.status, Status::Fail);
    assert!(
        f.fix.as_ref().unwrap().hint.contains("192.168.100.11:6000"),
        "{f:#?}"
    );
    let foreign = judge(
        "torchrun --nnodes=2 --node-rank=0 --master-addr=10.9.9.9 t.py",
        &ib_node(),
        &["10.9.9.9"],
    );
    assert_eq!(status(&foreign, "launch.endpoint"), Status::Fail);
    let other_rank = judge(
        "torchrun --nnodes=2 --node-rank=1 --master-addr=10.9.9.9 t.py",
        &ib_node(),
        &["10.9.9.9"],
    );
    assert_eq!(status(&other_rank, "launch.endpoint"), Status::Pass);
    assert_eq!(status(&other_rank, "launch.port"), Status::Skip);
}

#[test]
fn rank_1_with_a_loopback_or_empty_master_is_never_pointed_at_its_own_address() {
    let mut facts = ib_node();
    facts.env.insert("MASTER_ADDR".into(), String::new());
    let all = judge(
        "torchrun --nnodes=2 --node-rank=1 --master-addr=127.0.0.1 t.py",
        &facts,
        &["127.0.0.1"],
    );
    let (f, _) = get(&all, "launch.endpoint");
    assert_eq!(f.status, Status::Fail);
    let hint = &f.fix.as_ref().unwrap().hint;
    assert!(!hint.contains("192.168.100.11"), "{hint}");
    assert!(hint.contains("<rank 0's address>"), "{hint}");
    assert!(
        f.summary.contains("MASTER_ADDR is set but empty here"),
        "{}",
        f.summary
    );
    let empty = judge(
        "torchrun --nnodes=2 --node-rank=1 --master-addr= --master-port=29500 t.py",
        &facts,
        &[],
    );
    let (f, _) = get(&empty, "launch.endpoint");
    assert_eq!(f.status, Status::Fail, "{f:#?}");
    assert!(
        f.summary
            .contains("the master address is empty (--master-addr= on rank 1's line)"),
        "{}",
        f.summary
    );
    assert_eq!(f.evidence["cause"], "empty");
}

#[test]
fn a_nonzero_rank_given_its_own_address_as_the_master_fails() {
    let own = judge(
        "torchrun --nnodes=2 --node-rank=1 --master-addr=192.168.100.11 --master-port=29500 t.py",
        &ib_node(),
        &["192.168.100.11"],
    );
    let (f, _) = get(&own, "launch.endpoint");
    assert_eq!(f.status, Status::Fail, "{f:#?}");
    assert!(
        f.summary
            .contains("rank 1 was given its own address 192.168.100.11 as the master address"),
        "{}",
        f.summary
    );
    assert!(
        f.summary.contains("cannot know rank 0's address"),
        "{}",
        f.summary
    );
    assert!(
        f.fix.as_ref().unwrap().hint.contains("--master-addr"),
        "{f:#?}"
    );
    // Rank 0 with its own address is right; so is a c10d node without a rank (assigned at join).
    let rank0 = judge(
        "torchrun --nnodes=2 --node-rank=0 --master-addr=192.168.100.11 t.py",
        &ib_node(),
        &["192.168.100.11"],
    );
    assert_eq!(status(&rank0, "launch.endpoint"), Status::Pass);
    let c10d = judge(
        "torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=192.168.100.11:29400 t.py",
        &ib_node(),
        &["192.168.100.11"],
    );
    assert_eq!(status(&c10d, "launch.endpoint"), Status::Pass);
}

#[test]
fn an_unresolvable_host_and_a_static_endpoint_without_port_fail() {
    let p = parse(
        split_shell_words("torchrun --nnodes=2 --node-rank=1 --master-addr=nosuch t.py").unwrap(),
    );
    let facts = ib_node();
    let ctx = Context {
        facts: &facts,
        resolved: Some(Resolved {
            host: "nosuch".into(),
            addrs: vec![],
            error: Some("failed to lookup".into()),
        }),
        script_text: None,
        this_addr: None,
        job: Default::default(),
    };
    assert_eq!(status(&check(&p, &ctx), "launch.endpoint"), Status::Fail);
    let all = judge(
        "torchrun --nnodes=2 --node-rank=1 --rdzv-endpoint=10.1.0.11 t.py",
        &facts,
        &[],
    );
    assert_eq!(status(&all, "launch.endpoint"), Status::Fail);
    assert_eq!(
        shape_of(&parse(
            split_shell_words("torchrun --rdzv-backend=c10d --rdzv-endpoint=h t.py").unwrap()
        ))
        .endpoint,
        Some(("h".into(), 29400))
    );
}

#[test]
fn a_held_port_moves_to_the_free_one_in_the_flag_that_named_it() {
    let facts = held(ib_node(), 29500);
    let all = judge(
        "torchrun --nnodes=2 --node-rank=0 --master-addr=10.1.0.11 t.py",
        &facts,
        &["10.1.0.11"],
    );
    let (f, c) = get(&all, "launch.port");
    assert_eq!(f.status, Status::Fail);
    assert!(f.summary.contains("pid 4242"), "{}", f.summary);
    assert_eq!(
        c,
        &Some(Correction::SetValue {
            name: "master-port",
            value: "29501".into()
        })
    );
    let all = judge(
        "torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.1.0.11:29500 t.py",
        &facts,
        &["10.1.0.11"],
    );
    assert_eq!(
        get(&all, "launch.port").1,
        Some(Correction::SetValue {
            name: "rdzv-endpoint",
            value: "10.1.0.11:29501".into()
        })
    );
    // A c10d node that does not host the endpoint does not bind it.
    let all = judge(
        "torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.9.0.1:29500 t.py",
        &facts,
        &["10.9.0.1"],
    );
    assert_eq!(status(&all, "launch.port"), Status::Skip);
}

#[test]
fn backends_conf_and_unknown_flags() {
    let all = judge(
        "torchrun --rdzv-backend=c10 --rdzv-conf=timeout --nproc-per-nodes=2 --standalone t.py",
        &ib_node(),
        &[],
    );
    assert_eq!(
        get(&all, "launch.rdzv-backend").1,
        Some(Correction::SetValue {
            name: "rdzv-backend",
            value: "c10d".into()
        })
    );
    assert_eq!(status(&all, "launch.rdzv-conf"), Status::Fail);
    let (f, c) = get(&all, "launch.unknown-flag");
    assert_eq!(f.status, Status::Fail);
    assert!(
        f.fix
            .as_ref()
            .unwrap()
            .hint
            .contains("did you mean --nproc-per-node"),
        "{f:#?}"
    );
    assert!(c.is_none());
    let etcd = judge(
        "torchrun --rdzv-backend=etcd --rdzv-endpoint=etcd:2379 --nnodes=2 t.py",
        &ib_node(),
        &["10.5.0.1"],
    );
    assert_eq!(status(&etcd, "launch.rdzv-backend"), Status::Warn);
    let use_env = judge("torchrun --use_env --standalone t.py", &ib_node(), &[]);
    assert_eq!(
        get(&use_env, "launch.unknown-flag").1,
        Some(Correction::RemoveWord { index: 1 })
    );
    let missing = judge("torchrun --nnodes", &ib_node(), &[]);
    assert_eq!(status(&missing, "launch.args"), Status::Fail);
}

#[test]
fn legacy_launch_without_use_env_needs_a_script_that_reads_local_rank() {
    let p = parse(
        split_shell_words(
            "python -m torch.distributed.launch --nproc_per_node=2 --standalone main.py",
        )
        .unwrap(),
    );
    let facts = ib_node();
    let with = |text: Option<&str>| {
        let ctx = Context {
            facts: &facts,
            resolved: None,
            script_text: text.map(str::to_string),
            this_addr: None,
            job: Default::default(),
        };
        get(&check(&p, &ctx), "launch.legacy").clone()
    };
    let (f, c) = with(Some("import os\nrank = int(os.environ['LOCAL_RANK'])\n"));
    assert_eq!(f.status, Status::Fail);
    assert_eq!(
        c,
        Some(Correction::SetValue {
            name: "use-env",
            value: String::new()
        })
    );
    assert_eq!(
        with(Some("parser.add_argument('--local_rank', type=int)"))
            .0
            .status,
        Status::Warn
    );
    assert_eq!(with(None).0.status, Status::Warn);
    let env = parse(
        split_shell_words("python -m torch.distributed.launch --use_env --standalone main.py")
            .unwrap(),
    );
    let ctx = Context {
        facts: &facts,
        resolved: None,
        script_text: None,
        this_addr: None,
        job: Default::default(),
    };
    assert_eq!(get(&check(&env, &ctx), "launch.legacy").1, None);
}

//! Judgment tests for the line around the launcher: `launch.args` (other programs, accelerate,
//! deepspeed), `launch.variables`, `launch.script`, `launch.nproc` without a driver,
//! `launch.legacy`'s torchrun line, and the rank the run resolves.

use super::*;
use crate::launchline::args::{parse, split_line};
use std::collections::BTreeMap;

fn ib_node() -> NodeFacts {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/facts/ib-node.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn no_driver() -> NodeFacts {
    let mut f = ib_node();
    f.gpu.gpus.clear();
    f.gpu.nvml_error = Some("libnvidia-ml.so.1 not found: no NVIDIA driver installed".into());
    f
}

fn run(
    line: &str,
    env: &[(&str, &str)],
    facts: &NodeFacts,
    job: LineJob,
) -> Vec<(Finding, Option<Correction>)> {
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let p = parse(split_line(line, Some(&env)).unwrap());
    let ctx = Context {
        facts,
        resolved: None,
        script_text: None,
        this_addr: Some("192.168.100.11".into()),
        job,
    };
    check(&p, &ctx)
}

fn find<'a>(all: &'a [(Finding, Option<Correction>)], id: &str) -> Option<&'a Finding> {
    all.iter().map(|(f, _)| f).find(|f| f.id == id)
}

fn script(exists: bool, executable: bool) -> LineJob {
    LineJob {
        script_file: Some(ScriptFile {
            cwd: "/work/job".into(),
            exists,
            executable,
        }),
        ..LineJob::default()
    }
}

#[test]
fn a_program_that_is_no_torch_launcher_fails_launch_args_and_is_not_read_as_torchrun() {
    let all = run(
        "srun python train.py --epochs 3",
        &[],
        &ib_node(),
        LineJob::default(),
    );
    let f = find(&all, "launch.args").unwrap();
    assert_eq!(f.status, Status::Fail);
    assert!(
        f.summary.contains("python runs train.py directly"),
        "{}",
        f.summary
    );
    assert!(f.fix.as_ref().unwrap().hint.contains("preflight check"));
    assert!(find(&all, "launch.nproc").is_none() && find(&all, "launch.endpoint").is_none());
    let all = run("bash run.sh", &[], &ib_node(), LineJob::default());
    assert!(
        find(&all, "launch.args")
            .unwrap()
            .summary
            .contains("bash is not torchrun")
    );
    // Not firing: torchrun behind wrappers is read as torchrun.
    let all = run(
        "srun --ntasks-per-node=1 torchrun --nnodes=1 train.py",
        &[],
        &ib_node(),
        LineJob::default(),
    );
    let f = find(&all, "launch.args").unwrap();
    assert_eq!(f.status, Status::Pass);
    assert!(f.summary.contains("run through srun"), "{}", f.summary);
}

#[test]
fn deepspeed_and_accelerate_warn_and_map_what_they_can() {
    let all = run(
        "deepspeed --num_gpus 8 train.py",
        &[],
        &ib_node(),
        LineJob::default(),
    );
    let f = find(&all, "launch.args").unwrap();
    assert_eq!(f.status, Status::Warn);
    assert!(f.summary.contains("--num_gpus"), "{}", f.summary);
    assert!(find(&all, "launch.unknown-flag").is_none());
    assert_eq!(find(&all, "launch.nproc").unwrap().status, Status::Pass);
    let all = run(
        "deepspeed --hostfile hf --num_nodes 2 --num_gpus 16 --master_addr 10.0.0.1 t.py",
        &[],
        &ib_node(),
        LineJob::default(),
    );
    assert!(
        find(&all, "launch.args")
            .unwrap()
            .summary
            .contains("over ssh/pdsh")
    );
    let nproc = all.iter().find(|(f, _)| f.id == "launch.nproc").unwrap();
    assert_eq!(nproc.0.status, Status::Fail);
    assert!(
        nproc.0.summary.contains("--num_gpus=16"),
        "{}",
        nproc.0.summary
    );
    let all = run(
        "accelerate launch --num_machines 2 --machine_rank 1 --main_process_ip 10.0.0.1 --main_process_port 29600 --num_processes 32 --multi_gpu t.py --x",
        &[],
        &ib_node(),
        LineJob::default(),
    );
    let f = find(&all, "launch.args").unwrap();
    assert_eq!(f.status, Status::Warn);
    let nproc = find(&all, "launch.nproc").unwrap();
    // 32 processes over 2 machines: 16 a node, on an 8-GPU node.
    assert_eq!(nproc.status, Status::Fail, "{}", nproc.summary);
    assert!(nproc.summary.contains("16"), "{}", nproc.summary);
    assert_eq!(find(&all, "launch.node-rank").unwrap().node, Some(1));
}

#[test]
fn unset_variables_are_named_and_set_ones_are_not() {
    let all = run(
        "torchrun --nnodes=2 --nproc_per_node=$SLURM_GPUS_PER_TASK --node-rank=${NODE_RANK} --master-addr=10.0.0.1 t.py",
        &[("NODE_RANK", "1")],
        &ib_node(),
        LineJob::default(),
    );
    let f = find(&all, "launch.variables").unwrap();
    assert_eq!(f.status, Status::Warn);
    assert_eq!(f.subject, "SLURM_GPUS_PER_TASK");
    assert!(
        f.summary.contains("--nproc_per_node=$SLURM_GPUS_PER_TASK"),
        "{}",
        f.summary
    );
    assert_eq!(find(&all, "launch.nproc").unwrap().status, Status::Fail);
    assert_eq!(find(&all, "launch.node-rank").unwrap().node, Some(1));
    let all = run(
        "torchrun --nproc_per_node=${GPUS:-4} '$LITERAL' t.py",
        &[],
        &ib_node(),
        LineJob::default(),
    );
    assert!(find(&all, "launch.variables").is_none());
}

#[test]
fn a_missing_or_unrunnable_script_warns() {
    let line = "torchrun --nproc-per-node=8 train.py";
    let f = find(
        &run(line, &[], &ib_node(), script(false, false)),
        "launch.script",
    )
    .cloned();
    let f = f.unwrap();
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.summary.contains("does not exist in /work/job"),
        "{}",
        f.summary
    );
    let ok = run(line, &[], &ib_node(), script(true, false));
    assert_eq!(find(&ok, "launch.script").unwrap().status, Status::Pass);
    let sh = run("torchrun run.sh", &[], &ib_node(), script(true, false));
    assert_eq!(find(&sh, "launch.script").unwrap().status, Status::Warn);
    let exe = run("torchrun run.sh", &[], &ib_node(), script(true, true));
    assert_eq!(find(&exe, "launch.script").unwrap().status, Status::Pass);
    let np = run(
        "torchrun --no-python run.sh",
        &[],
        &ib_node(),
        script(true, false),
    );
    assert!(
        find(&np, "launch.script")
            .unwrap()
            .summary
            .contains("not executable")
    );
    // A module is not a file; facts from a file: not looked at.
    assert!(
        find(
            &run(
                "torchrun -m pkg.train",
                &[],
                &ib_node(),
                script(false, false)
            ),
            "launch.script"
        )
        .is_none()
    );
    assert!(
        find(
            &run(line, &[], &ib_node(), LineJob::default()),
            "launch.script"
        )
        .is_none()
    );
}

#[test]
fn no_driver_fails_a_gpu_job_unless_it_is_cpu_only() {
    let line = "torchrun --standalone --nnodes=1 --nproc-per-node=4 imagenet_elastic_trainer.py";
    let all = run(line, &[], &no_driver(), LineJob::default());
    let (f, c) = all.iter().find(|(f, _)| f.id == "launch.nproc").unwrap();
    assert_eq!(f.status, Status::Fail);
    assert!(f.summary.contains("--nproc-per-node=4"), "{}", f.summary);
    assert!(f.fix.as_ref().unwrap().hint.contains("--no-gpu"));
    // The count stays the user's: no correction to a number the node cannot run either.
    assert!(c.is_none());
    let gpu = run(
        "torchrun --nproc-per-node=gpu t.py",
        &[],
        &no_driver(),
        LineJob::default(),
    );
    assert_eq!(find(&gpu, "launch.nproc").unwrap().status, Status::Fail);
    let cpu_only = LineJob {
        cpu_only: true,
        ..LineJob::default()
    };
    assert_eq!(
        find(&run(line, &[], &no_driver(), cpu_only), "launch.nproc")
            .unwrap()
            .status,
        Status::Pass
    );
    assert_eq!(
        find(
            &run(
                "torchrun --nproc-per-node=cpu t.py",
                &[],
                &no_driver(),
                LineJob::default()
            ),
            "launch.nproc"
        )
        .unwrap()
        .status,
        Status::Pass
    );
}

#[test]
fn the_legacy_launcher_gets_the_torchrun_line_that_does_the_same() {
    let all = run(
        "OMP_NUM_THREADS=1 python -m torch.distributed.launch --use_env --nproc_per_node=2 --nnodes=2 --node_rank 1 --master_addr=10.0.0.2 main.py --lr 1",
        &[],
        &ib_node(),
        LineJob::default(),
    );
    let f = find(&all, "launch.legacy").unwrap();
    assert_eq!(f.status, Status::Warn);
    let line = "OMP_NUM_THREADS=1 torchrun --nproc_per_node=2 --nnodes=2 --node_rank 1 --master_addr=10.0.0.2 main.py --lr 1";
    assert_eq!(f.fix.as_ref().unwrap().commands, vec![line.to_string()]);
    assert_eq!(f.evidence["torchrun_command"], line);
    // Not firing: torchrun itself.
    assert!(
        find(
            &run("torchrun t.py", &[], &ib_node(), LineJob::default()),
            "launch.legacy"
        )
        .is_none()
    );
}

#[test]
fn the_rank_the_run_resolves_is_the_rank_judged() {
    let line = "torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29400 t.py";
    let job = LineJob {
        rank: Some(1),
        rank_from: Some("slurm".into()),
        ..LineJob::default()
    };
    let all = run(line, &[], &ib_node(), job);
    assert!(all.iter().all(|(f, _)| f.node == Some(1)), "{all:#?}");
    let all = run(line, &[], &ib_node(), LineJob::default());
    assert_eq!(find(&all, "launch.nnodes").unwrap().node, Some(0));
}

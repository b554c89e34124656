//! The GEMM judgments on facts: one slow GPU on one node, one slow node, a wrong GPU, mixed
//! models, a throttle during the burn, at 2, 3 and 4096 nodes.

use super::*;
use crate::core::ClusterInput;
use crate::core::{
    BurnSample, BurnTimeline, GemmBurn, GemmCheck, GemmRate, GpuCompute, GpuGemm, GpuLoadState,
    NodeFacts, WrongElement,
};

const SUM: &str = "9c1e0c6a2f4b7d11";

fn gpu(index: u32, model: &str, bf16: f64) -> GpuGemm {
    GpuGemm {
        gpu: index,
        pci_bus_id: Some(format!("0000:{:02x}:00.0", 0x19 + index)),
        model: model.into(),
        uuid: Some(format!("GPU-{index:08x}")),
        compute_capability: Some("9.0".into()),
        rates: vec![
            GemmRate {
                dtype: "bf16".into(),
                tflops: bf16,
                iters: 40,
            },
            GemmRate {
                dtype: "fp16".into(),
                tflops: bf16 * 0.99,
                iters: 40,
            },
        ],
        checks: vec![GemmCheck {
            dtype: "bf16".into(),
            checksum: SUM.into(),
            exact: true,
            ..Default::default()
        }],
        state: Some(GpuLoadState {
            sm_clock_mhz: Some(1980),
            max_sm_clock_mhz: Some(1980),
            temperature_c: Some(55),
            power_w: Some(690.0),
            power_limit_w: Some(700.0),
            power_default_limit_w: Some(700.0),
            clock_event_reasons: vec!["sw_power_cap".into()],
        }),
        ..Default::default()
    }
}

fn node(name: &str, gpus: Vec<GpuGemm>) -> NodeFacts {
    let mut f = NodeFacts {
        hostname: name.into(),
        ..Default::default()
    };
    f.gpu.compute = Some(GpuCompute {
        size: 8192,
        check_size: 4096,
        cublas_version: Some(120_803),
        gpus,
        ..Default::default()
    });
    f
}

const H100: &str = "NVIDIA H100 80GB HBM3";

fn eight(name: &str, rate: f64) -> NodeFacts {
    node(name, (0..8).map(|i| gpu(i, H100, rate)).collect())
}

fn ids(f: &[Finding], status: Status) -> Vec<(String, Option<u32>, String)> {
    f.iter()
        .filter(|f| f.status == status)
        .map(|f| (f.id.clone(), f.node, f.subject.clone()))
        .collect()
}

fn cluster(nodes: &[NodeFacts]) -> Vec<Finding> {
    let refs: Vec<(u32, &NodeFacts)> = nodes
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u32, f))
        .collect();
    let input = ClusterInput::of_nodes(&refs, nodes.len() as u32);
    crate::gpu::compute::cluster::gpu_compute(&input)
}

#[test]
fn one_slow_gpu_on_one_node_is_named_with_its_numbers_and_state() {
    let mut f = eight("gpu01", 740.0);
    let g3 = &mut f.gpu.compute.as_mut().unwrap().gpus[3];
    g3.rates[0].tflops = 560.0;
    g3.rates[1].tflops = 555.0;
    let s = g3.state.as_mut().unwrap();
    s.sm_clock_mhz = Some(1395);
    s.power_limit_w = Some(450.0);
    let out = check(0, &f);
    let fails = ids(&out, Status::Fail);
    assert_eq!(
        fails,
        vec![(
            crate::gpu::ids::COMPUTE_SLOW.into(),
            None,
            "GPU 3 (0000:1c:00.0)".into()
        )]
    );
    let slow = out.iter().find(|f| f.status == Status::Fail).unwrap();
    assert!(
        slow.summary.contains(
            "bf16 560 TFLOP/s, 76% of the model's reference 740 (upper quartile of 8 GPUs)"
        ),
        "{}",
        slow.summary
    );
    assert!(
        slow.summary.contains("57% of the published dense 989"),
        "{}",
        slow.summary
    );
    assert!(
        slow.summary.contains("SM clock 1395 of 1980 MHz"),
        "{}",
        slow.summary
    );
    assert!(
        slow.summary
            .contains("power limit lowered from the default 700 W"),
        "{}",
        slow.summary
    );
    assert_eq!(slow.evidence["uuid"], "GPU-00000003");
    let fix = slow.fix.as_ref().unwrap();
    assert!(
        fix.commands
            .iter()
            .any(|c| c == "sudo nvidia-smi -i 3 -pl 700"),
        "{fix:?}"
    );
    // The exact results pass.
    assert!(
        out.iter()
            .any(|f| f.id == crate::gpu::ids::COMPUTE_WRONG && f.status == Status::Pass)
    );
}

#[test]
fn a_gpu_within_the_margin_is_not_slow() {
    let mut f = eight("gpu01", 740.0);
    f.gpu.compute.as_mut().unwrap().gpus[5].rates[0].tflops = 660.0; // 89%
    assert!(ids(&check(0, &f), Status::Fail).is_empty());
}

#[test]
fn a_lone_gpu_is_judged_against_the_published_rate() {
    let f = node("solo", vec![gpu(0, H100, 400.0)]);
    let out = check(0, &f);
    let warn = ids(&out, Status::Warn);
    assert_eq!(warn.len(), 1, "{out:#?}");
    assert!(
        out[0].summary.contains("40% of the published dense 989"),
        "{}",
        out[0].summary
    );
    let fine = node("solo", vec![gpu(0, H100, 700.0)]);
    assert!(ids(&check(0, &fine), Status::Warn).is_empty());
}

#[test]
fn one_slow_node_is_named_by_the_cluster_not_by_itself() {
    for n in [2usize, 3] {
        let mut nodes: Vec<NodeFacts> = (0..n)
            .map(|i| eight(&format!("gpu{i:02}"), 740.0))
            .collect();
        nodes[n - 1] = eight(&format!("gpu{:02}", n - 1), 580.0);
        // Its own GPUs agree with each other and stay above half the published rate.
        assert!(ids(&check(0, &nodes[n - 1]), Status::Fail).is_empty());
        let out = cluster(&nodes);
        let fails = ids(&out, Status::Fail);
        assert_eq!(
            fails,
            vec![(
                crate::gpu::ids::COMPUTE_SLOW.into(),
                Some(n as u32 - 1),
                "gpus".into()
            )],
            "{n} nodes"
        );
        assert!(
            out[0]
                .summary
                .starts_with(&format!("all 8 GPUs of gpu{:02} multiply slower", n - 1)),
            "{}",
            out[0].summary
        );
    }
}

#[test]
fn a_slow_node_among_4096_is_the_only_one_named_and_the_judgment_is_fast() {
    let mut nodes: Vec<NodeFacts> = (0..4096)
        .map(|i| eight(&format!("n{i:04}"), 740.0 + (i % 7) as f64))
        .collect();
    nodes[1234] = eight("n1234", 600.0);
    let started = std::time::Instant::now();
    let out = cluster(&nodes);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(
        ids(&out, Status::Fail),
        vec![(
            crate::gpu::ids::COMPUTE_SLOW.into(),
            Some(1234),
            "gpus".into()
        )]
    );
    // Output stays bounded: the node's 8 GPUs listed once.
    assert!(out[0].summary.len() < 4000, "{}", out[0].summary.len());
}

#[test]
fn half_the_cluster_slow_does_not_move_the_reference() {
    // The upper quartile stays among the fast GPUs while fewer than three quarters are slow.
    let mut nodes: Vec<NodeFacts> = (0..4).map(|i| eight(&format!("g{i}"), 740.0)).collect();
    nodes[0] = eight("g0", 500.0);
    nodes[1] = eight("g1", 500.0);
    let fails = ids(&cluster(&nodes), Status::Fail);
    assert_eq!(fails.len(), 2, "{fails:?}");
}

#[test]
fn a_wrong_gpu_is_named_with_the_count_and_the_first_element() {
    let mut f = eight("gpu01", 740.0);
    let c = &mut f.gpu.compute.as_mut().unwrap().gpus[6].checks[0];
    c.wrong_elements = 17;
    c.wrong_rows = 3;
    c.wrong_cols = 9;
    c.checksum = "0badc0de0badc0de".into();
    c.first_wrong = Some(WrongElement {
        row: 12,
        col: 900,
        got: 1536.0,
        want: 1535.0,
    });
    let out = check(0, &f);
    let fails = ids(&out, Status::Fail);
    assert_eq!(
        fails,
        vec![(
            crate::gpu::ids::COMPUTE_WRONG.into(),
            None,
            "GPU 6 (0000:1f:00.0)".into()
        )]
    );
    let w = out
        .iter()
        .find(|f| f.id == crate::gpu::ids::COMPUTE_WRONG)
        .unwrap();
    assert!(w.summary.contains("17 elements of its bf16 product differ from the exact result (first at row 12, column 900: 1536 instead of 1535)"), "{}", w.summary);
    assert!(
        w.summary.contains(&format!(
            "checksum 0badc0de0badc0de where the others return {SUM}"
        )),
        "{}",
        w.summary
    );
    // The cluster does not name it twice.
    let others = eight("gpu02", 740.0);
    assert!(ids(&cluster(&[f, others]), Status::Fail).is_empty());
}

#[test]
fn a_lone_gpu_with_an_odd_checksum_is_named_by_the_cluster() {
    let mut nodes: Vec<NodeFacts> = (0..3)
        .map(|i| node(&format!("s{i}"), vec![gpu(0, H100, 740.0)]))
        .collect();
    nodes[2].gpu.compute.as_mut().unwrap().gpus[0].checks[0].checksum = "1111111111111111".into();
    let out = cluster(&nodes);
    assert_eq!(
        ids(&out, Status::Fail),
        vec![(
            crate::gpu::ids::COMPUTE_WRONG.into(),
            Some(2),
            "GPU 0 (0000:19:00.0)".into()
        )]
    );
    assert!(
        out[0]
            .summary
            .contains("checksum differs from the other GPUs' though no element was found wrong"),
        "{}",
        out[0].summary
    );
    // Two GPUs that disagree: no majority, nobody is accused.
    let two = &nodes[1..];
    assert!(ids(&cluster(two), Status::Fail).is_empty());
}

#[test]
fn mixed_models_are_judged_apart() {
    let a100 = node(
        "amp",
        (0..8)
            .map(|i| gpu(i, "NVIDIA A100-SXM4-80GB", 250.0))
            .collect(),
    );
    let h100 = eight("hop", 740.0);
    let l4 = node("ada", (0..2).map(|i| gpu(i, "NVIDIA L4", 95.0)).collect());
    let out = cluster(&[a100.clone(), h100, l4]);
    assert!(ids(&out, Status::Fail).is_empty(), "{out:#?}");
    assert!(ids(&check(0, &a100), Status::Warn).is_empty());
}

#[test]
fn a_skipped_test_says_why() {
    let mut f = NodeFacts::default();
    f.gpu.compute = Some(GpuCompute {
        skipped: Some("no libcublas found".into()),
        ..Default::default()
    });
    let out = check(0, &f);
    assert_eq!(out.len(), 2);
    assert!(
        out.iter()
            .all(|f| f.status == Status::Skip && f.summary.contains("no libcublas"))
    );
    // Not asked for: nothing at all.
    assert!(check(0, &NodeFacts::default()).is_empty());
}

fn timeline(gpu: u32, rates: &[f64], hot_from: Option<usize>) -> BurnTimeline {
    BurnTimeline {
        gpu,
        samples: rates
            .iter()
            .enumerate()
            .map(|(i, r)| BurnSample {
                t_s: (i + 1) as f64,
                tflops: *r,
                state: GpuLoadState {
                    sm_clock_mhz: Some(if hot_from.is_some_and(|h| i >= h) {
                        1350
                    } else {
                        1980
                    }),
                    temperature_c: Some(if hot_from.is_some_and(|h| i >= h) {
                        91
                    } else {
                        62
                    }),
                    power_w: Some(690.0),
                    clock_event_reasons: if hot_from.is_some_and(|h| i >= h) {
                        vec!["sw_power_cap".into(), "hw_thermal_slowdown".into()]
                    } else {
                        vec!["sw_power_cap".into()]
                    },
                    ..Default::default()
                },
            })
            .collect(),
    }
}

#[test]
fn a_gpu_that_throttles_under_the_burn_is_named_with_its_timeline() {
    let mut f = eight("gpu01", 740.0);
    let steady = [740.0; 30];
    let mut sag = [740.0; 30];
    for r in sag.iter_mut().skip(12) {
        *r = 560.0;
    }
    let c = f.gpu.compute.as_mut().unwrap();
    c.burn = Some(GemmBurn {
        seconds: 30,
        dtype: "bf16".into(),
        gpus: (0..8)
            .map(|g| {
                if g == 4 {
                    timeline(g, &sag, Some(12))
                } else {
                    timeline(g, &steady, None)
                }
            })
            .collect(),
        error: None,
    });
    let out = check(0, &f);
    let fails = ids(&out, Status::Fail);
    assert_eq!(
        fails,
        vec![(
            crate::gpu::ids::COMPUTE_THROTTLE.into(),
            None,
            "GPU 4".into()
        )]
    );
    let t = out
        .iter()
        .find(|f| f.id == crate::gpu::ids::COMPUTE_THROTTLE)
        .unwrap();
    assert!(
        t.summary
            .contains("slowed from 740 to 560 TFLOP/s (76%) under sustained load"),
        "{}",
        t.summary
    );
    assert!(
        t.summary.contains("clock events hw_thermal_slowdown"),
        "{}",
        t.summary
    );
    assert!(
        t.summary
            .contains("t=30s 560 TFLOP/s 1350 MHz 91 C 690 W [hw_thermal_slowdown]"),
        "{}",
        t.summary
    );
    // Reaching the power limit alone is what full load does: not judged.
    let mut calm = eight("gpu01", 740.0);
    calm.gpu.compute.as_mut().unwrap().burn = Some(GemmBurn {
        seconds: 30,
        dtype: "bf16".into(),
        gpus: (0..8).map(|g| timeline(g, &steady, None)).collect(),
        error: None,
    });
    let out = check(0, &calm);
    assert!(
        out.iter()
            .any(|f| f.id == crate::gpu::ids::COMPUTE_THROTTLE && f.status == Status::Pass)
    );
}

#[test]
fn reference_is_the_upper_quartile() {
    assert_eq!(reference(&mut [1.0, 2.0, 3.0, 4.0]), Some(3.0));
    assert_eq!(reference(&mut [5.0, 1.0]), Some(5.0));
    assert_eq!(reference(&mut [7.0]), Some(7.0));
    assert_eq!(reference(&mut []), None);
}

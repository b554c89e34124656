//! Every GPU health judgment from a fixture node tree (`tests/fixtures/gpu/<case>`): the NVML
//! snapshot, kernel log and sysfs read through the same probe code as a real node.

use crate::core::CheckContext;
use crate::core::{Finding, NodeFacts, Status};
use crate::infra::testutil::fixture_root;
use crate::probe;

fn facts(case: &str) -> NodeFacts {
    let root = fixture_root(&format!("gpu/{case}"));
    let mut gpu = probe::gpu::probe_at(&root);
    assert_eq!(gpu.nvml_error, None, "{case}");
    let ib = probe::ib::probe(&root);
    gpu.node_health = Some(probe::gpu_node::probe(&root, &gpu.gpus, &ib));
    NodeFacts {
        gpu,
        ib,
        ..Default::default()
    }
}

fn findings(case: &str) -> Vec<Finding> {
    super::check(&facts(case), &CheckContext::default())
}

/// The findings of `id`, asserting there is at least one.
fn of(fs: &[Finding], id: crate::core::FindingId) -> Vec<&Finding> {
    let v: Vec<&Finding> = fs.iter().filter(|f| f.id == id).collect();
    assert!(!v.is_empty(), "no {id} in {fs:#?}");
    v
}

fn status(fs: &[Finding], id: crate::core::FindingId) -> Status {
    of(fs, id)
        .iter()
        .map(|f| f.status)
        .max()
        .unwrap_or(Status::Skip)
}

const IDS: &[crate::core::FindingId] = &[
    crate::gpu::ids::PCIE_LINK,
    crate::gpu::ids::PCIE_REPLAY,
    crate::gpu::ids::XID,
    crate::gpu::ids::ECC,
    crate::gpu::ids::ROW_REMAP,
    crate::gpu::ids::RETIRED_PAGES,
    crate::gpu::ids::NVLINK,
    crate::gpu::ids::FABRIC_MANAGER,
    crate::gpu::ids::PEERMEM,
    crate::gpu::ids::PCIE_ACS,
    crate::gpu::ids::CLOCKS,
    crate::gpu::ids::PERSISTENCE,
    crate::gpu::ids::BANDWIDTH,
];

#[test]
fn healthy_h100_node_passes_every_check() {
    let f = facts("healthy-h100");
    let node = f.gpu.node_health.as_ref().expect("node health");
    assert_eq!(node.nvswitches, 4);
    assert_eq!(node.fabric_manager_running, Some(true));
    assert_eq!(node.peermem_module.as_deref(), Some("nvidia_peermem"));
    assert_eq!(node.virtualized, Some(false));
    assert_eq!(node.acs.error, None);
    // Above each of the 2 GPUs and the NIC: the root port and its switch downstream port carry
    // ACS (the switch's upstream port has none).
    assert_eq!(node.acs.bridges.len(), 6, "{:#?}", node.acs.bridges);
    assert_eq!(node.kernel_log.xids.len(), 1);
    let fs = super::check(&f, &CheckContext::default());
    for id in IDS {
        let st = status(&fs, *id);
        let expected = match *id {
            // H100 remaps rows; bandwidth is measured by `preflight check`, not from a tree.
            crate::gpu::ids::RETIRED_PAGES | crate::gpu::ids::BANDWIDTH => Status::Skip,
            _ => Status::Pass,
        };
        assert_eq!(st, expected, "{id}: {:#?}", of(&fs, *id));
    }
    // The benign XID 13 is information, not a problem.
    let xid = of(&fs, crate::gpu::ids::XID)[0];
    assert!(xid.summary.contains("XID 13 x1"), "{}", xid.summary);
}

#[test]
fn x8_link_at_p0_warns_with_the_gpu() {
    let fs = findings("x8-at-p0");
    let f = of(&fs, crate::gpu::ids::PCIE_LINK);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].status, Status::Warn);
    assert_eq!(f[0].subject, "GPU 1 (0000:3b:00.0)");
    assert_eq!(f[0].evidence["uuid"], "GPU-h100-0001");
    assert_eq!(f[0].evidence["current_width"], 8);
    assert!(f[0].summary.contains("x8 of x16"), "{}", f[0].summary);
    let fix = f[0].fix.as_ref().expect("fix");
    assert!(
        fix.commands
            .iter()
            .any(|c| c.contains("lspci -vv -s 0000:3b:00.0"))
    );
}

#[test]
fn idle_gpu_lowering_its_link_speed_is_no_alarm_but_a_narrow_link_still_is() {
    assert_eq!(
        status(&findings("gen1-at-p8"), crate::gpu::ids::PCIE_LINK),
        Status::Pass
    );
    // Width does not drop when idle: x8 is a fault whatever the P-state.
    let fs = findings("x8-at-p8");
    assert_eq!(status(&fs, crate::gpu::ids::PCIE_LINK), Status::Warn);
    assert!(
        !of(&fs, crate::gpu::ids::PCIE_LINK)[0]
            .summary
            .contains("gen")
    );
}

#[test]
fn xid79_within_the_window_fails_and_names_the_gpu() {
    let fs = findings("xid79-recent");
    let f = of(&fs, crate::gpu::ids::XID);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].status, Status::Fail);
    assert_eq!(f[0].subject, "GPU 1 (0000:3b:00.0)");
    assert!(
        f[0].summary.contains("fallen off the bus"),
        "{}",
        f[0].summary
    );
    assert_eq!(f[0].evidence["newest_age_s"], 600);
    assert_eq!(f[0].evidence["uuid"], "GPU-h100-0001");
    // What the terminal shows under the summary is evidence this finding carries.
    let entry = crate::catalog::get(crate::gpu::ids::XID.as_str()).unwrap();
    for key in entry.terminal_evidence {
        assert!(f[0].evidence.contains_key(*key), "{key}: {f:#?}");
    }
}

#[test]
fn xid79_outside_the_window_passes_and_a_wider_window_catches_it() {
    let fs = findings("xid79-old");
    let f = of(&fs, crate::gpu::ids::XID);
    assert_eq!(f[0].status, Status::Pass);
    assert_eq!(f[0].evidence["older"], 1);
    let wide = CheckContext {
        xid_window_s: Some(6 * 3600),
        ..Default::default()
    };
    let fs = super::check(&facts("xid79-old"), &wide);
    assert_eq!(status(&fs, crate::gpu::ids::XID), Status::Fail);
}

#[test]
fn pending_row_remap_fails() {
    let fs = findings("row-remap-pending");
    let f = of(&fs, crate::gpu::ids::ROW_REMAP);
    assert_eq!(f[0].status, Status::Fail);
    assert_eq!(f[0].evidence["gpu"], 1);
    let cmds = &f[0].fix.as_ref().expect("fix").commands;
    assert!(
        cmds.contains(&"sudo nvidia-smi -r -i 1".to_string()),
        "{cmds:?}"
    );
}

#[test]
fn inactive_nvlink_fails_naming_the_link() {
    let fs = findings("nvlink-down");
    let f = of(&fs, crate::gpu::ids::NVLINK);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].status, Status::Fail);
    assert_eq!(f[0].evidence["inactive_links"], serde_json::json!([3]));
    assert_eq!(f[0].evidence["expected"], 18);
}

#[test]
fn hgx_without_fabric_manager_fails() {
    let fs = findings("no-fabric-manager");
    let f = of(&fs, crate::gpu::ids::FABRIC_MANAGER);
    assert_eq!(f[0].status, Status::Fail);
    assert_eq!(f[0].evidence["nvswitches"], 4);
    let cmds = &f[0].fix.as_ref().expect("fix").commands;
    assert!(cmds[0].contains("systemctl enable --now nvidia-fabricmanager"));
}

#[test]
fn infiniband_without_peermem_warns_with_modprobe() {
    let fs = findings("ib-no-peermem");
    let f = of(&fs, crate::gpu::ids::PEERMEM);
    assert_eq!(f[0].status, Status::Warn);
    assert!(f[0].summary.contains("will not use GPUDirect RDMA"));
    assert_eq!(
        f[0].fix.as_ref().expect("fix").commands[0],
        "sudo modprobe nvidia_peermem"
    );
}

#[test]
fn acs_on_a_bridge_warns_with_setpci_and_skips_in_a_vm() {
    let fs = findings("acs-bridge");
    let f = of(&fs, crate::gpu::ids::PCIE_ACS);
    assert_eq!(f[0].status, Status::Warn);
    let cmds = &f[0].fix.as_ref().expect("fix").commands;
    assert!(
        cmds.contains(&"sudo setpci -s 0000:00:01.0 ECAP_ACS+0x6.w=0000".to_string()),
        "{cmds:?}"
    );
    assert!(
        cmds.contains(&"sudo setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000".to_string()),
        "{cmds:?}"
    );
    assert_eq!(
        status(&findings("acs-in-vm"), crate::gpu::ids::PCIE_ACS),
        Status::Skip
    );
}

#[test]
fn hardware_slowdown_warns() {
    let fs = findings("hw-slowdown");
    let f = of(&fs, crate::gpu::ids::CLOCKS);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].status, Status::Warn);
    assert!(
        f[0].summary.contains("hardware slowdown"),
        "{}",
        f[0].summary
    );
}

/// The cases the fixtures have no tree for: flip one field of the healthy node's facts.
fn healthy_with(edit: impl Fn(&mut crate::core::GpuHealth)) -> Vec<Finding> {
    let mut f = facts("healthy-h100");
    if let Some(h) = f.gpu.gpus[1].health.as_mut() {
        edit(h);
    }
    super::check(&f, &CheckContext::default())
}

#[test]
fn replay_counter_above_dcgm_threshold_warns() {
    let fs = healthy_with(|h| h.pcie_replay_counter = Some(81));
    assert_eq!(status(&fs, crate::gpu::ids::PCIE_REPLAY), Status::Warn);
    let fs = healthy_with(|h| h.pcie_replay_counter = Some(80));
    assert_eq!(status(&fs, crate::gpu::ids::PCIE_REPLAY), Status::Pass);
}

#[test]
fn uncorrectable_ecc_fails_and_many_correctable_warn() {
    let fs = healthy_with(|h| h.ecc_volatile_uncorrected = Some(2));
    assert_eq!(status(&fs, crate::gpu::ids::ECC), Status::Fail);
    let fs = healthy_with(|h| h.ecc_volatile_corrected = Some(5000));
    assert_eq!(status(&fs, crate::gpu::ids::ECC), Status::Warn);
}

#[test]
fn pending_retired_pages_fail_on_a_v100() {
    let fs = healthy_with(|h| {
        h.remapped_rows = None;
        h.retired_pages = Some(crate::core::RetiredPages {
            single_bit: 3,
            double_bit: 1,
            pending: true,
        });
    });
    assert_eq!(status(&fs, crate::gpu::ids::RETIRED_PAGES), Status::Fail);
}

#[test]
fn persistence_off_warns_with_nvidia_smi_pm() {
    let fs = healthy_with(|h| h.persistence_mode = Some(false));
    let f = of(&fs, crate::gpu::ids::PERSISTENCE);
    assert_eq!(f[0].status, Status::Warn);
    assert_eq!(
        f[0].fix.as_ref().expect("fix").commands[0],
        "sudo nvidia-smi -pm 1"
    );
}

#[test]
fn unsupported_queries_skip_with_nvmls_reason() {
    let fs = healthy_with(|h| {
        h.pcie_replay_counter = None;
        h.unsupported
            .insert("pcie_replay_counter".into(), "Not Supported".into());
    });
    let f = of(&fs, crate::gpu::ids::PCIE_REPLAY);
    assert_eq!(f[0].status, Status::Pass);
    assert!(
        f[0].summary.contains("GPU 1: Not Supported"),
        "{}",
        f[0].summary
    );
}

/// The healthy H100 node with these copies measured: (kind, gpu, peer, GB/s).
fn with_copies(copies: &[(&str, u32, Option<u32>, f64)]) -> NodeFacts {
    let mut f = facts("healthy-h100");
    let node = f.gpu.node_health.as_mut().expect("node");
    for (kind, gpu, peer, gb_s) in copies {
        node.bandwidth.push(crate::core::GpuBandwidth {
            kind: (*kind).into(),
            gpu: *gpu,
            peer: *peer,
            gb_s: *gb_s,
            bytes: 64 << 20,
            pci_bus_id: None,
        });
    }
    f
}

#[test]
fn slow_copies_warn_against_the_link_rate() {
    let f = with_copies(&[("h2d", 0, None, 52.0), ("h2d", 1, None, 20.0)]);
    let fs = super::check(&f, &CheckContext::default());
    let bw = of(&fs, crate::gpu::ids::BANDWIDTH);
    assert_eq!(bw.len(), 1, "{bw:#?}");
    assert_eq!(bw[0].status, Status::Warn);
    assert_eq!(bw[0].evidence["gpu"], 1);
}

#[test]
fn a_slow_peer_to_peer_pair_warns_against_the_nodes_median() {
    let f = with_copies(&[
        ("p2p", 0, Some(1), 250.0),
        ("p2p", 1, Some(2), 248.0),
        ("p2p", 2, Some(3), 40.0),
        ("p2p", 3, Some(0), 251.0),
    ]);
    let fs = super::check(&f, &CheckContext::default());
    let bw = of(&fs, crate::gpu::ids::BANDWIDTH);
    assert_eq!(bw.len(), 1, "{bw:#?}");
    assert_eq!(bw[0].status, Status::Warn);
    assert_eq!(bw[0].evidence["gpu"], 2);
    assert_eq!(bw[0].evidence["peer"], 3);
    assert!(bw[0].summary.contains("peer-to-peer"), "{}", bw[0].summary);
}

#[test]
fn a_slow_peer_to_peer_pair_names_the_gpu_as_every_gpu_finding_does() {
    // The fixture's two H100s, copied to four with their own index, bus id and UUID.
    let mut f = with_copies(&[
        ("p2p", 0, Some(1), 250.0),
        ("p2p", 1, Some(2), 248.0),
        ("p2p", 2, Some(3), 40.0),
        ("p2p", 3, Some(0), 251.0),
    ]);
    let first = f.gpu.gpus[0].clone();
    f.gpu.gpus.truncate(1);
    for i in 1..4u32 {
        let mut g = first.clone();
        g.index = i;
        g.uuid = format!("GPU-test-{i}");
        g.pci_bus_id = format!("00000000:{:02X}:00.0", 0x18 + i);
        f.gpu.gpus.push(g);
    }
    let fs = super::check(&f, &CheckContext::default());
    let bw = of(&fs, crate::gpu::ids::BANDWIDTH);
    assert_eq!(bw.len(), 1, "{bw:#?}");
    assert_eq!(bw[0].evidence["gpu"], 2);
    assert_eq!(bw[0].evidence["uuid"], "GPU-test-2");
    assert_eq!(bw[0].evidence["pci_bus_id"], "00000000:1A:00.0");
}

#[test]
fn facts_without_health_data_get_no_new_findings() {
    let mut f = facts("healthy-h100");
    for g in &mut f.gpu.gpus {
        g.health = None;
    }
    let fs = super::check(&f, &CheckContext::default());
    assert!(fs.is_empty(), "{fs:#?}");
}

#[test]
fn the_advice_says_whether_nccl_uses_gpudirect() {
    let with = facts("healthy-h100");
    let without = facts("ib-no-peermem");
    let r = super::gpudirect_reason(&[&with]).expect("reason");
    assert!(
        r.contains("NCCL will move GPU memory over InfiniBand directly"),
        "{r}"
    );
    let r = super::gpudirect_reason(&[&with, &without]).expect("reason");
    assert!(r.contains("not loaded on"), "{r}");
    assert_eq!(super::gpudirect_reason(&[&NodeFacts::default()]), None);
}

//! Sysfs trees built at test time (real layouts, PCI paths as symlinks): 8-rail HDR/NDR
//! InfiniBand with one slow and one down rail, RoCE with v1/v2, link-local and zero GIDs,
//! counters zero, over the threshold and saturated, an HCA the container lacks, and a PCIe
//! layout where NCCL's GPU-to-HCA mapping differs from enumeration order.

use super::*;
use crate::core::{Finding, Gpu, NodeFacts, Status};
use crate::infra::root::Root;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Builds a fake `/` with PCI devices under /sys/devices and the class links NCCL follows.
pub(crate) struct Sysfs {
    pub dir: tempfile::TempDir,
}

pub(crate) struct Hca<'a> {
    pub name: &'a str,
    /// Root complex ("pci0000:17") and the BDFs down to the HCA.
    pub root: &'a str,
    pub path: &'a [&'a str],
    pub rate: &'a str,
    pub state: &'a str,
    pub link_layer: &'a str,
    pub fw: &'a str,
    pub counters: &'a [(&'a str, u64)],
    pub uverbs: u32,
}

impl Sysfs {
    pub fn new() -> Self {
        Sysfs {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn root(&self) -> Root {
        Root::at(self.dir.path())
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel.trim_start_matches('/'))
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }

    fn link(&self, rel: &str, target: &str) {
        let p = self.p(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }

    /// A PCI device at `root/path...` with its /sys/bus/pci/devices link; returns its sysfs dir.
    pub fn pci(&self, root: &str, path: &[&str], iommu: Option<&str>) -> String {
        let dir = format!("/sys/devices/{root}/{}", path.join("/"));
        std::fs::create_dir_all(self.p(&dir)).unwrap();
        let bdf = path.last().unwrap();
        let bus = format!("/sys/bus/pci/devices/{bdf}");
        if !self.p(&bus).exists() {
            self.link(&bus, &format!("../../../..{dir}"));
        }
        if let Some(t) = iommu {
            self.write(&format!("{dir}/iommu_group_dir/type"), t);
            self.link(&format!("{dir}/iommu_group"), "iommu_group_dir");
        }
        dir
    }

    pub fn hca(&self, h: &Hca) {
        let dev = self.pci(h.root, h.path, Some("identity"));
        let ib = format!("{dev}/infiniband/{}", h.name);
        self.link(
            &format!("/sys/class/infiniband/{}", h.name),
            &format!("../../..{ib}"),
        );
        self.link(
            &format!("{ib}/device"),
            &format!("../../../{}", h.path.last().unwrap()),
        );
        self.link(
            &format!("{dev}/driver"),
            "../../../../bus/pci/drivers/mlx5_core",
        );
        self.write("/sys/module/mlx5_core/version", "24.10-1.1.4");
        self.write(&format!("{ib}/fw_ver"), h.fw);
        self.write(&format!("{ib}/hca_type"), "MT4129");
        let port = format!("{ib}/ports/1");
        self.write(&format!("{port}/state"), h.state);
        self.write(
            &format!("{port}/phys_state"),
            if h.state.contains("ACTIVE") {
                "5: LinkUp"
            } else {
                "3: Disabled"
            },
        );
        self.write(&format!("{port}/rate"), h.rate);
        self.write(&format!("{port}/link_layer"), h.link_layer);
        for name in [
            "symbol_error",
            "link_error_recovery",
            "link_downed",
            "port_rcv_errors",
            "excessive_buffer_overrun_errors",
            "local_link_integrity_errors",
            "port_xmit_data",
        ] {
            let v = h
                .counters
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .unwrap_or(0);
            self.write(&format!("{port}/counters/{name}"), &v.to_string());
        }
        self.write(&format!("{port}/hw_counters/local_ack_timeout_err"), "0");
        let uverbs = format!("uverbs{}", h.uverbs);
        std::fs::create_dir_all(self.p(&format!("{dev}/infiniband_verbs/{uverbs}"))).unwrap();
        self.write(&format!("/dev/infiniband/{uverbs}"), "");
    }

    pub fn gid(&self, hca: &str, index: u32, gid: &str, kind: &str, ndev: &str) {
        let port = format!("/sys/class/infiniband/{hca}/ports/1");
        self.write(&format!("{port}/gids/{index}"), gid);
        self.write(&format!("{port}/gid_attrs/types/{index}"), kind);
        self.write(&format!("{port}/gid_attrs/ndevs/{index}"), ndev);
    }

    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.p(rel)).unwrap();
    }

    pub fn facts(&self, gpus: &[Gpu]) -> NodeFacts {
        let root = self.root();
        let mut ib = crate::rdma::probe::ib::probe(&root);
        if !ib.devices.is_empty() {
            ib.gpu_pci_paths = crate::rdma::probe::paths::gpu_paths(&root, gpus);
        }
        let mut f = NodeFacts {
            hostname: "gpu01".into(),
            ib,
            ..Default::default()
        };
        f.gpu.gpus = gpus.to_vec();
        f.scale.gids = crate::rdma::probe::gid::probe(&root);
        f
    }
}

/// NVML's form of a sysfs BDF.
fn nvml(bdf: &str) -> String {
    format!("0000{}", bdf.to_ascii_uppercase())
}

/// An 8-GPU node with four PCIe switches, each holding two GPUs and two HCAs: GPU g and its
/// HCA share a downstream port of switch g/2. The HCAs are named so that enumeration order differs from the PCIe pairing:
/// `hca_for_gpu[g]` is the HCA next to GPU g.
pub(crate) fn eight_rail_node(
    rates: &[&str; 8],
    states: &[&str; 8],
    counters: &[&[(&str, u64)]; 8],
) -> (Sysfs, Vec<Gpu>, [&'static str; 8]) {
    let s = Sysfs::new();
    let hca_for_gpu = [
        "mlx5_4", "mlx5_5", "mlx5_0", "mlx5_1", "mlx5_6", "mlx5_7", "mlx5_2", "mlx5_3",
    ];
    let mut gpus = Vec::new();
    for g in 0..8u32 {
        let sw = g / 2;
        let rc = format!("pci0000:{:02x}", sw * 0x20);
        let rp = format!("0000:{:02x}:01.0", sw * 0x20);
        let up = format!("0000:{:02x}:00.0", sw * 0x20 + 1);
        let down_gpu = format!("0000:{:02x}:{:02x}.0", sw * 0x20 + 2, g % 2);
        let gpu_bdf = format!("0000:{:02x}:00.0", sw * 0x20 + 3 + g % 2);
        s.pci(&rc, &[&rp, &up, &down_gpu, &gpu_bdf], Some("identity"));
        gpus.push(Gpu {
            index: g,
            name: "NVIDIA H100 80GB HBM3".into(),
            pci_bus_id: nvml(&gpu_bdf),
            ..Default::default()
        });
        let hca_bdf = format!("0000:{:02x}:01.0", sw * 0x20 + 3 + g % 2);
        let name = hca_for_gpu[g as usize];
        let n: usize = name[5..].parse().unwrap();
        s.hca(&Hca {
            name,
            root: &rc,
            path: &[&rp, &up, &down_gpu, &hca_bdf],
            rate: rates[n],
            state: states[n],
            link_layer: "InfiniBand",
            fw: "28.39.1002",
            counters: counters[n],
            uverbs: n as u32,
        });
    }
    (s, gpus, hca_for_gpu)
}

const NDR: &str = "400 Gb/sec (4X NDR)";
const HDR: &str = "200 Gb/sec (4X HDR)";
const ACTIVE: &str = "4: ACTIVE";

fn by_id(fs: &[Finding], id: crate::core::FindingId) -> Vec<&Finding> {
    fs.iter().filter(|f| f.id == id).collect()
}

#[test]
fn rails_follow_the_pcie_path_not_the_enumeration_order() {
    let (s, gpus, hca_for_gpu) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &[&[]; 8]);
    let f = s.facts(&gpus);
    assert_eq!(f.ib.devices.len(), 8);
    let d0 = &f.ib.devices[0];
    let pci = d0.pci.as_ref().expect("pci path through the device link");
    assert_eq!(pci.bdf, "0000:23:01.0");
    assert_eq!(pci.root.as_deref(), Some("pci0000:20"));
    assert_eq!(pci.path.len(), 4);
    assert_eq!(pci.driver.as_deref(), Some("mlx5_core"));
    assert_eq!(pci.driver_version.as_deref(), Some("24.10-1.1.4"));
    assert_eq!(pci.iommu.as_deref(), Some("identity"));
    assert_eq!(d0.uverbs.as_deref(), Some("uverbs0"));
    assert_eq!(f.ib.gpu_pci_paths.len(), 8);
    let rails = map_rails(&f.ib);
    assert_eq!(rails.len(), 8);
    for (g, rail) in rails.iter().enumerate() {
        assert_eq!(rail.gpu, Some(g as u32));
        assert_eq!(rail.hca, hca_for_gpu[g], "{rail:?}");
        assert_eq!(rail.path, Some(PathKind::Pix), "{rail:?}");
    }
    // Enumeration order would have paired GPU 0 with mlx5_0; NCCL pairs it with mlx5_4.
    assert_eq!(rails[0].label(), "rail 0 (mlx5_4/1, GPU 0)");
    let out = node::check(&f);
    for id in [node::RATE, node::COUNTERS, node::CONTAINER, node::IOMMU] {
        let got = by_id(&out, id);
        assert_eq!(got.len(), 1, "{id}: {got:#?}");
        assert_eq!(got[0].status, Status::Pass, "{id}: {got:#?}");
    }
}

#[test]
fn one_rail_at_hdr_among_ndr_and_one_port_down() {
    let mut rates = [NDR; 8];
    rates[6] = HDR;
    let mut states = [ACTIVE; 8];
    states[3] = "1: DOWN";
    let (s, gpus, _) = eight_rail_node(&rates, &states, &[&[]; 8]);
    let f = s.facts(&gpus);
    let out = node::check(&f);
    let rate = by_id(&out, node::RATE);
    assert_eq!(rate.len(), 1, "{rate:#?}");
    let r = rate[0];
    assert_eq!((r.status, r.subject.as_str()), (Status::Warn, "mlx5_6/1"));
    // mlx5_6 sits next to GPU 4.
    assert!(
        r.summary
            .contains("mlx5_6/1 (rail 4, GPU 4) runs at 200 Gb/s"),
        "{}",
        r.summary
    );
    assert_eq!(r.evidence["width"], "4X");
    assert_eq!(r.evidence["speed"], "HDR");
    assert_eq!(r.evidence["expected_gbps"], 400.0);
    let cmds = &r.fix.as_ref().unwrap().commands;
    assert!(cmds.contains(&"ibstat mlx5_6 1".to_string()), "{cmds:?}");
    assert!(
        cmds.iter()
            .any(|c| c.starts_with("mlxlink -d 0000:43:01.0 -p 1")),
        "{cmds:?}"
    );
    // The down port is ib.port-down's, and counts as a missing rail across nodes.
    let down = crate::rdma::check(&f, &crate::core::CheckContext::default());
    assert!(
        down.iter()
            .any(|d| d.id == crate::rdma::ids::PORT_DOWN && d.subject == "mlx5_3/1")
    );
}

#[test]
fn counters_zero_over_the_threshold_and_saturated() {
    let mut counters: [&[(&str, u64)]; 8] = [&[]; 8];
    counters[1] = &[("symbol_error", 500), ("link_downed", 2)];
    counters[2] = &[("symbol_error", 65535), ("local_link_integrity_errors", 15)];
    let (s, gpus, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &counters);
    let f = s.facts(&gpus);
    assert_eq!(f.ib.devices[1].ports[0].counters["symbol_error"], 500);
    let out = node::check(&f);
    let c = by_id(&out, node::COUNTERS);
    assert_eq!(c.len(), 2, "{c:#?}");
    let over = c.iter().find(|f| f.subject == "mlx5_1/1").unwrap();
    assert!(
        over.summary.contains("symbol_error 500 (threshold 120"),
        "{}",
        over.summary
    );
    assert!(
        over.summary.contains("link_downed 2 (threshold 1"),
        "{}",
        over.summary
    );
    assert!(over.summary.contains("NVSentinel"), "{}", over.summary);
    let sat = c.iter().find(|f| f.subject == "mlx5_2/1").unwrap();
    assert!(
        sat.summary
            .contains("symbol_error saturated at 65535 (16-bit"),
        "{}",
        sat.summary
    );
    assert!(
        sat.summary
            .contains("local_link_integrity_errors saturated at 15 (4-bit")
    );
    assert_eq!(sat.evidence["counters"]["symbol_error"]["saturated"], 65535);
    assert_eq!(sat.evidence["saturated"], 2);
}

#[test]
fn counters_that_grew_between_two_snapshots() {
    let mut counters: [&[(&str, u64)]; 8] = [&[]; 8];
    counters[1] = &[("symbol_error", 7), ("link_downed", 250)];
    counters[2] = &[("symbol_error", 65535)];
    let (s, gpus, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &counters);
    let before = s.facts(&gpus).ib;
    assert_eq!(grew::check(&before, &before)[0].status, Status::Pass);
    // During the run: mlx5_1 flapped until its 8-bit link_downed saturated and took bit
    // errors; mlx5_2's saturated counter stays saturated; mlx5_5's ack timeouts grew.
    let port = |h: &str| format!("sys/class/infiniband/{h}/ports/1");
    let w = |rel: String, v: &str| std::fs::write(s.dir.path().join(rel), v).unwrap();
    w(format!("{}/counters/symbol_error", port("mlx5_1")), "19\n");
    w(format!("{}/counters/link_downed", port("mlx5_1")), "255\n");
    w(
        format!("{}/hw_counters/local_ack_timeout_err", port("mlx5_5")),
        "3\n",
    );
    let after = s.facts(&gpus).ib;
    let out = grew::check(&before, &after);
    assert_eq!(out.len(), 2, "{out:#?}");
    let flap = out.iter().find(|f| f.subject == "mlx5_1/1").unwrap();
    assert_eq!(flap.status, Status::Fail);
    assert!(
        flap.summary.contains("symbol_error +12 (7 -> 19)"),
        "{}",
        flap.summary
    );
    assert!(
        flap.summary.contains(
            "link_downed saturated during the run (250 -> 255, the true growth is unknown)"
        ),
        "{}",
        flap.summary
    );
    assert_eq!(flap.evidence["counters"]["link_downed"]["saturated"], 255);
    let ack = out.iter().find(|f| f.subject == "mlx5_5/1").unwrap();
    assert_eq!(ack.status, Status::Warn);
    assert!(
        ack.summary.contains("local_ack_timeout_err +3"),
        "{}",
        ack.summary
    );
    assert!(!out.iter().any(|f| f.subject == "mlx5_2/1"));
}

#[test]
fn an_hca_on_the_host_but_not_in_the_container() {
    let (s, gpus, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &[&[]; 8]);
    s.remove("/dev/infiniband/uverbs5");
    let out = node::check(&s.facts(&gpus));
    let c = by_id(&out, node::CONTAINER);
    assert_eq!(c[0].status, Status::Warn);
    assert!(
        c[0].summary.contains("mlx5_5 (/dev/infiniband/uverbs5)"),
        "{}",
        c[0].summary
    );
    assert!(c[0].summary.contains("falls back to TCP sockets"));
    assert_eq!(c[0].evidence["missing"], serde_json::json!(["mlx5_5"]));
}

#[test]
fn a_translating_iommu_on_a_gpu_warns() {
    let (s, gpus, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &[&[]; 8]);
    let gpu0 = s
        .dir
        .path()
        .join("sys/bus/pci/devices/0000:03:00.0/iommu_group/type");
    std::fs::write(gpu0, "DMA-FQ\n").unwrap();
    let out = node::check(&s.facts(&gpus));
    let i = by_id(&out, node::IOMMU)[0];
    assert_eq!(i.status, Status::Warn);
    assert!(i.summary.contains("GPU 0 (DMA-FQ)"), "{}", i.summary);
    assert!(i.fix.as_ref().unwrap().hint.contains("iommu=pt"));
}

/// A RoCE node: one HCA with v1 and v2 GIDs, link-local, IPv4-mapped and zero entries.
pub(crate) fn roce_node(ipv4: bool) -> NodeFacts {
    let s = Sysfs::new();
    s.hca(&Hca {
        name: "mlx5_0",
        root: "pci0000:00",
        path: &["0000:00:02.0", "0000:3b:00.0"],
        rate: "100 Gb/sec (4X EDR)",
        state: ACTIVE,
        link_layer: "Ethernet",
        fw: "22.36.1010",
        counters: &[],
        uverbs: 0,
    });
    s.gid(
        "mlx5_0",
        0,
        "fe80:0000:0000:0000:0e42:a1ff:fe65:8c2e",
        "IB/RoCE v1",
        "ens1f0np0",
    );
    s.gid(
        "mlx5_0",
        1,
        "fe80:0000:0000:0000:0e42:a1ff:fe65:8c2e",
        "RoCE v2",
        "ens1f0np0",
    );
    if ipv4 {
        s.gid(
            "mlx5_0",
            2,
            "0000:0000:0000:0000:0000:ffff:0a03:0015",
            "IB/RoCE v1",
            "ens1f0np0",
        );
        s.gid(
            "mlx5_0",
            3,
            "0000:0000:0000:0000:0000:ffff:0a03:0015",
            "RoCE v2",
            "ens1f0np0",
        );
    }
    s.gid(
        "mlx5_0",
        4,
        "0000:0000:0000:0000:0000:0000:0000:0000",
        "RoCE v2",
        "ens1f0np0",
    );
    s.facts(&[])
}

#[test]
fn roce_gids_v1_v2_link_local_and_zero() {
    let f = roce_node(true);
    let gids: Vec<u32> = f.scale.gids.iter().map(|g| g.index).collect();
    assert_eq!(gids, [0, 1, 2, 3], "the zero GID is left out");
    let rails = map_rails(&f.ib);
    assert_eq!(rails.len(), 1);
    assert_eq!(rails[0].gpu, None);
    assert_eq!(rails[0].label(), "rail 0 (mlx5_0/1)");
}

#[test]
fn no_rdma_devices_skip_with_the_reason() {
    let s = Sysfs::new();
    let f = s.facts(&[]);
    assert!(f.ib.gpu_pci_paths.is_empty() && f.ib.dev_infiniband.is_none());
    let out = node::check(&f);
    assert_eq!(out.len(), 4);
    assert!(
        out.iter()
            .all(|f| f.status == Status::Skip && f.summary.contains("no InfiniBand"))
    );
    let _ = Path::new("/");
}

fn cluster_findings(nodes: &[NodeFacts]) -> Vec<Finding> {
    let pairs: Vec<(u32, &NodeFacts)> = nodes
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u32, f))
        .collect();
    across::check_cluster(&crate::core::ClusterInput::of_nodes(
        &pairs,
        nodes.len() as u32,
    ))
}

fn named(mut f: NodeFacts, host: &str) -> NodeFacts {
    f.hostname = host.into();
    f
}

#[test]
fn across_nodes_a_slow_node_fewer_rails_and_mixed_firmware() {
    let (a, ga, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &[&[]; 8]);
    let (b, gb, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &[&[]; 8]);
    // Node 3 trained every rail at HDR: uniform on the node, slow against the cluster.
    let (c, gc, _) = eight_rail_node(&[HDR; 8], &[ACTIVE; 8], &[&[]; 8]);
    let mut states = [ACTIVE; 8];
    states[3] = "1: DOWN";
    let (d, gd, _) = eight_rail_node(&[NDR; 8], &states, &[&[]; 8]);
    let mut nodes = vec![
        named(a.facts(&ga), "gpu01"),
        named(b.facts(&gb), "gpu02"),
        named(c.facts(&gc), "gpu03"),
        named(d.facts(&gd), "gpu04"),
    ];
    let out = cluster_findings(&nodes);
    let rate = by_id(&out, node::RATE);
    // Rail 7 (mlx5_3) is down on gpu04, three nodes remain on it: still judged.
    assert_eq!(rate.len(), 8, "{rate:#?}");
    assert!(rate.iter().all(|f| f.node == Some(2)));
    assert!(
        rate.iter().any(|f| f.summary.starts_with(
            "mlx5_4/1 (rail 0, GPU 0) on rank 2 (gpu03) runs at 200 Gb/s (200 Gb/sec (4X HDR)) while rail 0 runs at 400 Gb/s on gpu[01-02,04]"
        )),
        "{:#?}",
        rate.iter().map(|f| &f.summary).collect::<Vec<_>>()
    );
    let rails = by_id(&out, across::RAILS);
    assert_eq!(rails.len(), 1);
    assert_eq!((rails[0].status, rails[0].node), (Status::Warn, Some(3)));
    assert!(
        rails[0]
            .summary
            .contains("has 7 working rail(s) while gpu[01-03] have 8"),
        "{}",
        rails[0].summary
    );
    assert_eq!(
        rails[0].evidence["lacking"],
        serde_json::json!(["mlx5_3/1"])
    );
    assert_eq!(by_id(&out, across::FIRMWARE)[0].status, Status::Pass);
    nodes[1].ib.devices[0].fw_ver = Some("28.41.1000".into());
    let out = cluster_findings(&nodes);
    let fw = by_id(&out, across::FIRMWARE)[0];
    assert_eq!(fw.status, Status::Warn);
    assert!(
        fw.summary
            .contains("MT4129 firmware 28.39.1002 on gpu[01-04], 28.41.1000 on gpu02"),
        "{}",
        fw.summary
    );
    assert_eq!(by_id(&out, across::ROCE_GID)[0].status, Status::Skip);
    // Two nodes that disagree on a rail's rate cannot tell which one is slow.
    let two = cluster_findings(&nodes[1..3]);
    assert!(by_id(&two, node::RATE).is_empty(), "{two:#?}");
}

#[test]
fn the_roce_gid_nccl_picks_must_be_of_one_kind() {
    let nodes = vec![named(roce_node(true), "r1"), named(roce_node(true), "r2")];
    let out = cluster_findings(&nodes);
    let g = by_id(&out, across::ROCE_GID)[0];
    assert_eq!(g.status, Status::Pass, "{g:#?}");
    assert!(g.summary.contains("index 3 everywhere"), "{}", g.summary);
    let nodes = vec![named(roce_node(true), "r1"), named(roce_node(false), "r2")];
    let out = cluster_findings(&nodes);
    let g = by_id(&out, across::ROCE_GID)[0];
    assert_eq!(g.status, Status::Warn);
    assert!(
        g.summary
            .contains("RoCE v2 IPv4-mapped on r1; RoCE v2 link-local only on r2"),
        "{}",
        g.summary
    );
    assert_eq!(
        g.evidence["gids"]["0"],
        serde_json::json!(["mlx5_0/1: index 3 RoCE v2 IPv4-mapped"])
    );
}

fn input_of<'a>(pairs: &'a [(u32, &'a NodeFacts)]) -> crate::core::ClusterInput<'a> {
    crate::core::ClusterInput::of_nodes(pairs, pairs.len() as u32)
}

#[test]
fn a_fixture_cluster_with_one_bad_rail_names_node_hca_and_gpu() {
    use super::localise::{RailResult, localise, retest_plan};
    let trees: Vec<(Sysfs, Vec<Gpu>)> = (0..4)
        .map(|_| {
            let (s, g, _) = eight_rail_node(&[NDR; 8], &[ACTIVE; 8], &[&[]; 8]);
            (s, g)
        })
        .collect();
    let nodes: Vec<NodeFacts> = trees
        .iter()
        .enumerate()
        .map(|(i, (s, g))| named(s.facts(g), &format!("gpu{:02}", i + 1)))
        .collect();
    let pairs: Vec<(u32, &NodeFacts)> = nodes
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u32, f))
        .collect();
    let input = input_of(&pairs);
    let mut results = Vec::new();
    for (a, b) in [(0, 1), (1, 2), (2, 3), (0, 3), (0, 2), (1, 3)] {
        for rail in 0..8 {
            let bad = rail == 5 && (a == 2 || b == 2);
            results.push(RailResult {
                a,
                b,
                rail,
                gbps: if bad { None } else { Some(370.0 + rail as f64) },
                error: bad.then(|| format!("NET/IB : Got completion from peer 10.0.0.{} with status=12 opcode=0 len=0 vendor err 129 (Send)", if a == 2 { b + 1 } else { a + 1 })),
                round: 0,
            });
        }
    }
    let plan = retest_plan(&results, &localise(&results));
    for (a, b, rail) in plan {
        let bad = rail == 5 && (a == 2 || b == 2);
        results.push(RailResult {
            a,
            b,
            rail,
            gbps: (!bad).then_some(371.0),
            error: bad.then(|| "NCCL watchdog: no progress in 30 s".into()),
            round: 1,
        });
    }
    let out = fault::check(&input, &results);
    assert_eq!(out.len(), 1, "{out:#?}");
    let f = &out[0];
    assert_eq!((f.status, f.node), (Status::Fail, Some(2)));
    // GPU 5's HCA is mlx5_7 on this PCIe layout.
    assert_eq!(f.subject, "gpu03 rail 5 (mlx5_7/1, GPU 5)");
    assert!(
        f.summary.starts_with(
            "rail 5 (mlx5_7/1, GPU 5) of rank 2 (gpu03): NCCL send/recv fails with gpu[01-02,04]"
        ),
        "{}",
        f.summary
    );
    assert!(f.summary.contains("confirmed by a retest"), "{}", f.summary);
    let cmds = &f.fix.as_ref().unwrap().commands;
    assert!(
        cmds.iter()
            .any(|c| c.starts_with("ssh gpu03 mlxlink -d 0000:44:01.0 -p 1")),
        "{cmds:?}"
    );
    assert!(
        cmds.iter().any(|c| c.starts_with(
            "export NCCL_IB_HCA==mlx5_4:1,mlx5_5:1,mlx5_0:1,mlx5_1:1,mlx5_6:1,mlx5_2:1,mlx5_3:1"
        )),
        "{cmds:?}"
    );
    assert_eq!(fault::check(&input, &[])[0].status, Status::Skip);
}

#[test]
fn a_node_with_a_slow_rail_bad_counters_and_an_hca_missing_in_the_container() {
    let mut rates = [NDR; 8];
    rates[6] = HDR;
    let mut counters: [&[(&str, u64)]; 8] = [&[]; 8];
    counters[1] = &[("symbol_error", 65535), ("link_downed", 3)];
    let (s, gpus, _) = eight_rail_node(&rates, &[ACTIVE; 8], &counters);
    s.remove("/dev/infiniband/uverbs5");
    let f = s.facts(&gpus);
    let out = node::check(&f);
    let warned: Vec<(&str, &str)> = out
        .iter()
        .filter(|f| f.status == Status::Warn)
        .map(|f| (f.id.as_str(), f.subject.as_str()))
        .collect();
    assert_eq!(
        warned,
        [
            (node::RATE.as_str(), "mlx5_6/1"),
            (node::COUNTERS.as_str(), "mlx5_1/1"),
            (node::CONTAINER.as_str(), "/dev/infiniband"),
        ]
    );
    // `preflight check --facts` on this node gives the notes' node sample.
    if let Ok(path) = std::env::var("PREFLIGHT_SAVE_RAILS_FACTS") {
        std::fs::write(path, serde_json::to_string_pretty(&f).unwrap_or_default())
            .unwrap_or_default();
    }
}

//! Rails as NCCL finds them: each GPU takes the HCA closest to it on PCIe (fewest bridges
//! between them, never one under another root complex while a closer one exists), not the HCA
//! of the same enumeration index. Rail r is GPU r with its HCA.

use crate::core::{GpuPciPath, IbDevice, IbFacts, IbPort};

/// How far apart a GPU and an HCA sit, in NCCL's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathKind {
    /// Behind one PCIe switch (at most one bridge between them).
    Pix,
    /// Behind several PCIe switches, under one root port.
    Pxb,
    /// Through the CPU's host bridge (one root complex, different root ports).
    Phb,
    /// Across CPU sockets or root complexes.
    Sys,
}

impl PathKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::Pix => "PIX",
            PathKind::Pxb => "PXB",
            PathKind::Phb => "PHB",
            PathKind::Sys => "SYS",
        }
    }
}

/// One rail: a GPU (when the node has GPUs) and the HCA port NCCL pairs with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rail {
    /// Rail number: the GPU's index, else the HCA's position in PCI order.
    pub index: u32,
    pub gpu: Option<u32>,
    pub gpu_bdf: Option<String>,
    pub hca: String,
    pub port: u32,
    pub hca_bdf: Option<String>,
    /// PCI bridges between the GPU and the HCA (None without a GPU).
    pub hops: Option<usize>,
    pub path: Option<PathKind>,
}

impl Rail {
    /// "mlx5_3/1".
    pub fn port_name(&self) -> String {
        format!("{}/{}", self.hca, self.port)
    }

    /// "rail 3 (mlx5_3/1, GPU 3)".
    pub fn label(&self) -> String {
        match self.gpu {
            Some(g) => format!("rail {} ({}, GPU {g})", self.index, self.port_name()),
            None => format!("rail {} ({})", self.index, self.port_name()),
        }
    }
}

/// The RDMA ports that can be rails: every port of an HCA, ACTIVE or not (a down rail is still
/// the rail of its GPU).
fn nets(ib: &IbFacts) -> Vec<(&IbDevice, &IbPort)> {
    let mut out: Vec<(&IbDevice, &IbPort)> = ib
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .collect();
    out.sort_by(|a, b| {
        let key = |x: &(&IbDevice, &IbPort)| {
            (
                x.0.pci.as_ref().map(|p| p.bdf.clone()),
                x.0.name.clone(),
                x.1.port,
            )
        };
        key(a).cmp(&key(b))
    });
    out
}

/// Bridges between two devices on their PCIe paths, and NCCL's name for that distance.
pub fn distance(
    a_root: Option<&str>,
    a: &[String],
    b_root: Option<&str>,
    b: &[String],
) -> (usize, PathKind) {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let hops = (a.len() - common) + (b.len() - common);
    let kind = if a_root != b_root || a_root.is_none() {
        PathKind::Sys
    } else if common == 0 {
        PathKind::Phb
    } else if hops <= 2 {
        PathKind::Pix
    } else {
        PathKind::Pxb
    };
    (hops, kind)
}

/// The node's rails. With GPU paths: each GPU, in index order, takes the closest HCA port not
/// yet taken (the closest taken one when all close ones are); the HCAs left over follow as
/// rails without a GPU. Without GPU paths: the HCA ports in PCI order.
pub fn map_rails(ib: &IbFacts) -> Vec<Rail> {
    let nets = nets(ib);
    let mut gpus: Vec<&GpuPciPath> = ib.gpu_pci_paths.iter().collect();
    gpus.sort_by_key(|g| g.gpu);
    let mut taken = vec![false; nets.len()];
    let mut rails = Vec::new();
    if !nets.is_empty() {
        for g in &gpus {
            let scored: Vec<(usize, (PathKind, usize))> = nets
                .iter()
                .enumerate()
                .filter_map(|(i, (d, _))| {
                    let pci = d.pci.as_ref()?;
                    let (hops, kind) =
                        distance(g.root.as_deref(), &g.path, pci.root.as_deref(), &pci.path);
                    Some((i, (kind, hops)))
                })
                .collect();
            let Some(best) = scored.iter().map(|(_, s)| *s).min() else {
                continue;
            };
            let closest: Vec<usize> = scored
                .iter()
                .filter(|(_, s)| *s == best)
                .map(|(i, _)| *i)
                .collect();
            let pick = closest
                .iter()
                .copied()
                .find(|i| !taken[*i])
                .unwrap_or(closest[g.gpu as usize % closest.len()]);
            taken[pick] = true;
            let (d, p) = nets[pick];
            rails.push(Rail {
                index: g.gpu,
                gpu: Some(g.gpu),
                gpu_bdf: Some(g.bdf.clone()),
                hca: d.name.clone(),
                port: p.port,
                hca_bdf: d.pci.as_ref().map(|p| p.bdf.clone()),
                hops: Some(best.1),
                path: Some(best.0),
            });
        }
    }
    let mut next = rails.iter().map(|r| r.index + 1).max().unwrap_or(0);
    for (i, (d, p)) in nets.iter().enumerate() {
        if taken[i] || rails.iter().any(|r| r.hca == d.name && r.port == p.port) {
            continue;
        }
        rails.push(Rail {
            index: next,
            gpu: None,
            gpu_bdf: None,
            hca: d.name.clone(),
            port: p.port,
            hca_bdf: d.pci.as_ref().map(|p| p.bdf.clone()),
            hops: None,
            path: None,
        });
        next += 1;
    }
    rails
}

/// The port behind a rail.
pub fn port_of<'a>(ib: &'a IbFacts, rail: &Rail) -> Option<(&'a IbDevice, &'a IbPort)> {
    let d = ib.devices.iter().find(|d| d.name == rail.hca)?;
    let p = d.ports.iter().find(|p| p.port == rail.port)?;
    Some((d, p))
}

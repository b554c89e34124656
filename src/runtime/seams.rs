//! Test seams: what a test may put in place of the machine (fake GPUs, an RDMA fixture tree, a
//! ring that corrupts a value, the per-rail children's network). The runtime asks a [`Seams`]
//! (hyperfine's `Executor` pattern): [`Real`] changes nothing; [`Fakes`] carries the values the
//! edge (`config`, from the `PREFLIGHT_TEST_*` variables) gave it. Nothing below the edge reads
//! the environment for them.

use preflight_checks::model::{Gpu, NodeFacts};
use preflight_checks::probe;
use preflight_checks::root::Root;
use std::path::PathBuf;
use std::sync::Arc;

/// What the runtime asks where a test may stand in for the machine.
pub trait Seams: std::fmt::Debug + Send + Sync {
    /// Changes a node's freshly probed facts (fake GPUs, a fixture's RDMA inventory).
    fn probed(&self, _facts: &mut NodeFacts) {}
    /// Where this node's RDMA inventory is read (both snapshots of the counters).
    fn rdma_root(&self, root: &Root) -> Root {
        root.clone()
    }
    /// Whether this node perturbs one value it sends in the TCP ring (so a test proves wrong
    /// values are caught).
    fn corrupt_ring(&self) -> bool {
        false
    }
    /// The network the per-rail children run over instead of `IB`, counted as the rail's path.
    fn rail_net(&self) -> Option<&str> {
        None
    }
}

/// A shared handle on the seams a job runs with.
pub type SeamsRef = Arc<dyn Seams>;

/// The machine itself: every seam as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct Real;

impl Seams for Real {}

/// The real machine's seams, as a handle.
pub fn real() -> SeamsRef {
    Arc::new(Real)
}

/// Values that stand in for the machine in tests (from the variables in [`vars`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fakes {
    /// This many fake GPUs (at most 16), replacing NVML's.
    pub gpus: Option<u32>,
    /// The fake NCCL worker, taken as the libnccl of a node with fake GPUs.
    pub nccl_worker: Option<String>,
    /// PCI addresses of the fake GPUs, in GPU order, for the rail mapping.
    pub gpu_buses: Option<Vec<String>>,
    /// A fixture tree whose `/sys/class/infiniband` (and GPUs' `/sys/bus/pci/devices`) is this
    /// node's RDMA inventory; everything else is probed from the real root.
    pub rdma_root: Option<PathBuf>,
    /// Perturb one value this node sends in the TCP ring.
    pub corrupt_ring: bool,
    /// `NCCL_NET` of the per-rail children instead of `IB` (a machine without RDMA).
    pub rail_net: Option<String>,
}

impl Fakes {
    /// Whether any seam is faked: the real machine's seams otherwise.
    pub fn any(&self) -> bool {
        *self != Fakes::default()
    }

    /// These fakes as a handle, or [`Real`] when none is set.
    pub fn into_ref(self) -> SeamsRef {
        if self.any() { Arc::new(self) } else { real() }
    }

    fn fake_gpus(&self, facts: &mut NodeFacts) {
        let Some(n) = self.gpus else {
            return;
        };
        facts.gpu.nvml_error = None;
        facts.gpu.gpus = (0..n.min(16))
            .map(|i| Gpu {
                index: i,
                name: format!("fake GPU {i} ({})", vars::FAKE_GPUS),
                uuid: format!("GPU-fake-{i}"),
                ..Default::default()
            })
            .collect();
        if let Some(worker) = &self.nccl_worker {
            facts.nccl.library = Some(worker.clone());
            facts.nccl.error = None;
        }
    }

    fn fixture_rdma(&self, facts: &mut NodeFacts) {
        let Some(dir) = &self.rdma_root else {
            return;
        };
        let root = Root::at(dir);
        if let Some(buses) = &self.gpu_buses {
            for (g, bus) in facts.gpu.gpus.iter_mut().zip(buses) {
                g.pci_bus_id = bus.trim().to_string();
            }
        }
        facts.ib = probe::ib::probe(&root);
        if !facts.ib.devices.is_empty() {
            facts.ib.gpu_pci_paths = probe::rdma::gpu_paths(&root, &facts.gpu.gpus);
        }
    }
}

/// The variables the edge (`config::seams`) reads into [`Fakes`]; named here too because what a
/// fake does says which variable made it (a fake GPU's name, the corrupting node's log line).
pub mod vars {
    /// `N`: N fake GPUs, and `PREFLIGHT_NCCL_WORKER` (the fake NCCL worker) as the libnccl, so
    /// the NCCL all-reduce runs end to end in CI.
    pub const FAKE_GPUS: &str = "PREFLIGHT_TEST_FAKE_GPUS";
    /// The fake GPUs' PCI addresses, comma-separated in GPU order (with [`RDMA_ROOT`]).
    pub const FAKE_GPU_BUSES: &str = "PREFLIGHT_TEST_FAKE_GPU_BUSES";
    /// A fixture tree that stands in for this node's RDMA inventory (both snapshots read it).
    pub const RDMA_ROOT: &str = "PREFLIGHT_TEST_RDMA_ROOT";
    /// Set: this node perturbs one value it sends in the TCP ring.
    pub const CORRUPT_ALLREDUCE: &str = "PREFLIGHT_TEST_CORRUPT_ALLREDUCE";
    /// The per-rail children's `NCCL_NET` instead of `IB` (never on a real cluster).
    pub const RAIL_NCCL_NET: &str = "PREFLIGHT_TEST_RAIL_NCCL_NET";
}

impl Seams for Fakes {
    fn probed(&self, facts: &mut NodeFacts) {
        self.fake_gpus(facts);
        self.fixture_rdma(facts);
    }

    fn rdma_root(&self, root: &Root) -> Root {
        match &self.rdma_root {
            Some(dir) => Root::at(dir),
            None => root.clone(),
        }
    }

    fn corrupt_ring(&self) -> bool {
        self.corrupt_ring
    }

    fn rail_net(&self) -> Option<&str> {
        self.rail_net.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_machine_changes_nothing_and_fakes_change_what_they_name() {
        let mut facts = NodeFacts::default();
        Real.probed(&mut facts);
        assert_eq!(facts, NodeFacts::default());
        assert!(!Real.corrupt_ring() && Real.rail_net().is_none());
        assert!(!Fakes::default().any());

        let fakes = Fakes {
            gpus: Some(40),
            nccl_worker: Some("/bin/worker".into()),
            corrupt_ring: true,
            rail_net: Some("Socket".into()),
            ..Default::default()
        };
        fakes.probed(&mut facts);
        assert_eq!(facts.gpu.gpus.len(), 16, "at most 16 fake GPUs");
        assert!(facts.gpu.gpus[3].name.contains(vars::FAKE_GPUS));
        assert_eq!(facts.nccl.library.as_deref(), Some("/bin/worker"));
        assert!(fakes.corrupt_ring());
        assert_eq!(fakes.rail_net(), Some("Socket"));
        let root = Root::at("/nowhere");
        assert_eq!(fakes.rdma_root(&root).path("/sys"), root.path("/sys"));
        let tree = Fakes {
            rdma_root: Some("/fixture".into()),
            ..Default::default()
        };
        assert_eq!(
            tree.rdma_root(&root).path("/sys"),
            Root::at("/fixture").path("/sys")
        );
    }
}

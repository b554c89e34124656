//! An NVML snapshot: a JSON file in a fixture tree (`/nvml-snapshot.json`) that answers the
//! [`GpuBackend`] queries in NVML's place, so GPU fixtures (an x8 link, a pending row remap,
//! an inactive NVLink) run through the same probe code as a real node.
//!
//! ```json
//! {"driver_version": "570.124.06", "cuda_driver_version": 12080,
//!  "devices": [{"name": {"Ok": "NVIDIA H100 80GB HBM3"}, "health": {"pcie": {...}}}]}
//! ```

use super::{DeviceReading, GpuBackend};
use crate::infra::root::Root;
use serde::Deserialize;

/// Where a fixture tree keeps its snapshot.
pub const SNAPSHOT_PATH: &str = "/nvml-snapshot.json";

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<i32>,
    pub devices: Vec<DeviceReading>,
}

/// The tree's snapshot: None on the real `/` or when the tree has none; Err when it is broken.
pub fn in_tree(root: &Root) -> Option<Result<SnapshotBackend, String>> {
    if root.is_system() || !root.exists(SNAPSHOT_PATH) {
        return None;
    }
    Some(load(root))
}

fn load(root: &Root) -> Result<SnapshotBackend, String> {
    let text = root
        .read(SNAPSHOT_PATH)
        .map_err(|e| format!("NVML snapshot {SNAPSHOT_PATH}: {e}"))?;
    let snap: Snapshot = serde_json::from_str(&text)
        .map_err(|e| format!("NVML snapshot {SNAPSHOT_PATH} is not valid: {e}"))?;
    Ok(SnapshotBackend {
        snap: std::sync::Mutex::new(snap),
    })
}

/// Answers the backend queries from a snapshot.
pub struct SnapshotBackend {
    // `device` hands each reading out once (DeviceReading is not Clone).
    snap: std::sync::Mutex<Snapshot>,
}

impl GpuBackend for SnapshotBackend {
    fn driver_version(&self) -> Result<String, String> {
        self.lock()
            .driver_version
            .clone()
            .ok_or_else(|| "not in the snapshot".into())
    }

    fn cuda_driver_version(&self) -> Result<i32, String> {
        self.lock()
            .cuda_driver_version
            .ok_or_else(|| "not in the snapshot".into())
    }

    fn device_count(&self) -> Result<u32, String> {
        Ok(self.lock().devices.len() as u32)
    }

    fn device(&self, index: u32) -> Result<DeviceReading, String> {
        let mut snap = self.lock();
        snap.devices
            .get_mut(index as usize)
            .map(std::mem::take)
            .ok_or_else(|| format!("no device {index} in the snapshot"))
    }
}

impl SnapshotBackend {
    fn lock(&self) -> std::sync::MutexGuard<'_, Snapshot> {
        self.snap.lock().unwrap_or_else(|p| p.into_inner())
    }
}

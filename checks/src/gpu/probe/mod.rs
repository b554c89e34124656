//! GPUs through NVML (loaded at run time; a missing driver is a fact, not a crash).
//!
//! [`NvmlSource`] is the only code that calls NVML. It reads through the small
//! [`GpuBackend`] trait, so the assembly of [`GpuFacts`] (per-GPU errors, process
//! names) is tested with fakes; [`GpuSource`] lets callers swap the whole probe. A fixture
//! tree may carry an NVML snapshot (`/nvml-snapshot.json`, see [`snapshot`]) that
//! stands in for NVML, as the tree stands in for sysfs and the kernel log.

pub mod kmsg;
pub mod load;
pub mod node;
mod nvml_health;
pub mod snapshot;

use crate::core::{Gpu, GpuFacts, GpuHealth, GpuProcess};
use crate::infra::root::Root;
use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use std::ffi::OsStr;

/// Anything that can report the GPUs of this node.
pub trait GpuSource {
    fn snapshot(&self) -> GpuFacts;
}

/// A per-field query result: None when not asked, Err with the reason when it failed.
pub type Field<T> = Option<Result<T, String>>;

/// One GPU as a backend reads it; each field fails on its own. An NVML snapshot file is a list
/// of these (`{"name": {"Ok": "NVIDIA H100"}, "memory": {"Err": "GPU is lost"}, ...}`).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct DeviceReading {
    pub name: Field<String>,
    pub uuid: Field<String>,
    pub pci_bus_id: Field<String>,
    /// (used, total) bytes.
    pub memory: Field<(u64, u64)>,
    /// (pid, used bytes) of compute processes.
    pub processes: Field<Vec<(u32, Option<u64>)>>,
    pub mig_enabled: Field<bool>,
    pub mig_devices: Vec<String>,
    /// PCIe, memory, NVLink, clocks, fabric; each query's failure inside.
    pub health: Option<GpuHealth>,
}

/// The queries the probe needs, one level above NVML.
pub trait GpuBackend {
    fn driver_version(&self) -> Result<String, String>;
    /// As NVML encodes it: 12080 for 12.8.
    fn cuda_driver_version(&self) -> Result<i32, String>;
    fn device_count(&self) -> Result<u32, String>;
    /// Reads one GPU; Err when the device handle itself cannot be had.
    fn device(&self, index: u32) -> Result<DeviceReading, String>;
    /// NVML's own process name, used when /proc has no entry (pid namespaces).
    fn process_name(&self, _pid: u32) -> Option<String> {
        None
    }
}

/// The real probe: NVML, with /proc read through `root` for process names.
#[derive(Clone, Debug, Default)]
pub struct NvmlSource {
    pub root: Root,
}

impl GpuSource for NvmlSource {
    fn snapshot(&self) -> GpuFacts {
        if let Some(snap) = snapshot::in_tree(&self.root) {
            return match snap {
                Ok(backend) => collect(&backend, &self.root),
                Err(reason) => GpuFacts {
                    nvml_error: Some(reason),
                    ..Default::default()
                },
            };
        }
        match init_nvml() {
            Ok(nvml) => collect(&NvmlBackend { nvml }, &self.root),
            Err(reason) => GpuFacts {
                nvml_error: Some(reason),
                ..Default::default()
            },
        }
    }
}

/// Probes this machine's GPUs. Never panics; without a driver it returns `nvml_error`.
pub fn probe() -> GpuFacts {
    NvmlSource::default().snapshot()
}

/// Probes the GPUs of `root`: NVML on the real `/`, the tree's NVML snapshot when it has one.
pub fn probe_at(root: &Root) -> GpuFacts {
    NvmlSource { root: root.clone() }.snapshot()
}

/// Library names tried after the default (`libnvidia-ml.so.1`): the unversioned name and the
/// usual absolute paths, for containers whose linker cache does not list the driver's library.
const FALLBACK_LIBS: &[&str] = &[
    "libnvidia-ml.so",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
    "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib/wsl/lib/libnvidia-ml.so.1",
];

pub(crate) fn init_nvml() -> Result<Nvml, String> {
    let first = match Nvml::init() {
        Ok(n) => return Ok(n),
        Err(e) => e,
    };
    if !matches!(first, NvmlError::LibloadingError(_)) {
        return Err(explain_init_error(&first));
    }
    for lib in FALLBACK_LIBS {
        if lib.starts_with('/') && !std::path::Path::new(lib).exists() {
            continue;
        }
        match Nvml::builder().lib_path(OsStr::new(lib)).init() {
            Ok(n) => return Ok(n),
            Err(NvmlError::LibloadingError(_)) => continue,
            Err(e) => return Err(explain_init_error(&e)),
        }
    }
    Err(explain_init_error(&first))
}

/// A reason a person can act on.
pub fn explain_init_error(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(inner) => format!(
            "NVIDIA driver library libnvidia-ml.so.1 not found: no NVIDIA driver installed, or \
             a container started without GPU access ({inner})"
        ),
        NvmlError::DriverNotLoaded => {
            "NVIDIA driver is installed but not loaded (nvidia kernel module missing)".into()
        }
        NvmlError::NoPermission => {
            "no permission to talk to the NVIDIA driver (check /dev/nvidia* permissions)".into()
        }
        NvmlError::LibRmVersionMismatch => {
            "NVIDIA driver and kernel module versions differ (driver updated without reboot)".into()
        }
        other => format!("NVML could not start: {other}"),
    }
}

/// "12.8" from NVML's 12080.
pub fn format_cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Builds the facts from any backend; per-GPU failures land in `Gpu.error`.
pub fn collect(backend: &dyn GpuBackend, root: &Root) -> GpuFacts {
    let mut facts = GpuFacts {
        driver_version: backend.driver_version().ok(),
        cuda_driver_version: backend.cuda_driver_version().ok().map(format_cuda_version),
        ..Default::default()
    };
    let count = match backend.device_count() {
        Ok(n) => n,
        Err(e) => {
            facts.nvml_error = Some(format!("NVML loaded but cannot count GPUs: {e}"));
            return facts;
        }
    };
    facts.gpus = (0..count).map(|i| read_gpu(backend, root, i)).collect();
    facts
}

fn read_gpu(backend: &dyn GpuBackend, root: &Root, index: u32) -> Gpu {
    let mut gpu = Gpu {
        index,
        ..Default::default()
    };
    let r = match backend.device(index) {
        Ok(r) => r,
        Err(e) => {
            gpu.error = Some(format!("device handle: {e}"));
            return gpu;
        }
    };
    let mut errors = Vec::new();
    let mut take = |field: &str, v: Field<String>| match v {
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            errors.push(format!("{field}: {e}"));
            String::new()
        }
        None => String::new(),
    };
    gpu.name = take("name", r.name);
    gpu.uuid = take("uuid", r.uuid);
    gpu.pci_bus_id = take("pci bus id", r.pci_bus_id);
    match r.memory {
        Some(Ok((used, total))) => {
            gpu.memory_used_bytes = Some(used);
            gpu.memory_total_bytes = Some(total);
        }
        Some(Err(e)) => errors.push(format!("memory: {e}")),
        None => {}
    }
    match r.processes {
        Some(Ok(ps)) => {
            gpu.processes = ps
                .into_iter()
                .map(|(pid, used)| GpuProcess {
                    pid,
                    used_bytes: used,
                    command: process_command(root, pid).or_else(|| backend.process_name(pid)),
                })
                .collect();
        }
        Some(Err(e)) => errors.push(format!("processes: {e}")),
        None => {}
    }
    // Most GPUs do not support MIG at all: a failed query is not an error.
    if let Some(Ok(m)) = r.mig_enabled {
        gpu.mig_enabled = Some(m);
    }
    gpu.mig_devices = r.mig_devices;
    gpu.health = r.health;
    if !errors.is_empty() {
        gpu.error = Some(errors.join("; "));
    }
    gpu
}

/// `/proc/<pid>/comm`, trimmed.
fn process_command(root: &Root, pid: u32) -> Option<String> {
    root.attr(format!("/proc/{pid}/comm"))
}

struct NvmlBackend {
    nvml: Nvml,
}

fn text(e: NvmlError) -> String {
    e.to_string()
}

impl GpuBackend for NvmlBackend {
    fn driver_version(&self) -> Result<String, String> {
        self.nvml.sys_driver_version().map_err(text)
    }

    fn cuda_driver_version(&self) -> Result<i32, String> {
        self.nvml.sys_cuda_driver_version().map_err(text)
    }

    fn device_count(&self) -> Result<u32, String> {
        self.nvml.device_count().map_err(text)
    }

    fn device(&self, index: u32) -> Result<DeviceReading, String> {
        let d = self.nvml.device_by_index(index).map_err(text)?;
        let mig_enabled = d.mig_mode().map(|m| m.current == 1).map_err(text);
        let mig_devices = if matches!(mig_enabled, Ok(true)) {
            let n = d.mig_device_count().unwrap_or(0);
            (0..n)
                .filter_map(|i| d.mig_device_by_index(i).ok())
                .filter_map(|m| m.uuid().ok())
                .collect()
        } else {
            Vec::new()
        };
        Ok(DeviceReading {
            name: Some(d.name().map_err(text)),
            uuid: Some(d.uuid().map_err(text)),
            pci_bus_id: Some(d.pci_info().map(|p| p.bus_id).map_err(text)),
            memory: Some(d.memory_info().map(|m| (m.used, m.total)).map_err(text)),
            processes: Some(
                d.running_compute_processes()
                    .map(|ps| {
                        ps.into_iter()
                            .map(|p| {
                                let used = match p.used_gpu_memory {
                                    UsedGpuMemory::Used(b) => Some(b),
                                    UsedGpuMemory::Unavailable => None,
                                };
                                (p.pid, used)
                            })
                            .collect()
                    })
                    .map_err(text),
            ),
            mig_enabled: Some(mig_enabled),
            mig_devices,
            health: Some(nvml_health::read(&self.nvml, &d)),
        })
    }

    fn process_name(&self, pid: u32) -> Option<String> {
        self.nvml.sys_process_name(pid, 64).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    struct Fake {
        count: Result<u32, String>,
    }

    impl GpuBackend for Fake {
        fn driver_version(&self) -> Result<String, String> {
            Ok("570.124.06".into())
        }
        fn cuda_driver_version(&self) -> Result<i32, String> {
            Ok(12080)
        }
        fn device_count(&self) -> Result<u32, String> {
            self.count.clone()
        }
        fn device(&self, index: u32) -> Result<DeviceReading, String> {
            match index {
                0 => Ok(DeviceReading {
                    name: Some(Ok("NVIDIA H200".into())),
                    uuid: Some(Ok("GPU-aaaa".into())),
                    pci_bus_id: Some(Ok("00000000:19:00.0".into())),
                    memory: Some(Ok((1 << 30, 140 << 30))),
                    processes: Some(Ok(vec![(4242, Some(1 << 30)), (999_999, None)])),
                    mig_enabled: Some(Err("Not supported".into())),
                    mig_devices: Vec::new(),
                    health: None,
                }),
                1 => Ok(DeviceReading {
                    name: Some(Ok("NVIDIA H200".into())),
                    uuid: Some(Ok("GPU-bbbb".into())),
                    memory: Some(Err("GPU is lost".into())),
                    processes: Some(Err("GPU is lost".into())),
                    ..Default::default()
                }),
                _ => Err("Unknown error".into()),
            }
        }
        fn process_name(&self, pid: u32) -> Option<String> {
            (pid == 999_999).then(|| "python3".to_string())
        }
    }

    fn proc_root() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("proc/4242");
        std::fs::create_dir_all(&p).expect("mkdir");
        std::fs::write(p.join("comm"), "torchrun\n").expect("write");
        let r = Root::at(d.path());
        (d, r)
    }

    #[test]
    fn collects_versions_gpus_and_process_names() {
        let (_d, root) = proc_root();
        let f = collect(&Fake { count: Ok(3) }, &root);
        assert_eq!(f.nvml_error, None);
        assert_eq!(f.driver_version.as_deref(), Some("570.124.06"));
        assert_eq!(f.cuda_driver_version.as_deref(), Some("12.8"));
        assert_eq!(f.gpus.len(), 3);
        let g0 = &f.gpus[0];
        assert_eq!(g0.error, None);
        assert_eq!(g0.pci_bus_id, "00000000:19:00.0");
        assert_eq!(g0.memory_total_bytes, Some(140 << 30));
        assert_eq!(g0.mig_enabled, None);
        assert_eq!(g0.processes[0].command.as_deref(), Some("torchrun"));
        assert_eq!(g0.processes[1].command.as_deref(), Some("python3"));
    }

    #[test]
    fn per_gpu_failures_go_to_gpu_error() {
        let (_d, root) = proc_root();
        let f = collect(&Fake { count: Ok(3) }, &root);
        let g1 = &f.gpus[1];
        assert_eq!(g1.uuid, "GPU-bbbb");
        let e1 = g1.error.as_deref().unwrap_or_default();
        assert!(e1.contains("memory: GPU is lost"), "{e1}");
        assert!(e1.contains("processes: GPU is lost"), "{e1}");
        assert_eq!(g1.memory_used_bytes, None);
        let e2 = f.gpus[2].error.as_deref().unwrap_or_default();
        assert!(e2.starts_with("device handle:"), "{e2}");
    }

    #[test]
    fn device_count_failure_is_an_nvml_error() {
        let (_d, root) = proc_root();
        let f = collect(
            &Fake {
                count: Err("Unknown".into()),
            },
            &root,
        );
        assert!(f.nvml_error.is_some());
        assert_eq!(f.driver_version.as_deref(), Some("570.124.06"));
        assert!(f.gpus.is_empty());
    }

    #[test]
    fn cuda_version_formats_like_nvidia_smi() {
        assert_eq!(format_cuda_version(12080), "12.8");
        assert_eq!(format_cuda_version(12040), "12.4");
        assert_eq!(format_cuda_version(11020), "11.2");
    }

    #[test]
    fn real_probe_without_driver_reports_why_and_is_fast() {
        let t = Instant::now();
        let f = probe();
        let took = t.elapsed();
        match &f.nvml_error {
            // No driver here (CI, this VM): a clear reason, quickly, and no GPUs.
            Some(reason) => {
                assert!(f.gpus.is_empty());
                assert!(
                    reason.contains("NVIDIA driver") || reason.contains("NVML"),
                    "{reason}"
                );
                assert!(took < Duration::from_millis(20), "took {took:?}");
            }
            // A machine with a driver: versions must have been read.
            None => assert!(f.driver_version.is_some(), "{f:?}"),
        }
    }

    #[test]
    fn library_missing_error_names_the_library() {
        let err = NvmlError::LibloadingError(libloading::Error::DlOpenUnknown);
        let msg = explain_init_error(&err);
        assert!(msg.contains("libnvidia-ml.so.1"));
        assert!(explain_init_error(&NvmlError::DriverNotLoaded).contains("not loaded"));
    }
}

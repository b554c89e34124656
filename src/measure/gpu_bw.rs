//! The GPUs' own copy bandwidth through CUDA (cudarc, loaded at run time): host-to-device and
//! device-to-host from pinned memory per GPU, and peer-to-peer from each GPU to the next where
//! the pair can reach each other directly.
//!
//! Bounded: the work runs on its own thread and the caller waits at most
//! [`BUDGET_PER_GPU`] per GPU; a GPU that hangs the driver leaves that thread behind (the
//! process exits after the report) and the result says it timed out. Without a CUDA driver it
//! answers with one line saying so, before cudarc is touched (cudarc panics without libcuda).

use cudarc::driver::sys::{
    CUdevice_attribute, CUresult, cuCtxEnablePeerAccess, cuDeviceCanAccessPeer,
};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use preflight_checks::model::GpuBandwidth;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest the whole measurement may take, per GPU measured.
pub const BUDGET_PER_GPU: Duration = Duration::from_secs(5);
/// Bytes per copy.
const COPY_BYTES: usize = 64 << 20;
/// Time spent timing one direction of one GPU (after a warm-up copy).
const TIME_PER_KIND: Duration = Duration::from_millis(400);
const MAX_REPS: u32 = 32;

/// Measures `gpus` (CUDA ordinals). Err is the one line a report shows when nothing was measured.
pub fn measure(gpus: &[u32]) -> Result<Vec<GpuBandwidth>, String> {
    if gpus.is_empty() {
        return Err("not measured: no GPU".into());
    }
    // SAFETY: only tries dlopen on a list of names; keeps nothing loaded.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("not measured: no CUDA driver (libcuda.so.1 could not be loaded)".into());
    }
    let budget = BUDGET_PER_GPU * gpus.len() as u32;
    let (tx, rx) = mpsc::channel();
    let list = gpus.to_vec();
    let spawned = std::thread::Builder::new()
        .name("gpu-bandwidth".into())
        .spawn(move || {
            let deadline = Instant::now() + budget;
            let out = std::panic::catch_unwind(|| run(&list, deadline))
                .unwrap_or_else(|_| Err("the CUDA driver call panicked".into()));
            let _ = tx.send(out);
        });
    if let Err(e) = spawned {
        return Err(format!("not measured: cannot start a thread: {e}"));
    }
    match rx.recv_timeout(budget + Duration::from_secs(1)) {
        Ok(Ok(rows)) if rows.is_empty() => Err("not measured: no copy finished in time".into()),
        Ok(Ok(rows)) => Ok(rows),
        Ok(Err(e)) => Err(format!("not measured: {e}")),
        Err(_) => Err(format!(
            "not measured: the CUDA copies did not finish within {} s (a hung GPU?)",
            budget.as_secs()
        )),
    }
}

fn run(gpus: &[u32], deadline: Instant) -> Result<Vec<GpuBandwidth>, String> {
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
    let mut rows = Vec::new();
    let mut contexts: Vec<(u32, Arc<CudaContext>)> = Vec::new();
    for &g in gpus {
        if Instant::now() >= deadline {
            break;
        }
        let ctx = CudaContext::new(g as usize).map_err(|e| format!("GPU {g}: {e:?}"))?;
        let bus = pci_bus_id(&ctx);
        let stream = ctx.default_stream();
        let (h2d, d2h) =
            host_copies(&ctx, &stream, deadline).map_err(|e| format!("GPU {g}: {e}"))?;
        for (kind, gb_s) in [("h2d", h2d), ("d2h", d2h)] {
            rows.push(GpuBandwidth {
                kind: kind.into(),
                gpu: g,
                peer: None,
                gb_s,
                bytes: COPY_BYTES as u64,
                pci_bus_id: bus.clone(),
            });
        }
        contexts.push((g, ctx));
    }
    if contexts.len() >= 2 {
        for i in 0..contexts.len() {
            if Instant::now() >= deadline {
                break;
            }
            let (a, ctx_a) = &contexts[i];
            let (b, ctx_b) = &contexts[(i + 1) % contexts.len()];
            if let Some(gb_s) = peer_copy(ctx_a, ctx_b, deadline)? {
                rows.push(GpuBandwidth {
                    kind: "p2p".into(),
                    gpu: *a,
                    peer: Some(*b),
                    gb_s,
                    bytes: COPY_BYTES as u64,
                    pci_bus_id: pci_bus_id(ctx_a),
                });
            }
        }
    }
    Ok(rows)
}

/// "0000:3b:00.0" as CUDA numbers the device.
pub(crate) fn pci_bus_id(ctx: &Arc<CudaContext>) -> Option<String> {
    let a = |x| ctx.attribute(x).ok();
    let domain = a(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?;
    let bus = a(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?;
    let dev = a(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?;
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.0"))
}

/// GB/s host-to-device and device-to-host with pinned host memory.
fn host_copies(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    deadline: Instant,
) -> Result<(f64, f64), String> {
    let e = |e: cudarc::driver::DriverError| format!("{e:?}");
    // SAFETY: the pinned buffer is only copied from and into, never read uninitialised by us.
    let mut host = unsafe { ctx.alloc_pinned::<u8>(COPY_BYTES) }.map_err(e)?;
    let mut dev: CudaSlice<u8> = stream.alloc_zeros(COPY_BYTES).map_err(e)?;
    let h2d = time_copies(deadline, || {
        stream.memcpy_htod(&host, &mut dev)?;
        stream.synchronize()
    })
    .map_err(e)?;
    let d2h = time_copies(deadline, || {
        stream.memcpy_dtoh(&dev, &mut host)?;
        stream.synchronize()
    })
    .map_err(e)?;
    Ok((h2d, d2h))
}

/// GB/s copying from `a` to `b`, or None when the pair has no direct path.
fn peer_copy(
    a: &Arc<CudaContext>,
    b: &Arc<CudaContext>,
    deadline: Instant,
) -> Result<Option<f64>, String> {
    let e = |e: cudarc::driver::DriverError| format!("{e:?}");
    let mut can = 0i32;
    // SAFETY: plain query with valid device handles and an out pointer.
    let r = unsafe { cuDeviceCanAccessPeer(&mut can, a.cu_device(), b.cu_device()) };
    if r != CUresult::CUDA_SUCCESS || can == 0 {
        return Ok(None);
    }
    for (from, to) in [(a, b), (b, a)] {
        from.bind_to_thread().map_err(e)?;
        // SAFETY: valid contexts; "already enabled" is not an error for us.
        let r = unsafe { cuCtxEnablePeerAccess(to.cu_ctx(), 0) };
        if r != CUresult::CUDA_SUCCESS && r != CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(None);
        }
    }
    let sa = a.default_stream();
    let sb = b.default_stream();
    let src: CudaSlice<u8> = sa.alloc_zeros(COPY_BYTES).map_err(e)?;
    let mut dst: CudaSlice<u8> = sb.alloc_zeros(COPY_BYTES).map_err(e)?;
    sa.synchronize().map_err(e)?;
    let gb_s = time_copies(deadline, || {
        sb.memcpy_dtod(&src, &mut dst)?;
        sb.synchronize()
    })
    .map_err(e)?;
    Ok(Some(gb_s))
}

/// One warm-up copy, then copies until [`TIME_PER_KIND`] or the deadline; GB/s.
fn time_copies(
    deadline: Instant,
    mut copy: impl FnMut() -> Result<(), cudarc::driver::DriverError>,
) -> Result<f64, cudarc::driver::DriverError> {
    copy()?;
    let start = Instant::now();
    let stop = (start + TIME_PER_KIND).min(deadline);
    let mut reps = 0u32;
    while reps < MAX_REPS && (reps == 0 || Instant::now() < stop) {
        copy()?;
        reps += 1;
    }
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    Ok(COPY_BYTES as f64 * f64::from(reps) / secs / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_cuda_driver_it_says_so_in_one_line_and_fast() {
        // SAFETY: dlopen probe only.
        if unsafe { cudarc::driver::sys::is_culib_present() } {
            eprintln!("libcuda present: the no-driver path is not testable here");
            return;
        }
        let t = Instant::now();
        let err = measure(&[0]).expect_err("no driver");
        assert_eq!(
            err,
            "not measured: no CUDA driver (libcuda.so.1 could not be loaded)"
        );
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(measure(&[]).expect_err("no gpu"), "not measured: no GPU");
    }

    #[test]
    fn where_a_gpu_exists_it_measures_within_the_budget() {
        // SAFETY: dlopen probe only.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            eprintln!("skipped: no CUDA driver on this machine (libcuda.so.1 not found)");
            return;
        }
        let t = Instant::now();
        let rows = measure(&[0]).expect("measured");
        assert!(t.elapsed() < BUDGET_PER_GPU + Duration::from_secs(1));
        for kind in ["h2d", "d2h"] {
            let r = rows.iter().find(|r| r.kind == kind).expect(kind);
            assert!(r.gb_s > 0.5 && r.gb_s < 1000.0, "{r:?}");
        }
    }
}

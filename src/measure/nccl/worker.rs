//! `preflight nccl-worker` (hidden): the child process that drives every local GPU in one NCCL group.
//!
//! Speaks the JSON lines of [`super::protocol`] on stdin/stdout. Never panics across the
//! boundary: libraries are checked before cudarc touches them (it panics when one is
//! missing), and everything else runs under `catch_unwind`. NCCL itself may still hang or
//! abort the process: the parent's watchdog handles that.
//!
//! Per size: buffers are filled with exact small integers that depend on (global rank,
//! index); one all-reduce (sum) is verified element by element against the exact sum; then,
//! on zeroed buffers (so repeated in-place sums stay finite), `warmup` untimed and `iters`
//! timed in-place all-reduces, timed with CUDA events (timing enabled) on each GPU's stream.

use super::protocol::{self, ID_BYTES, MAX_LINE, RankRow};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use cudarc::nccl::result as nccl;
use cudarc::nccl::sys as nccl_sys;
use serde_json::json;
use std::io::{BufRead, Read, Write};
use std::sync::Arc;

/// What one worker does (from the hidden `nccl-worker` subcommand's validated flags).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSpec {
    /// Total NCCL ranks over all nodes.
    pub nranks: u32,
    /// Global rank of this process's first GPU.
    pub first_rank: u32,
    /// Local GPUs to drive (devices 0..gpus-1 of CUDA_VISIBLE_DEVICES).
    pub gpus: u32,
    /// Message sizes in bytes.
    pub sizes: Vec<u64>,
    pub warmup: u32,
    pub iters: u32,
    /// Create and print the unique id even when `first_rank` is not 0.
    pub id_out: bool,
}

/// Runs the worker, reading the unique id from `input` and writing protocol lines to `output`;
/// returns the process exit code (0 after `{"done":true}`).
pub fn serve(args: &WorkerSpec, input: &mut dyn BufRead, output: &mut dyn Write) -> u8 {
    let mut out = Out(output);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        drive_gpus(args, input, &mut out)
    }));
    let err = match result {
        Ok(Ok(())) => {
            out.send(json!({"done": true}));
            return 0;
        }
        Ok(Err(e)) => e,
        Err(panic) => format!("worker panicked: {}", panic_text(&panic)),
    };
    out.send(json!({ "error": err }));
    1
}

/// Writes protocol lines, flushed at once; a closed pipe is ignored (the parent is gone).
struct Out<'a>(&'a mut dyn Write);

impl Out<'_> {
    fn send(&mut self, v: serde_json::Value) {
        let _ = writeln!(self.0, "{v}");
        let _ = self.0.flush();
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Checks arguments and libraries, then does the work.
fn drive_gpus(args: &WorkerSpec, input: &mut dyn BufRead, out: &mut Out<'_>) -> Result<(), String> {
    check_args(args)?;
    check_libraries()?;
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
    let count =
        CudaContext::device_count().map_err(|e| format!("cuDeviceGetCount failed: {e:?}"))?;
    if count < args.gpus as i32 {
        return Err(format!(
            "GPU count: --gpus {} but CUDA sees {count} device(s) (check CUDA_VISIBLE_DEVICES={})",
            args.gpus,
            std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "<unset>".into())
        ));
    }
    if args.first_rank == 0 || args.id_out {
        let id = nccl::get_uniqueid().map_err(|e| {
            format!(
                "ncclGetUniqueId failed: {:?} (NCCL could not find a bootstrap interface? check NCCL_SOCKET_IFNAME)",
                e.0
            )
        })?;
        out.send(json!({ "unique_id": protocol::encode_id(&id_bytes(&id)) }));
    }
    let id = read_id(input)?;
    out.send(json!({"phase": "init"}));
    let gpus = Gpus::open(args)?;
    let comms = Comms::init(args, &gpus, id)?;
    for &bytes in &args.sizes {
        out.send(json!({"phase": "allreduce", "bytes": bytes}));
        let row = measure_size(args, &gpus, &comms, bytes)?;
        out.send(json!({ "row": row }));
    }
    comms.destroy();
    Ok(())
}

fn check_args(args: &WorkerSpec) -> Result<(), String> {
    let last = u64::from(args.first_rank) + u64::from(args.gpus);
    if last > u64::from(args.nranks) {
        return Err(format!(
            "arguments: ranks {}..{} do not fit in --nranks {}",
            args.first_rank,
            last - 1,
            args.nranks
        ));
    }
    Ok(())
}

/// cudarc panics when it cannot load a library: look first, and say what to do.
fn check_libraries() -> Result<(), String> {
    // SAFETY: only tries dlopen on a list of names; loads nothing it keeps.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(
            "libcuda not found: no NVIDIA driver library (libcuda.so.1) could be loaded; \
            install the NVIDIA driver (nvidia-smi must work) or run on a GPU node"
                .into(),
        );
    }
    // SAFETY: as above.
    if !unsafe { nccl_sys::is_culib_present() } {
        return Err(format!(
            "libnccl not found: no libnccl.so could be loaded from LD_LIBRARY_PATH={}; \
             install NCCL (pip install nvidia-nccl-cu12) or point LD_LIBRARY_PATH at it",
            std::env::var("LD_LIBRARY_PATH").unwrap_or_default()
        ));
    }
    Ok(())
}

fn id_bytes(id: &nccl_sys::ncclUniqueId) -> [u8; ID_BYTES] {
    let mut out = [0u8; ID_BYTES];
    for (o, c) in out.iter_mut().zip(id.internal.iter()) {
        *o = *c as u8;
    }
    out
}

/// Reads the one `{"unique_id":..}` line (at most MAX_LINE bytes); the parent's watchdog bounds the wait.
fn read_id(input: &mut dyn BufRead) -> Result<nccl_sys::ncclUniqueId, String> {
    let mut line = Vec::new();
    let mut limited = Read::take(&mut *input, MAX_LINE as u64 + 1);
    limited
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("reading the unique id from stdin: {e}"))?;
    if line.len() > MAX_LINE {
        return Err(format!(
            "reading the unique id: line longer than {MAX_LINE} bytes"
        ));
    }
    if line.is_empty() {
        return Err("reading the unique id: stdin closed before the id came".into());
    }
    let text = String::from_utf8_lossy(&line);
    let hex = match protocol::parse_line(text.trim()) {
        protocol::Event::UniqueId(hex) => hex,
        _ => {
            return Err(format!(
                "reading the unique id: expected {{\"unique_id\":\"<hex>\"}}, got {}",
                protocol::shorten(text.trim())
            ));
        }
    };
    let bytes = protocol::decode_id(&hex).map_err(|e| format!("reading the unique id: {e}"))?;
    let mut id = nccl_sys::ncclUniqueId {
        internal: [0; ID_BYTES],
    };
    for (c, b) in id.internal.iter_mut().zip(bytes) {
        *c = b as _;
    }
    Ok(id)
}

/// One context and stream per local GPU.
struct Gpus {
    streams: Vec<Arc<CudaStream>>,
}

impl Gpus {
    fn open(args: &WorkerSpec) -> Result<Gpus, String> {
        let mut streams = Vec::new();
        for i in 0..args.gpus as usize {
            let ctx = CudaContext::new(i).map_err(|e| format!("opening GPU {i}: {e:?}"))?;
            let stream = ctx
                .new_stream()
                .map_err(|e| format!("creating a stream on GPU {i}: {e:?}"))?;
            streams.push(stream);
        }
        Ok(Gpus { streams })
    }
}

/// Raw communicators (cudarc's `Comm` panics in drop; these are destroyed explicitly).
struct Comms {
    comms: Vec<nccl_sys::ncclComm_t>,
}

impl Comms {
    /// ncclCommInitRank for every local GPU inside one group (ranks first_rank+i, device i).
    fn init(args: &WorkerSpec, gpus: &Gpus, id: nccl_sys::ncclUniqueId) -> Result<Comms, String> {
        let mut comms: Vec<nccl_sys::ncclComm_t> = vec![std::ptr::null_mut(); gpus.streams.len()];
        nccl::group_start().map_err(|e| format!("ncclGroupStart failed: {:?}", e.0))?;
        let mut first_err = None;
        for (i, stream) in gpus.streams.iter().enumerate() {
            if let Err(e) = stream.context().bind_to_thread() {
                first_err.get_or_insert(format!("binding GPU {i}: {e:?}"));
                break;
            }
            let rank = (args.first_rank as usize + i) as i32;
            // SAFETY: comms[i] is a valid slot; the id came from ncclGetUniqueId on the creator.
            let r = unsafe { nccl::comm_init_rank(&mut comms[i], args.nranks as i32, id, rank) };
            if let Err(e) = r {
                first_err.get_or_insert(format!(
                    "ncclCommInitRank (rank {rank}, GPU {i}) failed: {:?}",
                    e.0
                ));
                break;
            }
        }
        let end = nccl::group_end();
        let made = Comms { comms };
        if let Some(e) = first_err {
            made.abort();
            return Err(e);
        }
        if let Err(e) = end {
            made.abort();
            return Err(format!(
                "ncclCommInitRank (group of {} GPU(s), ranks {}..) failed: {:?}; see the NCCL log's WARN lines",
                args.gpus, args.first_rank, e.0
            ));
        }
        Ok(made)
    }

    fn destroy(self) {
        for c in self.comms.iter().filter(|c| !c.is_null()) {
            // SAFETY: each comm was initialised by ncclCommInitRank and is destroyed once.
            let _ = unsafe { nccl::comm_destroy(*c) };
        }
    }

    fn abort(self) {
        for c in self.comms.iter().filter(|c| !c.is_null()) {
            // SAFETY: as in destroy.
            let _ = unsafe { nccl::comm_abort(*c) };
        }
    }
}

/// The value rank `rank` puts at index `i`: a small integer, so sums are exact in f32.
pub fn fill_value(rank: u32, i: usize) -> f32 {
    (((i as u64) + 3 * u64::from(rank)) % 61 + 1) as f32
}

/// Expected sums by `i % 61` for ranks 0..nranks.
pub fn expected_table(nranks: u32) -> [f32; 61] {
    let mut t = [0f32; 61];
    for (j, slot) in t.iter_mut().enumerate() {
        let sum: u64 = (0..nranks)
            .map(|r| ((j as u64) + 3 * u64::from(r)) % 61 + 1)
            .sum();
        *slot = sum as f32;
    }
    t
}

/// Elements of `got` that differ from the exact sum.
pub fn count_wrong(got: &[f32], table: &[f32; 61]) -> u64 {
    got.iter()
        .enumerate()
        .filter(|(i, v)| **v != table[i % 61])
        .count() as u64
}

fn measure_size(
    args: &WorkerSpec,
    gpus: &Gpus,
    comms: &Comms,
    bytes: u64,
) -> Result<RankRow, String> {
    let count =
        usize::try_from((bytes / 4).max(1)).map_err(|_| format!("size {bytes} too large"))?;
    let what = |s: &str| format!("all-reduce of {bytes} bytes: {s}");
    let mut bufs: Vec<CudaSlice<f32>> = Vec::new();
    for (i, stream) in gpus.streams.iter().enumerate() {
        let rank = args.first_rank + i as u32;
        let host: Vec<f32> = (0..count).map(|k| fill_value(rank, k)).collect();
        bufs.push(
            stream
                .clone_htod(&host)
                .map_err(|e| what(&format!("copying to GPU {i}: {e:?}")))?,
        );
    }
    all_reduce_all(gpus, comms, &bufs, count, Wait::Finish).map_err(|e| what(&e))?;
    let table = expected_table(args.nranks);
    let mut wrong = 0;
    for (i, (stream, buf)) in gpus.streams.iter().zip(&bufs).enumerate() {
        let got = stream
            .clone_dtoh(buf)
            .map_err(|e| what(&format!("copying back from GPU {i}: {e:?}")))?;
        wrong += count_wrong(&got, &table);
    }
    for (i, (stream, buf)) in gpus.streams.iter().zip(bufs.iter_mut()).enumerate() {
        stream
            .memset_zeros(buf)
            .map_err(|e| what(&format!("zeroing on GPU {i}: {e:?}")))?;
    }
    for _ in 0..args.warmup {
        all_reduce_all(gpus, comms, &bufs, count, Wait::Enqueue).map_err(|e| what(&e))?;
    }
    sync_all(gpus).map_err(|e| what(&e))?;
    let time_us = timed(args, gpus, comms, &bufs, count).map_err(|e| what(&e))?;
    Ok(RankRow {
        bytes: count as u64 * 4,
        time_us,
        wrong,
    })
}

/// `iters` all-reduces between timing events on every stream; the slowest GPU's mean, in microseconds.
fn timed(
    args: &WorkerSpec,
    gpus: &Gpus,
    comms: &Comms,
    bufs: &[CudaSlice<f32>],
    count: usize,
) -> Result<f64, String> {
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut starts = Vec::new();
    for s in &gpus.streams {
        starts.push(
            s.record_event(flags)
                .map_err(|e| format!("cuEventRecord: {e:?}"))?,
        );
    }
    for _ in 0..args.iters {
        all_reduce_all(gpus, comms, bufs, count, Wait::Enqueue)?;
    }
    let mut worst = 0f64;
    for (s, start) in gpus.streams.iter().zip(&starts) {
        let end = s
            .record_event(flags)
            .map_err(|e| format!("cuEventRecord: {e:?}"))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(|e| format!("cuEventElapsedTime: {e:?}"))?;
        worst = worst.max(f64::from(ms));
    }
    Ok(worst * 1000.0 / f64::from(args.iters))
}

/// One in-place sum all-reduce on every local GPU inside a group; with `Wait::Finish`, waits for all streams.
fn all_reduce_all(
    gpus: &Gpus,
    comms: &Comms,
    bufs: &[CudaSlice<f32>],
    count: usize,
    wait: Wait,
) -> Result<(), String> {
    nccl::group_start().map_err(|e| format!("ncclGroupStart: {:?}", e.0))?;
    let mut first_err = None;
    for ((stream, comm), buf) in gpus.streams.iter().zip(&comms.comms).zip(bufs) {
        let (ptr, _sync) = buf.device_ptr(stream);
        // SAFETY: ptr addresses `count` f32 on this comm's GPU; in place is allowed by NCCL.
        let r = unsafe {
            nccl::all_reduce(
                ptr as *const _,
                ptr as *mut _,
                count,
                nccl_sys::ncclDataType_t::ncclFloat32,
                nccl_sys::ncclRedOp_t::ncclSum,
                *comm,
                stream.cu_stream() as _,
            )
        };
        if let Err(e) = r {
            first_err.get_or_insert(format!("ncclAllReduce: {:?}", e.0));
            break;
        }
    }
    let end = nccl::group_end();
    if let Some(e) = first_err {
        return Err(e);
    }
    end.map_err(|e| format!("ncclGroupEnd: {:?}", e.0))?;
    if wait == Wait::Enqueue {
        return Ok(());
    }
    sync_all(gpus)
}

/// Whether [`all_reduce_all`] waits for the GPUs (verification) or only enqueues (timing loops).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Finish,
    Enqueue,
}

fn sync_all(gpus: &Gpus) -> Result<(), String> {
    for (i, s) in gpus.streams.iter().enumerate() {
        s.synchronize()
            .map_err(|e| format!("waiting for GPU {i}: {e:?}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_sums_are_exact_and_wrong_values_are_counted() {
        let n = 5;
        let table = expected_table(n);
        let len = 1000;
        let mut sum = vec![0f32; len];
        for r in 0..n {
            for (i, s) in sum.iter_mut().enumerate() {
                *s += fill_value(r, i);
            }
        }
        assert_eq!(count_wrong(&sum, &table), 0);
        sum[7] += 1.0;
        sum[999] = f32::NAN;
        assert_eq!(count_wrong(&sum, &table), 2);
    }

    #[test]
    fn values_stay_exact_for_many_ranks() {
        // 2^24 is where f32 stops holding every integer.
        let t = expected_table(100_000);
        assert!(t.iter().all(|v| *v < 16_777_216.0 && v.fract() == 0.0));
    }

    #[test]
    fn ranks_must_fit() {
        let args = WorkerSpec {
            nranks: 4,
            first_rank: 3,
            gpus: 2,
            sizes: vec![1024],
            warmup: 0,
            iters: 1,
            id_out: false,
        };
        assert!(check_args(&args).unwrap_err().contains("do not fit"));
    }

    #[test]
    fn bad_id_lines_are_errors() {
        for input in ["", "garbage\n", "{\"unique_id\":\"00\"}\n"] {
            let mut r = std::io::Cursor::new(input.as_bytes().to_vec());
            assert!(read_id(&mut r).is_err(), "{input:?}");
        }
        let long = "x".repeat(MAX_LINE + 10);
        let mut r = std::io::Cursor::new(long.into_bytes());
        assert!(read_id(&mut r).unwrap_err().contains("longer"));
        let good = format!("{}\n", protocol::id_line(&"ab".repeat(128)));
        let mut r = std::io::Cursor::new(good.into_bytes());
        let id = read_id(&mut r).expect("id");
        assert_eq!(id.internal[0] as u8, 0xab);
    }
}

//! `preflight gemm-worker` (hidden): the child process that makes every visible GPU multiply.
//!
//! Per GPU, on its own thread, context, stream and cuBLAS handle: each data type the GPU has
//! tensor cores for is timed with CUDA events after a warm-up ([`timed_rate`]), then multiplied
//! on the seeded integer inputs of [`super::exact`] and checked against the exact product; under
//! `--burn` every GPU then multiplies at once for that long, reporting each window of about a
//! second. Never panics across the boundary: the libraries are looked for before cudarc touches
//! them (it panics when one is missing), and each GPU's work runs under `catch_unwind`. A hang
//! in the driver is the parent's watchdog's business.

use super::exact::{self, IntMatrix};
use super::protocol::{BurnLine, CheckLine, GpuInfo, Line, RateLine};
use cudarc::cublas::sys as cublas;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::io::Write;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// What the worker does (from the hidden subcommand's validated flags).
#[derive(Debug, Clone, PartialEq)]
pub struct GemmSpec {
    /// GPUs to drive: CUDA ordinals 0..gpus.
    pub gpus: u32,
    /// m = n = k of the timed multiplies.
    pub size: u32,
    /// m = n = k of the checked multiply.
    pub check_size: u32,
    /// Seconds of sustained load after the checks (0: none).
    pub burn_s: u32,
    /// Seed of the checked multiply's inputs (the same on every node).
    pub seed: u64,
}

/// Time the timed multiplies of one data type aim for.
const TARGET: Duration = Duration::from_millis(300);
/// Bounds on the timed multiplies per data type.
const MIN_ITERS: u32 = 3;
const MAX_ITERS: u32 = 500;
/// Untimed multiplies before timing.
const WARMUP: u32 = 2;
/// One window of the sustained load.
const WINDOW: Duration = Duration::from_secs(1);

/// One data type: how its inputs and outputs are stored and which compute type cuBLAS uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dtype {
    Bf16,
    Fp16,
    Tf32,
    Fp32,
    /// FP8 E4M3 through cuBLASLt (speed only: see `super::fp8`).
    Fp8,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::Fp16 => "fp16",
            Dtype::Tf32 => "tf32",
            Dtype::Fp32 => "fp32",
            Dtype::Fp8 => "fp8",
        }
    }

    /// The types a GPU of compute capability (major, minor) multiplies on tensor cores, first
    /// the one the sustained load uses: BF16, FP16 and TF32 from Ampere (8.0) on, and FP8 from
    /// Ada (8.9); FP16 and FP32 on Volta and Turing; FP32 before.
    pub fn for_capability(major: i32, minor: i32) -> Vec<Dtype> {
        match (major, minor) {
            (9.., _) | (8, 9..) => vec![Dtype::Bf16, Dtype::Fp16, Dtype::Tf32, Dtype::Fp8],
            (8, _) => vec![Dtype::Bf16, Dtype::Fp16, Dtype::Tf32],
            (7, _) => vec![Dtype::Fp16, Dtype::Fp32],
            _ => vec![Dtype::Fp32],
        }
    }

    /// Whether the checked multiply covers this type (FP8's accumulation is not exact).
    fn checked(self) -> bool {
        self != Dtype::Fp8
    }

    fn io_type(self) -> cublas::cudaDataType {
        match self {
            Dtype::Bf16 => cublas::cudaDataType::CUDA_R_16BF,
            Dtype::Fp16 => cublas::cudaDataType::CUDA_R_16F,
            Dtype::Tf32 | Dtype::Fp32 => cublas::cudaDataType::CUDA_R_32F,
            Dtype::Fp8 => cublas::cudaDataType::CUDA_R_8F_E4M3,
        }
    }

    fn compute(self) -> cublas::cublasComputeType_t {
        match self {
            Dtype::Tf32 => cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            _ => cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        }
    }

    fn wide(self) -> bool {
        matches!(self, Dtype::Tf32 | Dtype::Fp32)
    }
}

/// The bits of a 16-bit float of `kind` for a small integer (exact: |v| <= 15).
pub fn small_int_bits(v: i8, kind: Dtype) -> u16 {
    match kind {
        Dtype::Bf16 => ((f32::from(v)).to_bits() >> 16) as u16,
        _ => {
            let sign = if v < 0 { 0x8000u16 } else { 0 };
            let m = u16::from(v.unsigned_abs());
            if m == 0 {
                return sign;
            }
            let e = 15 - m.leading_zeros() as u16; // floor(log2 m)
            let mantissa = (m - (1 << e)) << (10 - e);
            sign | ((e + 15) << 10) | mantissa
        }
    }
}

/// Inputs of the timed multiplies: random signs and mantissas, magnitudes in [0.5, 2), so the
/// bits toggle as in training and the sums stay far from overflow.
struct SpeedInputs {
    fp8: Vec<u8>,
    half: Vec<u16>,
    bf16: Vec<u16>,
    wide: Vec<f32>,
}

impl SpeedInputs {
    fn new(n: usize, seed: u64, kinds: &[Dtype]) -> SpeedInputs {
        let mut g = exact::SplitMix(seed);
        let mut make =
            |f: &dyn Fn(u64) -> u32| -> Vec<u32> { (0..n).map(|_| f(g.next_u64())).collect() };
        let has = |d: Dtype| kinds.contains(&d);
        let half = if has(Dtype::Fp16) {
            make(&|r| ((r & 0x8000) | (14 + (r >> 20 & 1)) << 10 | (r >> 32 & 0x3FF)) as u32)
                .into_iter()
                .map(|v| v as u16)
                .collect()
        } else {
            Vec::new()
        };
        let bf16 = if has(Dtype::Bf16) {
            make(&|r| ((r & 0x8000) | (126 + (r >> 20 & 1)) << 7 | (r >> 32 & 0x7F)) as u32)
                .into_iter()
                .map(|v| v as u16)
                .collect()
        } else {
            Vec::new()
        };
        let wide = if has(Dtype::Tf32) || has(Dtype::Fp32) {
            make(&|r| {
                ((r & 0x8000_0000) | (126 + (r >> 20 & 1)) << 23 | (r >> 32 & 0x7F_FFFF)) as u32
            })
            .into_iter()
            .map(f32::from_bits)
            .collect()
        } else {
            Vec::new()
        };
        let fp8 = if has(Dtype::Fp8) {
            (0..n)
                .map(|_| super::fp8::random_bits(g.next_u64()))
                .collect()
        } else {
            Vec::new()
        };
        SpeedInputs {
            fp8,
            half,
            bf16,
            wide,
        }
    }
}

/// The inputs every GPU shares.
struct Shared {
    spec: GemmSpec,
    speed: SpeedInputs,
    a: IntMatrix,
    b: IntMatrix,
    start: Barrier,
}

/// Runs the worker, writing protocol lines to `output`; returns the process exit code.
pub fn serve(spec: &GemmSpec, output: &mut dyn Write) -> u8 {
    let mut send = |l: Line| {
        let _ = writeln!(output, "{}", l.text());
        let _ = output.flush();
    };
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drive(spec, &mut send)));
    match ran {
        Ok(Ok(())) => {
            send(Line::Done(true));
            0
        }
        Ok(Err(e)) => {
            send(Line::Error(e));
            1
        }
        Err(_) => {
            send(Line::Error("the GEMM worker panicked".into()));
            1
        }
    }
}

/// cudarc panics when it cannot load a library: look first, and say what to do.
fn check_libraries() -> Result<(), String> {
    // SAFETY: only tries dlopen on a list of names; keeps nothing loaded.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("libcuda not found: no NVIDIA driver library (libcuda.so.1) could be loaded; install the NVIDIA driver (nvidia-smi must work)".into());
    }
    // SAFETY: as above.
    if !unsafe { cublas::is_culib_present() } {
        return Err(format!(
            "libcublas not found in LD_LIBRARY_PATH={}: install cuBLAS (pip install nvidia-cublas-cu12, which PyTorch's CUDA wheels bring) or point LD_LIBRARY_PATH at it",
            std::env::var("LD_LIBRARY_PATH").unwrap_or_default()
        ));
    }
    Ok(())
}

fn drive(spec: &GemmSpec, send: &mut dyn FnMut(Line)) -> Result<(), String> {
    check_libraries()?;
    if spec.check_size as usize > exact::MAX_K {
        return Err(format!("--check-size over {}", exact::MAX_K));
    }
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
    let count = cudarc::driver::result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount failed: {e:?}"))?;
    let gpus = spec.gpus.min(count.max(0) as u32);
    if gpus == 0 {
        return Err("CUDA sees no GPU (CUDA_VISIBLE_DEVICES, or the driver)".into());
    }
    let n = spec.size as usize;
    let c = spec.check_size as usize;
    let shared = Arc::new(Shared {
        spec: spec.clone(),
        speed: SpeedInputs::new(
            n * n,
            spec.seed,
            &[
                Dtype::Bf16,
                Dtype::Fp16,
                Dtype::Tf32,
                Dtype::Fp32,
                Dtype::Fp8,
            ],
        ),
        a: IntMatrix::seeded(spec.seed ^ 0xA, c, c),
        b: IntMatrix::seeded(spec.seed ^ 0xB, c, c),
        start: Barrier::new(gpus as usize),
    });
    let (tx, rx) = mpsc::channel();
    let mut threads = Vec::new();
    for g in 0..gpus {
        let (shared, tx) = (shared.clone(), tx.clone());
        let t = std::thread::Builder::new()
            .name(format!("gemm-{g}"))
            .spawn(move || {
                let quick = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    Gpu::open(g).and_then(|gpu| gpu.measure(&shared, &tx).map(|dt| (gpu, dt)))
                }))
                .unwrap_or_else(|_| Err("panicked".into()));
                if shared.spec.burn_s > 0 {
                    shared.start.wait();
                }
                match quick {
                    Ok((gpu, (kind, ms))) if shared.spec.burn_s > 0 => {
                        let burnt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            gpu.burn(&shared, kind, ms, &tx)
                        }))
                        .unwrap_or_else(|_| Err("panicked".into()));
                        if let Err(e) = burnt {
                            let _ = tx.send(Line::GpuError {
                                gpu: g,
                                error: format!("during the sustained load: {e}"),
                            });
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.send(Line::GpuError { gpu: g, error: e });
                    }
                }
            });
        match t {
            Ok(t) => threads.push(t),
            Err(e) => return Err(format!("cannot start a thread: {e}")),
        }
    }
    drop(tx);
    for line in rx {
        send(line);
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// One GPU's context, stream and cuBLAS handle.
struct Gpu {
    ordinal: u32,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    handle: cublas::cublasHandle_t,
    kinds: Vec<Dtype>,
}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the handle was created by `open` and is destroyed once, here.
        unsafe {
            let _ = cudarc::cublas::result::destroy_handle(self.handle);
        }
    }
}

fn cu(what: &str) -> impl Fn(cudarc::driver::DriverError) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

impl Gpu {
    fn open(ordinal: u32) -> Result<Gpu, String> {
        let ctx = CudaContext::new(ordinal as usize).map_err(cu("opening the GPU"))?;
        let stream = ctx.new_stream().map_err(cu("creating a stream"))?;
        ctx.bind_to_thread().map_err(cu("binding the context"))?;
        let handle = cudarc::cublas::result::create_handle()
            .map_err(|e| format!("cublasCreate failed: {e:?}"))?;
        // SAFETY: the handle is live and the stream belongs to this context.
        unsafe {
            cudarc::cublas::result::set_stream(handle, stream.cu_stream() as cublas::cudaStream_t)
                .map_err(|e| format!("cublasSetStream failed: {e:?}"))?;
        }
        let (major, minor) = ctx
            .compute_capability()
            .map_err(cu("reading the compute capability"))?;
        Ok(Gpu {
            ordinal,
            ctx,
            stream,
            handle,
            kinds: Dtype::for_capability(major, minor),
        })
    }

    fn info(&self) -> GpuInfo {
        let bus = crate::measure::gpu_bw::pci_bus_id(&self.ctx);
        let cc = self
            .ctx
            .compute_capability()
            .map(|(a, b)| format!("{a}.{b}"))
            .unwrap_or_default();
        let mut version: std::ffi::c_int = 0;
        // SAFETY: the handle is live; version is a valid out pointer.
        let got = unsafe { cublas::cublasGetVersion_v2(self.handle, &mut version) };
        GpuInfo {
            gpu: self.ordinal,
            name: self.ctx.name().unwrap_or_default(),
            pci_bus_id: bus,
            compute_capability: cc,
            cublas_version: (got == cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
                .then_some(version.max(0) as u32),
        }
    }

    /// Rates and checks; returns the sustained load's type and its time per multiply (ms).
    fn measure(&self, shared: &Shared, tx: &Sender<Line>) -> Result<(Dtype, f64), String> {
        let _ = tx.send(Line::Gpu(self.info()));
        let n = shared.spec.size as usize;
        let mut first = None;
        let rate = |kind: Dtype, tflops: f64, iters: u32| {
            let _ = tx.send(Line::Rate(RateLine {
                gpu: self.ordinal,
                dtype: kind.name().into(),
                tflops,
                iters,
            }));
        };
        // cuBLAS types first, then their exact checks, and FP8 (cuBLASLt) last: whatever
        // happens there, what came before is already reported.
        for &kind in self.kinds.iter().filter(|k| **k != Dtype::Fp8) {
            let (tflops, iters, ms) = self.timed_rate(shared, kind, n)?;
            first.get_or_insert((kind, ms));
            rate(kind, tflops, iters);
        }
        for &kind in self.kinds.iter().filter(|k| k.checked()) {
            let v = self.checked(shared, kind)?;
            let _ = tx.send(Line::Check(v));
        }
        if self.kinds.contains(&Dtype::Fp8) {
            match self.timed_rate(shared, Dtype::Fp8, n) {
                Ok((tflops, iters, _)) => rate(Dtype::Fp8, tflops, iters),
                // Without cuBLASLt or an FP8 algorithm the GPU is still judged on the rest.
                Err(reason) => {
                    let _ = tx.send(Line::TypeSkipped {
                        gpu: self.ordinal,
                        dtype: Dtype::Fp8.name().into(),
                        reason,
                    });
                }
            }
        }
        first.ok_or_else(|| "no data type to measure".into())
    }

    /// One multiply C = A·B of n×n column-major matrices on this GPU's stream.
    fn gemm(
        &self,
        kind: Dtype,
        n: usize,
        (a, b, c): (u64, u64, u64),
        out: cublas::cudaDataType,
    ) -> Result<(), String> {
        let (alpha, beta) = (1f32, 0f32);
        let n = n as std::ffi::c_int;
        // SAFETY: a, b, c are live device buffers of n×n elements of the given types on this
        // GPU; alpha and beta are host f32 (the compute type is 32F).
        unsafe {
            cudarc::cublas::result::gemm_ex(
                self.handle,
                cublas::cublasOperation_t::CUBLAS_OP_N,
                cublas::cublasOperation_t::CUBLAS_OP_N,
                n,
                n,
                n,
                (&alpha as *const f32).cast(),
                a as *const std::ffi::c_void,
                kind.io_type(),
                n,
                b as *const std::ffi::c_void,
                kind.io_type(),
                n,
                (&beta as *const f32).cast(),
                c as *mut std::ffi::c_void,
                out,
                n,
                kind.compute(),
                cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| format!("cublasGemmEx ({}) failed: {e:?}", kind.name()))
    }

    fn upload_speed(&self, shared: &Shared, kind: Dtype) -> Result<Buffers, String> {
        let s = &self.stream;
        Ok(match kind {
            Dtype::Fp8 => return Err("FP8 multiplies through cuBLASLt (timed_fp8)".into()),
            Dtype::Bf16 | Dtype::Fp16 => {
                let src = if kind == Dtype::Bf16 {
                    &shared.speed.bf16
                } else {
                    &shared.speed.half
                };
                let a = s.clone_htod(src).map_err(cu("copying the inputs"))?;
                let c = s
                    .alloc_zeros::<u16>(src.len())
                    .map_err(cu("allocating the result"))?;
                Buffers::Narrow(a, c)
            }
            Dtype::Tf32 | Dtype::Fp32 => {
                let a = s
                    .clone_htod(&shared.speed.wide)
                    .map_err(cu("copying the inputs"))?;
                let c = s
                    .alloc_zeros::<f32>(shared.speed.wide.len())
                    .map_err(cu("allocating the result"))?;
                Buffers::Wide(a, c)
            }
        })
    }

    /// Dense TFLOP/s of `kind`: warm-up, one multiply to size the batch, then a batch of about
    /// [`TARGET`] between two CUDA events. Returns (TFLOP/s, multiplies timed, ms each).
    fn timed_rate(
        &self,
        shared: &Shared,
        kind: Dtype,
        n: usize,
    ) -> Result<(f64, u32, f64), String> {
        if kind == Dtype::Fp8 {
            return self.timed_fp8(shared, n);
        }
        let mut bufs = self.upload_speed(shared, kind)?;
        let (ptrs, out) = (bufs.pointers(&self.stream), kind.io_type());
        for _ in 0..WARMUP {
            self.gemm(kind, n, ptrs, out)?;
        }
        let one = self.time(|| self.gemm(kind, n, ptrs, out), 1)?;
        let iters =
            ((TARGET.as_secs_f64() * 1000.0 / one.max(1e-3)) as u32).clamp(MIN_ITERS, MAX_ITERS);
        let ms = self.time(|| self.gemm(kind, n, ptrs, out), iters)? / f64::from(iters);
        drop(bufs);
        let flops = 2.0 * (n as f64).powi(3);
        Ok((flops / (ms / 1000.0) / 1e12, iters, ms))
    }

    /// [`Self::timed_rate`] for FP8, through cuBLASLt.
    fn timed_fp8(&self, shared: &Shared, n: usize) -> Result<(f64, u32, f64), String> {
        let plan = super::fp8::Fp8Gemm::new(n, &self.stream)?;
        let s = &self.stream;
        let a = s
            .clone_htod(&shared.speed.fp8)
            .map_err(cu("copying the inputs"))?;
        let mut d = s
            .alloc_zeros::<u16>(shared.speed.fp8.len())
            .map_err(cu("allocating the result"))?;
        let d = std::cell::RefCell::new(&mut d);
        let op = || plan.run(s, &a, &a, &mut d.borrow_mut());
        for _ in 0..WARMUP {
            op()?;
        }
        let one = self.time(op, 1)?;
        let iters =
            ((TARGET.as_secs_f64() * 1000.0 / one.max(1e-3)) as u32).clamp(MIN_ITERS, MAX_ITERS);
        let ms = self.time(op, iters)? / f64::from(iters);
        let flops = 2.0 * (n as f64).powi(3);
        Ok((flops / (ms / 1000.0) / 1e12, iters, ms))
    }

    /// Milliseconds `iters` calls of `op` take on the stream, between two CUDA events.
    fn time(&self, op: impl Fn() -> Result<(), String>, iters: u32) -> Result<f64, String> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .stream
            .record_event(flags)
            .map_err(cu("cuEventRecord"))?;
        for _ in 0..iters {
            op()?;
        }
        let end = self
            .stream
            .record_event(flags)
            .map_err(cu("cuEventRecord"))?;
        let ms = start.elapsed_ms(&end).map_err(cu("cuEventElapsedTime"))?;
        Ok(f64::from(ms))
    }

    /// The checked multiply of `kind`: integer inputs, FP32 result, verified on the CPU.
    fn checked(&self, shared: &Shared, kind: Dtype) -> Result<CheckLine, String> {
        let n = shared.spec.check_size as usize;
        let s = &self.stream;
        let e = cu("the checked multiply");
        let mut c = s.alloc_zeros::<f32>(n * n).map_err(&e)?;
        if kind.wide() {
            let to = |m: &IntMatrix| m.values.iter().map(|v| f32::from(*v)).collect::<Vec<f32>>();
            let a = s.clone_htod(&to(&shared.a)).map_err(&e)?;
            let b = s.clone_htod(&to(&shared.b)).map_err(&e)?;
            let ((pa, _ga), (pb, _gb)) = (a.device_ptr(s), b.device_ptr(s));
            let (pc, _gc) = c.device_ptr_mut(s);
            self.gemm(kind, n, (pa, pb, pc), cublas::cudaDataType::CUDA_R_32F)?;
        } else {
            let to = |m: &IntMatrix| {
                m.values
                    .iter()
                    .map(|v| small_int_bits(*v, kind))
                    .collect::<Vec<u16>>()
            };
            let a = s.clone_htod(&to(&shared.a)).map_err(&e)?;
            let b = s.clone_htod(&to(&shared.b)).map_err(&e)?;
            let ((pa, _ga), (pb, _gb)) = (a.device_ptr(s), b.device_ptr(s));
            let (pc, _gc) = c.device_ptr_mut(s);
            self.gemm(kind, n, (pa, pb, pc), cublas::cudaDataType::CUDA_R_32F)?;
        }
        let host = s.clone_dtoh(&c).map_err(&e)?;
        s.synchronize().map_err(&e)?;
        let v = exact::verify(&shared.a, &shared.b, &host, shared.spec.seed);
        Ok(CheckLine {
            gpu: self.ordinal,
            dtype: kind.name().into(),
            checksum: exact::checksum(&host),
            wrong_elements: v.wrong_elements,
            wrong_rows: v.wrong_rows.len() as u32,
            wrong_cols: v.wrong_cols.len() as u32,
            exact: v.exact,
            first_wrong: v.first_wrong,
        })
    }

    /// The sustained load: windows of about [`WINDOW`] until `burn_s` has passed.
    fn burn(&self, shared: &Shared, kind: Dtype, ms: f64, tx: &Sender<Line>) -> Result<(), String> {
        let n = shared.spec.size as usize;
        let mut bufs = self.upload_speed(shared, kind)?;
        let (ptrs, out) = (bufs.pointers(&self.stream), kind.io_type());
        let per_window = ((WINDOW.as_secs_f64() * 1000.0 / ms.max(1e-3)) as u32).max(1);
        let started = Instant::now();
        let total = Duration::from_secs(u64::from(shared.spec.burn_s));
        let flops = 2.0 * (n as f64).powi(3);
        while started.elapsed() < total {
            let took = self.time(|| self.gemm(kind, n, ptrs, out), per_window)?;
            let _ = tx.send(Line::Burn(BurnLine {
                gpu: self.ordinal,
                t_s: started.elapsed().as_secs_f64(),
                tflops: flops * f64::from(per_window) / (took / 1000.0) / 1e12,
            }));
        }
        drop(bufs);
        Ok(())
    }
}

/// The timed multiply's device buffers: A (also used as B) and C.
enum Buffers {
    Narrow(CudaSlice<u16>, CudaSlice<u16>),
    Wide(CudaSlice<f32>, CudaSlice<f32>),
}

impl Buffers {
    /// Raw pointers (A, A, C). The buffers stay allocated while `self` lives.
    fn pointers(&mut self, s: &Arc<CudaStream>) -> (u64, u64, u64) {
        match self {
            Buffers::Narrow(a, c) => {
                let (pa, _) = a.device_ptr(s);
                let (pc, _) = c.device_ptr_mut(s);
                (pa, pa, pc)
            }
            Buffers::Wide(a, c) => {
                let (pa, _) = a.device_ptr(s);
                let (pc, _) = c.device_ptr_mut(s);
                (pa, pa, pc)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_bits_of_small_integers_are_exact() {
        let f16 = |v| small_int_bits(v, Dtype::Fp16);
        assert_eq!(f16(0), 0x0000);
        assert_eq!(f16(1), 0x3C00);
        assert_eq!(f16(2), 0x4000);
        assert_eq!(f16(3), 0x4200);
        assert_eq!(f16(15), 0x4B80);
        assert_eq!(f16(-1), 0xBC00);
        assert_eq!(f16(-15), 0xCB80);
        let bf = |v| small_int_bits(v, Dtype::Bf16);
        assert_eq!(bf(1), 0x3F80);
        assert_eq!(bf(-3), 0xC040);
        for v in -15i8..=15 {
            assert_eq!(f32::from_bits(u32::from(bf(v)) << 16), f32::from(v));
        }
    }

    #[test]
    fn types_follow_the_compute_capability() {
        assert_eq!(Dtype::for_capability(9, 0)[0], Dtype::Bf16);
        assert!(Dtype::for_capability(9, 0).contains(&Dtype::Fp8));
        assert!(Dtype::for_capability(8, 9).contains(&Dtype::Fp8));
        assert!(!Dtype::for_capability(8, 0).contains(&Dtype::Fp8));
        assert_eq!(Dtype::for_capability(7, 5), vec![Dtype::Fp16, Dtype::Fp32]);
        assert_eq!(Dtype::for_capability(6, 1), vec![Dtype::Fp32]);
    }

    #[test]
    fn speed_inputs_are_finite_and_in_range() {
        let s = SpeedInputs::new(1000, 5, &[Dtype::Bf16, Dtype::Fp16, Dtype::Tf32]);
        for v in &s.wide {
            assert!((0.5..2.0).contains(&v.abs()), "{v}");
        }
        for b in &s.bf16 {
            let v = f32::from_bits(u32::from(*b) << 16);
            assert!((0.5..2.0).contains(&v.abs()), "{v}");
        }
        for h in &s.half {
            let exp = (h >> 10) & 0x1F;
            assert!(exp == 14 || exp == 15, "{h:x}");
        }
    }
}

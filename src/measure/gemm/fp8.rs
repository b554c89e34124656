//! FP8 (E4M3) multiply speed through cuBLASLt, on GPUs with FP8 tensor cores (compute
//! capability 8.9 and newer: Ada, Hopper, Blackwell). cuBLAS's `cublasGemmEx` has no FP8; the
//! Lt API does, in the "TN" layout it requires (A transposed), with a BF16 result and FP32
//! accumulation. Speed only: FP8 accumulation on Hopper is not exact, so it has no exact check.

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::ffi::c_void;
use std::sync::Arc;

/// cuBLASLt's workspace (NVIDIA recommends 32 MiB on Hopper).
const WORKSPACE: usize = 32 << 20;

/// One planned n×n×n FP8 multiply: handle, descriptors, the chosen algorithm and a workspace.
pub struct Fp8Gemm {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    pref: sys::cublasLtMatmulPreference_t,
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
}

fn err(what: &str) -> impl Fn(cudarc::cublaslt::result::CublasError) -> String + '_ {
    move |e| format!("{what}: {e:?}")
}

impl Fp8Gemm {
    /// Plans the multiply on `stream`'s GPU; Err when cuBLASLt is missing or has no FP8
    /// algorithm for it.
    pub fn new(n: usize, stream: &Arc<CudaStream>) -> Result<Fp8Gemm, String> {
        // SAFETY: only tries dlopen on a list of names.
        if !unsafe { sys::is_culib_present() } {
            return Err("libcublasLt not found".into());
        }
        let handle = lt::create_handle().map_err(err("cublasLtCreate"))?;
        let mut plan = Fp8Gemm {
            handle,
            desc: std::ptr::null_mut(),
            layouts: [std::ptr::null_mut(); 3],
            pref: std::ptr::null_mut(),
            algo: unsafe { std::mem::zeroed() },
            workspace: stream
                .alloc_zeros::<u8>(WORKSPACE)
                .map_err(|e| format!("allocating the workspace: {e:?}"))?,
        };
        plan.desc = lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )
        .map_err(err("cublasLtMatmulDescCreate"))?;
        let transpose = cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T as i32;
        // SAFETY: the descriptor is live; the value is the attribute's documented type.
        unsafe {
            lt::set_matmul_desc_attribute(
                plan.desc,
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                (&transpose as *const i32).cast(),
                std::mem::size_of::<i32>(),
            )
            .map_err(err("setting TRANSA"))?;
        }
        let n64 = n as u64;
        let fp8 = sys::cudaDataType::CUDA_R_8F_E4M3;
        plan.layouts = [
            lt::create_matrix_layout(fp8, n64, n64, n as i64).map_err(err("layout A"))?,
            lt::create_matrix_layout(fp8, n64, n64, n as i64).map_err(err("layout B"))?,
            lt::create_matrix_layout(sys::cudaDataType::CUDA_R_16BF, n64, n64, n as i64)
                .map_err(err("layout D"))?,
        ];
        plan.pref = lt::create_matmul_pref().map_err(err("cublasLtMatmulPreferenceCreate"))?;
        let ws = WORKSPACE as u64;
        // SAFETY: as above; every handle passed is live.
        let found = unsafe {
            lt::set_matmul_pref_attribute(
                plan.pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&ws as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
            .map_err(err("setting the workspace size"))?;
            let [a, b, d] = plan.layouts;
            lt::get_matmul_algo_heuristic(plan.handle, plan.desc, a, b, d, d, plan.pref)
                .map_err(err("no FP8 algorithm (cublasLtMatmulAlgoGetHeuristic)"))?
        };
        plan.algo = found.algo;
        Ok(plan)
    }

    /// D = Aᵀ·B on `stream`: `a` and `b` hold n×n FP8 values, `d` n×n BF16.
    pub fn run(
        &self,
        stream: &Arc<CudaStream>,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
        d: &mut CudaSlice<u16>,
    ) -> Result<(), String> {
        let (alpha, beta) = (1f32, 0f32);
        let (pa, _ga) = a.device_ptr(stream);
        let (pb, _gb) = b.device_ptr(stream);
        let (pd, _gd) = d.device_ptr_mut(stream);
        let (pw, _gw) = self.workspace.device_ptr(stream);
        let [la, lb, ld] = self.layouts;
        // SAFETY: every pointer is a live device buffer of the size its layout says, on this
        // stream's GPU; alpha and beta are host f32 (the scale type).
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                pa as *const c_void,
                la,
                pb as *const c_void,
                lb,
                pd as *const c_void,
                ld,
                pd as *mut c_void,
                ld,
                &self.algo,
                pw as *mut c_void,
                WORKSPACE,
                stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(err("cublasLtMatmul (fp8)"))
    }
}

impl Drop for Fp8Gemm {
    fn drop(&mut self) {
        // SAFETY: each handle was created by `new` (or is null and skipped) and is destroyed once.
        unsafe {
            if !self.pref.is_null() {
                let _ = lt::destroy_matmul_pref(self.pref);
            }
            for l in self.layouts {
                if !l.is_null() {
                    let _ = lt::destroy_matrix_layout(l);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::destroy_matmul_desc(self.desc);
            }
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

/// FP8 E4M3 bits for random signs and mantissas with magnitudes in [0.5, 2).
pub fn random_bits(r: u64) -> u8 {
    let sign = ((r >> 7) & 1) as u8;
    let exp = 6 + ((r >> 20) & 1) as u8;
    let mantissa = ((r >> 32) & 0x7) as u8;
    sign << 7 | exp << 3 | mantissa
}

#[cfg(test)]
mod tests {
    #[test]
    fn fp8_bits_stay_in_range() {
        for r in [0u64, u64::MAX, 0x1234_5678_9ABC_DEF0, 1 << 20, 1 << 7] {
            let b = super::random_bits(r);
            let exp = (b >> 3) & 0xF;
            assert!(exp == 6 || exp == 7, "{b:08b}");
            // E4M3: bias 7, so 2^(6-7) .. 2^(7-7)·1.875.
            let m = f64::from(b & 7) / 8.0 + 1.0;
            let v = m * 2f64.powi(i32::from(exp) - 7);
            assert!((0.5..2.0).contains(&v), "{v}");
        }
    }
}

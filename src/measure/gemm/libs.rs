//! Where the GEMM worker finds libcublas: beside the libnccl the node probe found (PyTorch's
//! CUDA 12 wheels put `nvidia/cublas/lib` next to `nvidia/nccl/lib`, its CUDA 13 wheels
//! `nvidia/cu13/lib`), in `LD_LIBRARY_PATH`, or in the CUDA toolkit's usual places.

use crate::measure::nccl::libdir::TempDir;
use std::path::{Path, PathBuf};

/// File names looked for. cudarc's loader does not try `.so.13`: [`needs_link`] says when the
/// worker needs a `libcublas.so` link to the file found.
const NAMES: &[&str] = &[
    "libcublas.so.13",
    "libcublas.so.12",
    "libcublas.so.11",
    "libcublas.so",
];

/// Whether cudarc's loader would miss `file` by its name (it tries `libcublas.so`, `.so.12`,
/// `.so.11`, ... but not `.so.13`).
pub fn needs_link(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == "libcublas.so.13")
}

/// A private dir whose `lib` holds `libcublas.so` (and `libcublasLt.so`, for FP8, when it
/// stands beside) linked to a `.so.13` [`needs_link`] named, and that `lib` dir; the links live
/// as long as the returned [`TempDir`].
pub fn link_unversioned(file: &Path) -> std::io::Result<(TempDir, PathBuf)> {
    let tmp = TempDir::new()?;
    let dir = tmp.link_as(file, "libcublas.so")?;
    let lt = file.with_file_name("libcublasLt.so.13");
    if lt.exists() {
        tmp.link_as(&lt, "libcublasLt.so")?;
    }
    Ok((tmp, dir))
}

/// Toolkit and distribution directories looked in after the NCCL sibling and LD_LIBRARY_PATH.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda/targets/sbsa-linux/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
];

/// The directory holding a libcublas the worker can load, and the file; None when none is found.
pub fn find(
    nccl_library: Option<&str>,
    ld_library_path: Option<&str>,
) -> Option<(PathBuf, PathBuf)> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(lib) = nccl_library {
        // <site>/nvidia/nccl/lib/libnccl.so.2 -> <site>/nvidia/cublas/lib
        if let Some(nvidia) = Path::new(lib)
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
        {
            dirs.push(nvidia.join("cublas/lib"));
            dirs.push(nvidia.join("cu13/lib"));
        }
    }
    if let Some(path) = ld_library_path {
        dirs.extend(path.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    dirs.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
    dirs.into_iter().find_map(|d| {
        NAMES
            .iter()
            .map(|n| d.join(n))
            .find(|f| f.exists())
            .map(|f| (d.clone(), f))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cublas_beside_pytorchs_nccl_first() {
        let t = tempfile::tempdir().unwrap();
        let site = t.path().join("site-packages/nvidia");
        std::fs::create_dir_all(site.join("nccl/lib")).unwrap();
        std::fs::create_dir_all(site.join("cublas/lib")).unwrap();
        std::fs::write(site.join("nccl/lib/libnccl.so.2"), "").unwrap();
        std::fs::write(site.join("cublas/lib/libcublas.so.12"), "").unwrap();
        let other = t.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("libcublas.so"), "").unwrap();
        let nccl = site.join("nccl/lib/libnccl.so.2");
        let (dir, file) = find(nccl.to_str(), other.to_str()).unwrap();
        assert_eq!(dir, site.join("cublas/lib"));
        assert!(file.ends_with("libcublas.so.12"));
        // Without the NCCL sibling: LD_LIBRARY_PATH.
        let (dir, _) = find(None, Some(&format!("::{}", other.display()))).unwrap();
        assert_eq!(dir, other);
        // PyTorch's CUDA 13 wheels: nvidia/cu13/lib/libcublas.so.13, which needs a link.
        std::fs::remove_file(site.join("cublas/lib/libcublas.so.12")).unwrap();
        std::fs::create_dir_all(site.join("cu13/lib")).unwrap();
        std::fs::write(site.join("cu13/lib/libcublas.so.13"), "").unwrap();
        let (dir, file) = find(nccl.to_str(), None).unwrap();
        assert_eq!(dir, site.join("cu13/lib"));
        assert!(needs_link(&file));
        assert!(!needs_link(Path::new(
            "/usr/local/cuda/lib64/libcublas.so.12"
        )));
    }

    #[test]
    fn a_cuda_13_cublas_is_linked_by_the_names_cudarc_tries_and_removed_with_its_dir() {
        let t = tempfile::tempdir().unwrap();
        let blas = t.path().join("libcublas.so.13");
        std::fs::write(&blas, "blas").unwrap();
        std::fs::write(t.path().join("libcublasLt.so.13"), "lt").unwrap();
        let (tmp, dir) = link_unversioned(&blas).unwrap();
        assert_eq!(std::fs::read_link(dir.join("libcublas.so")).unwrap(), blas);
        assert_eq!(
            std::fs::read_to_string(dir.join("libcublasLt.so")).unwrap(),
            "lt"
        );
        drop(tmp);
        assert!(!dir.exists(), "{} left behind", dir.display());
        // Without cuBLASLt beside it: only libcublas.so.
        std::fs::remove_file(t.path().join("libcublasLt.so.13")).unwrap();
        let (_tmp, dir) = link_unversioned(&blas).unwrap();
        assert!(dir.join("libcublas.so").exists());
        assert!(!dir.join("libcublasLt.so").exists());
    }
}

//! A private temp dir for one NCCL worker: `lib/libnccl.so` linked to the libnccl the probe found, and the NCCL logs.
//!
//! cudarc looks for `libnccl.so` (and `.so.1`, `.so.12`, ...) but not `libnccl.so.2`, the only
//! name PyTorch's `nvidia-nccl-cu*` wheel ships; a symlink first in `LD_LIBRARY_PATH` fixes that.

use crate::cleanup;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// How many names are tried before giving up on creating a temp dir.
const MAX_TRIES: u32 = 16;

/// A directory removed (with its contents) on drop, and by the signal handler if preflight is
/// interrupted first (it is registered in [`cleanup::global`]).
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
    _registered: cleanup::Guard<'static>,
}

impl TempDir {
    /// Creates `<tmp>/preflight-nccl-<pid>-<n>`, mode 0700.
    pub fn new() -> io::Result<TempDir> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..MAX_TRIES {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let path = base.join(format!(
                "preflight-nccl-{}-{n}-{nanos:x}",
                std::process::id()
            ));
            let made = cleanup::global().make(
                || create_private_dir(&path),
                |()| vec![cleanup::Undo::Path(path.clone())],
            );
            match made {
                Ok(((), guard)) => {
                    return Ok(TempDir {
                        path,
                        _registered: guard,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temp dir name")))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates `lib/libnccl.so` pointing at `lib` and returns the `lib` dir to put first in `LD_LIBRARY_PATH`.
    pub fn link_nccl(&self, lib: &Path) -> io::Result<PathBuf> {
        self.link_as(lib, "libnccl.so")
    }

    /// Creates `lib/<name>` pointing at `lib` (a name cudarc's loader tries) and returns the
    /// `lib` dir to put first in `LD_LIBRARY_PATH`.
    pub fn link_as(&self, lib: &Path, name: &str) -> io::Result<PathBuf> {
        let dir = self.path.join("lib");
        if !dir.exists() {
            create_private_dir(&dir)?;
        }
        let target = std::fs::canonicalize(lib)?;
        std::os::unix::fs::symlink(&target, dir.join(name))?;
        Ok(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn create_private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

/// `dir` first, then the existing value (when not empty).
pub fn prepend_path(dir: &Path, existing: Option<&str>) -> String {
    match existing.filter(|e| !e.is_empty()) {
        Some(e) => format!("{}:{e}", dir.display()),
        None => dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_libnccl_so_and_cleans_up() {
        let src = TempDir::new().expect("tmp");
        let real = src.path().join("libnccl.so.2");
        std::fs::write(&real, b"not really a library").expect("write");
        let tmp = TempDir::new().expect("tmp");
        let dir = tmp.link_nccl(&real).expect("link");
        let link = dir.join("libnccl.so");
        assert_eq!(
            std::fs::read_link(&link).expect("link"),
            real.canonicalize().expect("c")
        );
        assert_eq!(std::fs::read(&link).expect("read"), b"not really a library");
        let kept = tmp.path().to_path_buf();
        drop(tmp);
        assert!(!kept.exists());
    }

    #[test]
    fn missing_library_is_an_error_not_a_dangling_link() {
        let tmp = TempDir::new().expect("tmp");
        assert!(
            tmp.link_nccl(Path::new("/nonexistent/libnccl.so.2"))
                .is_err()
        );
    }

    #[test]
    fn prepends_to_ld_library_path() {
        let d = Path::new("/tmp/x/lib");
        assert_eq!(prepend_path(d, None), "/tmp/x/lib");
        assert_eq!(prepend_path(d, Some("")), "/tmp/x/lib");
        assert_eq!(
            prepend_path(d, Some("/opt/a:/opt/b")),
            "/tmp/x/lib:/opt/a:/opt/b"
        );
    }
}

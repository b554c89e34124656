//! `Root`: the filesystem root every probe reads through, so fixture trees can stand in for `/`.
//!
//! Every file is read with [`read_regular`]: only a regular file, never more than a cap, and
//! never opened in a way that could block (a FIFO or a device in a fixture tree, or a path a
//! hostile tree swapped, is refused with a message instead of hanging or filling memory).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Most bytes one file read through a [`Root`] may hold. The biggest files the probes read are
/// `/proc/net/tcp6` (about 150 bytes per socket: 32 MiB is over 200,000 sockets, far more than
/// a training node holds), `/proc/net/fib_trie` and `/etc/ld.so.cache` (usually well under
/// 1 MiB); sysfs attributes are a page at most.
pub const MAX_FILE: u64 = 32 << 20;

/// Why [`read_regular`] read nothing. The path is the caller's to name.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Opening or reading failed (missing file, permissions, ...); its kind is kept.
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("it is {what}, not a regular file")]
    NotRegular { what: &'static str },
    #[error("it is {size} bytes, over the {} limit", crate::infra::format_bytes(*cap))]
    TooBig { size: u64, cap: u64 },
    /// A file whose metadata said less (procfs says 0) that kept going past the cap.
    #[error("it holds more than the {} limit", crate::infra::format_bytes(*cap))]
    TooLong { cap: u64 },
}

/// What a non-regular file is, for a message.
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
}

/// Reads a whole regular file of at most `cap` bytes (symlinks are followed).
///
/// The type is checked before opening, the file is opened non-blocking (so a FIFO swapped in
/// after the check cannot hang the open) and checked again, and the read stops at `cap + 1`
/// bytes: procfs and sysfs files say size 0 or 4096 whatever they hold.
pub fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let meta = std::fs::metadata(path)?;
    check_meta(&meta, cap)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    check_meta(&file.metadata()?, cap)?;
    read_capped(file, cap)
}

fn check_meta(meta: &std::fs::Metadata, cap: u64) -> Result<(), FileError> {
    if !meta.file_type().is_file() {
        return Err(FileError::NotRegular {
            what: kind_of(meta.file_type()),
        });
    }
    if meta.len() > cap {
        return Err(FileError::TooBig {
            size: meta.len(),
            cap,
        });
    }
    Ok(())
}

fn read_capped(file: File, cap: u64) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(FileError::TooLong { cap });
    }
    Ok(bytes)
}

/// A directory standing in for `/`. Probes read `/sys`, `/proc`, `/etc` and `/dev/shm` only through it.
#[derive(Clone, Debug)]
pub struct Root {
    base: PathBuf,
}

impl Default for Root {
    fn default() -> Self {
        Root::system()
    }
}

impl Root {
    /// The real root `/`.
    pub fn system() -> Self {
        Root {
            base: PathBuf::from("/"),
        }
    }

    /// A fixture tree (or any directory) standing in for `/`.
    pub fn at(base: impl Into<PathBuf>) -> Self {
        Root { base: base.into() }
    }

    /// True when this is the machine's own `/`.
    pub fn is_system(&self) -> bool {
        self.base == Path::new("/")
    }

    /// Maps an absolute path such as `/sys/class/net` into this root.
    pub fn path(&self, abs: impl AsRef<Path>) -> PathBuf {
        let abs = abs.as_ref();
        let rel = abs.strip_prefix("/").unwrap_or(abs);
        self.base.join(rel)
    }

    /// Reads a whole file as text (lossy UTF-8: sysfs is not always clean).
    pub fn read(&self, abs: impl AsRef<Path>) -> io::Result<String> {
        let bytes = self.read_bytes(abs)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Reads a whole regular file of at most [`MAX_FILE`] bytes. A missing or unreadable file
    /// keeps its error kind; a FIFO, device, directory or oversized file is an `InvalidData`
    /// error naming the path and what it is.
    pub fn read_bytes(&self, abs: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        let path = self.path(abs);
        read_regular(&path, MAX_FILE).map_err(|e| match e {
            FileError::Io(e) => e,
            other => io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: {other}; preflight reads only regular files of at most {} there \
                     (in a --root tree, put the file's contents in a plain file)",
                    path.display(),
                    crate::infra::format_bytes(MAX_FILE)
                ),
            ),
        })
    }

    /// Reads a one-line sysfs attribute, trimmed; None when missing, unreadable or empty.
    pub fn attr(&self, abs: impl AsRef<Path>) -> Option<String> {
        let s = self.read(abs).ok()?;
        let t = s.trim();
        if t.is_empty() {
            None
        } else {
            Some(t.to_string())
        }
    }

    /// Parses a one-line attribute as a number; None when missing or not a number.
    pub fn attr_num<T: std::str::FromStr>(&self, abs: impl AsRef<Path>) -> Option<T> {
        self.attr(abs)?.parse().ok()
    }

    /// Entry names of a directory, sorted; empty when it does not exist.
    pub fn list(&self, abs: impl AsRef<Path>) -> Vec<String> {
        let mut names: Vec<String> = match std::fs::read_dir(self.path(abs)) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        names
    }

    pub fn exists(&self, abs: impl AsRef<Path>) -> bool {
        // symlink_metadata: fixture trees keep sysfs links that may dangle.
        std::fs::symlink_metadata(self.path(abs)).is_ok()
    }

    /// The last component of a symlink's target (`/sys/class/net/eth0/device/driver` -> `virtio_net`).
    pub fn link_name(&self, abs: impl AsRef<Path>) -> Option<String> {
        let target = std::fs::read_link(self.path(abs)).ok()?;
        target.file_name().map(|n| n.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_absolute_paths_under_base() {
        let r = Root::at("/tmp/fx");
        assert_eq!(
            r.path("/sys/class/net"),
            PathBuf::from("/tmp/fx/sys/class/net")
        );
        assert!(!r.is_system());
        assert!(Root::system().is_system());
    }

    #[test]
    fn attr_trims_and_rejects_empty_and_garbage() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), "1500\n").unwrap();
        std::fs::write(d.path().join("b"), "\n").unwrap();
        std::fs::write(d.path().join("c"), "fast\n").unwrap();
        let r = Root::at(d.path());
        assert_eq!(r.attr_num::<u32>("/a"), Some(1500));
        assert_eq!(r.attr("/b"), None);
        assert_eq!(r.attr_num::<u32>("/c"), None);
        assert_eq!(r.attr("/missing"), None);
        assert!(r.list("/missing").is_empty());
    }

    /// Runs `f` on a thread and fails the test when it takes longer than `secs`.
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs))
            .expect("the read did not return in time")
    }

    #[test]
    fn root_refuses_fifos_devices_directories_and_oversized_files() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::create_dir(d.path().join("dir")).unwrap();
        let big = std::fs::File::create(d.path().join("big")).unwrap();
        big.set_len(MAX_FILE + 1).unwrap();
        std::fs::write(d.path().join("ok"), "fine\n").unwrap();
        let base = d.path().to_path_buf();
        let results = within(5, move || {
            let r = Root::at(&base);
            ["/fifo", "/dir", "/big", "/ok", "/missing"].map(|p| r.read(p))
        });
        let msg = |i: usize| results[i].as_ref().unwrap_err().to_string();
        assert!(msg(0).contains("fifo: it is a FIFO (named pipe), not a regular file"));
        assert!(msg(1).contains("dir: it is a directory"));
        assert!(
            msg(2).contains(&format!(
                "big: it is {} bytes, over the 32 MiB limit",
                MAX_FILE + 1
            )),
            "{}",
            msg(2)
        );
        assert_eq!(results[3].as_ref().unwrap(), "fine\n");
        assert_eq!(
            results[4].as_ref().unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let zero = within(5, || read_regular(Path::new("/dev/zero"), 1024));
        assert!(matches!(
            zero,
            Err(FileError::NotRegular {
                what: "a character device"
            })
        ));
    }

    #[test]
    fn reads_stop_at_the_cap_when_metadata_says_less() {
        // procfs files say size 0: the read itself is bounded.
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert!(matches!(
            read_capped(f, 16),
            Err(FileError::TooLong { cap: 16 })
        ));
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert!(read_capped(f, MAX_FILE).unwrap().len() > 16);
        assert!(read_regular(Path::new("/proc/self/status"), MAX_FILE).is_ok());
    }
}

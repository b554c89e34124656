//! `Root`: the filesystem root every probe reads through, so fixture trees can stand in for `/`.

use std::io;
use std::path::{Path, PathBuf};

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
        let bytes = std::fs::read(self.path(abs))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
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
}

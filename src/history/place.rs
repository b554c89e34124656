//! Where the store goes: a node-local file. SQLite's WAL needs shared memory that a network file
//! system does not give, and on most clusters `$HOME` is NFS or Lustre, shared by every node:
//! there the store moves to `/var/tmp/preflight-<uid>/` (local, kept across reboots), or failing
//! that to one file per host without WAL, and the reason is said.

use std::path::{Path, PathBuf};

/// `statfs` magic numbers of the file systems that several machines share (Linux's
/// `magic.h`, and the values Lustre, GPFS, BeeGFS and the others register).
const SHARED: &[(i64, &str)] = &[
    (0x6969, "nfs"),
    (0x517B, "smb"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    (0x0BD0_0BD0, "lustre"),
    (0x4750_4653, "gpfs"),
    (0x00C3_6400, "cephfs"),
    (0x1983_0326, "beegfs"),
    (0x0102_1997, "9p"),
    (0x5346_414F, "afs"),
    (0x6B41_4653, "afs"),
    (0x7375_7245, "coda"),
    (0x0116_1970, "gfs2"),
    (0x7461_636F, "ocfs2"),
    (0xAAD7_AAEA, "panfs"),
    (0x6573_5546, "fuse"),
    (0x564C, "ncp"),
];

/// The name of the shared (network or cluster) file system holding `path`, judged at its
/// nearest existing folder; None when it is local or cannot be told.
pub fn shared_fs(path: &Path) -> Option<&'static str> {
    let mut at = path;
    while !at.exists() {
        at = at.parent().filter(|p| !p.as_os_str().is_empty())?;
    }
    let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `c` is a valid C string and `buf` a writable statfs the call fills.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut buf) } != 0 {
        return None;
    }
    kind(buf.f_type as i64)
}

/// The shared file system a `statfs` magic number names, if it is one.
pub fn kind(magic: i64) -> Option<&'static str> {
    let magic = magic & 0xFFFF_FFFF;
    SHARED.iter().find(|(m, _)| *m == magic).map(|(_, n)| *n)
}

/// Where the store is, and why there when it is not where it would be by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub path: PathBuf,
    /// Why the store is here (a network file system was avoided), for `preflight history`.
    pub why: Option<String>,
}

/// The store's place given the default `path`: kept when its folder is local; else
/// `/var/tmp/preflight-<uid>/<name>` when `/var/tmp` is local and that folder is this user's
/// (or not there yet); else `history-<host>.db` beside it, a file per host. `fs` tells the
/// shared file system of a path ([`shared_fs`] outside tests).
pub fn node_local(
    path: PathBuf,
    host: &str,
    uid: u32,
    fs: &dyn Fn(&Path) -> Option<&'static str>,
) -> Place {
    let Some(dir) = path.parent().map(Path::to_path_buf) else {
        return Place { path, why: None };
    };
    let Some(kind) = fs(&dir) else {
        return Place { path, why: None };
    };
    let tmp = Path::new("/var/tmp");
    let mine = tmp.join(format!("preflight-{uid}"));
    if tmp.is_dir() && fs(tmp).is_none() && owned_or_absent(&mine, uid) {
        let name = path
            .file_name()
            .map_or("history.db".into(), |n| n.to_owned());
        return Place {
            path: mine.join(name),
            why: Some(format!(
                "node-local: {} is on {kind}, shared by the nodes, where SQLite's WAL does not work and every node would write one file",
                dir.display()
            )),
        };
    }
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Place {
        path: dir.join(format!("history-{host}.db")),
        why: Some(format!(
            "one file per host, without WAL: {} is on {kind} and /var/tmp is not a node-local folder of this user's",
            dir.display()
        )),
    }
}

/// Whether `dir` is absent or a real folder (not a link) owned by `uid`: another user's folder
/// in the world-writable /var/tmp is never used.
fn owned_or_absent(dir: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(dir) {
        Err(_) => true,
        Ok(m) => m.is_dir() && m.uid() == uid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_file_systems_are_told_by_their_magic() {
        assert_eq!(kind(0x6969), Some("nfs"));
        assert_eq!(kind(0x0BD0_0BD0), Some("lustre"));
        assert_eq!(kind(0x4750_4653), Some("gpfs"));
        // A sign-extended 32-bit magic, as some libcs hand f_type over.
        assert_eq!(kind(0xFFFF_FFFF_FF53_4D42u64 as i64), Some("cifs"));
        assert_eq!(kind(0xEF53), None, "ext4");
        assert_eq!(kind(0x0102_1994), None, "tmpfs");
        assert_eq!(kind(0x5846_5342), None, "xfs");
        // This machine's /tmp is local.
        assert_eq!(shared_fs(Path::new("/tmp/does/not/exist")), None);
    }

    #[test]
    fn a_store_on_a_network_home_moves_to_a_node_local_folder_or_a_file_per_host() {
        let home = PathBuf::from("/home/u/.local/state/preflight/history.db");
        let local = |_: &Path| None;
        assert_eq!(node_local(home.clone(), "n1", 4242, &local).path, home);
        let nfs_home = |p: &Path| p.starts_with("/home").then_some("nfs");
        let p = node_local(home.clone(), "n1", 4242, &nfs_home);
        assert_eq!(p.path, PathBuf::from("/var/tmp/preflight-4242/history.db"));
        assert!(p.why.unwrap().contains("is on nfs"));
        let all_shared = |_: &Path| Some("lustre");
        let p = node_local(home, "n1/x", 4242, &all_shared);
        assert_eq!(
            p.path,
            PathBuf::from("/home/u/.local/state/preflight/history-n1_x.db")
        );
        assert!(p.why.unwrap().contains("without WAL"));
    }
}

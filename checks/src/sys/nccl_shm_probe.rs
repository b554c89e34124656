//! NCCL's shared-memory files in /dev/shm (`nccl-*`), with the processes that still map or hold
//! them (from /proc/<pid>/maps and /proc/<pid>/fd), so leftovers of a crashed job can be told
//! from the segments of a running one.

use crate::core::ShmFile;
use crate::infra::root::Root;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant, SystemTime};

/// The scan of /proc gives up after this long (the files not yet proven held stay unverified).
const SCAN_BUDGET: Duration = Duration::from_secs(3);

/// Most files listed (a /dev/shm full of leftovers is reported by its first ones and a count).
const MAX_FILES: usize = 512;
/// Most processes scanned for holders.
const MAX_PROCS: usize = 65536;
/// Most fds looked at per process.
const MAX_FDS: usize = 65536;
/// Most holders named per file (one live holder is enough to tell).
const MAX_HOLDERS: usize = 64;

/// True for the names NCCL gives its segments: `nccl-XXXXXX` (and older `nccl-shm-*`).
pub fn is_nccl_name(name: &str) -> bool {
    name.starts_with("nccl-") && name.len() > "nccl-".len() && !name.contains('/')
}

pub fn probe(root: &Root) -> Vec<ShmFile> {
    let mut files: Vec<ShmFile> = root
        .list("/dev/shm")
        .into_iter()
        .filter(|n| is_nccl_name(n))
        .take(MAX_FILES)
        .filter_map(|name| {
            let meta = std::fs::symlink_metadata(root.path(format!("/dev/shm/{name}"))).ok()?;
            meta.is_file().then(|| ShmFile {
                bytes: meta.len(),
                owner_uid: Some(meta.uid()),
                unverified: false,
                age_s: meta
                    .modified()
                    .ok()
                    .and_then(|m| SystemTime::now().duration_since(m).ok())
                    .map(|d| d.as_secs()),
                name,
                holders: Vec::new(),
            })
        })
        .collect();
    if files.is_empty() {
        return files;
    }
    let started = Instant::now();
    for pid in root
        .list("/proc")
        .into_iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .take(MAX_PROCS)
    {
        if started.elapsed() > SCAN_BUDGET {
            for f in files.iter_mut().filter(|f| f.holders.is_empty()) {
                f.unverified = true;
            }
            break;
        }
        let mut held: Vec<String> = Vec::new();
        match root.read(format!("/proc/{pid}/maps")) {
            Ok(maps) => held.extend(maps.lines().filter_map(shm_name_in_maps_line)),
            // Another user's process (no ptrace access): its files cannot be proven stale.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                let uid = process_uid(root, pid);
                for f in files.iter_mut() {
                    if uid.is_none() || uid == f.owner_uid {
                        f.unverified = true;
                    }
                }
            }
            Err(_) => {}
        }
        for fd in root
            .list(format!("/proc/{pid}/fd"))
            .into_iter()
            .take(MAX_FDS)
        {
            if let Ok(target) = std::fs::read_link(root.path(format!("/proc/{pid}/fd/{fd}"))) {
                let t = target.to_string_lossy();
                if let Some(n) = t.strip_prefix("/dev/shm/") {
                    held.push(n.trim_end_matches(" (deleted)").to_string());
                }
            }
        }
        for f in files.iter_mut() {
            if held.contains(&f.name) && !f.holders.contains(&pid) && f.holders.len() < MAX_HOLDERS
            {
                f.holders.push(pid);
            }
        }
    }
    files
}

/// The real uid of a process, from the `Uid:` line of /proc/<pid>/status.
fn process_uid(root: &Root, pid: u32) -> Option<u32> {
    root.read(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The /dev/shm file a maps line maps: `7f.. rw-s 00000000 00:19 42  /dev/shm/nccl-AbCdEf`.
fn shm_name_in_maps_line(line: &str) -> Option<String> {
    let i = line.find("/dev/shm/")?;
    let name = &line[i + "/dev/shm/".len()..];
    let name = name.trim_end().trim_end_matches(" (deleted)");
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_maps_lines() {
        assert!(is_nccl_name("nccl-Xy12Ab"));
        assert!(!is_nccl_name("nccl-"));
        assert!(!is_nccl_name("psm_shm.1"));
        assert_eq!(
            shm_name_in_maps_line(
                "7f00-7f10 rw-s 00000000 00:19 42                         /dev/shm/nccl-AbCdEf"
            )
            .as_deref(),
            Some("nccl-AbCdEf")
        );
        assert_eq!(
            shm_name_in_maps_line("7f00-7f10 rw-s 0 00:19 42 /dev/shm/nccl-Q (deleted)").as_deref(),
            Some("nccl-Q")
        );
        assert_eq!(
            shm_name_in_maps_line("7f00-7f10 r-xp 0 08:01 1 /usr/lib/x.so"),
            None
        );
    }

    #[test]
    fn a_file_mapped_by_a_live_process_has_a_holder_and_one_nobody_holds_has_none() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("dev/shm")).unwrap();
        std::fs::create_dir_all(p.join("proc/4242/fd")).unwrap();
        std::fs::write(p.join("dev/shm/nccl-live01"), vec![0u8; 4096]).unwrap();
        std::fs::write(p.join("dev/shm/nccl-dead01"), vec![0u8; 8192]).unwrap();
        std::fs::write(p.join("dev/shm/other"), b"x").unwrap();
        std::fs::write(
            p.join("proc/4242/maps"),
            "7f00-7f10 rw-s 00000000 00:19 42 /dev/shm/nccl-live01\n",
        )
        .unwrap();
        let files = probe(&Root::at(p));
        assert_eq!(files.len(), 2);
        let dead = files.iter().find(|f| f.name == "nccl-dead01").unwrap();
        assert_eq!((dead.bytes, dead.holders.len()), (8192, 0));
        let live = files.iter().find(|f| f.name == "nccl-live01").unwrap();
        assert_eq!(live.holders, vec![4242]);
    }

    #[test]
    fn a_real_process_holding_a_real_shm_file_is_found_on_this_machine() {
        if !std::path::Path::new("/dev/shm").is_dir() {
            return;
        }
        let name = format!("nccl-pftest{}", std::process::id());
        let path = format!("/dev/shm/{name}");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(1 << 16).unwrap();
        let files = probe(&Root::system());
        let _ = std::fs::remove_file(&path);
        let me = files.iter().find(|f| f.name == name).expect("listed");
        assert!(me.holders.contains(&std::process::id()), "{me:?}");
        assert_eq!(me.bytes, 1 << 16);
        drop(file);
    }
}

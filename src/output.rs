//! Writing to stdout and files: a closed pipe (`| head`) ends output quietly instead of panicking.

use std::io::{self, Write};
use std::path::Path;

/// Writes `text` to stdout. A broken pipe is success: the reader has what it wanted.
pub fn stdout(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes `text` to a file, creating or truncating it.
pub fn file(path: &Path, text: &str) -> io::Result<()> {
    std::fs::write(path, text)
}

/// Writes `text` to `path` atomically: a temp file beside it (`.NAME.PID.tmp`, which a
/// textfile collector reading `*.prom` ignores), synced, then renamed over `path`, so a reader
/// sees the old file or the new one, never half of one. The temp file is removed on failure.
pub fn atomic_file(path: &Path, text: &str) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    // pid and clock: nodes sharing a file system may share a pid, not also the nanosecond.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = path.with_file_name(format!(
        ".{}.{}.{nanos}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A report file: replaced atomically when it is (or will be) a regular file, so every node of
/// a job may write the same shared path; written in place when it is a device or a FIFO
/// (`-o /dev/stdout`).
pub fn report_file(path: &Path, text: &str) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => file(path, text),
        _ => atomic_file(path, text),
    }
}

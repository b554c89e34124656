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

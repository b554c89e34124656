//! Explains a hang: PyTorch Flight Recorder dumps (every rank's last collectives, pickle or
//! JSON, NCCL or gloo) and NCCL RAS status, judged across ranks into the rank(s) that stopped
//! the job, with causes and the commands that confirm them. Pure functions over bytes already
//! read; the binary finds the files and queries RAS's port.
//!
//! [`dump`] reads one file within [`dump::Budgets`] ([`pickle`] bounds the pickle before
//! decoding); [`verdict`] lines the ranks up per process group; [`ras`] reads RAS's text and
//! JSON; [`answer`] puts dumps, RAS and a log's hints together.

pub mod answer;
pub mod dump;
pub mod pickle;
pub mod ras;
pub mod verdict;

#[cfg(test)]
mod tests;

pub use dump::{Budgets, Dump, Unread};

/// Reads a set of named files (name, bytes) into dumps and one line per file that could not be
/// judged. Rank and host come from each name with the prefix the names share; a rank read twice
/// keeps its first file and says so.
pub fn read_all(
    files: &[(String, Vec<u8>)],
    prefix: Option<&str>,
    b: &Budgets,
) -> (Vec<Dump>, Vec<Unread>) {
    let base = |f: &str| f.rsplit('/').next().unwrap_or(f).to_string();
    let names: Vec<String> = files.iter().map(|(f, _)| base(f)).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let prefix = prefix.map_or_else(|| dump::common_prefix(&refs), str::to_string);
    let mut dumps: Vec<Dump> = Vec::new();
    let mut unread = Vec::new();
    for ((file, bytes), name) in files.iter().zip(&names) {
        let (rank, host) =
            dump::name_parts(name, &prefix).map_or((None, None), |(r, h)| (Some(r), h));
        match dump::parse(file, bytes, rank, host, b) {
            Ok(d) if dumps.iter().any(|x| x.rank == d.rank) => unread.push(Unread {
                file: file.clone(),
                rank: Some(d.rank),
                why: format!(
                    "a second dump of rank {}: the first one read is judged",
                    d.rank
                ),
            }),
            Ok(d) => dumps.push(d),
            Err(why) => unread.push(Unread {
                file: file.clone(),
                rank,
                why,
            }),
        }
    }
    dumps.sort_by_key(|d| d.rank);
    (dumps, unread)
}

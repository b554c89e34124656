//! The SQLite file that keeps this node's runs: one row per run (its record as JSON), running
//! totals per finding id that retention never prunes, WAL so several jobs' prologs can write at
//! once, a busy timeout so no check waits long, and a file that is not a database set aside.
//! On a network file system (a store the user placed there) it keeps SQLite's rollback journal
//! instead of WAL, and never sets a file aside that another node may be using.

use preflight_checks::model::{FindingTotal, NodeRun, TOTALS};
use rusqlite::{Connection, ErrorCode, OpenFlags, params};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema this build writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

/// Longest a run waits for another writer before it gives up (a warning, not a failure).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// How much the store keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Runs older than this many days are dropped.
    pub days: u32,
    /// The file's live pages are kept under this many bytes (the oldest runs go first).
    pub max_bytes: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            days: 90,
            max_bytes: 64 << 20,
        }
    }
}

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Where a corrupt file found at open was moved to.
    pub set_aside: Option<PathBuf>,
}

/// Whether an error says the file is not a sound database.
fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    )
}

impl Store {
    /// Opens (creating it and its folder) the store at `path`. A file that is not a database
    /// or is corrupt is renamed `<name>.corrupt-<unix time>` beside it (with its WAL) and a new
    /// one started; the error says why the store cannot be used otherwise.
    pub fn open(path: &Path) -> Result<Store, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let shared = super::place::shared_fs(path);
        let journal = if shared.is_some() { "DELETE" } else { "WAL" };
        match Self::open_once(path, journal) {
            Ok(store) => Ok(store),
            Err(e) if is_corrupt(&e) => {
                if let Some(fs) = shared {
                    return Err(format!(
                        "{} is not a sound database, and it is on {fs}, where other nodes may be using it, so it was not set aside: when no job runs, move it away (`mv {} {}.corrupt`)",
                        path.display(),
                        path.display(),
                        path.display()
                    ));
                }
                let aside = set_aside(path)?;
                let mut store = Self::open_once(path, journal).map_err(|e| describe(path, &e))?;
                store.set_aside = Some(aside);
                Ok(store)
            }
            Err(e) => Err(describe(path, &e)),
        }
    }

    /// Opens the file with `journal` (`WAL` on a local disk, `DELETE` on a network file system).
    fn open_once(path: &Path, journal: &str) -> rusqlite::Result<Store> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL with NORMAL sync: a commit does not wait for the disk (a power cut may lose the
        // last runs, never the file), so recording costs a check microseconds, not an fsync.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Reading the schema version reads the header: garbage fails here.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version == 0 {
            conn.execute_batch(
                "PRAGMA auto_vacuum = INCREMENTAL;
                 BEGIN IMMEDIATE;
                 CREATE TABLE IF NOT EXISTS runs (
                     seq INTEGER PRIMARY KEY AUTOINCREMENT,
                     node TEXT NOT NULL, run TEXT NOT NULL, time INTEGER NOT NULL,
                     record TEXT NOT NULL);
                 CREATE INDEX IF NOT EXISTS runs_node_seq ON runs(node, seq);
                 CREATE INDEX IF NOT EXISTS runs_time ON runs(time);
                 CREATE TABLE IF NOT EXISTS totals (
                     node TEXT NOT NULL, id TEXT NOT NULL, status TEXT NOT NULL,
                     runs INTEGER NOT NULL, PRIMARY KEY (node, id, status));
                 CREATE TABLE IF NOT EXISTS node_runs (
                     node TEXT PRIMARY KEY, runs INTEGER NOT NULL);
                 PRAGMA user_version = 1;
                 COMMIT;",
            )?;
        }
        conn.pragma_update(None, "journal_mode", journal)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            set_aside: None,
        })
    }

    /// Where the store is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the file (newer files are read as far as they agree).
    pub fn version(&self) -> i64 {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap_or(SCHEMA_VERSION)
    }

    /// Keeps one run: its record, the node's run count and its totals, in one transaction (a
    /// writer killed midway leaves nothing of the run), then applies `keep`.
    pub fn record(&mut self, run: &NodeRun, keep: Retention) -> Result<(), String> {
        let json = serde_json::to_string(run).map_err(|e| e.to_string())?;
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| describe(&self.path, &e))?;
        let write = || -> rusqlite::Result<()> {
            tx.execute(
                "INSERT INTO runs (node, run, time, record) VALUES (?1, ?2, ?3, ?4)",
                params![run.node, run.run, run.time, json],
            )?;
            tx.execute(
                "INSERT INTO node_runs (node, runs) VALUES (?1, 1)
                 ON CONFLICT(node) DO UPDATE SET runs = runs + 1",
                params![run.node],
            )?;
            let mut seen: Vec<(&str, &str)> = Vec::new();
            for f in &run.findings {
                if seen.contains(&(f.id.as_str(), f.status.as_str())) {
                    continue;
                }
                seen.push((f.id.as_str(), f.status.as_str()));
                tx.execute(
                    "INSERT INTO totals (node, id, status, runs) VALUES (?1, ?2, ?3, 1)
                     ON CONFLICT(node, id, status) DO UPDATE SET runs = runs + 1",
                    params![run.node, f.id, f.status],
                )?;
            }
            Ok(())
        };
        write().map_err(|e| describe(&self.path, &e))?;
        tx.commit().map_err(|e| describe(&self.path, &e))?;
        self.prune(keep, run.time)
    }

    /// Drops runs older than `keep.days` before `now`, then the oldest runs while the live
    /// pages exceed `keep.max_bytes` (at most 64 rounds of a tenth each), and gives the freed
    /// pages back to the file system.
    fn prune(&mut self, keep: Retention, now: i64) -> Result<(), String> {
        let err = |e: rusqlite::Error| describe(&self.path, &e);
        let cutoff = now - i64::from(keep.days) * 86_400;
        let old = self
            .conn
            .execute("DELETE FROM runs WHERE time < ?1", params![cutoff])
            .map_err(err)?;
        let mut freed = old > 0;
        for _ in 0..64 {
            if self.live_bytes().map_err(err)? <= keep.max_bytes {
                break;
            }
            let n: i64 = self
                .conn
                .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
                .map_err(err)?;
            if n <= 1 {
                break;
            }
            self.conn
                .execute(
                    "DELETE FROM runs WHERE seq IN (SELECT seq FROM runs ORDER BY seq LIMIT ?1)",
                    params![(n / 10).max(1)],
                )
                .map_err(err)?;
            freed = true;
        }
        if freed {
            self.conn
                .execute_batch("PRAGMA incremental_vacuum")
                .map_err(err)?;
        }
        Ok(())
    }

    /// Bytes in the file's pages that hold data (its pages less the free ones).
    pub fn live_bytes(&self) -> rusqlite::Result<u64> {
        let get = |p: &str| -> rusqlite::Result<i64> {
            self.conn
                .query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
        };
        let pages = get("page_count")? - get("freelist_count")?;
        Ok(pages.max(0) as u64 * get("page_size")?.max(0) as u64)
    }

    /// `node`'s last `limit` runs, oldest first.
    pub fn recent(&self, node: &str, limit: usize) -> Result<Vec<NodeRun>, String> {
        self.query(
            "SELECT record FROM (SELECT seq, record FROM runs WHERE node = ?1
             ORDER BY seq DESC LIMIT ?2) ORDER BY seq",
            params![node, limit as i64],
        )
    }

    /// Every run kept (every node the file holds), oldest first, at most `limit` (the newest).
    pub fn all(&self, limit: usize) -> Result<Vec<NodeRun>, String> {
        self.query(
            "SELECT record FROM (SELECT seq, record FROM runs ORDER BY seq DESC LIMIT ?1)
             ORDER BY seq",
            params![limit as i64],
        )
    }

    fn query(&self, sql: &str, p: impl rusqlite::Params) -> Result<Vec<NodeRun>, String> {
        let err = |e: rusqlite::Error| describe(&self.path, &e);
        let mut stmt = self.conn.prepare(sql).map_err(err)?;
        let rows = stmt.query_map(p, |r| r.get::<_, String>(0)).map_err(err)?;
        let mut out = Vec::new();
        for row in rows {
            // A record this build cannot read (a newer field type) is skipped, not fatal.
            if let Ok(run) = serde_json::from_str::<NodeRun>(&row.map_err(err)?) {
                out.push(run);
            }
        }
        Ok(out)
    }

    /// Runs `node` recorded since the store began (retention does not lower it).
    pub fn total_runs(&self, node: &str) -> Result<u64, String> {
        self.conn
            .query_row(
                "SELECT coalesce((SELECT runs FROM node_runs WHERE node = ?1), 0)",
                params![node],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
            .map_err(|e| describe(&self.path, &e))
    }

    /// `node`'s running totals per finding id and status, the most frequent first.
    pub fn totals(&self, node: &str) -> Result<Vec<FindingTotal>, String> {
        let err = |e: rusqlite::Error| describe(&self.path, &e);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, status, runs FROM totals WHERE node = ?1
                 ORDER BY runs DESC, id, status LIMIT ?2",
            )
            .map_err(err)?;
        let rows = stmt
            .query_map(params![node, TOTALS as i64], |r| {
                Ok(FindingTotal {
                    id: r.get(0)?,
                    status: r.get(1)?,
                    runs: r.get::<_, i64>(2)?.max(0) as u64,
                })
            })
            .map_err(err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(err)
    }

    /// Every node the store holds runs of, with its run count since the store began.
    pub fn nodes(&self) -> Result<Vec<(String, u64)>, String> {
        let err = |e: rusqlite::Error| describe(&self.path, &e);
        let mut stmt = self
            .conn
            .prepare("SELECT node, runs FROM node_runs ORDER BY node")
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))
            .map_err(err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(err)
    }

    /// `PRAGMA integrity_check`'s answer ("ok" for a sound file).
    pub fn integrity(&self) -> Result<String, String> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| describe(&self.path, &e))
    }
}

/// Renames a corrupt store (and its WAL and shared-memory files) `<name>.corrupt-<unix time>`.
fn set_aside(path: &Path) -> Result<PathBuf, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let aside = PathBuf::from(format!("{}.corrupt-{now}", path.display()));
    std::fs::rename(path, &aside).map_err(|e| {
        format!(
            "{} is corrupt and cannot be set aside as {}: {e}",
            path.display(),
            aside.display()
        )
    })?;
    for ext in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{ext}", path.display()));
        if side.exists() {
            let _ = std::fs::rename(&side, format!("{}{ext}", aside.display()));
        }
    }
    Ok(aside)
}

/// An error in words, with the path.
fn describe(path: &Path, e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => format!(
            "{} was busy with another writer for more than {} s",
            path.display(),
            BUSY_TIMEOUT.as_secs()
        ),
        Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::PermissionDenied) => {
            format!("cannot write {}: {e}", path.display())
        }
        _ => format!("{}: {e}", path.display()),
    }
}

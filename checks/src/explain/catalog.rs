//! The catalog of finding ids across every concern: what each one means, why it matters and
//! how to fix it.
//!
//! Each concern keeps its entries beside its ids (`<concern>/catalog.rs`) and registers them
//! ([`crate::registry::CONCERNS`]); here they are put in README's order. `preflight explain ID`
//! prints an entry, and README's finding-id table is [`markdown_table`] (a test keeps them
//! equal, and another fails when the code emits an id that is missing here).

pub use crate::core::Entry;
use crate::core::FindingId;
use std::sync::LazyLock;

/// README's order of the ids (the table people read and diff): a data table, checked by a test
/// to hold every registered id once.
static ORDER: &[FindingId] = &[
    crate::net::ids::NO_INTERFACE,
    crate::sys::ids::HOSTNAME_LOOPBACK,
    crate::net::ids::ARP_FLUX,
    crate::net::ids::NCCL_AUTO_PICK,
    crate::rdma::ids::PORT_DOWN,
    crate::rdma::ids::VERBS,
    crate::rdma::ids::PARTIAL,
    crate::rdma::ids::GID_INDEX,
    crate::rdma::ids::RATE,
    crate::rdma::ids::RAILS,
    crate::rdma::ids::FIRMWARE,
    crate::rdma::ids::ROCE_GID,
    crate::rdma::ids::COUNTERS,
    crate::rdma::ids::COUNTERS_GREW,
    crate::rdma::ids::CONTAINER,
    crate::rdma::ids::IOMMU,
    crate::rdma::ids::RAIL_FAULT,
    crate::gpu::ids::NVML,
    crate::gpu::ids::COUNT,
    crate::gpu::ids::VISIBLE_DEVICES,
    crate::gpu::ids::IN_USE,
    crate::gpu::ids::MIG,
    crate::gpu::ids::PCIE_LINK,
    crate::gpu::ids::PCIE_REPLAY,
    crate::gpu::ids::XID,
    crate::gpu::ids::ECC,
    crate::gpu::ids::ROW_REMAP,
    crate::gpu::ids::RETIRED_PAGES,
    crate::gpu::ids::NVLINK,
    crate::gpu::ids::FABRIC_MANAGER,
    crate::gpu::ids::PEERMEM,
    crate::gpu::ids::CLOCKS,
    crate::gpu::ids::PERSISTENCE,
    crate::gpu::ids::BANDWIDTH,
    crate::gpu::ids::COMPUTE_SLOW,
    crate::gpu::ids::COMPUTE_WRONG,
    crate::gpu::ids::COMPUTE_THROTTLE,
    crate::gpu::ids::PCIE_ACS,
    crate::nccl::ids::LIBRARY,
    crate::ports::ids::IN_USE,
    crate::firewall::ids::RULES,
    crate::sys::ids::SHM,
    crate::sys::ids::MEMLOCK,
    crate::sys::scale::ids::LISTEN_BACKLOG,
    crate::sys::scale::ids::NOFILE,
    crate::sys::scale::ids::PORT_RANGE,
    crate::sys::scale::ids::NEIGH_TABLE,
    crate::sys::scale::ids::STALE_NCCL,
    crate::sys::scale::ids::PIDS,
    crate::env::ids::SOCKET_IFNAME,
    crate::env::ids::IB_DISABLE,
    crate::env::ids::MASTER,
    crate::rendezvous::ids::RENDEZVOUS,
    crate::rendezvous::ids::REFUSED,
    crate::link::ids::NAT,
    crate::healthy_set::ids::HEALTHY_SET,
    crate::rendezvous::ids::MASTER_RESOLUTION,
    crate::rendezvous::ids::FQDN,
    crate::rendezvous::ids::MASTER_ELSEWHERE,
    crate::rendezvous::ids::MASTER_LATE,
    crate::rendezvous::ids::LAUNCHER_MASTER,
    crate::rendezvous::ids::AUTH,
    crate::rendezvous::ids::DUPLICATE_HOST,
    crate::rendezvous::ids::VERSIONS,
    crate::gpu::ids::GPUS,
    crate::gpu::ids::GPU_HEALTH,
    crate::link::ids::UNREACHABLE,
    crate::link::ids::INTERCEPTED,
    crate::link::ids::IDLE_TIMEOUT,
    crate::launch::ids::AS_WRITTEN,
    crate::link::ids::MTU_BLACKHOLE,
    crate::link::ids::MTU_MISMATCH,
    crate::link::ids::DEGRADED,
    crate::link::ids::SLOW,
    crate::link::ids::LATENCY,
    crate::collective::ids::BUSBW,
    crate::collective::ids::WRONG,
    crate::collective::ids::NET,
    crate::collective::ids::ERROR,
    crate::launch::ids::ARGS,
    crate::launch::ids::UNKNOWN_FLAG,
    crate::launch::ids::NNODES,
    crate::launch::ids::NODE_RANK,
    crate::launch::ids::NPROC,
    crate::launch::ids::STANDALONE,
    crate::launch::ids::RDZV_BACKEND,
    crate::launch::ids::RDZV_CONF,
    crate::launch::ids::ENDPOINT,
    crate::launch::ids::PORT,
    crate::launch::ids::LEGACY,
    crate::sys::scale::ids::TCPSTORE,
    crate::launch::ids::VARIABLES,
    crate::launch::ids::SCRIPT,
    crate::launch::ids::COMMAND,
    crate::launch::ids::TASKS_PER_NODE,
    crate::history::ids::LEMON,
    crate::history::ids::STORE,
];

static ENTRIES: LazyLock<Vec<Entry>> = LazyLock::new(|| {
    let registered: Vec<&Entry> = crate::registry::CONCERNS
        .iter()
        .flat_map(|c| c.entries.iter())
        .collect();
    ORDER
        .iter()
        .filter_map(|id| registered.iter().find(|e| e.id == *id).map(|e| **e))
        .collect()
});

/// Every entry, in README order.
pub fn all() -> &'static [Entry] {
    &ENTRIES
}

/// The entry for `id`, if the id exists.
pub fn get(id: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.id == id)
}

/// Ids that look like `query`: same prefix first, then by edit distance; at most `max`.
pub fn closest(query: &str, max: usize) -> Vec<&'static str> {
    let q = query.trim().to_ascii_lowercase();
    let mut scored: Vec<(usize, &'static str)> = ENTRIES
        .iter()
        .filter_map(|e| {
            let id = e.id.as_str();
            let d = edit_distance(&q, id);
            let related =
                !q.is_empty() && (id.starts_with(&q) || id.contains(&q) || q.starts_with(e.area()));
            let near = d <= (q.chars().count() / 3).max(2);
            (related || near).then_some((if id.starts_with(&q) { 0 } else { d }, id))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(max).map(|(_, id)| id).collect()
}

/// Levenshtein distance over chars (ids are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The finding-id table of README and the guide (docs/src/findings.md): header and one `| \`id\` | fires | meaning |` row per entry.
pub fn markdown_table() -> String {
    let mut s = String::from("| id | fires as | action | meaning |\n| --- | --- | --- | --- |\n");
    for e in ENTRIES.iter() {
        s.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            e.id,
            e.fires,
            action_cell(e),
            e.meaning
        ));
    }
    s
}

/// The table's action: `` `reset-gpu` (node, hardware) ``, `` `fix-config` (user) ``; `gpu.xid`'s
/// is NVIDIA's per XID.
fn action_cell(e: &Entry) -> String {
    let Some(r) = e.remedy else {
        return String::new();
    };
    if e.id == crate::gpu::ids::XID {
        return format!(
            "per XID, NVIDIA's (`{}` by default; 79: `reboot`) ({})",
            r.action, r.problem
        );
    }
    match e.fault() {
        crate::core::Fault::User => format!("`{}` ({})", r.action, r.problem),
        fault => format!("`{}` ({}, {fault})", r.action, r.problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ids_are_unique_and_shaped_area_dot_name() {
        let mut seen = BTreeSet::new();
        for e in all() {
            assert!(seen.insert(e.id), "duplicate id {}", e.id);
            let (area, name) = e.id.as_str().split_once('.').expect("area.name");
            assert_eq!(area, e.area(), "{}", e.id);
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                e.id
            );
        }
    }

    #[test]
    fn every_text_is_filled_and_one_line_where_the_table_needs_it() {
        for e in all() {
            for (what, text) in [
                ("fires", e.fires),
                ("meaning", e.meaning),
                ("why", e.why),
                ("fix", e.fix),
            ] {
                assert!(text.trim().len() > 2, "{} has no {what}", e.id);
                assert!(!text.contains('\n'), "{} {what} spans lines", e.id);
                assert!(!text.contains("  "), "{} {what} has a double space", e.id);
            }
            assert!(
                !e.meaning.contains('|'),
                "{} meaning breaks the table",
                e.id
            );
            assert!(
                ["skip", "pass", "warn", "fail", "error"]
                    .iter()
                    .any(|st| e.fires.contains(st)),
                "{}: fires names no status",
                e.id
            );
        }
    }

    #[test]
    fn terminal_evidence_keys_are_evidence_keys_each_once() {
        for e in all() {
            let keys = e.terminal_evidence;
            for (i, k) in keys.iter().enumerate() {
                assert!(
                    !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "{}: {k:?} is not an evidence key",
                    e.id
                );
                assert!(!keys[..i].contains(k), "{}: {k} listed twice", e.id);
            }
        }
    }

    #[test]
    fn get_finds_entries_and_rejects_unknown() {
        assert_eq!(get("port.in-use").map(|e| e.area()), Some("port"));
        assert!(get("port.in_use").is_none());
        assert!(get("").is_none());
    }

    #[test]
    fn closest_suggests_typos_and_prefixes() {
        assert_eq!(closest("port.in_use", 3).first(), Some(&"port.in-use"));
        assert_eq!(closest("gpu.cont", 3).first(), Some(&"gpu.count"));
        let gpu = closest("gpu", 20);
        assert!(
            gpu.contains(&"gpu.mig") && gpu.contains(&"gpu.nvml"),
            "{gpu:?}"
        );
        assert!(closest("zzzzzzzzzzzzzz", 3).is_empty());
    }

    #[test]
    fn markdown_table_has_a_row_per_entry() {
        let t = markdown_table();
        assert_eq!(t.lines().count(), all().len() + 2);
        assert!(t.contains(
            "| `sys.shm` | warn | `fix-config` (user) | /dev/shm smaller than 1 GiB |\n"
        ));
    }
}

//! Unit tests of the Flight Recorder verdict on the real dumps under tests/fixtures/flight-recorder.

use super::answer::{self, LogHints};
use super::verdict::Kind;
use super::{Budgets, ras, read_all};

fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(rel)
}

/// Every file of a fixture folder, as the binary would hand them over.
fn files(rel: &str) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(fixture(rel))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

fn culprits(rel: &str) -> Vec<(u32, Kind)> {
    let (dumps, unread) = read_all(&files(rel), None, &Budgets::default());
    assert!(unread.is_empty(), "{rel}: {unread:?}");
    let v = super::verdict::judge(&dumps, None);
    v.culprits.iter().map(|c| (c.rank, c.kind)).collect()
}

/// The same six scenarios as written by torch 2.11 (`flight-recorder/<scenario>`) and by torch
/// 2.9.1 (`flight-recorder/torch-2.9.1/<scenario>`, the first release that dumps for gloo): both
/// write dump version 2.10, through different writers. `flight-recorder/v2.3-nccl` holds torch
/// 2.11's dumps rewritten into dump version 2.3 as ProcessGroupNCCL wrote it
/// (`tests/tools/fr_downgrade.py`: no comm_lib_version, no thread fields, "nccl:" operations,
/// Python's pickler, which puts containers in the memo before filling them).
#[test]
fn real_gloo_dumps_name_the_rank_that_stopped_the_job_in_pickle_and_json() {
    let sets = ["", "torch-2.9.1/", "v2.3-nccl/"];
    for (torch, form) in sets.iter().flat_map(|t| [(*t, "pickle"), (*t, "json")]) {
        let at = |s: &str| format!("flight-recorder/{torch}{s}/{form}");
        let form = format!("{torch}{form}");
        assert_eq!(culprits(&at("healthy")), [], "{form}");
        assert_eq!(culprits(&at("straggler")), [(1, Kind::Missing)], "{form}");
        assert_eq!(culprits(&at("dead")), [(1, Kind::NoDump)], "{form}");
        assert_eq!(culprits(&at("skip")), [(2, Kind::Mismatch)], "{form}");
        assert_eq!(culprits(&at("mismatch")), [(1, Kind::Mismatch)], "{form}");
        assert_eq!(
            culprits(&at("subgroup")),
            [(2, Kind::Missing), (3, Kind::Missing)],
            "{form}"
        );
    }
}

#[test]
fn a_healthy_set_says_so_with_the_last_collective() {
    let (dumps, _) = read_all(
        &files("flight-recorder/healthy/pickle"),
        None,
        &Budgets::default(),
    );
    assert_eq!(dumps.len(), 3);
    assert!(
        dumps
            .iter()
            .all(|d| d.version == "2.10" && d.backend == "gloo")
    );
    let v = super::verdict::judge(&dumps, None);
    assert!(v.healthy);
    assert_eq!(
        v.groups[0].last_completed_by_all,
        Some((5, "barrier".to_string()))
    );
}

#[test]
fn host_names_in_file_names_and_subgroups_on_their_own_ranks() {
    let (dumps, _) = read_all(
        &files("flight-recorder/subgroup/pickle"),
        None,
        &Budgets::default(),
    );
    let hosts: Vec<_> = dumps
        .iter()
        .map(|d| (d.rank, d.host.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        hosts,
        [
            (0, "nodeA".into()),
            (1, "nodeA".into()),
            (2, "nodeB".into()),
            (3, "nodeB".into())
        ]
    );
    let v = super::verdict::judge(&dumps, None);
    let a = v.groups.iter().find(|g| g.desc == "pairA").unwrap();
    assert_eq!((a.ranks.clone(), a.status), (vec![0, 1], "healthy"));
    assert_eq!(v.groups[0].status, "hang");
}

#[test]
fn truncated_empty_and_foreign_files_get_one_line_and_the_rest_is_judged() {
    let (dumps, unread) = read_all(&files("flight-recorder/broken"), None, &Budgets::default());
    assert_eq!(dumps.iter().map(|d| d.rank).collect::<Vec<_>>(), [0, 2]);
    let why: Vec<_> = unread
        .iter()
        .map(|u| (u.rank, u.why.split(':').next().unwrap().to_string()))
        .collect();
    assert_eq!(
        why,
        [
            (Some(1), "truncated".into()),
            (Some(3), "empty file (0 bytes)".into()),
            (
                Some(4),
                "neither a pickle (first byte 0x80) nor JSON".into()
            )
        ]
    );
    let h = answer::answer(&dumps, unread, None, &LogHints::default());
    assert_eq!(h.culprits[0].rank, Some(1));
    assert!(
        h.culprits[0]
            .evidence
            .iter()
            .any(|e| e.contains("truncated")),
        "{:?}",
        h.culprits[0].evidence
    );
}

#[test]
fn a_budget_that_bites_is_a_line_not_a_parse() {
    let b = Budgets {
        depth: 2,
        ..Budgets::default()
    };
    let (dumps, unread) = read_all(&files("flight-recorder/healthy/pickle"), None, &b);
    assert!(dumps.is_empty());
    assert!(
        unread[0].why.contains("nesting deeper than 2"),
        "{unread:?}"
    );
}

fn ras_of(name: &str) -> ras::Ras {
    ras::parse(&std::fs::read(fixture(&format!("ras/{name}"))).unwrap()).unwrap()
}

#[test]
fn ras_names_the_ranks_behind_not_the_ones_ahead() {
    let r = ras_of("nccl-2.28-straggler.txt");
    assert_eq!(r.nccl_version.as_deref(), Some("2.28.9+cuda12.9"));
    let b = &r.behind[0];
    assert_eq!(
        (b.func.as_str(), b.launched, b.ahead_at, b.count),
        ("AllReduce", 1200, 1201, 1)
    );
    assert_eq!(b.ranks[0].rank, Some(3));
    assert_eq!(b.ranks[0].pid, Some(52012));
    assert_eq!(b.ranks[0].host.as_deref(), Some("10.0.0.2"));
    assert_eq!(b.ranks[0].gpu.as_deref(), Some("1"));
    // nccl#1911: RAS lists the 2 ranks ahead; the 30 behind are the culprits, unnamed.
    let r = ras_of("nccl-2.26-ranks-ahead-listed.txt");
    assert_eq!(
        (
            r.behind[0].launched,
            r.behind[0].count,
            r.behind[0].ranks.len()
        ),
        (41, 30, 0)
    );
    let h = answer::answer(&[], vec![], Some((r, "f".into())), &LogHints::default());
    assert!(h.culprits[0].evidence[0].contains("VERBOSE STATUS"));
    assert!(
        h.culprits
            .iter()
            .all(|c| c.rank != Some(5) && c.rank != Some(9))
    );
}

#[test]
fn ras_dead_and_missing_in_text_and_json() {
    let r = ras_of("nccl-2.24-dead-and-behind.txt");
    assert_eq!(r.dead[0].pid, Some(7781));
    assert_eq!(r.comms[0].missing[0].rank, Some(6));
    assert_eq!(r.behind[0].ranks[0].rank, Some(5));
    assert_eq!(r.behind[0].func, "");
    let j = ras_of("nccl-2.29-dead.json");
    assert_eq!(j.format, "json");
    assert_eq!(j.dead[0].rank, Some(1));
    assert_eq!(j.dead[0].host.as_deref(), Some("10.0.0.2"));
    assert!(ras::parse(b"hello\nworld\n").is_err());
    assert!(ras::parse(b"{\"a\": 1}").is_err());
}

#[test]
fn dumps_and_ras_together_fill_in_host_pid_and_gpu() {
    let (dumps, _) = read_all(
        &files("flight-recorder/dead/json"),
        None,
        &Budgets::default(),
    );
    let r = ras_of("nccl-2.29-dead.json");
    let h = answer::answer(
        &dumps,
        vec![],
        Some((r, "ras".into())),
        &LogHints::default(),
    );
    let c = &h.culprits[0];
    assert_eq!((c.rank, c.kind), (Some(1), "no-dump"));
    assert_eq!(
        (c.host.as_deref(), c.pid, c.gpu.as_deref()),
        (Some("10.0.0.2"), Some(4200), Some("0"))
    );
    assert_eq!(
        h.culprits.len(),
        1,
        "RAS's dead rank 1 is the dumps' rank 1: {:?}",
        h.culprits
    );
}

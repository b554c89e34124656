//! Tests of the links' table: read back as given, records and cells, pair sets, odd input.

use super::sets::PAIR_BITS_SIDE;
use super::*;

fn link(from: u32, to: u32, result: LinkOutcome) -> LinkResult {
    LinkResult {
        from,
        to,
        interface: "eth0".into(),
        address: format!("10.0.0.{}", to + 1).into(),
        port: 4000,
        result,
        rtt_us: (result == LinkOutcome::Ok).then_some(20.0 + from as f32),
        rtt_p99_us: (result == LinkOutcome::Ok).then_some(30.0),
        mtu: (result == LinkOutcome::Ok).then_some(9000),
        error: (result != LinkOutcome::Ok).then(|| "timed out".into()),
        ..Default::default()
    }
}

/// Every ordered pair of `n`, one timeout, one measured pair and one link to a second
/// address, not in key order.
fn cluster(n: u32) -> Vec<LinkResult> {
    let mut v = Vec::new();
    for to in (0..n).rev() {
        for from in 0..n {
            if from == to {
                continue;
            }
            let mut l = link(from, to, LinkOutcome::Ok);
            if (from, to) == (2, 5) {
                l = link(from, to, LinkOutcome::Timeout);
            }
            if (from, to) == (1, 0) {
                l.throughput_gbit_s = Some(90.0);
            }
            v.push(l);
        }
    }
    let mut stray = link(3, 4, LinkOutcome::Ok);
    stray.address = "172.17.0.1".into();
    v.push(stray);
    v
}

fn key(l: &LinkResult) -> (u32, u32, String) {
    (l.from, l.to, l.address.to_string())
}

#[test]
fn the_table_reads_back_every_link_as_it_was_given_in_key_order() {
    let given = cluster(70);
    let mut sorted = given.clone();
    sorted.sort_by_key(key);
    let links = Links::of(given, 70);
    assert!(links.is_dense());
    assert_eq!(links.len(), sorted.len());
    let back: Vec<LinkResult> = links.iter().map(|l| l.to_result()).collect();
    assert_eq!(back, sorted);
    // Only the timeout, the measured link and the stray are records.
    let mut records: Vec<(u32, u32)> = links.records().map(|l| (l.from, l.to)).collect();
    records.sort_unstable();
    assert_eq!(records, [(1, 0), (2, 5)]);
    assert_eq!(links.into_vec(), sorted);
}

#[test]
fn a_pair_set_holds_its_pairs_as_bits_or_as_a_list() {
    for side in [5, PAIR_BITS_SIDE + 1] {
        let set = PairSet::of(side, [(1, 2), (2, 1), (1, 2), (4, 0), (9, 9)].into_iter());
        assert_eq!(set.len(), 4);
        assert!(set.contains(1, 2) && set.contains(2, 1) && set.contains(4, 0));
        assert!(set.contains(9, 9), "a rank past the side is listed");
        assert!(!set.contains(0, 4) && !set.contains(3, 3) && !set.contains(u32::MAX, 0));
    }
    assert!(PairSet::of(0, std::iter::empty()).is_empty());
    assert_eq!(side_of([3, 7, 1].into_iter()), 8);
}

#[test]
fn a_small_cluster_keeps_its_links_as_given() {
    let given = cluster(8);
    let links = Links::of(given.clone(), 8);
    assert!(!links.is_dense());
    let back: Vec<LinkResult> = links.iter().map(|l| l.to_result()).collect();
    assert_eq!(back, given);
    assert_eq!(Links::borrowed(&given).records().count(), given.len());
}

#[test]
fn find_and_update_reach_cells_and_records_and_a_measured_link_becomes_a_record() {
    let mut links = Links::of(cluster(70), 70);
    let f = links.find(4, 9, "10.0.0.10").unwrap();
    assert_eq!(
        (f.result, f.rtt_us, f.mtu),
        (LinkOutcome::Ok, Some(24.0), Some(9000))
    );
    assert!(f.record.is_none());
    assert!(links.find(4, 9, "10.0.0.11").is_none());
    assert!(links.update(4, 9, "10.0.0.10", |l| l.throughput_gbit_s = Some(12.5)));
    let f = links.find(4, 9, "10.0.0.10").unwrap();
    assert_eq!(f.throughput_gbit_s, Some(12.5));
    assert!(f.record.is_some());
    assert!(links.update(2, 5, "10.0.0.6", |l| l.retries = 1));
    assert_eq!(
        links
            .find(2, 5, "10.0.0.6")
            .unwrap()
            .record
            .unwrap()
            .retries,
        1
    );
    assert!(links.update(3, 4, "172.17.0.1", |l| l.mtu = Some(1500)));
    assert_eq!(links.find(3, 4, "172.17.0.1").unwrap().mtu, Some(1500));
    assert!(!links.update(3, 4, "192.0.2.1", |_| {}));
    let n = links.len();
    assert_eq!(links.iter().count(), n);
    let keys: Vec<(u32, u32, String)> = links.iter().map(|l| key(&l.to_result())).collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "in key order");
}

#[test]
fn odd_values_stay_records_and_nothing_panics_on_hostile_ranks() {
    let mut odd = cluster(70);
    odd[0].rtt_us = Some(f32::NAN);
    odd[1].mtu = Some(70_000);
    odd[2].port = 1;
    odd.push(link(u32::MAX, 1, LinkOutcome::Ok));
    let links = Links::of(odd.clone(), 70);
    // A rank far past the cluster: no table at all.
    assert!(!links.is_dense());
    odd.pop();
    let links = Links::of(odd.clone(), 70);
    assert!(links.is_dense());
    // The NaN RTT, the MTU past 65535, the other port, the timeout and the measured link.
    assert_eq!(links.records().count(), 5);
    let back: Vec<LinkResult> = links.iter().map(|l| l.to_result()).collect();
    assert_eq!(back.len(), odd.len());
    assert!(back.iter().any(|l| l.rtt_us.is_some_and(f32::is_nan)));
    assert!(back.iter().any(|l| l.mtu == Some(70_000)));
    let mut empty = Links::dense(0, Vec::new());
    empty.push(link(0, 1, LinkOutcome::Ok));
    empty.settle();
    assert_eq!(empty.iter().count(), 1);
}

#[test]
fn a_row_filled_at_once_reads_as_its_links_pushed_one_by_one() {
    let n = 70u32;
    let targets: Vec<Target> = (0..n)
        .map(|to| Target {
            to,
            interface: "eth0".into(),
            address: format!("10.0.0.{}", to + 1).into(),
            port: 4000,
        })
        .collect();
    let mut one_by_one = Links::dense(n, targets.clone());
    let mut filled = Links::dense(n, targets);
    for from in 0..n {
        for to in (0..n).filter(|t| *t != from) {
            if (from, to) == (3, 5) {
                let l = link(from, to, LinkOutcome::Timeout);
                one_by_one.push(l.clone());
                filled.push(l);
                continue;
            }
            let l = link(from, to, LinkOutcome::Ok);
            let rtt = l.rtt_us.unwrap_or_default();
            assert!(one_by_one.push_ok(from, to, &l.address, rtt, 30.0, 9000));
        }
    }
    for from in 0..n {
        let want = if from == 3 { n - 2 } else { n - 1 };
        assert_eq!(
            filled.fill_row_ok(from, 20.0 + from as f32, 30.0, 9000),
            want as usize
        );
    }
    // A row already full fills nothing more; an RTT a cell cannot hold fills nothing.
    assert_eq!(filled.fill_row_ok(4, 1.0, 1.0, 9000), 0);
    assert_eq!(filled.fill_row_ok(n + 1, 1.0, 1.0, 9000), 0);
    one_by_one.settle();
    filled.settle();
    assert_eq!(filled.len(), one_by_one.len());
    let a: Vec<LinkResult> = filled.iter().map(|l| l.to_result()).collect();
    let b: Vec<LinkResult> = one_by_one.iter().map(|l| l.to_result()).collect();
    assert_eq!(a, b);
    // Counted per target from the state bytes: the timeout is a record, not a plain link.
    let cells = filled.cells().expect("every link in a cell");
    let counts = cells.plain_counts(&vec![true; n as usize]);
    assert_eq!((counts[5], counts[6]), (n - 2, n - 1));
    let even: Vec<bool> = (0..n).map(|r| r % 2 == 0).collect();
    assert_eq!(cells.plain_counts(&even)[6], n / 2 - 1);
    assert_eq!(cells.plain_counts(&[])[6], 0);
}

#[test]
fn records_read_in_key_order_whatever_order_they_came_in() {
    let mut links = Links::of(cluster(70), 70);
    assert!(links.update(9, 1, "10.0.0.2", |l| l.throughput_gbit_s = Some(5.0)));
    assert!(links.update(2, 8, "10.0.0.9", |l| l.throughput_gbit_s = Some(6.0)));
    let from_records: Vec<(u32, u32, String)> = links.records().map(key).collect();
    let from_walk: Vec<(u32, u32, String)> =
        links.iter().filter_map(|l| l.record.map(key)).collect();
    assert_eq!(from_records, from_walk);
    assert!(
        from_records.windows(2).all(|w| w[0] <= w[1]),
        "{from_records:?}"
    );
    assert_eq!(from_records.len(), 4);
}

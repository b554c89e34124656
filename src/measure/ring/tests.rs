//! Ring all-reduce over 127.0.0.1 with one thread per rank.

use super::*;
use crate::transport::auth;
use std::io::{Read, Write};
use std::net::Ipv4Addr;

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn secret() -> Secret {
    Secret::token("ring-test")
}

fn quick(timeout_s: u64) -> RingConfig {
    RingConfig {
        warmup: 0,
        iters: 1,
        timeout: Duration::from_secs(timeout_s),
        ..RingConfig::default()
    }
}

fn peers(rank: usize, n: usize, right_port: u16) -> RingPeers {
    RingPeers {
        my_rank: rank as u32,
        nnodes: n as u32,
        pos: rank,
        n,
        left_rank: ((rank + n - 1) % n) as u32,
        right_rank: ((rank + 1) % n) as u32,
        right: SocketAddr::new(LOCAL, right_port),
        admitted: crate::transport::gate::Gate::open(),
    }
}

type Outcome = Result<Vec<RankRow>, RingError>;

/// Runs a ring of `n` threads; `setup(rank)` gives each rank its config, secret and sizes.
fn ring_with(
    n: usize,
    setup: impl Fn(usize) -> (RingConfig, Secret, Vec<u64>),
    before: impl FnOnce(&[u16]),
) -> Vec<Outcome> {
    let listeners: Vec<RingListener> = (0..n).map(|_| RingListener::bind(LOCAL).unwrap()).collect();
    let ports: Vec<u16> = listeners.iter().map(|l| l.port()).collect();
    before(&ports);
    let handles: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(r, l)| {
            let p = peers(r, n, ports[(r + 1) % n]);
            let (cfg, secret, sizes) = setup(r);
            std::thread::spawn(move || ring_allreduce(l, &p, &sizes, &cfg, &secret))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn ring(n: usize, sizes: &[u64], cfg: RingConfig) -> Vec<Outcome> {
    ring_with(n, |_| (cfg.clone(), secret(), sizes.to_vec()), |_| {})
}

#[test]
fn sums_exactly_for_2_to_8_ranks_and_odd_sizes() {
    for n in 2..=8usize {
        // 1 element, 3 elements (fewer than ranks for n > 3), not divisible by n, several
        // streams with uneven parts, and (for small rings) several segments per chunk.
        let mut sizes = vec![4, 12, 4 * (n as u64 * 1001 + 1), 1000004];
        if n <= 3 {
            sizes.push(4 * (2 * n as u64 * plan::SEG_ELEMS as u64 * 4 + 7));
        }
        let cfg = RingConfig {
            warmup: 1,
            iters: 2,
            ..quick(10)
        };
        for (rank, out) in ring(n, &sizes, cfg).into_iter().enumerate() {
            let rows = out.unwrap_or_else(|e| panic!("n={n} rank {rank}: {e}"));
            assert_eq!(rows.iter().map(|r| r.bytes).collect::<Vec<_>>(), sizes);
            for r in &rows {
                assert_eq!(r.wrong, 0, "n={n} rank {rank} size {}", r.bytes);
                assert!(r.time_us > 0.0 && r.time_us.is_finite());
            }
        }
    }
}

#[test]
fn one_stream_and_many_streams_agree() {
    for streams in [1, 7] {
        let cfg = RingConfig {
            streams,
            ..quick(10)
        };
        for out in ring(3, &[4 * 200_003], cfg) {
            assert_eq!(out.unwrap()[0].wrong, 0, "streams={streams}");
        }
    }
}

#[test]
fn a_corrupted_chunk_is_counted_on_every_rank_and_only_for_its_size() {
    let sizes = vec![4000, 4 * 70_001, 4000];
    let outs = ring_with(
        4,
        |r| {
            let mut cfg = RingConfig {
                iters: 2,
                ..quick(10)
            };
            if r == 2 {
                cfg.corrupt = Some(Corrupt {
                    size_index: Some(1),
                });
            }
            (cfg, secret(), sizes.clone())
        },
        |_| {},
    );
    for (rank, out) in outs.into_iter().enumerate() {
        let rows = out.unwrap();
        assert_eq!(rows[0].wrong, 0, "rank {rank}");
        assert_eq!(rows[1].wrong, 1, "rank {rank}");
        assert_eq!(rows[2].wrong, 0, "rank {rank}");
    }
}

#[test]
fn corrupting_every_size_marks_every_size() {
    let sizes = vec![8, 4 * 33];
    let outs = ring_with(
        2,
        |r| {
            let mut cfg = quick(10);
            cfg.corrupt = (r == 0).then_some(Corrupt { size_index: None });
            (cfg, secret(), sizes.clone())
        },
        |_| {},
    );
    for out in outs {
        assert!(out.unwrap().iter().all(|r| r.wrong > 0));
    }
}

#[test]
fn a_ring_of_one_needs_no_network() {
    let l = RingListener::bind(LOCAL).unwrap();
    let p = peers(0, 1, 9); // nothing listens on port 9; it must not be contacted
    let rows = ring_allreduce(l, &p, &[4, 4000], &quick(1), &secret()).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.wrong == 0));
}

#[test]
fn a_neighbour_that_never_comes_is_an_error_within_the_timeout() {
    let gone = RingListener::bind(LOCAL).unwrap().port(); // bound then dropped: refuses
    let l = RingListener::bind(LOCAL).unwrap();
    let t = Instant::now();
    let e = ring_allreduce(l, &peers(0, 2, gone), &[4000], &quick(2), &secret()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    let msg = e.to_string();
    assert!(msg.contains("rank 1"), "{msg}");
    assert!(matches!(e, RingError::Connect { rank: 1, .. }), "{msg}");
}

#[test]
fn a_listening_but_silent_left_neighbour_is_reported() {
    // The right neighbour exists (a plain listener answering nothing), the left never connects.
    let l = RingListener::bind(LOCAL).unwrap();
    let other = RingListener::bind(LOCAL).unwrap();
    let p = RingPeers {
        right_rank: 1,
        ..peers(0, 2, other.port())
    };
    let t = Instant::now();
    let e = ring_allreduce(l, &p, &[4000], &quick(2), &secret()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(9), "{:?}", t.elapsed());
    assert!(e.to_string().contains("rank 1"), "{e}");
}

#[test]
fn a_neighbour_with_the_wrong_secret_is_rejected() {
    let outs = ring_with(
        2,
        |r| {
            let s = if r == 1 {
                Secret::token("other")
            } else {
                secret()
            };
            (quick(2), s, vec![4000])
        },
        |_| {},
    );
    for out in &outs {
        assert!(out.is_err());
    }
    for out in &outs {
        let msg = out.as_ref().unwrap_err().to_string();
        eprintln!("{msg}");
        assert!(msg.contains("secret") || msg.contains("token"), "{msg}");
    }
}

#[test]
fn garbage_on_the_listener_does_not_disturb_the_ring() {
    let mut keep = Vec::new();
    let outs = ring_with(
        2,
        |_| (quick(5), secret(), vec![4 * 1001]),
        |ports| {
            for &port in ports {
                let mut c = TcpStream::connect((LOCAL, port)).unwrap();
                c.write_all(b"GET / HTTP/1.0\r\n\r\n\x00\xff garbage")
                    .unwrap();
                keep.push(c);
                keep.push(TcpStream::connect((LOCAL, port)).unwrap()); // silent
            }
        },
    );
    for out in outs {
        assert_eq!(out.unwrap()[0].wrong, 0);
    }
}

#[test]
fn different_sizes_on_neighbours_are_named() {
    let outs = ring_with(
        2,
        |r| (quick(3), secret(), vec![if r == 0 { 400 } else { 800 }]),
        |_| {},
    );
    let msgs: Vec<String> = outs
        .iter()
        .map(|o| o.as_ref().unwrap_err().to_string())
        .collect();
    assert!(msgs.iter().any(|m| m.contains("--sizes")), "{msgs:?}");
}

/// A left neighbour that authenticates, opens its streams, then vanishes.
#[test]
fn a_neighbour_vanishing_mid_run_is_an_error_not_a_hang() {
    let l = RingListener::bind(LOCAL).unwrap();
    let my_port = l.port();
    let fake = TcpListener::bind((LOCAL, 0)).unwrap();
    let fake_port = fake.local_addr().unwrap().port();
    let cfg = quick(2);
    let streams = cfg.streams;
    let h = std::thread::spawn(move || {
        let mut socks = Vec::new();
        for j in 0..streams {
            let mut s = TcpStream::connect((LOCAL, my_port)).unwrap();
            auth::connect(&mut s, &secret(), 1, 2, Some(0)).unwrap();
            s.write_all(&conn::hello_bytes(j, 2, streams)).unwrap();
            socks.push(s);
        }
        for _ in 0..streams {
            let (mut s, _) = fake.accept().unwrap();
            auth::accept(&mut s, &secret(), 1).unwrap();
            let mut hello = [0u8; 16];
            s.read_exact(&mut hello).unwrap();
            socks.push(s);
        }
        std::thread::sleep(Duration::from_millis(200));
        drop(socks);
    });
    let t = Instant::now();
    let e = ring_allreduce(l, &peers(0, 2, fake_port), &[4 << 20], &cfg, &secret()).unwrap_err();
    h.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let msg = e.to_string();
    assert!(matches!(e, RingError::Step { .. }), "{msg}");
    assert!(msg.contains("rank 1") && msg.contains("step"), "{msg}");
}

#[test]
fn bandwidth_follows_nccl_tests() {
    assert!((algbw_gb_s(1_000_000_000, 1e6) - 1.0).abs() < 1e-12);
    assert!((busbw_gb_s(1_000_000_000, 1e6, 4) - 1.5).abs() < 1e-12);
    assert_eq!(busbw_gb_s(1_000_000_000, 1e6, 1), 0.0);
    assert_eq!(algbw_gb_s(4, 0.0), 0.0);
}

#[test]
fn huge_sizes_get_fewer_iterations() {
    assert_eq!(iters_for(1 << 20, 5), 5);
    assert_eq!(iters_for(256 << 20, 5), 4);
    assert_eq!(iters_for(1 << 30, 5), 1);
    assert_eq!(iters_for(16 << 30, 5), 1);
    assert_eq!(iters_for(4, 0), 1);
}

#[test]
fn check_data_is_exact_and_a_perturbation_is_seen() {
    let (mut a, mut b) = (Vec::with_capacity(10_001), Vec::with_capacity(10_001));
    data::fill(&mut a, 10_001, 0);
    data::fill(&mut b, 10_001, 1);
    assert_eq!(a.len(), 10_001);
    assert_eq!(data::count_wrong(&a, 1), 0);
    assert!(data::count_wrong(&a, 2) > 5_000);
    worker::add_into(&mut a, &b);
    assert_eq!(data::count_wrong(&a, 2), 0);
    data::perturb_first_send(&mut a, 10_001, 2, 0, 1);
    assert_eq!(data::count_wrong(&a, 2), 1);
}

/// Loopback throughput, for a human: `cargo test --release --lib ring::tests::loopback -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark; run by hand in release mode"]
fn loopback_busbw() {
    let bytes: u64 = std::env::var("RING_BENCH_BYTES")
        .ok()
        .and_then(|v| crate::measure::sizes::parse_sizes(&v).ok())
        .map_or(64 << 20, |s| s[0]);
    let streams = std::env::var("RING_BENCH_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    for n in [2, 4] {
        let cfg = RingConfig {
            streams,
            ..RingConfig::default()
        };
        let outs = ring(n, &[bytes], cfg);
        let rows: Vec<RankRow> = outs.into_iter().map(|o| o.unwrap()[0].clone()).collect();
        let worst = rows.iter().map(|r| r.time_us).fold(0.0, f64::max);
        assert!(rows.iter().all(|r| r.wrong == 0));
        println!(
            "n={n} streams={streams} {}: time {worst:.0} us, algbw {:.2} GB/s, busbw {:.2} GB/s",
            crate::measure::sizes::human_bytes(bytes),
            algbw_gb_s(bytes, worst),
            busbw_gb_s(bytes, worst, n)
        );
    }
}

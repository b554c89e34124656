//! A modelled cluster for the fail-slow judgment's property tests: the runtime's throughput
//! schedule (every pair up to 8 nodes, else the ring plus random matchings), multiplicative
//! noise on every measurement, planted slow parts, and the retest before naming.

use preflight_checks::fail_slow::{self, Direction, Sample, Verdict};
use std::collections::HashSet;

/// What is slow, and by how much.
#[derive(Clone, Debug, Default)]
pub struct Plant {
    pub n: u32,
    pub nodes: Vec<(u32, Direction)>,
    /// Both directions of these unordered pairs.
    pub pairs: Vec<(u32, u32)>,
    /// These ordered pairs only.
    pub directions: Vec<(u32, u32)>,
    /// The last `cut` ranks form a group whose pairs with the rest are slow (a rack uplink).
    pub cut: u32,
    /// A slow part's share of the healthy rate.
    pub factor: f64,
    /// Each measurement is the rate times a factor drawn from [1 - noise, 1 + noise].
    pub noise: f64,
    /// Random matchings beyond the ring (the runtime's `--quick` is 1).
    pub matchings: u32,
    /// Slow under this whatever the reference (a rated speed's share or a user floor).
    pub floor: f64,
}

/// The healthy rate, Gbit/s.
pub const RATE: f64 = 10.0;

/// xorshift64*: the model's only randomness, from the seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

impl Plant {
    pub fn healthy(n: u32) -> Plant {
        Plant {
            n,
            factor: 0.25,
            noise: 0.3,
            matchings: 1,
            ..Plant::default()
        }
    }

    fn in_cut(&self, r: u32) -> bool {
        self.cut > 0 && r >= self.n - self.cut
    }

    /// The share of the healthy rate `from -> to` gets.
    pub fn share(&self, from: u32, to: u32) -> f64 {
        let node_slow = self.nodes.iter().any(|(x, d)| match d {
            Direction::Sending => *x == from,
            Direction::Receiving => *x == to,
            Direction::Both => *x == from || *x == to,
        });
        let pair_slow = self
            .pairs
            .iter()
            .any(|(a, b)| (*a == from && *b == to) || (*a == to && *b == from));
        let dir_slow = self.directions.contains(&(from, to));
        let cut_slow = self.in_cut(from) != self.in_cut(to);
        if node_slow || pair_slow || dir_slow || cut_slow {
            self.factor
        } else {
            1.0
        }
    }

    fn measure(&self, from: u32, to: u32, rng: &mut Rng) -> Sample {
        let noise = 1.0 + self.noise * (2.0 * rng.unit() - 1.0);
        Sample {
            from,
            to,
            value: RATE * self.share(from, to) * noise,
            floor: self.floor,
        }
    }

    /// The unordered pairs the runtime's schedule measures.
    pub fn schedule(&self, rng: &mut Rng) -> Vec<(u32, u32)> {
        let n = self.n;
        let key = |a: u32, b: u32| (a.min(b), a.max(b));
        if n <= 8 {
            return (0..n)
                .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
                .collect();
        }
        let mut out: Vec<(u32, u32)> = (0..n).map(|i| key(i, (i + 1) % n)).collect();
        for _ in 0..self.matchings {
            let mut order: Vec<u32> = (0..n).collect();
            for i in (1..order.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                order.swap(i, j);
            }
            out.extend(order.chunks_exact(2).map(|c| key(c[0], c[1])));
        }
        out
    }

    /// Measures the schedule, judges, retests the suspects, judges again (as the runtime does).
    pub fn run(&self, seed: u64) -> (Verdict, usize) {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let pairs = self.schedule(&mut rng);
        let mut samples = Vec::with_capacity(pairs.len() * 2);
        for &(a, b) in &pairs {
            samples.push(self.measure(a, b, &mut rng));
            samples.push(self.measure(b, a, &mut rng));
        }
        let first = fail_slow::judge(&samples, fail_slow::throughput_rule);
        let measured: HashSet<(u32, u32)> = pairs.iter().copied().collect();
        let ranks: Vec<u32> = (0..self.n).collect();
        let plan = fail_slow::retest_plan(&first, &ranks, &measured);
        let mut retested = HashSet::new();
        for round in &plan {
            for &(a, b) in round {
                samples.push(self.measure(a, b, &mut rng));
                samples.push(self.measure(b, a, &mut rng));
                retested.extend([(a, b), (b, a)]);
            }
        }
        let n = retested.len();
        (
            fail_slow::judge_retested(&samples, fail_slow::throughput_rule, &retested),
            n,
        )
    }

    /// Panics unless `v` names exactly what was planted, each as its kind.
    pub fn assert_named(&self, v: &Verdict) {
        let ctx = || format!("plant {self:?}\nverdict {v:#?}");
        let mut want_nodes: Vec<(u32, Direction)> = self.nodes.clone();
        want_nodes.sort_by_key(|(r, _)| *r);
        let got_nodes: Vec<(u32, Direction)> =
            v.nodes.iter().map(|n| (n.rank, n.direction)).collect();
        assert_eq!(got_nodes, want_nodes, "nodes: {}", ctx());
        if self.cut > 0 {
            assert_eq!(v.cuts.len(), 1, "one cut: {}", ctx());
            let c = &v.cuts[0];
            let b: Vec<u32> = (self.n - self.cut..self.n).collect();
            assert_eq!(c.b, b, "the smaller side: {}", ctx());
            assert_eq!(c.a.len() as u32, self.n - self.cut, "{}", ctx());
        } else {
            assert!(v.cuts.is_empty(), "no cut: {}", ctx());
        }
        let mut want: Vec<(u32, u32, bool, bool)> = self
            .pairs
            .iter()
            .map(|(a, b)| (*a.min(b), *a.max(b), true, true))
            .chain(self.directions.iter().map(|(f, t)| {
                let (a, b) = (*f.min(t), *f.max(t));
                (a, b, *f == a, *f == b)
            }))
            .collect();
        want.sort();
        let mut got: Vec<(u32, u32, bool, bool)> = v
            .pairs_slow
            .iter()
            .map(|p| (p.a, p.b, p.a_to_b_slow, p.b_to_a_slow))
            .collect();
        got.sort();
        assert_eq!(got, want, "pairs and directions: {}", ctx());
        assert_eq!(v.unlisted_pairs, 0, "{}", ctx());
        assert!(v.everywhere.is_none(), "{}", ctx());
    }
}

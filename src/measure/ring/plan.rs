//! The ring schedule: how a buffer splits into streams, chunks and pipeline segments, and what each step sends.
//!
//! The buffer is cut into one contiguous part per stream; each stream runs an independent ring
//! all-reduce over its part, cut into `n` chunks (sizes differ by at most one element, possibly zero).
//! Step `t` of `2(n-1)` sends chunk `send(t)` to the right and receives chunk `recv(t)` from the left;
//! `send(t) == recv(t-1)`, which is what lets segments flow on as soon as they arrive.

use std::ops::Range;

/// Elements per pipeline segment (256 KiB of float32).
pub const SEG_ELEMS: usize = 64 * 1024;
/// Fewest elements a stream sends per step (64 KiB of float32): below it a step costs its
/// wakeups more than its bytes, so small messages and large rings use fewer streams (NCCL
/// likewise uses fewer channels for small messages).
pub const MIN_CHUNK_ELEMS: usize = 16 * 1024;

/// The `i`th of `parts` balanced pieces of `0..total` (the first `total % parts` are one longer).
pub fn split(total: usize, parts: usize, i: usize) -> Range<usize> {
    let parts = parts.max(1);
    let (base, rem) = (total / parts, total % parts);
    let start = i * base + i.min(rem);
    start..start + base + usize::from(i < rem)
}

/// How many of the `streams` connections carry data for a message of `count` elements on a
/// ring of `n`: as many as keep each stream's chunk (`count / n / streams`) at
/// [`MIN_CHUNK_ELEMS`] or more, at least one.
pub fn streams_used(count: usize, n: usize, streams: usize) -> usize {
    streams
        .min(count / n.max(1).saturating_mul(MIN_CHUNK_ELEMS))
        .max(1)
}

/// What the receiver does with a chunk: reduce-scatter adds, all-gather overwrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Add,
    Copy,
}

/// One step of one stream: absolute element ranges in the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub send: Range<usize>,
    pub recv: Range<usize>,
    pub op: Op,
}

/// The schedule of one stream for one message.
#[derive(Clone, Debug)]
pub struct SegmentPlan {
    part: Range<usize>,
    n: usize,
    pos: usize,
}

impl SegmentPlan {
    /// Stream `stream` of `used` for a `count`-element message at ring position `pos` of `n`.
    pub fn new(count: usize, n: usize, pos: usize, used: usize, stream: usize) -> SegmentPlan {
        let part = if stream < used {
            split(count, used, stream)
        } else {
            0..0
        };
        SegmentPlan { part, n, pos }
    }

    /// Number of steps: reduce-scatter then all-gather, `n-1` each.
    pub fn steps(&self) -> usize {
        2 * self.n.saturating_sub(1)
    }

    fn chunk(&self, c: usize) -> Range<usize> {
        let r = split(self.part.len(), self.n, c);
        self.part.start + r.start..self.part.start + r.end
    }

    /// `pos - back` modulo `n`.
    fn behind(&self, back: usize) -> usize {
        (self.pos + self.n - back % self.n) % self.n
    }

    /// Step `t` (`0..steps()`): reduce-scatter step `s = t` sends chunk `pos-s` and adds chunk
    /// `pos-s-1`; all-gather step `s = t-(n-1)` sends chunk `pos+1-s` and copies chunk `pos-s`.
    pub fn step(&self, t: usize) -> Step {
        let rs = self.n - 1;
        if t < rs {
            Step {
                send: self.chunk(self.behind(t)),
                recv: self.chunk(self.behind(t + 1)),
                op: Op::Add,
            }
        } else {
            let s = t - rs;
            Step {
                send: self.chunk(self.behind(s + self.n - 1)),
                recv: self.chunk(self.behind(s)),
                op: Op::Copy,
            }
        }
    }
}

/// Number of segments a range is cut into.
pub fn segments(r: &Range<usize>) -> usize {
    r.len().div_ceil(SEG_ELEMS)
}

/// Segment `k` of a range.
pub fn segment(r: &Range<usize>, k: usize) -> Range<usize> {
    let start = r.start + k * SEG_ELEMS;
    start..(start + SEG_ELEMS).min(r.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_balanced_and_covers_everything() {
        for total in [0, 1, 3, 7, 8, 1001] {
            for parts in 1..=9 {
                let rs: Vec<_> = (0..parts).map(|i| split(total, parts, i)).collect();
                assert_eq!(rs[0].start, 0);
                assert_eq!(rs[parts - 1].end, total);
                assert!(rs.windows(2).all(|w| w[0].end == w[1].start));
                let (lo, hi) = (total / parts, total.div_ceil(parts));
                assert!(rs.iter().all(|r| r.len() == lo || r.len() == hi));
            }
        }
    }

    #[test]
    fn each_step_sends_what_the_previous_one_received() {
        for n in 2..=8 {
            for pos in 0..n {
                let p = SegmentPlan::new(1003, n, pos, 1, 0);
                for t in 1..p.steps() {
                    assert_eq!(p.step(t).send, p.step(t - 1).recv, "n={n} pos={pos} t={t}");
                }
            }
        }
    }

    #[test]
    fn left_neighbour_sends_what_we_receive() {
        for n in 2..=8 {
            for pos in 0..n {
                let me = SegmentPlan::new(999, n, pos, 1, 0);
                let left = SegmentPlan::new(999, n, (pos + n - 1) % n, 1, 0);
                for t in 0..me.steps() {
                    assert_eq!(left.step(t).send, me.step(t).recv);
                }
            }
        }
    }

    #[test]
    fn reduce_scatter_leaves_each_rank_owning_chunk_pos_plus_one() {
        // Simulate the ring on sets of contributions: every chunk must end up holding all ranks.
        for n in 2..=6 {
            let count = 2 * n + 1;
            let mut held: Vec<Vec<u64>> = (0..n).map(|r| vec![1u64 << r; count]).collect();
            let plans: Vec<SegmentPlan> = (0..n)
                .map(|p| SegmentPlan::new(count, n, p, 1, 0))
                .collect();
            for t in 0..plans[0].steps() {
                let sent: Vec<Vec<u64>> = (0..n)
                    .map(|p| held[p][plans[p].step(t).send].to_vec())
                    .collect();
                for p in 0..n {
                    let from = &sent[(p + n - 1) % n];
                    let st = plans[p].step(t);
                    for (d, s) in held[p][st.recv].iter_mut().zip(from) {
                        *d = if st.op == Op::Add { *d | s } else { *s };
                    }
                }
            }
            let all = (1u64 << n) - 1;
            assert!(held.iter().all(|h| h.iter().all(|v| *v == all)), "n={n}");
        }
    }

    #[test]
    fn small_messages_use_fewer_streams_and_segments_cover_chunks() {
        assert_eq!(streams_used(1, 2, 4), 1);
        assert_eq!(streams_used(MIN_CHUNK_ELEMS * 2 * 2, 2, 4), 2);
        assert_eq!(streams_used(1 << 24, 2, 4), 4);
        // 16 MiB of float32 on 64 nodes keeps 4 streams, on 256 nodes one (16 KiB chunks
        // otherwise: each step would cost more in wakeups than in bytes).
        assert_eq!(streams_used(4 << 20, 64, 4), 4);
        assert_eq!(streams_used(4 << 20, 256, 4), 1);
        assert_eq!(streams_used(1 << 20, 0, 4), 4, "no ring is no special case");
        assert!(SegmentPlan::new(10, 4, 0, 1, 3).step(0).send.is_empty());
        let r = 5..5 + 2 * SEG_ELEMS + 3;
        assert_eq!(segments(&r), 3);
        assert_eq!(segment(&r, 2), 5 + 2 * SEG_ELEMS..r.end);
        assert_eq!(segments(&(4..4)), 0);
    }
}

//! Sets the judgments over links keep per rank or per pair: [`RankText`] (each rank's address
//! text, matched by a label's pointer after one comparison) and [`PairSet`] (a bit per ordered
//! pair of a cluster's ranks).

use super::{DENSE_MAX_RANK, Label};

/// Per destination rank, the one address text a judgment looks for (a network member's), and
/// whether a link's address is it: a link read from the table shares its target's label, so
/// after one comparison the label's pointer answers, yes or no, with no string compared per
/// link. Used over one [`Links`] at a time (the pointers are its labels').
pub struct RankText {
    /// Indexed by rank where the ranks are a cluster's; else `sparse` holds them.
    dense: Vec<Option<String>>,
    sparse: std::collections::BTreeMap<u32, String>,
    /// Per rank: the last label found to be the text, and the last found not to be.
    yes: Vec<std::cell::Cell<usize>>,
    no: Vec<std::cell::Cell<usize>>,
}

impl RankText {
    pub fn new(entries: impl Iterator<Item = (u32, String)>) -> RankText {
        let entries: Vec<(u32, String)> = entries.collect();
        let side = side_of(entries.iter().map(|(r, _)| *r));
        if side > DENSE_MAX_RANK {
            return RankText {
                dense: Vec::new(),
                sparse: entries.into_iter().collect(),
                yes: Vec::new(),
                no: Vec::new(),
            };
        }
        let mut dense = vec![None; side as usize];
        for (r, t) in entries {
            dense[r as usize] = Some(t);
        }
        RankText {
            yes: (0..side).map(|_| std::cell::Cell::new(0)).collect(),
            no: (0..side).map(|_| std::cell::Cell::new(0)).collect(),
            dense,
            sparse: std::collections::BTreeMap::new(),
        }
    }

    /// The text looked for on `rank`.
    pub fn text(&self, rank: u32) -> Option<&str> {
        match self.dense.get(rank as usize) {
            Some(t) => t.as_deref(),
            None => self.sparse.get(&rank).map(String::as_str),
        }
    }

    /// Whether `address` is `rank`'s text; `other` decides a label that is not (a parse, say),
    /// once per label.
    pub fn matches(&self, rank: u32, address: &Label, other: impl Fn(&str) -> bool) -> bool {
        let Some(text) = self.text(rank) else {
            return false;
        };
        let (Some(yes), Some(no)) = (self.yes.get(rank as usize), self.no.get(rank as usize))
        else {
            return text == address.as_str() || other(address);
        };
        let ptr = address.as_str().as_ptr() as usize;
        if yes.get() == ptr {
            return true;
        }
        if no.get() == ptr {
            return false;
        }
        let is = text == address.as_str() || other(address);
        if is {
            yes.set(ptr)
        } else {
            no.set(ptr)
        }
        is
    }
}

/// A set of ordered pairs of ranks: a bit per pair where the ranks are those of a cluster (2 MiB
/// at 4096 nodes), else a sorted list. Filled once, then read.
#[derive(Clone, Debug)]
pub struct PairSet {
    /// Ranks 0..side, a bit per (from, to); `None`: the list holds them.
    side: Option<u32>,
    bits: Vec<u64>,
    list: Vec<(u32, u32)>,
    len: usize,
}

/// The most ranks a bit matrix is made for (32 MiB of bits).
pub(crate) const PAIR_BITS_SIDE: u32 = 1 << 14;

impl PairSet {
    /// The pairs of `pairs`, whose ranks are below `side` (else they are listed instead).
    pub fn of(side: u32, pairs: impl Iterator<Item = (u32, u32)>) -> PairSet {
        let mut set = PairSet::new(side);
        for (a, b) in pairs {
            set.insert(a, b);
        }
        set.done()
    }

    /// An empty set for ranks below `side`: [`PairSet::insert`], then [`PairSet::done`].
    pub fn new(side: u32) -> PairSet {
        let dense = side <= PAIR_BITS_SIDE;
        let cells = if dense {
            side as usize * side as usize
        } else {
            0
        };
        PairSet {
            side: dense.then_some(side),
            bits: vec![0; cells.div_ceil(64)],
            list: Vec::new(),
            len: 0,
        }
    }

    /// Adds (a, b): `Some(true)` when it was not in the set, `Some(false)` when it was, `None`
    /// when that is known only after [`PairSet::done`] (a pair of the list).
    pub fn insert(&mut self, a: u32, b: u32) -> Option<bool> {
        match self.side {
            Some(side) if a < side && b < side => {
                let i = a as usize * side as usize + b as usize;
                let (w, bit) = (i / 64, 1u64 << (i % 64));
                let new = self.bits[w] & bit == 0;
                if new {
                    self.bits[w] |= bit;
                    self.len += 1;
                }
                Some(new)
            }
            _ => {
                self.list.push((a, b));
                None
            }
        }
    }

    /// Ends the inserts.
    pub fn done(mut self) -> PairSet {
        self.list.sort_unstable();
        self.list.dedup();
        self.len += self.list.len();
        self
    }

    pub fn contains(&self, a: u32, b: u32) -> bool {
        match self.side {
            Some(side) if a < side && b < side => {
                let i = a as usize * side as usize + b as usize;
                self.bits[i / 64] & (1u64 << (i % 64)) != 0
            }
            _ => self.list.binary_search(&(a, b)).is_ok(),
        }
    }

    /// Distinct pairs.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One more than the highest rank among `ranks` (the side of a [`PairSet`] over them).
pub fn side_of(ranks: impl Iterator<Item = u32>) -> u32 {
    ranks.max().map_or(0, |r| r.saturating_add(1))
}

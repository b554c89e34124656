//! Union-find over ranks: the groups of nodes joined by fast pairs.

use std::collections::HashMap;

/// Disjoint sets of ranks, indexed densely.
pub(super) struct Groups {
    slot: HashMap<u32, usize>,
    ranks: Vec<u32>,
    parent: Vec<usize>,
}

impl Groups {
    pub(super) fn new(ranks: impl Iterator<Item = u32>) -> Groups {
        let mut g = Groups {
            slot: HashMap::new(),
            ranks: Vec::new(),
            parent: Vec::new(),
        };
        for r in ranks {
            if !g.slot.contains_key(&r) {
                g.slot.insert(r, g.ranks.len());
                g.parent.push(g.ranks.len());
                g.ranks.push(r);
            }
        }
        g
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    pub(super) fn join(&mut self, a: u32, b: u32) {
        let (Some(&ia), Some(&ib)) = (self.slot.get(&a), self.slot.get(&b)) else {
            return;
        };
        let (ra, rb) = (self.root(ia), self.root(ib));
        if ra != rb {
            self.parent[ra.max(rb)] = ra.min(rb);
        }
    }

    /// Each rank's group, as an index into [`Groups::sizes`] and [`Groups::members`].
    pub(super) fn labels(&mut self) -> HashMap<u32, usize> {
        (0..self.ranks.len())
            .map(|i| (self.ranks[i], self.root(i)))
            .collect()
    }

    /// The size of each group by its index (0 for indexes that are no group).
    pub(super) fn sizes(&mut self) -> Vec<usize> {
        let mut size = vec![0; self.ranks.len()];
        for i in 0..self.ranks.len() {
            let r = self.root(i);
            size[r] += 1;
        }
        size
    }

    /// The ranks of each group by its index, sorted.
    pub(super) fn members(&mut self) -> Vec<Vec<u32>> {
        let mut m = vec![Vec::new(); self.ranks.len()];
        for i in 0..self.ranks.len() {
            let r = self.root(i);
            m[r].push(self.ranks[i]);
        }
        for g in &mut m {
            g.sort_unstable();
        }
        m
    }
}

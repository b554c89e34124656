//! A dense table's cells read in place, row by row and target by target, for readers that
//! walk every pair once (the report's compaction): a byte and a float a pair, no view built.

use super::{EMPTY, Label, Link, LinkResult, Links, PLAIN, RECORD, Table, Target};

/// What one cell holds.
#[derive(Clone, Copy, Debug)]
pub enum Cell<'a> {
    Empty,
    /// A link that connected and carries nothing else: its RTT, if measured.
    Plain(Option<f32>),
    /// A link held as a full record.
    Record(&'a LinkResult),
}

/// Every link of a [`Links`] in its dense table (see [`Links::cells`]): the cells' order,
/// row-major over targets sorted by (to, address), is [`Links::iter`]'s order.
#[derive(Clone, Copy)]
pub struct Cells<'a> {
    links: &'a Links<'a>,
    table: &'a Table,
}

impl Links<'_> {
    /// Every empty cell of row `from` but its own targets' as a link that connected and
    /// carries these figures (a whole row written at once: a simulation's links, every one
    /// alike but the few pushed before); how many were filled. Nothing without a table, or
    /// with an RTT, p99 or MTU a cell cannot hold.
    pub fn fill_row_ok(&mut self, from: u32, rtt_us: f32, rtt_p99_us: f32, mtu: u32) -> usize {
        self.changed();
        let Some(table) = self.table.as_mut() else {
            return 0;
        };
        let fits = !rtt_us.is_nan() && !rtt_p99_us.is_nan() && mtu > 0 && mtu <= 65535;
        if from >= table.rows || !fits {
            return 0;
        }
        let width = table.targets.len();
        let row = from as usize * width..(from as usize + 1) * width;
        let mut filled = 0;
        for (t, c) in row.enumerate() {
            if table.state[c] == EMPTY && table.targets[t].to != from {
                table.state[c] = PLAIN;
                table.rtt[c] = rtt_us;
                table.p99[c] = rtt_p99_us;
                table.mtu[c] = mtu as u16;
                filled += 1;
            }
        }
        self.len += filled;
        filled
    }
}

impl<'a> Links<'a> {
    /// The table's cells, when every link is in one (a table without loose records: a
    /// coordinator's or a simulation's links); else `None` (read [`Links::iter`]).
    pub fn cells(&'a self) -> Option<Cells<'a>> {
        let table = self.table.as_ref()?;
        self.loose
            .is_empty()
            .then_some(Cells { links: self, table })
    }
}

impl<'a> Cells<'a> {
    /// Rows: ranks 0..rows dialled.
    pub fn rows(&self) -> u32 {
        self.table.rows
    }

    /// The columns, sorted by (to, address).
    pub fn targets(&self) -> &'a [Target] {
        &self.table.targets
    }

    /// The cell of `row` dialling target `t` (both in range, else empty).
    pub fn get(&self, row: u32, t: usize) -> Cell<'a> {
        let table = self.table;
        let width = table.targets.len();
        if t >= width || row >= table.rows {
            return Cell::Empty;
        }
        let c = row as usize * width + t;
        match table.state.get(c) {
            Some(&PLAIN) => Cell::Plain(Some(table.rtt[c]).filter(|r| !r.is_nan())),
            Some(&RECORD) => self
                .links
                .records
                .get(table.rtt[c].to_bits() as usize)
                .map_or(Cell::Empty, Cell::Record),
            _ => Cell::Empty,
        }
    }

    /// The link in that cell, as [`Links::iter`] gives it.
    pub fn link(&self, row: u32, t: usize) -> Option<Link<'a>> {
        let width = self.table.targets.len();
        if t >= width || row >= self.table.rows {
            return None;
        }
        self.links.at(row as usize * width + t, row, t)
    }

    /// Per target, the links held as plain cells (connected, nothing else) from the rows
    /// `row` accepts (a flag per rank; a rank past the flags is not accepted): the table's
    /// state bytes summed column by column, a fraction of a nanosecond a pair.
    pub fn plain_counts(&self, row: &[bool]) -> Vec<u32> {
        let table = self.table;
        let width = table.targets.len();
        let mut counts = vec![0u32; width];
        if width == 0 {
            return counts;
        }
        for (r, states) in table.state.chunks_exact(width).enumerate() {
            if !row.get(r).copied().unwrap_or(false) {
                continue;
            }
            for (n, s) in counts.iter_mut().zip(states) {
                *n += u32::from(*s == PLAIN);
            }
        }
        counts
    }

    /// Which targets some link dialled and which rows dialled any: the state bytes OR-ed
    /// column by column and row by row (no cell read as a link).
    pub fn occupancy(&self) -> (Vec<bool>, Vec<bool>) {
        let table = self.table;
        let width = table.targets.len();
        let mut cols = vec![0u8; width];
        let mut rows = vec![false; table.rows as usize];
        if width > 0 {
            for (row, states) in rows.iter_mut().zip(table.state.chunks_exact(width)) {
                let mut any = 0u8;
                for (c, s) in cols.iter_mut().zip(states) {
                    *c |= *s;
                    any |= *s;
                }
                *row = any != EMPTY;
            }
        }
        (cols.into_iter().map(|c| c != EMPTY).collect(), rows)
    }

    /// The records with their target, in no particular order.
    pub fn records(&self) -> impl Iterator<Item = (usize, &'a LinkResult)> + 'a {
        let width = self.table.targets.len().max(1);
        let links = self.links;
        links
            .record_cells
            .iter()
            .zip(&links.records)
            .map(move |(c, r)| (c % width, r))
    }

    /// Row `row`'s cells as two slices, one entry per target: the state ([`Cells::PLAIN`]: a
    /// link that connected, its RTT beside it, NaN for none; else read it with
    /// [`Cells::get`]) and the RTT. Empty past the rows.
    pub fn row(&self, row: u32) -> (&'a [u8], &'a [f32]) {
        let table = self.table;
        let width = table.targets.len();
        if row >= table.rows {
            return (&[], &[]);
        }
        let range = row as usize * width..(row as usize + 1) * width;
        (&table.state[range.clone()], &table.rtt[range])
    }

    /// The state of a plain cell in [`Cells::row`].
    pub const PLAIN: u8 = PLAIN;

    /// The address label of target `t`.
    pub fn address(&self, t: usize) -> Option<&'a Label> {
        self.table.targets.get(t).map(|x| &x.address)
    }
}

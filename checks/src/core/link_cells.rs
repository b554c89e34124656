//! A dense table's cells read in place, row by row and target by target, for readers that
//! walk every pair once (the report's compaction): a byte and a float a pair, no view built.

use super::{Label, Link, LinkResult, Links, PLAIN, RECORD, Table, Target};

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

impl<'a> Links<'a> {
    /// The table's cells, when every link is in one (a table without loose records: a
    /// coordinator's or a simulation's links); else `None` (read [`Links::iter`]).
    pub fn cells(&'a self) -> Option<Cells<'a>> {
        let table = self.table.as_ref()?;
        self.loose.is_empty().then_some(Cells { links: self, table })
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

    /// The address label of target `t`.
    pub fn address(&self, t: usize) -> Option<&'a Label> {
        self.table.targets.get(t).map(|x| &x.address)
    }
}

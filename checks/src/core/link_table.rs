//! Every link a cluster measured, held so that thousands of nodes fit: above
//! [`DENSE_ABOVE`] nodes a dense table of small cells (result, RTT, path MTU) holds the links
//! that connected and carry nothing else, and full [`LinkResult`] records only the links that
//! failed, were measured for throughput, or carry anything more (an error, a retry, a stall).
//! At 4096 nodes that is 16.7 million ordered pairs in 11 bytes each instead of 80; the
//! judgment reads both through one iterator of [`Link`] views, in (from, to, address) order.

use super::{Label, LinkOutcome, LinkResult, Network, NetworkEval};
use std::borrow::Cow;

/// Up to this many nodes every link is kept as it came (a full record each); above, the links
/// that connected and carry nothing else go in the dense table.
pub const DENSE_ABOVE: usize = 64;

/// The highest rank a dense table is built for: rows are indexed by rank.
const DENSE_MAX_RANK: u32 = 1 << 20;

/// A cell's state.
const EMPTY: u8 = 0;
/// The link is in the cell (ok, with at most an RTT, a p99 and a path MTU).
const PLAIN: u8 = 1;
/// The link is a full record: the cell's `rtt` holds its index in `records`.
const RECORD: u8 = 2;

/// One listener of one node: a column of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub to: u32,
    pub interface: Label,
    pub address: Label,
    pub port: u16,
}

/// One link as the judgment reads it, from a cell or a full record.
#[derive(Clone, Copy, Debug)]
pub struct Link<'a> {
    pub from: u32,
    pub to: u32,
    pub interface: &'a Label,
    pub address: &'a Label,
    pub port: u16,
    pub result: LinkOutcome,
    pub rtt_us: Option<f32>,
    pub rtt_p99_us: Option<f32>,
    pub throughput_gbit_s: Option<f32>,
    pub mtu: Option<u32>,
    /// The full record when the link is held as one (every link not ok, every link measured
    /// for throughput, every one with an error, a retry, a stall or a handshake failure).
    pub record: Option<&'a LinkResult>,
}

impl Link<'_> {
    /// The link as a record of its own.
    pub fn to_result(&self) -> LinkResult {
        match self.record {
            Some(r) => r.clone(),
            None => LinkResult {
                from: self.from,
                to: self.to,
                interface: self.interface.clone(),
                address: self.address.clone(),
                port: self.port,
                result: self.result,
                rtt_us: self.rtt_us,
                rtt_p99_us: self.rtt_p99_us,
                throughput_gbit_s: self.throughput_gbit_s,
                mtu: self.mtu,
                ..Default::default()
            },
        }
    }

    fn of(r: &LinkResult) -> Link<'_> {
        Link {
            from: r.from,
            to: r.to,
            interface: &r.interface,
            address: &r.address,
            port: r.port,
            result: r.result,
            rtt_us: r.rtt_us,
            rtt_p99_us: r.rtt_p99_us,
            throughput_gbit_s: r.throughput_gbit_s,
            mtu: r.mtu,
            record: Some(r),
        }
    }
}

/// A link held in a cell, as [`Links::scan`] gives it: it connected (its address is the
/// target's that `scan` accepted).
#[derive(Clone, Copy, Debug)]
pub struct PlainLink<'a> {
    pub from: u32,
    pub to: u32,
    pub address: &'a Label,
    pub rtt_us: Option<f32>,
    pub mtu: Option<u32>,
}

/// The dense part: `rows` ranks dialling `targets`, one cell per (from, target), row-major.
#[derive(Clone, Debug, Default)]
struct Table {
    rows: u32,
    /// Sorted by (to, address).
    targets: Vec<Target>,
    /// `first[to]..first[to + 1]`: the targets of rank `to` (`rows + 1` entries).
    first: Vec<u32>,
    state: Vec<u8>,
    /// PLAIN: the RTT (NaN: none); RECORD: the record's index, as bits.
    rtt: Vec<f32>,
    /// PLAIN: the p99 RTT (NaN: none).
    p99: Vec<f32>,
    /// PLAIN: the path MTU (0: none).
    mtu: Vec<u16>,
}

impl Table {
    fn cell(&self, from: u32, target: usize) -> usize {
        from as usize * self.targets.len() + target
    }

    /// The target (to, address), if the table has one.
    fn target(&self, to: u32, address: &str) -> Option<usize> {
        let range = self.first.get(to as usize)?..self.first.get(to as usize + 1)?;
        let (lo, hi) = (*range.start as usize, *range.end as usize);
        // A label shared with the target (a simulation's, a table's own) answers by pointer.
        (lo..hi).find(|&t| {
            let own = self.targets[t].address.as_str();
            (own.as_ptr() == address.as_ptr() && own.len() == address.len()) || own == address
        })
    }

    /// The cell `l` would go in, when it is a link the table can hold as plain.
    fn plain_cell(&self, l: &LinkResult) -> Option<usize> {
        let plain = l.result == LinkOutcome::Ok
            && l.from != l.to
            && l.from < self.rows
            && l.throughput_gbit_s.is_none()
            && l.error.is_none()
            && !l.stalled
            && l.retries == 0
            && l.handshake.is_none()
            && l.rtt_us.is_none_or(|r| !r.is_nan())
            && l.rtt_p99_us.is_none_or(|r| !r.is_nan())
            && l.mtu.is_none_or(|m| m > 0 && m <= u32::from(u16::MAX));
        if !plain {
            return None;
        }
        let t = self.target(l.to, &l.address)?;
        let target = &self.targets[t];
        (target.interface == l.interface && target.port == l.port).then(|| self.cell(l.from, t))
    }
}

/// Every link of a cluster: kept as given (small clusters, tests, a coordinator's list lent for
/// a moment), or in a dense table with records beside it (see the module's doc).
#[derive(Debug, Default)]
pub struct Links<'a> {
    table: Option<Table>,
    /// Records that have a cell (their index is in the cell).
    records: Vec<LinkResult>,
    /// The cell of each record (by index), to read the records in the cells' order without a
    /// pass over every cell.
    record_cells: Vec<usize>,
    /// Records without a cell (no table; a target the table does not have; a second link of
    /// one cell): in the order given without a table, in (from, to, address) order with one.
    loose: Cow<'a, [LinkResult]>,
    len: usize,
    /// Networks judged on these links (`networks::evaluate`), kept for the next
    /// ask with the same networks and ranks (the advice and the report judge them alike).
    evals: std::sync::Mutex<Vec<Judged>>,
}

/// One judgment of networks on the links: the networks, the ranks, the result.
type Judged = (Vec<Network>, Vec<u32>, Vec<NetworkEval>);

impl Clone for Links<'_> {
    fn clone(&self) -> Self {
        Links {
            table: self.table.clone(),
            records: self.records.clone(),
            record_cells: self.record_cells.clone(),
            loose: self.loose.clone(),
            len: self.len,
            evals: Default::default(),
        }
    }
}

impl<'a> Links<'a> {
    /// No links.
    pub const fn none() -> Links<'static> {
        Links {
            table: None,
            records: Vec::new(),
            record_cells: Vec::new(),
            loose: Cow::Borrowed(&[]),
            len: 0,
            evals: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The judgment of `networks` among `ranks` on these links, judged once: `judge` runs on
    /// the first ask, later asks with the same networks and ranks get a copy.
    pub fn judged(
        &self,
        networks: &[Network],
        ranks: &[u32],
        judge: impl FnOnce() -> Vec<NetworkEval>,
    ) -> Vec<NetworkEval> {
        let hit = self.evals.lock().ok().and_then(|cache| {
            cache
                .iter()
                .find(|(n, r, _)| n.as_slice() == networks && r.as_slice() == ranks)
                .map(|(_, _, e)| e.clone())
        });
        if let Some(e) = hit {
            return e;
        }
        let e = judge();
        if let Ok(mut cache) = self.evals.lock() {
            if cache.len() >= 4 {
                cache.remove(0);
            }
            cache.push((networks.to_vec(), ranks.to_vec(), e.clone()));
        }
        e
    }

    /// Forgets the judgments kept (the links changed).
    fn changed(&mut self) {
        if let Ok(cache) = self.evals.get_mut() {
            cache.clear();
        }
    }

    /// The links as given, lent (nothing copied).
    pub fn borrowed(links: &'a [LinkResult]) -> Links<'a> {
        Links {
            len: links.len(),
            loose: Cow::Borrowed(links),
            ..Default::default()
        }
    }

    /// The links as given, owned.
    pub fn owned(links: Vec<LinkResult>) -> Links<'static> {
        Links {
            len: links.len(),
            loose: Cow::Owned(links),
            ..Default::default()
        }
    }

    /// The links of a cluster of `nodes` nodes: as given up to [`DENSE_ABOVE`] nodes, else in
    /// a dense table (the list is consumed as it is read, so the two are not held at once for
    /// long).
    pub fn of(links: Vec<LinkResult>, nodes: usize) -> Links<'static> {
        let max_rank = links.iter().map(|l| l.from.max(l.to)).max().unwrap_or(0);
        if nodes <= DENSE_ABOVE || max_rank >= DENSE_MAX_RANK {
            return Links::owned(links);
        }
        // Each (to, address) once, found among the few of its rank; the first ok link's
        // interface and port name the target (else the first link's).
        let mut by_rank: Vec<Vec<(bool, Target)>> = vec![Vec::new(); max_rank as usize + 1];
        for l in &links {
            let mine = &mut by_rank[l.to as usize];
            let ok = l.result == LinkOutcome::Ok;
            let target = || Target {
                to: l.to,
                interface: l.interface.clone(),
                address: l.address.clone(),
                port: l.port,
            };
            match mine.iter_mut().find(|(_, t)| t.address == l.address) {
                Some(slot) if ok && !slot.0 => *slot = (true, target()),
                Some(_) => {}
                None => mine.push((ok, target())),
            }
        }
        let targets: Vec<Target> = by_rank.into_iter().flatten().map(|(_, t)| t).collect();
        let mut out = Links::dense(max_rank + 1, targets);
        for l in links {
            out.push(l);
        }
        out.settle();
        out
    }

    /// An empty table of `rows` ranks (0..rows) dialling `targets` (any order; one per
    /// (to, address)).
    pub fn dense(rows: u32, mut targets: Vec<Target>) -> Links<'static> {
        let rows = rows.min(DENSE_MAX_RANK);
        targets.retain(|t| t.to < rows);
        targets.sort_by(|a, b| (a.to, a.address.as_str()).cmp(&(b.to, b.address.as_str())));
        targets.dedup_by(|a, b| a.to == b.to && a.address == b.address);
        let mut first = vec![0u32; rows as usize + 1];
        for t in &targets {
            first[t.to as usize + 1] += 1;
        }
        for i in 1..first.len() {
            first[i] += first[i - 1];
        }
        let cells = rows as usize * targets.len();
        Links {
            table: Some(Table {
                rows,
                targets,
                first,
                state: vec![EMPTY; cells],
                rtt: vec![f32::NAN; cells],
                p99: vec![f32::NAN; cells],
                mtu: vec![0; cells],
            }),
            records: Vec::new(),
            record_cells: Vec::new(),
            loose: Cow::Owned(Vec::new()),
            len: 0,
            evals: Default::default(),
        }
    }

    /// Adds one link. With a table, call [`Links::settle`] after the last before reading.
    pub fn push(&mut self, l: LinkResult) {
        self.changed();
        self.len += 1;
        let Some(table) = self.table.as_mut() else {
            self.loose.to_mut().push(l);
            return;
        };
        if let Some(c) = table.plain_cell(&l)
            && table.state[c] == EMPTY
        {
            table.state[c] = PLAIN;
            table.rtt[c] = l.rtt_us.unwrap_or(f32::NAN);
            table.p99[c] = l.rtt_p99_us.unwrap_or(f32::NAN);
            table.mtu[c] = l.mtu.map_or(0, |m| m as u16);
            return;
        }
        let cell = table
            .target(l.to, &l.address)
            .filter(|_| l.from < table.rows)
            .map(|t| table.cell(l.from, t))
            .filter(|c| table.state[*c] == EMPTY);
        match cell {
            Some(c) => {
                table.state[c] = RECORD;
                table.rtt[c] = f32::from_bits(self.records.len() as u32);
                self.records.push(l);
                self.record_cells.push(c);
            }
            None => self.loose.to_mut().push(l),
        }
    }

    /// Adds a link that connected and carries only its RTT, p99 and path MTU straight into its
    /// cell (no record made and dropped: a simulation's million links); false, and nothing
    /// added, when it has no empty cell here (then [`Links::push`] the full record).
    pub fn push_ok(
        &mut self,
        from: u32,
        to: u32,
        address: &str,
        rtt_us: f32,
        rtt_p99_us: f32,
        mtu: u32,
    ) -> bool {
        self.changed();
        let Some(table) = self.table.as_mut() else {
            return false;
        };
        let plain = from != to
            && from < table.rows
            && !rtt_us.is_nan()
            && !rtt_p99_us.is_nan()
            && mtu > 0
            && mtu <= u32::from(u16::MAX);
        let Some(t) = table.target(to, address).filter(|_| plain) else {
            return false;
        };
        let c = table.cell(from, t);
        if table.state[c] != EMPTY {
            return false;
        }
        table.state[c] = PLAIN;
        table.rtt[c] = rtt_us;
        table.p99[c] = rtt_p99_us;
        table.mtu[c] = mtu as u16;
        self.len += 1;
        true
    }

    /// Puts the records without a cell in (from, to, address) order, the order of the table's
    /// cells, so [`Links::iter`] reads every link in that order (without a table: every link).
    pub fn settle(&mut self) {
        self.changed();
        let sorted = self.loose.windows(2).all(|w| {
            (w[0].from, w[0].to, w[0].address.as_str())
                <= (w[1].from, w[1].to, w[1].address.as_str())
        });
        if !sorted {
            self.loose.to_mut().sort_by(|a, b| {
                (a.from, a.to, a.address.as_str()).cmp(&(b.from, b.to, b.address.as_str()))
            });
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the dense table holds the plain links.
    pub fn is_dense(&self) -> bool {
        self.table.is_some()
    }

    /// The link in cell `c` (PLAIN or RECORD), if any.
    fn in_cell(&self, c: usize) -> Option<Link<'_>> {
        let n = self.table.as_ref()?.targets.len();
        self.at(c, (c / n) as u32, c % n)
    }

    /// The link in cell `c`, which is row `from`'s cell of target `t`.
    fn at(&self, c: usize, from: u32, t: usize) -> Option<Link<'_>> {
        let table = self.table.as_ref()?;
        match table.state[c] {
            PLAIN => {
                let t = &table.targets[t];
                let some = |v: f32| (!v.is_nan()).then_some(v);
                Some(Link {
                    from,
                    to: t.to,
                    interface: &t.interface,
                    address: &t.address,
                    port: t.port,
                    result: LinkOutcome::Ok,
                    rtt_us: some(table.rtt[c]),
                    rtt_p99_us: some(table.p99[c]),
                    throughput_gbit_s: None,
                    mtu: (table.mtu[c] > 0).then_some(u32::from(table.mtu[c])),
                    record: None,
                })
            }
            RECORD => self
                .records
                .get(table.rtt[c].to_bits() as usize)
                .map(Link::of),
            _ => None,
        }
    }

    /// Every link: without a table in the order given, with one in (from, to, address) order.
    pub fn iter(&self) -> impl Iterator<Item = Link<'_>> + '_ {
        self.walk(EMPTY)
    }

    /// The links held as full records, in [`Links::iter`]'s order: every one not ok, every
    /// one measured for throughput, every one with an error, a retry, a stall or a handshake
    /// failure (and, without a table, every link). The table's plain cells are skipped
    /// unread.
    pub fn records(&self) -> impl Iterator<Item = &LinkResult> + '_ {
        // The records in cells, by cell (a sort of the few, not a pass over every cell),
        // merged with the loose ones by key.
        let mut order: Vec<(usize, usize)> = match self.table {
            Some(_) => self.record_cells.iter().copied().zip(0..).collect(),
            None => Vec::new(),
        };
        order.sort_unstable();
        let mut in_cells = order
            .into_iter()
            .filter_map(|(_, i)| self.records.get(i))
            .peekable();
        let mut loose = self.loose.iter().peekable();
        fn key(l: &LinkResult) -> (u32, u32, &str) {
            (l.from, l.to, l.address.as_str())
        }
        std::iter::from_fn(move || match (in_cells.peek(), loose.peek()) {
            (Some(a), Some(b)) if key(b) < key(a) => loose.next(),
            (Some(_), _) => in_cells.next(),
            (None, _) => loose.next(),
        })
    }

    /// The cells whose state is above `skip`, merged with the loose records by key.
    fn walk(&self, skip: u8) -> impl Iterator<Item = Link<'_>> + '_ {
        let (state, width): (&[u8], usize) = self
            .table
            .as_ref()
            .map_or((&[], 1), |t| (&t.state, t.targets.len().max(1)));
        let mut loose = self.loose.iter().map(Link::of).peekable();
        // The cell, and its row and target (kept as it moves: no division per cell).
        let (mut c, mut row, mut t) = (0usize, 0u32, 0usize);
        std::iter::from_fn(move || {
            // The next cell with a link.
            while c < state.len() && state[c] <= skip {
                c += 1;
                t += 1;
                if t == width {
                    t = 0;
                    row += 1;
                }
            }
            let cell = (c < state.len()).then(|| self.at(c, row, t)).flatten();
            match (cell, loose.peek()) {
                (Some(a), Some(b))
                    if (b.from, b.to, b.address.as_str()) < (a.from, a.to, a.address.as_str()) =>
                {
                    loose.next()
                }
                (Some(a), _) => {
                    c += 1;
                    t += 1;
                    if t == width {
                        t = 0;
                        row += 1;
                    }
                    Some(a)
                }
                (None, _) => loose.next(),
            }
        })
    }

    /// Every link to a target `on` accepts (asked once per target of the table, once per record):
    /// each plain cell's link to `plain` (row by row) with what `on` answered for its target,
    /// each record to `record` (in [`Links::iter`]'s order) with the same. For judgments that
    /// only count or collect, so the table's cells are read as bytes, not as links: a few
    /// nanoseconds a pair.
    pub fn scan<'s, T: Copy>(
        &'s self,
        on: impl Fn(u32, &Label) -> Option<T>,
        mut plain: impl FnMut(PlainLink<'s>, T),
        mut record: impl FnMut(&'s LinkResult, T),
    ) {
        if let Some(table) = &self.table {
            let width = table.targets.len();
            let wanted: Vec<Option<T>> =
                table.targets.iter().map(|t| on(t.to, &t.address)).collect();
            if width > 0 && wanted.iter().any(Option::is_some) {
                for (row, cells) in table.state.chunks(width).enumerate() {
                    for (t, state) in cells.iter().enumerate() {
                        let Some(tag) = wanted[t].filter(|_| *state == PLAIN) else {
                            continue;
                        };
                        let c = row * width + t;
                        let target = &table.targets[t];
                        plain(
                            PlainLink {
                                from: row as u32,
                                to: target.to,
                                address: &target.address,
                                rtt_us: (!table.rtt[c].is_nan()).then_some(table.rtt[c]),
                                mtu: (table.mtu[c] > 0).then_some(u32::from(table.mtu[c])),
                            },
                            tag,
                        );
                    }
                }
            }
        }
        for r in self.records() {
            if let Some(tag) = on(r.to, &r.address) {
                record(r, tag);
            }
        }
    }

    /// Every link to rank `to` (not in [`Links::iter`]'s order): the table's column(s) of
    /// `to` read row by row, then the records without a cell; never a view of another rank's.
    pub fn to_rank(&self, to: u32) -> impl Iterator<Item = Link<'_>> + '_ {
        let (rows, range) = self.table.as_ref().map_or((0, 0..0), |t| {
            let lo = t.first.get(to as usize).copied().unwrap_or(0) as usize;
            let hi = t.first.get(to as usize + 1).copied().unwrap_or(0) as usize;
            (t.rows, lo..hi.max(lo))
        });
        let width = self.table.as_ref().map_or(0, |t| t.targets.len());
        let cells = (0..rows).flat_map(move |row| {
            range
                .clone()
                .filter_map(move |t| self.at(row as usize * width + t, row, t))
        });
        cells.chain(self.loose.iter().filter(move |l| l.to == to).map(Link::of))
    }

    /// The link (from, to, address), if there is one (the first, if there are several).
    pub fn find(&self, from: u32, to: u32, address: &str) -> Option<Link<'_>> {
        let in_table = self.table.as_ref().and_then(|t| {
            let target = t.target(to, address).filter(|_| from < t.rows)?;
            self.in_cell(t.cell(from, target))
        });
        in_table.or_else(|| {
            self.loose
                .iter()
                .find(|l| l.from == from && l.to == to && l.address == address)
                .map(Link::of)
        })
    }

    /// Whether a link (from, to, address) connected.
    pub fn connected(&self, from: u32, to: u32, address: &str) -> bool {
        let in_table = self.table.as_ref().and_then(|t| {
            let target = t.target(to, address).filter(|_| from < t.rows)?;
            self.in_cell(t.cell(from, target))
        });
        in_table.is_some_and(|l| l.result == LinkOutcome::Ok)
            || self.loose.iter().any(|l| {
                l.from == from && l.to == to && l.result == LinkOutcome::Ok && l.address == address
            })
    }

    /// Changes the link (from, to, address) with `f`; false when there is none. A link in a
    /// cell becomes a record when `f` gives it what a cell cannot hold (a throughput, say).
    pub fn update(
        &mut self,
        from: u32,
        to: u32,
        address: &str,
        f: impl FnOnce(&mut LinkResult),
    ) -> bool {
        self.changed();
        let cell = self.table.as_ref().and_then(|t| {
            let target = t.target(to, address).filter(|_| from < t.rows)?;
            Some(t.cell(from, target))
        });
        if let Some(c) = cell
            && let Some(table) = self.table.as_ref()
        {
            match table.state[c] {
                RECORD => {
                    let i = table.rtt[c].to_bits() as usize;
                    if let Some(r) = self.records.get_mut(i) {
                        f(r);
                        return true;
                    }
                }
                PLAIN => {
                    let mut l = self.in_cell(c).map(|l| l.to_result()).unwrap_or_default();
                    f(&mut l);
                    if let Some(table) = self.table.as_mut() {
                        table.state[c] = EMPTY;
                    }
                    self.len -= 1;
                    self.push(l);
                    return true;
                }
                _ => {}
            }
        }
        let loose = self.loose.to_mut();
        match loose
            .iter_mut()
            .find(|l| l.from == from && l.to == to && l.address == address)
        {
            Some(l) => {
                f(l);
                true
            }
            None => false,
        }
    }

    /// Every link as a record of its own, in [`Links::iter`]'s order.
    pub fn into_vec(self) -> Vec<LinkResult> {
        if self.table.is_none() {
            return self.loose.into_owned();
        }
        let mut out = Vec::with_capacity(self.len);
        out.extend(self.iter().map(|l| l.to_result()));
        out
    }
}

/// What the judgments over links take: the links, or a plain list of them (lent for the call).
pub trait AsLinks {
    fn with_links<R>(self, f: impl FnOnce(&Links) -> R) -> R;
}

impl AsLinks for &Links<'_> {
    fn with_links<R>(self, f: impl FnOnce(&Links) -> R) -> R {
        f(self)
    }
}

impl AsLinks for &[LinkResult] {
    fn with_links<R>(self, f: impl FnOnce(&Links) -> R) -> R {
        f(&Links::borrowed(self))
    }
}

impl AsLinks for &Vec<LinkResult> {
    fn with_links<R>(self, f: impl FnOnce(&Links) -> R) -> R {
        f(&Links::borrowed(self))
    }
}

impl<const N: usize> AsLinks for &[LinkResult; N] {
    fn with_links<R>(self, f: impl FnOnce(&Links) -> R) -> R {
        f(&Links::borrowed(self))
    }
}

impl<'a> From<&'a Vec<LinkResult>> for Links<'a> {
    fn from(links: &'a Vec<LinkResult>) -> Links<'a> {
        Links::borrowed(links)
    }
}

impl<'a> From<&'a [LinkResult]> for Links<'a> {
    fn from(links: &'a [LinkResult]) -> Links<'a> {
        Links::borrowed(links)
    }
}

#[path = "link_sets.rs"]
mod sets;
pub use sets::{PairSet, RankText, side_of};

#[path = "link_cells.rs"]
mod cells;
pub use cells::{Cell, Cells};

#[cfg(test)]
#[path = "link_table_tests.rs"]
mod tests;

//! The links of a large cluster kept linear in size: above [`COMPACT_ABOVE`] nodes `links`
//! keeps the links that are not ok and a bounded sample of measured ones, and every pair's
//! result and RTT go into `link_matrix` (see `model::LinkMatrix`); [`networks`] reads either
//! form back as one matrix of cells per network.

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use preflight_checks::model::{Link, Links};
use preflight_checks::model::{LinkMatrix, LinkOutcome, LinkResult, MatrixNetwork, Report};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::io::{Read, Write};

mod dense;

/// Up to this many nodes `links` holds every ordered pair; above, the matrix holds them.
pub const COMPACT_ABOVE: usize = 64;
/// Measured (throughput) links kept per network, per node.
const MEASURED_PER_NODE: usize = 16;
/// Links with the highest RTT kept per network beyond the measured ones.
const WORST_RTT: usize = 32;
/// Links not ok kept per network, per node (at least [`FAILED_MIN`]): beyond, only counted.
const FAILED_PER_NODE: usize = 8;
const FAILED_MIN: usize = 1024;
/// The encoding written in `link_matrix.encoding`.
pub const ENCODING: &str = "deflate+base64";

/// Above [`COMPACT_ABOVE`] nodes the findings that passed or were skipped keep their id, node,
/// subject and summary but not their evidence (an empty object): they are most of a large
/// cluster's findings, their evidence repeats the node's own facts (kept in `nodes`), and the
/// report stays linear in a small constant. Warnings and failures keep every field.
fn drop_passing_evidence(report: &mut Report) {
    use preflight_checks::model::Status;
    for f in &mut report.findings {
        if matches!(f.status, Status::Pass | Status::Skip) {
            f.evidence.clear();
        }
    }
}

/// [`compact`], by value: the report the cluster's coordinator hands out.
pub fn compacted(mut report: Report) -> Report {
    compact(&mut report);
    report
}

/// Compacts `report`'s links when it has more than [`COMPACT_ABOVE`] nodes; a smaller report
/// (or one without links, or already compact) is left as it is.
pub fn compact(report: &mut Report) {
    if report.nodes.len() <= COMPACT_ABOVE {
        return;
    }
    let links = std::mem::take(&mut report.links);
    compact_links(report, Links::owned(links));
}

/// Puts `links` in `report`: every one up to [`COMPACT_ABOVE`] nodes, else compacted (see the
/// module's doc), read from the links' dense table when they have one, so the coordinator never
/// holds every link as a record.
pub fn compact_links(report: &mut Report, links: Links) {
    if report.nodes.len() <= COMPACT_ABOVE {
        report.links = links.into_vec();
        return;
    }
    drop_passing_evidence(report);
    if links.is_empty() || report.link_matrix.is_some() {
        report.links = links.into_vec();
        return;
    }
    // Every link in a cell of a dense table: read from the cells.
    if let Some(cells) = links.cells()
        && dense::compact_cells(report, &links, cells)
    {
        return;
    }
    // Each link's network, named once per (destination, address, interface).
    let names = NetworkNames::of(report, &links);
    let mut keep = Bits(vec![0; links.len().div_ceil(64)]);
    let mut networks = Vec::new();
    let mut failed_omitted = 0u64;
    let mut order: Vec<u32> = (0..names.names.len() as u32).collect();
    order.sort_by(|a, b| names.names[*a as usize].cmp(&names.names[*b as usize]));
    for id in order {
        let on = |l: &Link| names.id(l) == id;
        let name = names.names[id as usize].clone();
        let (net, omitted) = matrix_of(&links, &on, name, names.side, &mut keep);
        failed_omitted += omitted;
        networks.push(net);
    }
    let total = links.len() as u64;
    report.links = links
        .iter()
        .enumerate()
        .filter(|(i, _)| keep.get(*i))
        .map(|(_, l)| l.to_result())
        .collect();
    report.links.shrink_to_fit();
    report.link_matrix = Some(LinkMatrix {
        encoding: ENCODING.to_string(),
        networks,
        links_total: total,
        links_kept: report.links.len() as u64,
        failed_omitted,
    });
}

/// The networks the links are on: each (destination, address, interface) named once, then
/// each link's network found among its destination's few (by the labels' pointers, which a
/// table's links share: no string compared per link).
struct NetworkNames<'a> {
    names: Vec<String>,
    /// Per destination rank: (address, interface, name index).
    by_to: Vec<Vec<(&'a str, &'a str, u32)>>,
    far: HashMap<(u32, &'a str, &'a str), u32>,
    /// One more than the highest rank of any link.
    side: u32,
}

/// The same text: the same pointer (a shared label), else equal.
fn same(a: &str, b: &str) -> bool {
    (a.as_ptr() == b.as_ptr() && a.len() == b.len()) || a == b
}

impl<'a> NetworkNames<'a> {
    fn of(report: &Report, links: &'a Links) -> NetworkNames<'a> {
        let mut out = NetworkNames {
            names: Vec::new(),
            by_to: Vec::new(),
            far: HashMap::new(),
            side: 0,
        };
        let mut by_name: HashMap<String, u32> = HashMap::new();
        for l in links.iter() {
            out.side = out.side.max(l.from.max(l.to).saturating_add(1));
            let (address, interface) = (l.address.as_str(), l.interface.as_str());
            if out.find(l.to, address, interface).is_some() {
                continue;
            }
            let name = label_of(report, l.to, address, interface);
            let names = &mut out.names;
            let id = *by_name.entry(name.clone()).or_insert_with(|| {
                names.push(name);
                names.len() as u32 - 1
            });
            if l.to < 1 << 20 {
                let to = l.to as usize;
                if out.by_to.len() <= to {
                    out.by_to.resize_with(to + 1, Vec::new);
                }
                out.by_to[to].push((address, interface, id));
            } else {
                out.far.insert((l.to, address, interface), id);
            }
        }
        out
    }

    fn find(&self, to: u32, address: &str, interface: &str) -> Option<u32> {
        if to < 1 << 20 {
            let mine = self.by_to.get(to as usize)?;
            mine.iter()
                .find(|(a, i, _)| same(a, address) && same(i, interface))
                .map(|x| x.2)
        } else {
            self.far.get(&(to, address, interface)).copied()
        }
    }

    /// The network of `l` (every link was named by [`NetworkNames::of`]).
    fn id(&self, l: &Link) -> u32 {
        self.find(l.to, l.address, l.interface).unwrap_or(u32::MAX)
    }
}

/// A column's address and interface, as the links (borrowed) name them.
type Column<'a> = Option<(&'a str, &'a str)>;

/// The links kept beside the matrix, a bit each (by their index in [`Links::iter`]'s order).
struct Bits(Vec<u64>);

/// The links of one matrix network kept as records beside its cells: the failed ones (up to a
/// cap sized to the cluster), the slowest measured, and the [`WORST_RTT`] highest RTTs of the
/// rest, kept as they come in a heap, not a list of every ok link.
#[derive(Default)]
struct Kept {
    failed: Vec<usize>,
    measured: Vec<(usize, f32)>,
    worst_rtt: BinaryHeap<Reverse<(u64, Reverse<usize>)>>,
}

impl Kept {
    /// Notes link `i` of the network.
    fn note(
        &mut self,
        i: usize,
        result: LinkOutcome,
        throughput: Option<f32>,
        rtt_us: Option<f32>,
    ) {
        if result != LinkOutcome::Ok {
            self.failed.push(i);
        } else if let Some(tp) = throughput {
            self.measured.push((i, tp));
        } else if let Some(r) = rtt_us.map(f64::from).filter(|r| r.is_finite() && *r >= 0.0) {
            // A non-negative float orders as its bits do; of equal RTTs the first link stays. A
            // link below the least of a full heap would leave it at once: not pushed.
            let key = Reverse((r.to_bits(), Reverse(i)));
            let heap = &mut self.worst_rtt;
            if heap.len() < WORST_RTT || heap.peek().is_some_and(|least| key < *least) {
                heap.push(key);
                if heap.len() > WORST_RTT {
                    heap.pop();
                }
            }
        }
    }

    /// Marks the kept links in `keep` for a network of `n` nodes; the failed links left out.
    fn mark(mut self, n: usize, keep: &mut Bits) -> u64 {
        let cap = (FAILED_PER_NODE * n).max(FAILED_MIN);
        let omitted = self.failed.len().saturating_sub(cap) as u64;
        for &i in self.failed.iter().take(cap) {
            keep.set(i);
        }
        self.measured.sort_by(|a, b| a.1.total_cmp(&b.1));
        for &(i, _) in self.measured.iter().take(MEASURED_PER_NODE * n) {
            keep.set(i);
        }
        for Reverse((_, Reverse(i))) in self.worst_rtt {
            keep.set(i);
        }
        omitted
    }
}

impl Bits {
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

/// Ranks to matrix positions: a table where the ranks are a cluster's, else a map.
enum Cols {
    Dense(Vec<u32>),
    Sparse(HashMap<u32, usize>),
}

impl Cols {
    fn of(ranks: &[u32]) -> Cols {
        match ranks.last() {
            Some(&max) if max < 1 << 20 => {
                let mut v = vec![u32::MAX; max as usize + 1];
                for (i, r) in ranks.iter().enumerate() {
                    v[*r as usize] = i as u32;
                }
                Cols::Dense(v)
            }
            _ => Cols::Sparse(ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect()),
        }
    }

    fn get(&self, rank: u32) -> usize {
        match self {
            Cols::Dense(v) => v[rank as usize] as usize,
            Cols::Sparse(m) => m[&rank],
        }
    }
}

/// One network's matrix from the links `on` it (by their index in [`Links::iter`]'s order),
/// marking in `keep` the links the report keeps beside it; and how many failed links were
/// only counted.
fn matrix_of(
    links: &Links,
    on: &dyn Fn(&Link) -> bool,
    name: String,
    side: u32,
    keep: &mut Bits,
) -> (MatrixNetwork, u64) {
    let members = || links.iter().enumerate().filter(|(_, l)| on(l));
    // The ranks of the network's links, in order, and each column's address: the first ok
    // link's to that rank, else the first link's. One pass, flagged per rank where the ranks
    // are a cluster's (never a list of two per link).
    let (ranks, first): (Vec<u32>, Vec<Column>) = if side <= 1 << 20 {
        let mut seen = vec![false; side as usize];
        let mut ok: Vec<Column> = vec![None; side as usize];
        let mut any: Vec<Column> = vec![None; side as usize];
        for (_, l) in members() {
            seen[l.from as usize] = true;
            seen[l.to as usize] = true;
            let to = l.to as usize;
            let here = Some((l.address.as_str(), l.interface.as_str()));
            if any[to].is_none() {
                any[to] = here;
            }
            if ok[to].is_none() && l.result == LinkOutcome::Ok {
                ok[to] = here;
            }
        }
        let ranks: Vec<u32> = (0..side).filter(|r| seen[*r as usize]).collect();
        let first = ranks
            .iter()
            .map(|r| ok[*r as usize].or(any[*r as usize]))
            .collect();
        (ranks, first)
    } else {
        let mut r: Vec<u32> = members().flat_map(|(_, l)| [l.from, l.to]).collect();
        r.sort_unstable();
        r.dedup();
        let col = Cols::of(&r);
        let mut first: Vec<Column> = vec![None; r.len()];
        for ok_only in [true, false] {
            for (_, l) in members() {
                let slot = &mut first[col.get(l.to)];
                if slot.is_none() && (!ok_only || l.result == LinkOutcome::Ok) {
                    *slot = Some((l.address.as_str(), l.interface.as_str()));
                }
            }
        }
        (r, first)
    };
    let addresses = first;
    let col = Cols::of(&ranks);
    let n = ranks.len();
    let mut grid = Grid::new(n);
    let mut kept = Kept::default();
    for (i, l) in members() {
        let (f, t) = (col.get(l.from), col.get(l.to));
        let on_column = addresses[t].is_some_and(|(a, _)| same(a, l.address));
        if !on_column || f == t {
            // Another address of the same node on this network: kept as it is.
            keep.set(i);
            continue;
        }
        grid.set(f, t, l.result, l.rtt_us.and_then(rtt_code));
        kept.note(i, l.result, l.throughput_gbit_s, l.rtt_us);
    }
    let omitted = kept.mark(n, keep);
    let columns = addresses
        .into_iter()
        .map(|a| a.map_or_else(Default::default, |(a, i)| (a.to_string(), i.to_string())));
    (grid.network(name, ranks, columns), omitted)
}

/// One network's matrix as it is filled: per cell a result code and the RTT in whole
/// microseconds (little-endian, 0 for none), packed into a [`MatrixNetwork`] once full.
struct Grid {
    n: usize,
    result: Vec<u8>,
    rtt: Vec<u8>,
}

impl Grid {
    fn new(n: usize) -> Grid {
        Grid {
            n,
            result: vec![0u8; n * n],
            rtt: vec![0u8; 2 * n * n],
        }
    }

    /// The cell of the link from column `from` to column `to`.
    fn set(&mut self, from: usize, to: usize, result: LinkOutcome, rtt_us: Option<u16>) {
        let cell = from * self.n + to;
        self.result[cell] = code(result);
        self.rtt[2 * cell..2 * cell + 2].copy_from_slice(&rtt_us.unwrap_or(0).to_le_bytes());
    }

    /// The network named `name` over `ranks`, each column's address and interface from
    /// `columns` (in the ranks' order).
    fn network(
        self,
        name: String,
        ranks: Vec<u32>,
        columns: impl Iterator<Item = (String, String)>,
    ) -> MatrixNetwork {
        let (addresses, interfaces) = columns.unzip();
        MatrixNetwork {
            name,
            ranks,
            addresses,
            interfaces,
            result: pack(&self.result),
            rtt_us: pack(&self.rtt),
        }
    }
}

/// An RTT as a cell holds it: whole microseconds, at least 1 (0 means none) and at most 65535;
/// `None` for a negative or not finite one.
fn rtt_code(rtt_us: f32) -> Option<u16> {
    (rtt_us.is_finite() && rtt_us >= 0.0).then(|| rtt_us.round().clamp(1.0, 65535.0) as u16)
}

fn code(r: LinkOutcome) -> u8 {
    match r {
        LinkOutcome::Ok => 1,
        LinkOutcome::Refused => 2,
        LinkOutcome::Timeout => 3,
        LinkOutcome::Unreachable => 4,
        LinkOutcome::Error => 5,
        LinkOutcome::Invalid => 6,
    }
}

fn outcome(c: u8) -> Option<LinkOutcome> {
    match c {
        1 => Some(LinkOutcome::Ok),
        2 => Some(LinkOutcome::Refused),
        3 => Some(LinkOutcome::Timeout),
        4 => Some(LinkOutcome::Unreachable),
        5 => Some(LinkOutcome::Error),
        6 => Some(LinkOutcome::Invalid),
        _ => None,
    }
}

/// Deflate, then base64.
fn pack(bytes: &[u8]) -> String {
    let mut e = DeflateEncoder::new(Vec::new(), Compression::default());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(bytes);
    base64(&e.finish().unwrap_or_default())
}

/// The inverse of [`pack`], `len` bytes exactly, or `None` when the text is not that.
fn unpack(text: &str, len: usize) -> Option<Vec<u8>> {
    let raw = unbase64(text)?;
    let mut out = Vec::with_capacity(len);
    DeflateDecoder::new(raw.as_slice())
        .take(len as u64 + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() == len).then_some(out)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn unbase64(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = B64.iter().position(|b| *b == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// One pair's result as a reader sees it: from the matrix, refined by the link in `links`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cell {
    /// `None`: not measured (and the diagonal).
    pub result: Option<LinkOutcome>,
    pub rtt_us: Option<f32>,
    pub throughput_gbit_s: Option<f32>,
}

/// One network's pairs, whichever form the report holds them in.
#[derive(Debug, Default)]
pub struct NetworkLinks {
    /// The subnet (`10.0.0.0/24`) or the interface's name.
    pub name: String,
    pub ranks: Vec<u32>,
    /// Per column: the address measured and its interface.
    pub addresses: Vec<String>,
    pub interfaces: Vec<String>,
    /// `ranks.len()²` cells, row: from, column: to.
    pub cells: Vec<Cell>,
    /// Path MTUs seen on the network (from the links kept).
    pub mtus: Vec<u32>,
    /// Pairs measured (cells with a result).
    pub measured: usize,
}

impl NetworkLinks {
    pub fn cell(&self, from: usize, to: usize) -> &Cell {
        &self.cells[from * self.ranks.len() + to]
    }
}

/// Every network's pairs, from `link_matrix` when the report has one and from `links` (each
/// refining its cell), in the order of their names. A matrix that does not decode is left out.
pub fn networks(report: &Report) -> Vec<NetworkLinks> {
    let mut nets: Vec<NetworkLinks> = Vec::new();
    if let Some(m) = &report.link_matrix {
        for net in &m.networks {
            let n = net.ranks.len();
            let (Some(result), Some(rtt)) =
                (unpack(&net.result, n * n), unpack(&net.rtt_us, 2 * n * n))
            else {
                continue;
            };
            let cells = (0..n * n)
                .map(|c| Cell {
                    result: outcome(result[c]),
                    rtt_us: match u16::from_le_bytes([rtt[2 * c], rtt[2 * c + 1]]) {
                        0 => None,
                        us => Some(f32::from(us)),
                    },
                    throughput_gbit_s: None,
                })
                .collect();
            nets.push(NetworkLinks {
                name: net.name.clone(),
                ranks: net.ranks.clone(),
                addresses: net.addresses.clone(),
                interfaces: net.interfaces.clone(),
                cells,
                ..Default::default()
            });
        }
    }
    // Links not covered by a matrix: grouped by network, each column's address the first
    // ok link's (else the first link's) to that rank.
    let mut loose: BTreeMap<String, Vec<&LinkResult>> = BTreeMap::new();
    let mut by_name: HashMap<String, usize> = nets
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for l in &report.links {
        let label = network_label(report, l);
        if !by_name.contains_key(&label) {
            loose.entry(label).or_default().push(l);
        }
    }
    for (name, links) in &loose {
        let mut ranks: Vec<u32> = links.iter().flat_map(|l| [l.from, l.to]).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let n = ranks.len();
        let col: HashMap<u32, usize> = ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect();
        let mut addresses = vec![None::<&LinkResult>; n];
        for l in links {
            let slot = &mut addresses[col[&l.to]];
            if slot.is_none_or(|s| s.result != LinkOutcome::Ok && l.result == LinkOutcome::Ok) {
                *slot = Some(l);
            }
        }
        by_name.insert(name.clone(), nets.len());
        nets.push(NetworkLinks {
            name: name.clone(),
            addresses: addresses
                .iter()
                .map(|l| l.map(|l| l.address.to_string()).unwrap_or_default())
                .collect(),
            interfaces: addresses
                .iter()
                .map(|l| l.map(|l| l.interface.to_string()).unwrap_or_default())
                .collect(),
            ranks,
            cells: vec![Cell::default(); n * n],
            ..Default::default()
        });
    }
    // Every link refines its cell (the matrix rounds RTTs and has no throughput).
    let cols: Vec<HashMap<u32, usize>> = nets
        .iter()
        .map(|n| n.ranks.iter().enumerate().map(|(i, r)| (*r, i)).collect())
        .collect();
    for l in &report.links {
        let Some(&i) = by_name.get(&network_label(report, l)) else {
            continue;
        };
        let net = &mut nets[i];
        if let Some(m) = l.mtu {
            if !net.mtus.contains(&m) {
                net.mtus.push(m);
            }
        }
        let (Some(&f), Some(&t)) = (cols[i].get(&l.from), cols[i].get(&l.to)) else {
            continue;
        };
        if f == t || net.addresses[t] != l.address {
            continue;
        }
        let n = net.ranks.len();
        net.cells[f * n + t] = Cell {
            result: Some(l.result),
            rtt_us: l.rtt_us,
            throughput_gbit_s: l.throughput_gbit_s,
        };
    }
    for net in &mut nets {
        net.mtus.sort_unstable();
        net.measured = net.cells.iter().filter(|c| c.result.is_some()).count();
    }
    nets.sort_by(|a, b| a.name.cmp(&b.name));
    nets
}

/// The address a node was reached on: the first ok link's to it (else the first link's), from
/// `links` and then the matrix's columns.
pub fn addresses(report: &Report) -> HashMap<u32, String> {
    let mut out: HashMap<u32, (bool, String)> = HashMap::new();
    // Above 64 nodes the matrix's first network names every rank's address on one network;
    // the links kept beside it are samples from any network, so they only fill gaps.
    if let Some(net) = report.link_matrix.iter().flat_map(|m| &m.networks).next() {
        for (r, a) in net.ranks.iter().zip(&net.addresses) {
            out.insert(*r, (true, a.clone()));
        }
    }
    for l in &report.links {
        let ok = l.result == LinkOutcome::Ok;
        match out.get(&l.to) {
            Some((true, _)) => {}
            Some((false, _)) if !ok => {}
            _ => {
                out.insert(l.to, (ok, l.address.to_string()));
            }
        }
    }
    for net in report.link_matrix.iter().flat_map(|m| &m.networks) {
        for (r, a) in net.ranks.iter().zip(&net.addresses) {
            out.entry(*r).or_insert((false, a.clone()));
        }
    }
    out.into_iter().map(|(r, (_, a))| (r, a)).collect()
}

/// `10.200.1.0/24`: the subnet of the link's target address; its interface's name when the
/// facts do not hold the address (an older or trimmed report).
pub fn network_label(report: &Report, l: &LinkResult) -> String {
    label_of(report, l.to, &l.address, &l.interface)
}

/// [`network_label`] of a link to `address` (on `interface`) of rank `to`.
fn label_of(report: &Report, to: u32, address: &str, interface: &str) -> String {
    let found = report
        .node(to)
        .and_then(|n| {
            n.facts
                .net
                .interfaces
                .iter()
                .flat_map(|i| i.ipv4.iter())
                .find(|a| a.addr.to_string() == address)
        })
        .map(|a| a.prefix);
    let Some(prefix) = found else {
        return if interface.is_empty() {
            address.to_string()
        } else {
            interface.to_string()
        };
    };
    match address.parse::<std::net::Ipv4Addr>() {
        Ok(ip) => {
            let mask: u32 = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - prefix.min(32))
            };
            format!(
                "{}/{prefix}",
                std::net::Ipv4Addr::from(u32::from(ip) & mask)
            )
        }
        Err(_) => address.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ReportBuilder;
    use preflight_checks::model::{IfAddr, Interface, Mode, NodeFacts};

    /// `n` nodes on 10.0.0.0/16, every pair ok with an RTT of `from + to` µs, throughput on
    /// the ring neighbours, and 0 -> 1 refused.
    fn report(n: u32) -> Report {
        let mut b = ReportBuilder::new(Mode::Cluster);
        let addr = |r: u32| format!("10.0.{}.{}", r / 200, r % 200 + 1);
        let mut links = Vec::new();
        for from in 0..n {
            let mut f = NodeFacts {
                hostname: format!("n{from}"),
                ..Default::default()
            };
            f.net.interfaces.push(Interface {
                name: "eth0".into(),
                ipv4: vec![IfAddr {
                    addr: addr(from).parse().unwrap(),
                    prefix: 16,
                }],
                ..Default::default()
            });
            b = b.node(from, f);
            for to in (0..n).filter(|t| *t != from) {
                let bad = (from, to) == (0, 1);
                links.push(LinkResult {
                    from,
                    to,
                    interface: "eth0".into(),
                    address: addr(to).into(),
                    result: if bad {
                        LinkOutcome::Refused
                    } else {
                        LinkOutcome::Ok
                    },
                    rtt_us: (!bad).then_some((from + to) as f32 + 0.4),
                    throughput_gbit_s: (to == (from + 1) % n).then_some(9.5),
                    error: bad.then(|| "connection refused".into()),
                    ..Default::default()
                });
            }
        }
        b.links(links).build()
    }

    #[test]
    fn up_to_64_nodes_every_link_stays() {
        let r = report(64);
        let c = compacted(r.clone());
        assert_eq!(c, r);
    }

    #[test]
    fn above_64_nodes_the_matrix_holds_every_pair_and_links_what_matters() {
        let r = report(80);
        let c = compacted(r.clone());
        let m = c.link_matrix.as_ref().unwrap();
        assert_eq!(m.encoding, ENCODING);
        assert_eq!(
            (m.links_total, m.links_kept),
            (80 * 79, c.links.len() as u64)
        );
        // Kept: the refused pair (with its error), the 79 other ring links, the 32 worst RTTs.
        assert_eq!(c.links.len(), 1 + 79 + WORST_RTT, "{}", c.links.len());
        let refused = c
            .links
            .iter()
            .find(|l| l.result != LinkOutcome::Ok)
            .unwrap();
        assert_eq!(refused.error.as_deref(), Some("connection refused"));
        // Read back: each pair's result and RTT as the whole report had them (RTT rounded).
        let back: Report = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        let nets = networks(&back);
        assert_eq!(nets.len(), 1);
        let net = &nets[0];
        assert_eq!(net.name, "10.0.0.0/16");
        assert_eq!(net.measured, 80 * 79);
        for l in &r.links {
            let cell = net.cell(l.from as usize, l.to as usize);
            assert_eq!(cell.result, Some(l.result), "{l:?}");
            // Rounded to the microsecond in the matrix, exact for the links kept.
            match (cell.rtt_us.map(f64::from), l.rtt_us.map(f64::from)) {
                (Some(got), Some(want)) => assert!((got - want).abs() <= 0.5, "{l:?}"),
                (got, want) => assert_eq!((got, want), (None, None), "{l:?}"),
            }
        }
        assert_eq!(net.cell(5, 6).throughput_gbit_s, Some(9.5));
        // The same from the whole report's links.
        let whole = networks(&r);
        assert_eq!(whole[0].measured, 80 * 79);
        assert_eq!(addresses(&back)[&7], "10.0.0.8");
    }

    /// [`report`] plus what a table holds apart: a second network (rank 3's eth1), a second
    /// address of rank 5 on the first, timeouts from rank 9, a retried link, RTTs that differ.
    fn mixed(n: u32) -> (Report, Vec<LinkResult>) {
        let mut r = report(n);
        let mut links = std::mem::take(&mut r.links);
        r.nodes[3].facts.net.interfaces.push(Interface {
            name: "eth1".into(),
            ipv4: vec![IfAddr {
                addr: "10.9.0.4".parse().unwrap(),
                prefix: 24,
            }],
            ..Default::default()
        });
        for from in (0..n).filter(|f| *f != 3) {
            links.push(LinkResult {
                from,
                to: 3,
                interface: "eth1".into(),
                address: "10.9.0.4".into(),
                result: LinkOutcome::Ok,
                rtt_us: Some(7.0 + from as f32),
                ..Default::default()
            });
        }
        r.nodes[5].facts.net.interfaces[0].ipv4.push(IfAddr {
            addr: "10.0.9.9".parse().unwrap(),
            prefix: 16,
        });
        for from in (0..n).filter(|f| *f != 5 && f % 3 == 0) {
            links.push(LinkResult {
                from,
                to: 5,
                interface: "eth0".into(),
                address: "10.0.9.9".into(),
                result: LinkOutcome::Ok,
                rtt_us: Some(3.0),
                ..Default::default()
            });
        }
        for l in links.iter_mut() {
            if l.from == 9 && l.to % 4 == 0 {
                l.result = LinkOutcome::Timeout;
                l.rtt_us = None;
                l.error = Some("timed out".into());
            }
            if (l.from, l.to) == (2, 7) {
                l.retries = 1;
            }
        }
        links.sort_by(|a, b| {
            (a.from, a.to, a.address.as_str()).cmp(&(b.from, b.to, b.address.as_str()))
        });
        (r, links)
    }

    #[test]
    fn a_table_is_compacted_from_its_cells_as_from_every_link() {
        let (r, links) = mixed(90);
        let table = Links::of(links.clone(), 90);
        assert!(table.cells().is_some(), "every link in a cell");
        let (mut from_cells, mut from_links) = (r.clone(), r);
        compact_links(&mut from_cells, table);
        compact_links(&mut from_links, Links::owned(links));
        let m = from_cells.link_matrix.as_ref().unwrap();
        assert_eq!(
            m.networks.len(),
            2,
            "{:?}",
            m.networks.iter().map(|n| &n.name).collect::<Vec<_>>()
        );
        assert!(from_cells.links.iter().any(|l| l.address == "10.0.9.9"));
        assert!(
            from_cells
                .links
                .iter()
                .any(|l| l.result == LinkOutcome::Timeout)
        );
        assert_eq!(from_cells, from_links);
    }

    #[test]
    fn a_matrix_that_does_not_decode_is_left_out_not_a_panic() {
        let mut c = compacted(report(70));
        for bad in ["", "!!!!", "AAAA", "eJwDAAAAAAE="] {
            c.link_matrix.as_mut().unwrap().networks[0].rtt_us = bad.into();
            let nets = networks(&c);
            // Only the links kept remain, as a network of their own.
            assert!(nets.iter().all(|n| n.measured < 70 * 69), "{bad}");
        }
    }

    #[test]
    fn base64_round_trips() {
        for len in 0..10 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37) as u8).collect();
            assert_eq!(unbase64(&base64(&bytes)).unwrap(), bytes);
        }
        assert_eq!(base64(b"Man"), "TWFu");
    }
}

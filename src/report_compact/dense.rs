//! The report's compaction read straight from a dense table whose every link sits in a cell
//! (a coordinator's or a simulation's links): each target named once, each cell read once
//! as a byte and a float, no view built and no name looked up per pair. It gives what
//! [`super::compact_links`]'s general path gives (the same matrices, kept links and counts;
//! a test holds the two alike).

use super::{Bits, ENCODING, Grid, Kept, label_of, rtt_code, same};
use preflight_checks::model::{
    Cell, Cells, LinkMatrix, LinkOutcome, Links, MatrixNetwork, Report, Target,
};
use std::collections::HashMap;

/// What a non-empty cell holds, as the matrix reads it.
struct Seen {
    result: LinkOutcome,
    rtt_us: Option<f32>,
    throughput: Option<f32>,
}

fn seen(cell: Cell) -> Option<Seen> {
    match cell {
        Cell::Empty => None,
        Cell::Plain(rtt_us) => Some(Seen {
            result: LinkOutcome::Ok,
            rtt_us,
            throughput: None,
        }),
        Cell::Record(r) => Some(Seen {
            result: r.result,
            rtt_us: r.rtt_us,
            throughput: r.throughput_gbit_s,
        }),
    }
}

/// The targets some link dialled, the rows that dialled any, and one more than the highest
/// rank of any link; `None` when a record in a cell names another interface than its target
/// (the general path names each link's network by its own interface).
fn used_targets(cells: &Cells) -> Option<(Vec<bool>, Vec<bool>, u32)> {
    let targets = cells.targets();
    if cells
        .records()
        .any(|(t, r)| targets.get(t).is_none_or(|x| x.interface != r.interface))
    {
        return None;
    }
    let (used, rows) = cells.occupancy();
    let mut side = rows.iter().rposition(|r| *r).map_or(0, |r| r as u32 + 1);
    for (_, target) in targets.iter().enumerate().filter(|(t, _)| used[*t]) {
        side = side.max(target.to.saturating_add(1));
    }
    Some((used, rows, side))
}

/// Compacts `links` into `report` from their cells, as the general path would; false (and
/// `report` untouched) when the cells cannot say it alike (see [`used_targets`]).
pub(super) fn compact_cells(report: &mut Report, links: &Links, cells: Cells) -> bool {
    let Some((used, rows_any, side)) = used_targets(&cells) else {
        return false;
    };
    let used_count = used.iter().filter(|u| **u).count();
    let targets = cells.targets();
    // Each used target's network, named once.
    let mut names: Vec<String> = Vec::new();
    let mut by_name: HashMap<String, u32> = HashMap::new();
    let mut net_of = vec![u32::MAX; targets.len()];
    for (t, target) in targets.iter().enumerate().filter(|(t, _)| used[*t]) {
        let name = label_of(report, target.to, &target.address, &target.interface);
        net_of[t] = *by_name.entry(name.clone()).or_insert_with(|| {
            names.push(name);
            names.len() as u32 - 1
        });
    }
    let mut order: Vec<u32> = (0..names.len() as u32).collect();
    order.sort_by(|a, b| names[*a as usize].cmp(&names[*b as usize]));
    let width = targets.len();
    let mut keep = Bits(vec![0; (cells.rows() as usize * width).div_ceil(64)]);
    let mut networks = Vec::new();
    let mut failed_omitted = 0u64;
    for id in order {
        let on: Vec<usize> = (0..width).filter(|t| net_of[*t] == id).collect();
        let name = names[id as usize].clone();
        // A network of every used target: its rows are those that dialled any.
        let rows = (on.len() == used_count).then_some(rows_any.as_slice());
        let (net, omitted) = matrix_of(&cells, (&on, rows), name, side, &mut keep);
        failed_omitted += omitted;
        networks.push(net);
    }
    let mut kept = Vec::new();
    for (w, bits) in keep.0.iter().enumerate().filter(|(_, b)| **b != 0) {
        for b in (0..64).filter(|b| bits & (1 << b) != 0) {
            let c = w * 64 + b;
            let (row, t) = ((c / width) as u32, c % width);
            if let Some(l) = cells.link(row, t) {
                kept.push(l.to_result());
            }
        }
    }
    kept.shrink_to_fit();
    report.link_matrix = Some(LinkMatrix {
        encoding: ENCODING.to_string(),
        networks,
        links_total: links.len() as u64,
        links_kept: kept.len() as u64,
        failed_omitted,
    });
    report.links = kept;
    true
}

/// Per target of `on`: the first row whose cell holds a link, and the first whose link
/// connected (the general path's "first link to the rank, else the first ok one").
fn first_rows(cells: &Cells, on: &[usize]) -> Vec<(Option<u32>, Option<u32>)> {
    on.iter()
        .map(|&t| {
            let mut any = None;
            for row in 0..cells.rows() {
                let Some(s) = seen(cells.get(row, t)) else {
                    continue;
                };
                any = any.or(Some(row));
                if s.result == LinkOutcome::Ok {
                    return (any, Some(row));
                }
            }
            (any, None)
        })
        .collect()
}

/// The network's ranks (those of its links, in order) and each one's column: the target of
/// the first link to it that connected, else of the first link to it, in the links' order.
fn columns(
    cells: &Cells,
    on: &[usize],
    rows: Option<&[bool]>,
    side: u32,
) -> (Vec<u32>, Vec<Option<usize>>) {
    let targets = cells.targets();
    let mut seen_rank = vec![false; side as usize];
    for row in 0..cells.rows().min(side) {
        seen_rank[row as usize] = match rows {
            Some(rows) => rows.get(row as usize).copied().unwrap_or(false),
            None => on
                .iter()
                .any(|&t| !matches!(cells.get(row, t), Cell::Empty)),
        };
    }
    // (row, target) of the first ok link and of the first link to each rank.
    let mut ok: Vec<Option<(u32, usize)>> = vec![None; side as usize];
    let mut any: Vec<Option<(u32, usize)>> = vec![None; side as usize];
    for (&t, (first_any, first_ok)) in on.iter().zip(first_rows(cells, on)) {
        let to = targets[t].to as usize;
        let Some(row) = first_any else { continue };
        seen_rank[to] = true;
        if any[to].is_none_or(|k| (row, t) < k) {
            any[to] = Some((row, t));
        }
        if let Some(row) = first_ok
            && ok[to].is_none_or(|k| (row, t) < k)
        {
            ok[to] = Some((row, t));
        }
    }
    let ranks: Vec<u32> = (0..side).filter(|r| seen_rank[*r as usize]).collect();
    let column = ranks
        .iter()
        .map(|r| ok[*r as usize].or(any[*r as usize]).map(|(_, t)| t))
        .collect();
    (ranks, column)
}

/// One network's matrix from the cells of the targets `on` it, marking in `keep` (by cell)
/// the links the report keeps beside it; and how many failed links were only counted.
fn matrix_of(
    cells: &Cells,
    (on, rows): (&[usize], Option<&[bool]>),
    name: String,
    side: u32,
    keep: &mut Bits,
) -> (MatrixNetwork, u64) {
    let targets = cells.targets();
    let width = targets.len();
    let (ranks, column) = columns(cells, on, rows, side);
    let mut col = vec![u32::MAX; side as usize];
    for (i, r) in ranks.iter().enumerate() {
        col[*r as usize] = i as u32;
    }
    let n = ranks.len();
    // Per target of `on`: its column, and whether it is that column's address.
    let placed: Vec<(usize, bool)> = on
        .iter()
        .map(|&t| {
            let c = col[targets[t].to as usize] as usize;
            let here = column[c].is_some_and(|k| same(&targets[k].address, &targets[t].address));
            (c, here)
        })
        .collect();
    let mut grid = Grid::new(n);
    let mut kept = Kept::default();
    // The last RTT rounded: its bits and its cell's microseconds (NaN's are none).
    let mut last = (f32::NAN.to_bits(), None);
    for (row, f) in ranks.iter().map(|r| (*r, col[*r as usize] as usize)) {
        if row >= cells.rows() {
            continue;
        }
        let (states, rtts) = cells.row(row);
        for (&t, &(tc, here)) in on.iter().zip(&placed) {
            let l = match states.get(t) {
                Some(&Cells::PLAIN) => Seen {
                    result: LinkOutcome::Ok,
                    rtt_us: rtts.get(t).copied().filter(|r| !r.is_nan()),
                    throughput: None,
                },
                Some(_) => match seen(cells.get(row, t)) {
                    Some(l) => l,
                    None => continue,
                },
                None => continue,
            };
            let i = row as usize * width + t;
            if !here || f == tc {
                // Another address of the same node on this network: kept as it is.
                keep.set(i);
                continue;
            }
            // Rounded once per run of equal RTTs (most of a row's, often).
            let us = l.rtt_us.and_then(|r| {
                if r.to_bits() != last.0 {
                    last = (r.to_bits(), rtt_code(r));
                }
                last.1
            });
            grid.set(f, tc, l.result, us);
            kept.note(i, l.result, l.throughput, l.rtt_us);
        }
    }
    let omitted = kept.mark(n, keep);
    let named = |k: Option<usize>| {
        k.map_or_else(Default::default, |k| {
            let t: &Target = &targets[k];
            (t.address.to_string(), t.interface.to_string())
        })
    };
    (
        grid.network(name, ranks, column.into_iter().map(named)),
        omitted,
    )
}

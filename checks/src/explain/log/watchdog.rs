//! Watchdog timeouts read across ranks: two ranks that time out at the same sequence number
//! of one process group while waiting in different collectives (or the same one with other
//! sizes) called mismatched collectives, as torch's Flight Recorder analyzer judges dumps.

use super::Hit;

/// The collective one watchdog line names.
struct Waiting<'a> {
    pg: Option<&'a str>,
    seq: &'a str,
    op: &'a str,
    numel: Option<&'a str>,
    rank: Option<u32>,
}

fn waiting(h: &Hit) -> Option<Waiting<'_>> {
    let v = &h.values;
    Some(Waiting {
        pg: v.get("pg").map(String::as_str),
        seq: v.get("seq")?,
        op: v.get("op")?,
        numel: v.get("numel").map(String::as_str),
        rank: h
            .rank
            .or_else(|| v.get("rank").and_then(|r| r.parse().ok())),
    })
}

fn who(w: &Waiting) -> String {
    match w.rank {
        Some(r) => format!("rank {r}"),
        None => "a rank".to_string(),
    }
}

/// Why the watchdog lines prove mismatched collectives, when they do: the first two lines of
/// one process group at one sequence number whose operation or element count differ.
pub fn mismatch(hits: &[Hit]) -> Option<String> {
    let all: Vec<Waiting> = hits.iter().filter_map(waiting).collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if a.pg != b.pg || a.seq != b.seq {
                continue;
            }
            let what = if a.op != b.op {
                format!("{} waits in {} and {} in {}", who(a), a.op, who(b), b.op)
            } else if a.numel.is_some() && b.numel.is_some() && a.numel != b.numel {
                format!(
                    "{} waits in {} of {} elements and {} in {} of {}",
                    who(a),
                    a.op,
                    a.numel.unwrap_or_default(),
                    who(b),
                    b.op,
                    b.numel.unwrap_or_default()
                )
            } else {
                continue;
            };
            return Some(format!(
                "the watchdog lines disagree at SeqNum {} of one process group: {what}: the ranks called different collectives",
                a.seq
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(rank: u32, seq: &str, op: &str, numel: &str) -> Hit {
        let mut values = std::collections::BTreeMap::new();
        values.insert("seq".to_string(), seq.to_string());
        values.insert("op".to_string(), op.to_string());
        values.insert("numel".to_string(), numel.to_string());
        Hit {
            line_no: 1,
            line: String::new(),
            host: None,
            rank: Some(rank),
            device: None,
            values,
        }
    }

    #[test]
    fn ranks_waiting_in_different_collectives_at_one_seq_are_a_mismatch() {
        let h = [
            hit(7, "80078", "BROADCAST", "5056"),
            hit(3, "80078", "ALLREDUCE", "2106881"),
        ];
        let why = mismatch(&h).unwrap();
        assert!(
            why.contains("rank 7 waits in BROADCAST and rank 3 in ALLREDUCE"),
            "{why}"
        );
        let sizes = [
            hit(0, "5", "ALLREDUCE", "10"),
            hit(1, "5", "ALLREDUCE", "20"),
        ];
        assert!(mismatch(&sizes).unwrap().contains("of 10 elements"));
    }

    #[test]
    fn the_same_collective_everywhere_or_other_seqs_prove_nothing() {
        let same = [hit(0, "9", "ALLREDUCE", "4"), hit(1, "9", "ALLREDUCE", "4")];
        assert_eq!(mismatch(&same), None);
        let other = [
            hit(0, "9", "ALLREDUCE", "4"),
            hit(1, "10", "BROADCAST", "4"),
        ];
        assert_eq!(mismatch(&other), None);
        assert_eq!(mismatch(&[]), None);
    }
}

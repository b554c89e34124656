//! Host names folded into Slurm hostlist syntax (`node[001-063,065],login1`): the one way a report
//! names a set of nodes, whatever its size. The inverse (expansion) is `placement::hostlist` in the
//! binary crate.

use std::collections::BTreeMap;

/// A name split at its last run of digits: `gpu-a017` is (`gpu-a`, 17, width 3, ``).
struct Split<'a> {
    prefix: &'a str,
    number: u64,
    width: usize,
    suffix: &'a str,
}

fn split(name: &str) -> Option<Split<'_>> {
    let bytes = name.as_bytes();
    let end = bytes.iter().rposition(|b| b.is_ascii_digit())? + 1;
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    let digits = &name[start..end];
    // Too many digits for a u64 (or a name that is one long number): keep the name whole.
    if digits.len() > 18 {
        return None;
    }
    let number = digits.parse().ok()?;
    // `node007` has width 3; `node7` width 1 (Slurm pads to the range's first width).
    let width = if digits.starts_with('0') && digits.len() > 1 {
        digits.len()
    } else {
        1
    };
    Some(Split {
        prefix: &name[..start],
        number,
        width,
        suffix: &name[end..],
    })
}

/// Folds `names` into hostlist syntax: names that differ only in their last number are one
/// bracket of ranges (`node[1-4,7]`), zero padding kept (`gpu[001-012]`); other names stand
/// alone. Groups and numbers are sorted, duplicates dropped. Empty input gives "".
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    // (prefix, suffix, width) -> numbers; names without digits apart.
    let mut groups: BTreeMap<(String, String, usize), Vec<u64>> = BTreeMap::new();
    let mut plain: Vec<String> = Vec::new();
    for n in names {
        let n = n.as_ref();
        match split(n) {
            Some(s) => groups
                .entry((s.prefix.to_string(), s.suffix.to_string(), s.width))
                .or_default()
                .push(s.number),
            None => plain.push(n.to_string()),
        }
    }
    // An unpadded number as long as a padded group's width belongs to that group
    // (`node0999` and `node1000` are `node[0999-1000]`).
    let padded: Vec<(String, String, usize)> = groups.keys().filter(|k| k.2 > 1).cloned().collect();
    for (prefix, suffix, width) in padded.iter().rev() {
        let key = (prefix.clone(), suffix.clone(), 1);
        let Some(plain_nums) = groups.get_mut(&key) else {
            continue;
        };
        let (fit, keep): (Vec<u64>, Vec<u64>) = plain_nums
            .iter()
            .partition(|n| n.to_string().len() >= *width);
        *plain_nums = keep;
        if plain_nums.is_empty() {
            groups.remove(&key);
        }
        groups
            .entry((prefix.clone(), suffix.clone(), *width))
            .or_default()
            .extend(fit);
    }
    let mut items: Vec<(String, String)> = Vec::new();
    for ((prefix, suffix, width), mut nums) in groups {
        nums.sort_unstable();
        nums.dedup();
        let text = if nums.len() == 1 {
            format!("{prefix}{:0width$}{suffix}", nums[0])
        } else {
            format!("{prefix}[{}]{suffix}", ranges(&nums, width))
        };
        items.push((format!("{prefix}\u{0}{suffix}"), text));
    }
    plain.sort();
    plain.dedup();
    items.extend(plain.into_iter().map(|p| (p.clone(), p)));
    items.sort();
    items
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// `1,2,3,5` -> `1-3,5` (each number padded to `width`).
fn ranges(nums: &[u64], width: usize) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < nums.len() {
        let mut j = i;
        while j + 1 < nums.len() && nums[j + 1] == nums[j] + 1 {
            j += 1;
        }
        if i == j {
            out.push(format!("{:0width$}", nums[i]));
        } else {
            out.push(format!("{:0width$}-{:0width$}", nums[i], nums[j]));
        }
        i = j + 1;
    }
    out.join(",")
}

/// Like [`compress`], cut to about `max_chars` characters, then "and N more" (N counts names):
/// whole ranges only, so what is shown is itself a valid hostlist. A list that fits is returned
/// as it is.
pub fn compress_within<S: AsRef<str>>(names: &[S], max_chars: usize) -> String {
    let full = compress(names);
    if full.len() <= max_chars {
        return full;
    }
    let mut shown: Vec<String> = Vec::new();
    let mut len = 0usize;
    let mut count = 0usize;
    'items: for item in split_top(&full) {
        let n = item_names(&item);
        if len + item.len() < max_chars {
            len += item.len() + 1;
            count += n;
            shown.push(item);
            continue;
        }
        // Cut inside the bracket: as many of its ranges as fit.
        if let (Some(open), Some(close)) = (item.find('['), item.rfind(']')) {
            let (head, tail) = (&item[..open], &item[close + 1..]);
            let mut kept: Vec<&str> = Vec::new();
            for r in item[open + 1..close].split(',') {
                let cost = head.len()
                    + tail.len()
                    + 3
                    + kept.iter().map(|k| k.len() + 1).sum::<usize>()
                    + r.len();
                if len + cost > max_chars {
                    break;
                }
                kept.push(r);
            }
            if !kept.is_empty() {
                let part = format!("{head}[{}]{tail}", kept.join(","));
                count += item_names(&part);
                shown.push(part);
            }
        }
        break 'items;
    }
    let total = {
        let mut v: Vec<&str> = names.iter().map(|n| n.as_ref()).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    if shown.is_empty() {
        // Distinct names: ranks that share one name are one host here.
        return format!("{total} {}", if total == 1 { "host" } else { "hosts" });
    }
    format!(
        "{} and {} more",
        shown.join(","),
        total.saturating_sub(count)
    )
}

/// The items of a hostlist: commas outside brackets.
fn split_top(list: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut item = String::new();
    let mut depth = 0usize;
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    items.push(item);
    items
}

/// How many names one folded item stands for.
fn item_names(item: &str) -> usize {
    let (Some(open), Some(close)) = (item.find('['), item.rfind(']')) else {
        return 1;
    };
    item[open + 1..close]
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(a), Ok(b)) if b >= a => (b - a + 1) as usize,
                _ => 1,
            },
            None => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_runs_keeps_padding_and_sorts() {
        let names: Vec<String> = (1..=63)
            .chain([65])
            .map(|i| format!("node{i:03}"))
            .collect();
        assert_eq!(compress(&names), "node[001-063,065]");
        assert_eq!(compress(&["node3", "node1", "node2", "node1"]), "node[1-3]");
        assert_eq!(compress(&["node7"]), "node7");
        assert_eq!(
            compress(&["login", "gpu2", "gpu1", "a1-ib", "a2-ib"]),
            "a[1-2]-ib,gpu[1-2],login"
        );
        assert_eq!(compress::<&str>(&[]), "");
        // Mixed widths stay apart (Slurm would not read node[1-010] as they are).
        assert_eq!(compress(&["node1", "node010"]), "node010,node1");
        assert_eq!(compress(&["node9", "node10", "node11"]), "node[9-11]");
        assert_eq!(compress(&["10.200.1.1", "10.200.1.2"]), "10.200.1.[1-2]");
        assert_eq!(
            compress(&["99999999999999999999999"]),
            "99999999999999999999999"
        );
    }

    #[test]
    fn cut_lists_say_how_many_are_left() {
        let names: Vec<String> = (0..1024).map(|i| format!("h{}x", i * 2)).collect();
        let s = compress_within(&names, 40);
        assert!(s.len() <= 40 + " and 1024 more".len(), "{s}");
        assert!(s.ends_with(" more"), "{s}");
        assert!(s.starts_with("h[0,2,4,"), "{s}");
        let shown = s.split(" and ").next().unwrap().split(',').count();
        assert!(s.contains(&format!("and {} more", 1024 - shown)), "{s}");
        let names: Vec<String> = (0..1024).map(|i| format!("node{i:04}")).collect();
        assert_eq!(compress_within(&names, 40), "node[0000-1023]");
        let odd: Vec<String> = (0..50).map(|i| format!("r{i}n{}", i * 3)).collect();
        let s = compress_within(&odd, 30);
        assert!(s.len() < 50 && s.ends_with(" more"), "{s}");
        assert_eq!(compress_within(&["a1", "a2"], 40), "a[1-2]");
    }
}

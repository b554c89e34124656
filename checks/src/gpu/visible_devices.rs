//! CUDA_VISIBLE_DEVICES: parse every form CUDA accepts and resolve it against the GPUs found.
//!
//! CUDA's rules (CUDA C Programming Guide, "CUDA Environment Variables"; PyTorch's
//! `torch.cuda._parse_visible_devices` mirrors them):
//! - unset: every GPU is visible; set but empty: none is.
//! - a comma list of indices (`0,1,3`), GPU UUIDs as `nvidia-smi -L` prints them
//!   (`GPU-8932f937-...`, or any prefix that names one GPU only), or MIG devices
//!   (`MIG-<uuid>` or the older `MIG-GPU-<uuid>/<gi>/<ci>`); spaces around entries are ignored.
//! - enumeration stops at the first invalid entry: `0,2,-1,1` shows 0 and 2 only,
//!   and `-1` alone hides every GPU.
//! - numbers are read as `strtoul` does, so `1gpu2` counts as `1`.
//! - a repeated device makes the whole list empty (PyTorch: "Repeated ordinal results in empty set").
//! - PyTorch decides by the first entry whether the list holds indices or UUIDs, and stops at
//!   the first entry of the other kind.

use crate::core::Gpu;
use serde::Serialize;

/// What went wrong with one entry of CUDA_VISIBLE_DEVICES.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ProblemKind {
    /// Neither an index, a `GPU-` UUID nor a `MIG-` id (`cuda:0`, `gpu1`, `all`).
    Garbage,
    /// Digits followed by other characters (`1gpu2`); CUDA reads the leading number only.
    TrailingGarbage { read_as: u32 },
    /// A negative number or an empty entry before other entries: the rest is ignored.
    Stop,
    /// An index past the last GPU.
    IndexOutOfRange { index: u32, count: usize },
    /// A UUID (or prefix) that matches no GPU here.
    UnknownUuid,
    /// A UUID prefix that matches more than one GPU.
    AmbiguousUuid { matches: Vec<String> },
    /// The same GPU named twice: CUDA then shows no GPU at all.
    Duplicate { gpu: u32 },
    /// A MIG entry whose form is not `MIG-<uuid>` or `MIG-GPU-<uuid>/<gi>/<ci>`.
    BadMig,
    /// An index after UUIDs or a UUID after indices: PyTorch stops there.
    MixedForms,
}

/// One problem, with the entry and its position (0-based) in the list.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub position: usize,
    pub entry: String,
    #[serde(flatten)]
    pub kind: ProblemKind,
    /// Entries ignored because enumeration stopped here.
    pub ignored: Vec<String>,
}

impl Problem {
    /// One sentence for a human.
    pub fn describe(&self) -> String {
        let head = format!(
            "entry {} {}",
            self.position + 1,
            crate::infra::shellword::quoted(&self.entry)
        );
        let what = match &self.kind {
            ProblemKind::Garbage => "is not a GPU index, a GPU-<uuid> or a MIG-<uuid>".to_string(),
            ProblemKind::TrailingGarbage { read_as } => {
                format!("has characters after the number; CUDA reads it as {read_as}")
            }
            ProblemKind::Stop => "is negative or empty, so CUDA stops enumerating there".into(),
            ProblemKind::IndexOutOfRange { index, count } => {
                format!("names GPU {index} but this node has {count} (0..{count})")
            }
            ProblemKind::UnknownUuid => "matches no GPU UUID on this node".into(),
            ProblemKind::AmbiguousUuid { matches } => {
                format!("is a prefix of several GPU UUIDs ({})", matches.join(", "))
            }
            ProblemKind::Duplicate { gpu } => {
                format!("names GPU {gpu} again; a repeated GPU makes CUDA show none at all")
            }
            ProblemKind::BadMig => {
                "is not MIG-<uuid> or MIG-GPU-<uuid>/<gpu instance>/<compute instance>".into()
            }
            ProblemKind::MixedForms => {
                "mixes indices and UUIDs; PyTorch stops at the first entry of the other kind".into()
            }
        };
        if self.ignored.is_empty() {
            format!("{head} {what}")
        } else {
            format!("{head} {what}; ignored: {}", self.ignored.join(","))
        }
    }
}

/// How one entry names a device, before it is matched against the GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Index(u32),
    /// `GPU-...`, full or a prefix.
    Uuid(String),
    /// `MIG-<uuid>` (R470+ form).
    MigUuid(String),
    /// `MIG-GPU-<uuid>/<gi>/<ci>` (older form): the parent GPU's UUID prefix.
    MigLegacy {
        gpu_uuid: String,
        gi: u32,
        ci: u32,
    },
    /// A negative number or an empty entry: enumeration stops.
    Stop,
    /// A number with junk after it (`1gpu2`).
    IndexWithJunk(u32),
    Garbage,
}

/// The GPUs CUDA will show, in CUDA's order, and everything wrong with the value.
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
pub struct Visible {
    /// The variable was set.
    pub set: bool,
    /// The visible GPUs, in the order CUDA enumerates them (MIG entries show their parent GPU).
    pub gpus: Vec<Gpu>,
    /// MIG device UUIDs named by the value that could not be tied to a GPU here; each still
    /// counts as one visible device.
    pub unresolved_mig: Vec<String>,
    pub problems: Vec<Problem>,
}

impl Visible {
    /// How many CUDA devices the job will see.
    pub fn count(&self) -> usize {
        self.gpus.len() + self.unresolved_mig.len()
    }
}

/// Reads one entry as CUDA would, without looking at the GPUs.
pub fn classify(raw: &str) -> Entry {
    let s = raw.trim();
    if s.is_empty() {
        return Entry::Stop;
    }
    if let Some(rest) = s.strip_prefix("MIG-") {
        return classify_mig(rest);
    }
    if s.starts_with("GPU-") {
        return Entry::Uuid(s.to_string());
    }
    classify_number(s)
}

fn classify_mig(rest: &str) -> Entry {
    if let Some(legacy) = rest.strip_prefix("GPU-") {
        let mut parts = legacy.split('/');
        let uuid = parts.next().unwrap_or_default();
        let gi = parts.next().and_then(|p| p.trim().parse().ok());
        let ci = parts.next().and_then(|p| p.trim().parse().ok());
        return match (uuid.is_empty(), gi, ci, parts.next()) {
            (false, Some(gi), Some(ci), None) => Entry::MigLegacy {
                gpu_uuid: format!("GPU-{uuid}"),
                gi,
                ci,
            },
            _ => Entry::Garbage,
        };
    }
    let hexish = |c: char| c.is_ascii_hexdigit() || c == '-';
    if !rest.is_empty() && rest.chars().all(hexish) {
        Entry::MigUuid(format!("MIG-{rest}"))
    } else {
        Entry::Garbage
    }
}

/// `strtoul` with a sign, as CUDA reads indices.
fn classify_number(s: &str) -> Entry {
    let (negative, digits_and_rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let digits: String = digits_and_rest
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    if digits.is_empty() {
        return Entry::Garbage;
    }
    if negative {
        return Entry::Stop;
    }
    let Ok(n) = digits.parse::<u32>() else {
        return Entry::Garbage;
    };
    if digits.len() == digits_and_rest.len() {
        Entry::Index(n)
    } else {
        Entry::IndexWithJunk(n)
    }
}

/// Resolves `CUDA_VISIBLE_DEVICES` (None when unset) against the GPUs NVML found.
pub fn resolve(value: Option<&str>, gpus: &[Gpu]) -> Visible {
    let Some(value) = value else {
        return Visible {
            set: false,
            gpus: gpus.to_vec(),
            ..Default::default()
        };
    };
    let mut out = Visible {
        set: true,
        ..Default::default()
    };
    if value.trim().is_empty() {
        return out;
    }
    let entries: Vec<&str> = value.split(',').collect();
    let uuid_mode = is_uuid_form(&classify(entries[0]));
    let mut seen: Vec<String> = Vec::new();
    for (pos, raw) in entries.iter().enumerate() {
        let entry = classify(raw);
        let ignored = || {
            entries[pos + 1..]
                .iter()
                .map(|e| e.trim().to_string())
                .collect()
        };
        let problem = |kind| Problem {
            position: pos,
            entry: raw.trim().to_string(),
            kind,
            ignored: ignored(),
        };
        if entry != Entry::Stop && entry != Entry::Garbage && is_uuid_form(&entry) != uuid_mode {
            out.problems.push(problem(ProblemKind::MixedForms));
            break;
        }
        let found = match match_entry(&entry, gpus) {
            Ok(Matched::Gpu(i)) => i,
            Ok(Matched::UnresolvedMig(uuid)) => {
                out.unresolved_mig.push(uuid);
                continue;
            }
            Err(None) => {
                // A trailing "-1" or "" is the documented way to hide the rest: not a problem.
                if !ignored().is_empty() {
                    out.problems.push(problem(ProblemKind::Stop));
                }
                break;
            }
            Err(Some(kind)) => {
                out.problems.push(problem(kind));
                break;
            }
        };
        let gpu = &gpus[found];
        if let Entry::IndexWithJunk(n) = entry {
            out.problems.push(Problem {
                ignored: Vec::new(),
                ..problem(ProblemKind::TrailingGarbage { read_as: n })
            });
        }
        let key = device_key(&entry, gpu);
        if seen.contains(&key) {
            out.problems.push(Problem {
                ignored: Vec::new(),
                ..problem(ProblemKind::Duplicate { gpu: gpu.index })
            });
            out.gpus.clear();
            out.unresolved_mig.clear();
            return out;
        }
        seen.push(key);
        out.gpus.push(gpu.clone());
    }
    out
}

/// What makes two entries the same CUDA device: the GPU, or the MIG instance on it.
fn device_key(entry: &Entry, gpu: &Gpu) -> String {
    match entry {
        Entry::MigLegacy { gi, ci, .. } => format!("{}/{gi}/{ci}", gpu.uuid),
        Entry::MigUuid(uuid) => uuid.to_ascii_lowercase(),
        _ => format!("gpu{}", gpu.index),
    }
}

fn is_uuid_form(e: &Entry) -> bool {
    matches!(
        e,
        Entry::Uuid(_) | Entry::MigUuid(_) | Entry::MigLegacy { .. }
    )
}

enum Matched {
    /// Position in the `gpus` slice.
    Gpu(usize),
    UnresolvedMig(String),
}

/// Matches one entry; `Err(None)` means "stop here" without a problem of its own.
fn match_entry(entry: &Entry, gpus: &[Gpu]) -> Result<Matched, Option<ProblemKind>> {
    match entry {
        Entry::Stop => Err(None),
        Entry::Garbage => Err(Some(ProblemKind::Garbage)),
        Entry::Index(n) | Entry::IndexWithJunk(n) => match_index(*n, gpus).map(Matched::Gpu),
        Entry::Uuid(prefix)
        | Entry::MigLegacy {
            gpu_uuid: prefix, ..
        } => match_uuid_prefix(prefix, gpus).map(Matched::Gpu),
        Entry::MigUuid(uuid) => Ok(match_mig(uuid, gpus)),
    }
}

fn match_index(n: u32, gpus: &[Gpu]) -> Result<usize, Option<ProblemKind>> {
    // CUDA orders devices fastest first by default, NVML by PCI bus; both count the same GPUs,
    // so an index is valid when it is below the count. We report the NVML GPU with that index.
    let out_of_range = || {
        Some(ProblemKind::IndexOutOfRange {
            index: n,
            count: gpus.len(),
        })
    };
    if n as usize >= gpus.len() {
        return Err(out_of_range());
    }
    Ok(gpus.iter().position(|g| g.index == n).unwrap_or(n as usize))
}

fn match_uuid_prefix(prefix: &str, gpus: &[Gpu]) -> Result<usize, Option<ProblemKind>> {
    let lower = prefix.to_ascii_lowercase();
    let hits: Vec<usize> = gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.uuid.to_ascii_lowercase().starts_with(&lower))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [one] => Ok(*one),
        [] => Err(Some(ProblemKind::UnknownUuid)),
        many => Err(Some(ProblemKind::AmbiguousUuid {
            matches: many.iter().map(|&i| gpus[i].uuid.clone()).collect(),
        })),
    }
}

fn match_mig(uuid: &str, gpus: &[Gpu]) -> Matched {
    let lower = uuid.to_ascii_lowercase();
    gpus.iter()
        .position(|g| {
            g.mig_devices
                .iter()
                .any(|m| m.to_ascii_lowercase().starts_with(&lower))
        })
        .map(Matched::Gpu)
        .unwrap_or_else(|| Matched::UnresolvedMig(uuid.to_string()))
}

/// Visible GPUs on a node after `CUDA_VISIBLE_DEVICES`: the count torchrun's
/// `--nproc-per-node` should default to.
pub fn visible_gpu_count(facts: &crate::core::NodeFacts) -> u32 {
    let cvd = facts.env.get("CUDA_VISIBLE_DEVICES").map(|s| s.as_str());
    resolve(cvd, &facts.gpu.gpus).count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: u32) -> Vec<Gpu> {
        (0..n)
            .map(|i| Gpu {
                index: i,
                name: "NVIDIA H100 80GB HBM3".into(),
                uuid: format!("GPU-{i}a2b3c4d-1111-2222-3333-44444444444{i}"),
                ..Default::default()
            })
            .collect()
    }

    fn indices(v: &Visible) -> Vec<u32> {
        v.gpus.iter().map(|g| g.index).collect()
    }

    #[test]
    fn unset_shows_every_gpu_and_empty_shows_none() {
        let g = gpus(4);
        let unset = resolve(None, &g);
        assert!(!unset.set);
        assert_eq!(indices(&unset), vec![0, 1, 2, 3]);
        let empty = resolve(Some(""), &g);
        assert!(empty.set);
        assert_eq!(empty.count(), 0);
        assert!(empty.problems.is_empty());
        let minus_one = resolve(Some("-1"), &g);
        assert_eq!(minus_one.count(), 0);
        assert!(minus_one.problems.is_empty());
    }

    #[test]
    fn index_list_keeps_order_and_ignores_spaces() {
        let v = resolve(Some(" 2, 0 ,3"), &gpus(4));
        assert_eq!(indices(&v), vec![2, 0, 3]);
        assert!(v.problems.is_empty());
    }

    #[test]
    fn stops_at_the_first_invalid_entry_like_cuda() {
        let v = resolve(Some("0,2,-1,1"), &gpus(4));
        assert_eq!(indices(&v), vec![0, 2]);
        assert_eq!(v.problems.len(), 1);
        assert_eq!(v.problems[0].kind, ProblemKind::Stop);
        assert_eq!(v.problems[0].ignored, vec!["1".to_string()]);
        let trailing_comma = resolve(Some("0,1,"), &gpus(4));
        assert_eq!(indices(&trailing_comma), vec![0, 1]);
        assert!(trailing_comma.problems.is_empty());
    }

    #[test]
    fn out_of_range_index_stops_and_is_reported() {
        let v = resolve(Some("0,1,4,2"), &gpus(4));
        assert_eq!(indices(&v), vec![0, 1]);
        assert_eq!(
            v.problems[0].kind,
            ProblemKind::IndexOutOfRange { index: 4, count: 4 }
        );
        assert!(v.problems[0].describe().contains("GPU 4"));
    }

    #[test]
    fn duplicate_makes_the_list_empty() {
        let v = resolve(Some("0,1,0"), &gpus(2));
        assert_eq!(v.count(), 0);
        assert_eq!(v.problems[0].kind, ProblemKind::Duplicate { gpu: 0 });
        assert_eq!(v.problems[0].position, 2);
        // A UUID naming the same GPU as an earlier UUID prefix is a duplicate too.
        let g = gpus(2);
        let both = format!("{},GPU-0a2b", g[0].uuid);
        assert!(matches!(
            resolve(Some(&both), &g).problems[0].kind,
            ProblemKind::Duplicate { gpu: 0 }
        ));
    }

    #[test]
    fn uuids_full_and_prefix_resolve() {
        let g = gpus(3);
        let v = resolve(Some(&format!("{},GPU-2a2b", g[1].uuid)), &g);
        assert_eq!(indices(&v), vec![1, 2]);
        assert!(v.problems.is_empty());
    }

    #[test]
    fn unknown_and_ambiguous_uuids_are_problems() {
        let g = gpus(3);
        let unknown = resolve(Some("GPU-deadbeef,GPU-1a"), &g);
        assert_eq!(unknown.count(), 0);
        assert_eq!(unknown.problems[0].kind, ProblemKind::UnknownUuid);
        let ambiguous = resolve(Some("GPU-"), &g);
        assert!(matches!(
            &ambiguous.problems[0].kind,
            ProblemKind::AmbiguousUuid { matches } if matches.len() == 3
        ));
    }

    #[test]
    fn garbage_and_trailing_junk() {
        let g = gpus(4);
        let cuda0 = resolve(Some("cuda:0"), &g);
        assert_eq!(cuda0.count(), 0);
        assert_eq!(cuda0.problems[0].kind, ProblemKind::Garbage);
        let junk = resolve(Some("1gpu2,2"), &g);
        assert_eq!(indices(&junk), vec![1, 2]);
        assert_eq!(
            junk.problems[0].kind,
            ProblemKind::TrailingGarbage { read_as: 1 }
        );
    }

    #[test]
    fn mixed_forms_stop_where_pytorch_stops() {
        let g = gpus(2);
        let v = resolve(Some(&format!("0,{}", g[1].uuid)), &g);
        assert_eq!(indices(&v), vec![0]);
        assert_eq!(v.problems[0].kind, ProblemKind::MixedForms);
    }

    #[test]
    fn mig_forms() {
        let mut g = gpus(2);
        g[1].mig_devices = vec!["MIG-c6b1e3a0-aaaa-bbbb-cccc-0123456789ab".into()];
        let new_form = resolve(Some("MIG-c6b1e3a0"), &g);
        assert_eq!(indices(&new_form), vec![1]);
        let unknown_mig = resolve(Some("MIG-ffffffff-0000"), &g);
        assert_eq!(unknown_mig.count(), 1);
        assert_eq!(unknown_mig.unresolved_mig.len(), 1);
        let legacy = resolve(Some(&format!("MIG-{}/1/0", g[0].uuid)), &g);
        assert_eq!(indices(&legacy), vec![0]);
        assert!(legacy.problems.is_empty());
        let bad = resolve(Some("MIG-GPU-0a2b/x/0"), &g);
        assert_eq!(bad.problems[0].kind, ProblemKind::Garbage);
        assert_eq!(classify("MIG-zz"), Entry::Garbage);
    }

    #[test]
    fn never_panics_on_odd_input() {
        let g = gpus(1);
        for v in [
            ",",
            ",,",
            "-",
            "+",
            "99999999999999999999",
            "\u{feff}0",
            "GPU",
            "MIG-",
            "0,-",
            " ",
            "MIG-GPU-/1/2",
            "0/1",
        ] {
            let _ = resolve(Some(v), &g);
            let _ = resolve(Some(v), &[]);
        }
        assert_eq!(
            resolve(Some("0"), &[]).problems[0].kind,
            ProblemKind::IndexOutOfRange { index: 0, count: 0 }
        );
    }
}

//! Verdicts on the measured all-reduce: bus bandwidth, wrong values, the network NCCL used, runs that failed.

pub mod catalog;
pub mod ids;

#[cfg(test)]
use crate::core::LinkResult;
use crate::core::{AsLinks, CollectiveResult, CollectiveRow, Finding, Fix, Links, Status};

/// The all-reduce is judged too slow when its large-message busbw is under this share of the
/// slowest ring link's pairwise throughput.
pub const LINK_SHARE: f64 = 0.5;

/// Everything the collective checks look at.
pub struct CollectiveInput<'a> {
    /// One result per transport and configuration measured.
    pub results: &'a [CollectiveResult],
    /// The pairwise link results (for the slowest link in the ring; a measured link is always
    /// one of the records).
    pub links: &'a Links<'a>,
    /// `--min-busbw` in GB/s.
    pub min_busbw_gb_s: Option<f64>,
    /// Why nothing was measured, when nothing was (e.g. "--allreduce off").
    pub not_run: Option<String>,
    /// The run was one node's GPUs (`check --thorough`): the fixes rerun that, not a cluster.
    pub one_node: bool,
    /// What the pairwise test found slow, in a few words each (`link.slow`'s `part`), and the
    /// reference its judgment used (Gbit/s): the all-reduce's finding says whether a slow link
    /// explains it.
    pub slow_parts: Vec<String>,
    pub link_reference_gbit: Option<f64>,
}

impl<'a> CollectiveInput<'a> {
    /// The input with what `link.slow` found among `findings` (its warnings' parts, its reference).
    pub fn with_link_verdict(mut self, findings: &[Finding]) -> CollectiveInput<'a> {
        for v in findings.iter().filter_map(crate::link::verdict::Slow::of) {
            if v.warned
                && let Some(part) = v.part
            {
                self.slow_parts.push(part);
            }
            if let Some(r) = v.reference_gbit_s {
                self.link_reference_gbit = Some(r);
            }
        }
        self
    }
}

impl CollectiveInput<'_> {
    /// The preflight command that reruns this NCCL all-reduce.
    fn nccl_rerun(&self) -> &'static str {
        if self.one_node {
            "preflight check --thorough"
        } else {
            "preflight cluster --allreduce nccl ..."
        }
    }
}

/// Runs every collective check; `collective.busbw` and `collective.wrong` appear at least once.
pub fn check_collectives(input: &CollectiveInput) -> Vec<Finding> {
    if input.results.is_empty() {
        let why = input
            .not_run
            .clone()
            .unwrap_or_else(|| "no all-reduce was measured".into());
        return [crate::collective::ids::BUSBW, crate::collective::ids::WRONG]
            .into_iter()
            .map(|id| Finding::new(id, Status::Skip, "allreduce", why.clone()))
            .collect();
    }
    let mut out = Vec::new();
    for r in input.results {
        if let Some(f) = run_error(r, input) {
            out.push(f);
        }
        out.push(wrong_values(r, input));
        out.push(bus_bandwidth(r, input));
        if let Some(f) = network_used(r) {
            out.push(f);
        }
    }
    out
}

/// "tcp", "nccl", "nccl (--compare-env)".
pub fn label(r: &CollectiveResult) -> String {
    if r.config == "compare" {
        format!("{} (--compare-env)", r.transport)
    } else {
        r.transport.clone()
    }
}

/// The row of the largest message that was timed, if any.
pub fn large_row(r: &CollectiveResult) -> Option<&CollectiveRow> {
    r.rows
        .iter()
        .filter(|row| row.time_us.is_finite() && row.time_us > 0.0)
        .max_by_key(|row| row.bytes)
}

fn env_text(r: &CollectiveResult) -> String {
    if r.env.is_empty() {
        return "(no NCCL environment)".into();
    }
    r.env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_error(r: &CollectiveResult, input: &CollectiveInput) -> Option<Finding> {
    let err = r.error.as_ref()?;
    let (hint, commands): (&str, Vec<String>) = if r.transport == "nccl" {
        (
            "NCCL could not finish the all-reduce; rerun with NCCL's log on the named node and read its WARN lines (a hang or abort here is what the training job would hit)",
            vec![format!(
                "{} NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET {}",
                env_text(r),
                input.nccl_rerun()
            )],
        )
    } else {
        (
            "the TCP ring between neighbours broke; check the link and firewall findings for the named ranks, then rerun",
            vec!["preflight cluster --allreduce tcp ...".into()],
        )
    };
    let mut fix = Fix::new(hint);
    for c in commands {
        fix = fix.command(c);
    }
    Some(
        Finding::new(
            crate::collective::ids::ERROR,
            Status::Error,
            label(r),
            format!("the {} all-reduce could not finish: {err}", label(r)),
        )
        .with("transport", &r.transport)
        .with("error", err)
        .with("failed_ranks", &r.failed_ranks)
        .with("sizes_measured", r.rows.len())
        .fix(fix),
    )
}

fn wrong_values(r: &CollectiveResult, input: &CollectiveInput) -> Finding {
    if r.rows.is_empty() {
        return Finding::new(
            crate::collective::ids::WRONG,
            Status::Skip,
            label(r),
            format!("the {} all-reduce measured no size", label(r)),
        );
    }
    let bad: Vec<&CollectiveRow> = r.rows.iter().filter(|row| row.wrong > 0).collect();
    if bad.is_empty() {
        return Finding::new(
            crate::collective::ids::WRONG,
            Status::Pass,
            label(r),
            format!(
                "every value of the {} all-reduce matched the exact sum ({} size{}, {} rank{})",
                label(r),
                r.rows.len(),
                if r.rows.len() == 1 { "" } else { "s" },
                r.ranks,
                if r.ranks == 1 { "" } else { "s" }
            ),
        )
        .with("sizes", r.rows.len());
    }
    let total: u64 = bad.iter().map(|row| row.wrong).sum();
    let sizes: Vec<u64> = bad.iter().map(|row| row.bytes).collect();
    let who = if r.failed_ranks.is_empty() {
        "unknown ranks".to_string()
    } else {
        format!(
            "rank{} {}",
            if r.failed_ranks.len() == 1 { "" } else { "s" },
            r.failed_ranks
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let fix = if r.transport == "nccl" {
        Fix::new("NCCL returned wrong sums: a GPU, NVLink/PCIe path or NIC corrupts data. Check the named nodes' GPU and NIC error counters, and rerun with P2P off to isolate the path")
            .command("nvidia-smi -q -d ECC,ROW_REMAPPER | grep -i -e volatile -e pending")
            .command("dmesg | grep -i -e xid -e mce -e edac")
            .command(format!("NCCL_P2P_DISABLE=1 {}", input.nccl_rerun()))
    } else {
        Fix::new("data arrived changed between nodes (TCP checksums passed, so memory, CPU or a NIC offload corrupts it); check the named nodes' memory and NIC error counters")
            .command("dmesg | grep -i -e mce -e edac -e 'hardware error'")
            .command("ethtool -S <interface> | grep -i -e err -e crc")
    };
    Finding::new(
        crate::collective::ids::WRONG,
        Status::Fail,
        label(r),
        format!(
            "the {} all-reduce returned {total} wrong values on {who} (sizes {})",
            label(r),
            sizes
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .with("wrong_values", total)
    .with("sizes_bytes", &sizes)
    .with("ranks", &r.failed_ranks)
    .fix(fix)
}

/// The slowest pairwise link around the ring (`order[i] -> order[i+1]`), on the addresses the run used.
pub fn slowest_ring_link(r: &CollectiveResult, links: impl AsLinks) -> Option<(u32, u32, f64)> {
    links.with_links(|links| slowest_in(r, links))
}

fn slowest_in(r: &CollectiveResult, links: &Links) -> Option<(u32, u32, f64)> {
    let n = r.order.len();
    if n < 2 {
        return None;
    }
    // The ring's steps with the address each used, then the best throughput of each from one
    // pass over the records (a scan of every link per step is n³ at thousands of nodes).
    let steps: Vec<(u32, u32, &str)> = (0..n)
        .filter_map(|i| {
            let (from, to) = (r.order[i], r.order[(i + 1) % n]);
            let addr = r.addresses.get(&to.to_string())?;
            Some((from, to, addr.as_str()))
        })
        .collect();
    let mut best: std::collections::HashMap<(u32, u32, &str), Option<f64>> =
        steps.iter().map(|k| (*k, None)).collect();
    for l in links.records() {
        let Some(slot) = best.get_mut(&(l.from, l.to, l.address.as_str())) else {
            continue;
        };
        if let Some(t) = l
            .throughput_gbit_s
            .map(f64::from)
            .filter(|t| t.is_finite() && *t > 0.0)
        {
            *slot = Some(slot.map_or(t, |b| b.max(t)));
        }
    }
    let mut slowest: Option<(u32, u32, f64)> = None;
    for (from, to, addr) in steps {
        if let Some(tp) = best.get(&(from, to, addr)).copied().flatten()
            && slowest.is_none_or(|(_, _, s)| tp < s)
        {
            slowest = Some((from, to, tp));
        }
    }
    slowest
}

fn bus_bandwidth(r: &CollectiveResult, input: &CollectiveInput) -> Finding {
    let subject = label(r);
    let Some(row) = large_row(r) else {
        return Finding::new(
            crate::collective::ids::BUSBW,
            Status::Skip,
            subject,
            format!("the {} all-reduce timed no size", label(r)),
        );
    };
    if r.ranks < 2 {
        return Finding::new(
            crate::collective::ids::BUSBW,
            Status::Skip,
            subject,
            format!(
                "one rank only: an all-reduce moves no data between ranks, so bus bandwidth is 0 by definition ({} bytes in {:.0} us)",
                row.bytes, row.time_us
            ),
        )
        .with("ranks", r.ranks);
    }
    let busbw = row.busbw_gb_s;
    let slowest = slowest_ring_link(r, input.links);
    let mut f = Finding::new(
        crate::collective::ids::BUSBW,
        Status::Pass,
        subject.clone(),
        String::new(),
    )
    .with("transport", &r.transport)
    .with("bytes", row.bytes)
    .with("busbw_gb_s", busbw)
    .with("algbw_gb_s", row.algbw_gb_s)
    .with("ranks", r.ranks)
    .with("env", &r.env);
    if let Some((from, to, gbit)) = slowest {
        f = f
            .with("slowest_link", format!("{from}->{to}"))
            .with("slowest_link_gbit_s", gbit)
            .with("slowest_link_gb_s", gbit / 8.0);
    }
    if let Some(min) = input.min_busbw_gb_s {
        f = f.with("min_busbw_gb_s", min);
    }
    let under_min = input.min_busbw_gb_s.filter(|min| busbw < *min);
    let under_link = slowest.filter(|(_, _, gbit)| busbw < LINK_SHARE * gbit / 8.0);
    // Under half of what the healthy pairs carry, with a slow part found: the slow part explains it.
    let under_reference = input
        .link_reference_gbit
        .filter(|g| busbw < LINK_SHARE * g / 8.0 && !input.slow_parts.is_empty());
    if !input.slow_parts.is_empty() {
        f = f.with("slow_parts", &input.slow_parts);
    }
    if let Some(g) = input.link_reference_gbit {
        f = f.with("link_reference_gbit_s", g);
    }
    let cause = cause_text(input);
    let size = human_bytes(row.bytes);
    match (under_min, under_link, under_reference) {
        (Some(min), _, _) => {
            f.status = Status::Fail;
            f.summary = format!(
                "{} all-reduce bus bandwidth at {size} is {busbw:.3} GB/s, under --min-busbw {min} GB/s{cause}",
                label(r)
            );
            f.fix(slow_fix(r, slowest, &input.slow_parts))
        }
        (None, link, reference) if link.is_some() || reference.is_some() => {
            let under = match (link, reference) {
                (Some((from, to, gbit)), _) => format!(
                    "the slowest ring link {from}->{to} ({:.3} GB/s = {gbit:.2} Gbit/s pairwise)",
                    gbit / 8.0
                ),
                (None, g) => {
                    let g = g.unwrap_or_default();
                    format!(
                        "what the healthy pairs carry ({:.3} GB/s = {g:.2} Gbit/s, link.slow's reference)",
                        g / 8.0
                    )
                }
            };
            f.status = Status::Warn;
            f.summary = format!(
                "{} all-reduce bus bandwidth at {size} is {busbw:.3} GB/s, under half of {under}{cause}",
                label(r)
            );
            f.fix(slow_fix(r, slowest, &input.slow_parts))
        }
        _ => {
            f.summary = match slowest {
                Some((from, to, gbit)) => format!(
                    "{} all-reduce bus bandwidth at {size} is {busbw:.3} GB/s ({:.0}% of the slowest ring link {from}->{to}, {:.3} GB/s)",
                    label(r),
                    100.0 * busbw / (gbit / 8.0),
                    gbit / 8.0
                ),
                None => format!(
                    "{} all-reduce bus bandwidth at {size} is {busbw:.3} GB/s",
                    label(r)
                ),
            };
            f
        }
    }
}

/// Why the all-reduce is slow, as the pairwise test saw it: the slow parts it named, or that
/// every pair was within its reference (a scale or congestion effect).
fn cause_text(input: &CollectiveInput) -> String {
    match (input.slow_parts.as_slice(), input.link_reference_gbit) {
        ([], Some(_)) => ". Every measured pair was within the pairwise reference (link.slow passed), so no one link explains it: it is a scale or congestion effect of the all-reduce itself (many flows at once, CPU, the transport's settings)".into(),
        ([], None) => String::new(),
        (parts, _) => {
            let shown: Vec<&str> = parts.iter().take(3).map(String::as_str).collect();
            let more = parts.len().saturating_sub(shown.len());
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            format!(
                ". The pairwise test found why: {}{more} (link.slow); a ring all-reduce runs at the pace of its slowest part",
                shown.join("; ")
            )
        }
    }
}

fn slow_fix(r: &CollectiveResult, slowest: Option<(u32, u32, f64)>, parts: &[String]) -> Fix {
    let fix = slow_fix_by_transport(r, slowest);
    match parts.first() {
        None => fix,
        Some(first) => Fix {
            hint: format!(
                "Fix what link.slow names first ({first}{}): the ring runs at its pace. Then: {}",
                if parts.len() > 1 {
                    " and the others"
                } else {
                    ""
                },
                fix.hint
            ),
            ..fix
        },
    }
}

fn slow_fix_by_transport(r: &CollectiveResult, slowest: Option<(u32, u32, f64)>) -> Fix {
    let link = slowest
        .map(|(a, b, g)| format!(" (slowest ring link {a}->{b}: {g:.2} Gbit/s)"))
        .unwrap_or_default();
    if r.transport == "nccl" {
        Fix::new(format!(
            "NCCL moves less than its network allows{link}: make sure it uses the fast fabric (InfiniBand/RoCE with NCCL_IB_DISABLE=0, or the fastest NIC in NCCL_SOCKET_IFNAME), and compare both settings in one run"
        ))
        .command("preflight cluster --allreduce nccl --compare-env NCCL_IB_DISABLE=1 ...")
        .command("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ... 2>&1 | grep -e NET/ -e 'via NET'")
    } else {
        Fix::new(format!(
            "the TCP ring is slower than the links{link}: look for a slow link or a busy CPU on the named ranks (link.slow), and give NCCL's socket transport more connections per peer"
        ))
        .command("export NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4")
        .command("preflight cluster --thorough ...")
    }
}

fn network_used(r: &CollectiveResult) -> Option<Finding> {
    if r.transport != "nccl" {
        return None;
    }
    let net = r.net.clone()?;
    Some(match &r.net_mismatch {
        Some(why) => Finding::new(
            crate::collective::ids::NET,
            Status::Warn,
            label(r),
            format!(
                "NCCL used {net}, not what the advice names: {why}"
            ),
        )
        .with("net", &net)
        .with("env", &r.env)
        .with("mismatch", why)
        .fix(
            Fix::new("export the advised NCCL environment on every node before torchrun, and check no other NCCL_* variable (or /etc/nccl.conf, ~/.nccl.conf) overrides it")
                .command(format!("export {}", env_text(r)))
                .command("env | grep ^NCCL_; cat /etc/nccl.conf ~/.nccl.conf 2>/dev/null"),
        ),
        None => Finding::new(
            crate::collective::ids::NET,
            Status::Pass,
            label(r),
            format!("NCCL used {net}, as advised"),
        )
        .with("net", &net),
    })
}

/// Algorithm bandwidth in GB/s (1e9 bytes/s), as nccl-tests: bytes / time.
pub fn algbw_gb_s(bytes: u64, time_us: f64) -> f64 {
    if time_us > 0.0 {
        bytes as f64 / (time_us * 1e3)
    } else {
        0.0
    }
}

/// Bus bandwidth in GB/s, as nccl-tests for all-reduce: algbw * 2(n-1)/n.
pub fn busbw_gb_s(bytes: u64, time_us: f64, n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    algbw_gb_s(bytes, time_us) * 2.0 * (n as f64 - 1.0) / n as f64
}

/// "4K", "1M", "256M", "1G" for whole units, "1.5M" otherwise, "1000B" under 1 KiB.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (size, name) in UNITS {
        if bytes >= size {
            return if bytes % size == 0 {
                format!("{}{name}", bytes / size)
            } else {
                format!("{:.1}{name}", bytes as f64 / size as f64)
            };
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::LinkOutcome;
    use std::collections::BTreeMap;

    fn row(bytes: u64, time_us: f64, n: u32, wrong: u64) -> CollectiveRow {
        CollectiveRow {
            bytes,
            time_us,
            algbw_gb_s: algbw_gb_s(bytes, time_us),
            busbw_gb_s: busbw_gb_s(bytes, time_us, n as usize),
            wrong,
        }
    }

    fn tcp_result(n: u32, rows: Vec<CollectiveRow>) -> CollectiveResult {
        CollectiveResult {
            op: "allreduce".into(),
            transport: "tcp".into(),
            ranks: n,
            order: (0..n).collect(),
            addresses: (0..n)
                .map(|r| (r.to_string(), format!("10.200.0.{}", r + 1)))
                .collect(),
            config: "advice".into(),
            rows,
            ..Default::default()
        }
    }

    fn link(from: u32, to: u32, gbit: f64) -> LinkResult {
        LinkResult {
            from,
            to,
            interface: "eth0".into(),
            address: format!("10.200.0.{}", to + 1).into(),
            result: LinkOutcome::Ok,
            throughput_gbit_s: Some(gbit as f32),
            ..Default::default()
        }
    }

    fn full_links(n: u32, gbit: f64) -> Vec<LinkResult> {
        let mut v = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    v.push(link(a, b, gbit));
                }
            }
        }
        v
    }

    fn find(fs: &[Finding], id: crate::core::FindingId) -> &Finding {
        fs.iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    }

    fn input<'a>(
        results: &'a [CollectiveResult],
        links: &'a Links<'a>,
        min: Option<f64>,
    ) -> CollectiveInput<'a> {
        CollectiveInput {
            results,
            links,
            min_busbw_gb_s: min,
            not_run: None,
            one_node: false,
            slow_parts: Vec::new(),
            link_reference_gbit: None,
        }
    }

    #[test]
    fn nothing_measured_skips_both_ids_with_the_reason() {
        let fs = check_collectives(&CollectiveInput {
            results: &[],
            links: &crate::core::Links::none(),
            min_busbw_gb_s: None,
            not_run: Some("--allreduce off".into()),
            one_node: false,
            slow_parts: Vec::new(),
            link_reference_gbit: None,
        });
        assert_eq!(fs.len(), 2);
        assert!(fs.iter().all(|f| f.status == Status::Skip));
        assert!(fs[0].summary.contains("--allreduce off"));
    }

    #[test]
    fn busbw_near_the_links_passes() {
        // 4 ranks, 64 MiB in 60 ms: algbw 1.118 GB/s, busbw 1.68 GB/s; links 10 Gbit/s = 1.25 GB/s.
        let r = [tcp_result(4, vec![row(64 << 20, 60_000.0, 4, 0)])];
        let links = full_links(4, 10.0);
        let fs = check_collectives(&input(&r, &Links::borrowed(&links), None));
        let f = find(&fs, crate::collective::ids::BUSBW);
        assert_eq!(f.status, Status::Pass, "{}", f.summary);
        assert_eq!(f.evidence["slowest_link_gbit_s"], 10.0);
        assert_eq!(
            find(&fs, crate::collective::ids::WRONG).status,
            Status::Pass
        );
    }

    #[test]
    fn busbw_under_half_the_slowest_ring_link_warns_and_names_it() {
        // busbw ~0.168 GB/s; links 10 Gbit/s except 2->3 at 2 Gbit/s (0.25 GB/s): 0.168 > 0.125 -> pass;
        // with 2->3 at 4 Gbit/s (0.5 GB/s): 0.168 < 0.25 -> warn naming 2->3.
        let r = [tcp_result(4, vec![row(64 << 20, 600_000.0, 4, 0)])];
        let mut links = full_links(4, 10.0);
        for l in links.iter_mut().filter(|l| l.from == 2 && l.to == 3) {
            l.throughput_gbit_s = Some(4.0);
        }
        let fs = check_collectives(&input(&r, &Links::borrowed(&links), None));
        let f = find(&fs, crate::collective::ids::BUSBW);
        assert_eq!(f.status, Status::Warn, "{}", f.summary);
        assert!(f.summary.contains("2->3"), "{}", f.summary);
        assert!(f.fix.is_some());
        // A slow link that is not in the ring (0->2) is not the ring's limit.
        let mut links = full_links(4, 1.0);
        for l in links.iter_mut().filter(|l| l.from == 0 && l.to == 2) {
            l.throughput_gbit_s = Some(0.1);
        }
        let fs = check_collectives(&input(&r, &Links::borrowed(&links), None));
        assert_eq!(
            find(&fs, crate::collective::ids::BUSBW).status,
            Status::Pass
        );
    }

    #[test]
    fn busbw_names_the_slow_part_link_slow_found_or_says_no_link_explains_it() {
        // busbw ~0.168 GB/s; every ring link 1 Gbit/s (0.125 GB/s): passes against the links.
        let r = [tcp_result(4, vec![row(64 << 20, 600_000.0, 4, 0)])];
        let links = full_links(4, 1.0);
        // The healthy pairs carry 10 Gbit/s and a slow node was found: warn, naming it.
        let view = Links::borrowed(&links);
        let mut with_part = input(&r, &view, None);
        with_part.slow_parts = vec!["rank 2 (node03), slow sending and receiving".into()];
        with_part.link_reference_gbit = Some(10.0);
        let fs = check_collectives(&with_part);
        let f = find(&fs, crate::collective::ids::BUSBW);
        assert_eq!(f.status, Status::Warn, "{}", f.summary);
        assert!(
            f.summary.contains(
                "The pairwise test found why: rank 2 (node03), slow sending and receiving"
            ),
            "{}",
            f.summary
        );
        assert!(
            f.fix
                .as_ref()
                .unwrap()
                .hint
                .starts_with("Fix what link.slow names first"),
            "{:?}",
            f.fix
        );
        // Every pair fine, the ring slow against its links: a scale or congestion effect.
        let links = full_links(4, 10.0);
        let view = Links::borrowed(&links);
        let mut clean = input(&r, &view, None);
        clean.link_reference_gbit = Some(10.0);
        let fs = check_collectives(&clean);
        let f = find(&fs, crate::collective::ids::BUSBW);
        assert_eq!(f.status, Status::Warn, "{}", f.summary);
        assert!(
            f.summary.contains("scale or congestion effect"),
            "{}",
            f.summary
        );
    }

    #[test]
    fn min_busbw_fails_below_and_passes_above() {
        let r = [tcp_result(
            2,
            vec![row(1 << 20, 1000.0, 2, 0), row(64 << 20, 100_000.0, 2, 0)],
        )];
        // Largest row: 64 MiB / 0.1 s = 0.671 GB/s algbw = busbw for n=2.
        let fs = check_collectives(&input(&r, &Links::none(), Some(1.0)));
        let f = find(&fs, crate::collective::ids::BUSBW);
        assert_eq!(f.status, Status::Fail);
        assert!(f.summary.contains("--min-busbw 1"), "{}", f.summary);
        assert_eq!(f.evidence["bytes"], 64u64 << 20);
        let fs = check_collectives(&input(&r, &Links::none(), Some(0.5)));
        assert_eq!(
            find(&fs, crate::collective::ids::BUSBW).status,
            Status::Pass
        );
    }

    #[test]
    fn wrong_values_fail_with_sizes_and_ranks() {
        let mut res = tcp_result(
            3,
            vec![row(1 << 20, 1000.0, 3, 0), row(4 << 20, 4000.0, 3, 17)],
        );
        res.failed_ranks = vec![2];
        let r = [res];
        let fs = check_collectives(&input(&r, &Links::none(), None));
        let f = find(&fs, crate::collective::ids::WRONG);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(f.evidence["wrong_values"], 17);
        assert!(f.summary.contains("rank 2"), "{}", f.summary);
        assert!(f.summary.contains(&(4u64 << 20).to_string()));
        assert!(!f.fix.as_ref().unwrap().commands.is_empty());
    }

    #[test]
    fn one_rank_skips_busbw() {
        let r = [tcp_result(1, vec![row(1 << 20, 10.0, 1, 0)])];
        let fs = check_collectives(&input(&r, &Links::none(), Some(100.0)));
        assert_eq!(
            find(&fs, crate::collective::ids::BUSBW).status,
            Status::Skip
        );
    }

    #[test]
    fn a_failed_run_is_an_error_and_keeps_its_rows() {
        let mut res = tcp_result(3, vec![row(1 << 20, 1000.0, 3, 0)]);
        res.error = Some("rank 1: connection to rank 2 at 10.200.0.3 timed out".into());
        res.failed_ranks = vec![1];
        let r = [res];
        let fs = check_collectives(&input(&r, &Links::none(), None));
        let f = find(&fs, crate::collective::ids::ERROR);
        assert_eq!(f.status, Status::Error);
        assert!(f.summary.contains("rank 1"));
        assert_eq!(
            find(&fs, crate::collective::ids::WRONG).status,
            Status::Pass
        );
    }

    #[test]
    fn nccl_network_mismatch_warns() {
        let mut res = tcp_result(2, vec![row(1 << 20, 100.0, 2, 0)]);
        res.transport = "nccl".into();
        res.net = Some("NET/IB mlx5_0:1".into());
        res.env = BTreeMap::from([("NCCL_IB_DISABLE".to_string(), "1".to_string())]);
        res.net_mismatch = Some("advice sets NCCL_IB_DISABLE=1 but NCCL used NET/IB".into());
        let r = [res.clone()];
        let fs = check_collectives(&input(&r, &Links::none(), None));
        let f = find(&fs, crate::collective::ids::NET);
        assert_eq!(f.status, Status::Warn);
        assert!(f.fix.as_ref().unwrap().commands[0].contains("NCCL_IB_DISABLE=1"));
        res.net_mismatch = None;
        let r = [res];
        let fs = check_collectives(&input(&r, &Links::none(), None));
        assert_eq!(find(&fs, crate::collective::ids::NET).status, Status::Pass);
        // TCP results never carry a collective.net finding.
        let r = [tcp_result(2, vec![row(1 << 20, 100.0, 2, 0)])];
        assert!(
            check_collectives(&input(&r, &Links::none(), None))
                .iter()
                .all(|f| f.id != crate::collective::ids::NET)
        );
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(1 << 20), "1M");
        assert_eq!(human_bytes(256 << 20), "256M");
        assert_eq!(human_bytes(4096), "4K");
        assert_eq!(human_bytes(1 << 30), "1G");
        assert_eq!(human_bytes(1000), "1000B");
    }
}

//! `--format html` and `preflight render`, checked in a real browser: each saved cluster report
//! (3 healthy nodes, 3 with a filtered pair and a slow node, 8 nodes) and a node check report is
//! rendered to a file, loaded by headless Chromium (`--dump-dom`, after the page's script ran),
//! and the DOM is compared with the report: the n x n matrix and its results, every finding,
//! every command verbatim in a `pre.cmd` with its Copy button, one chart point per all-reduce
//! size, and a hostile hostname shown as text. A screenshot of each page is kept under
//! `$CARGO_TARGET_TMPDIR/html/` for a person to look at.
//!
//! Without Chromium the browser tests skip, or fail when `PREFLIGHT_REQUIRE_NETNS=1` (CI).

use crate::common::{bin, fixture};
use preflight_checks::model::{LinkOutcome, Report};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one Chromium run may take before it is killed.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);
/// Chromium runs one at a time: each takes most of a small CI machine.
static BROWSER: Mutex<()> = Mutex::new(());

fn skip_or_fail(reason: &str) {
    if std::env::var("PREFLIGHT_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("PREFLIGHT_REQUIRE_NETNS=1 but the browser test cannot run: {reason}");
    }
    println!("skipped: {reason}");
    eprintln!("skipped: {reason}");
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser", "google-chrome"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Runs Chromium headless on `page` with `args`, bounded by [`BROWSER_LIMIT`]; its stdout.
fn browse(browser: &Path, page: &Path, args: &[&str], work: &Path) -> String {
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let out = work.join("stdout");
    let profile = tempfile::tempdir_in(work).unwrap();
    let started = Instant::now();
    let mut child = Command::new(browser)
        .args(["--headless=new", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--no-first-run", "--hide-scrollbars", "--mute-audio"])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.display()));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > BROWSER_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} ran over {BROWSER_LIMIT:?} on {}",
                browser.display(),
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "chromium {args:?} on {}: {status}",
        page.display()
    );
    eprintln!(
        "chromium {} on {}: {:.1} s",
        args.first().unwrap_or(&""),
        page.file_name().unwrap().to_string_lossy(),
        started.elapsed().as_secs_f64()
    );
    std::fs::read_to_string(&out).unwrap()
}

// ----- a small reader for the DOM Chromium serializes (double-quoted attributes) -----

/// Every start tag `<name ...>` in `dom`: its offset and attributes.
fn tags(dom: &str, name: &str) -> Vec<(usize, BTreeMap<String, String>)> {
    let open = format!("<{name}");
    let mut out = Vec::new();
    for (at, _) in dom.match_indices(&open) {
        let rest = &dom[at + open.len()..];
        if !rest.starts_with([' ', '>', '/']) {
            continue;
        }
        let end = rest.find('>').expect("tag ends");
        out.push((at, attributes(&rest[..end])));
    }
    out
}

fn attributes(mut s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    loop {
        s = s.trim_start();
        let Some(name_end) = s.find(|c: char| c == '=' || c.is_whitespace()) else {
            if !s.is_empty() && s != "/" {
                out.insert(s.to_string(), String::new());
            }
            return out;
        };
        let name = s[..name_end].to_string();
        s = &s[name_end..];
        if let Some(v) = s.strip_prefix("=\"") {
            let close = v.find('"').expect("attribute value ends");
            out.insert(name, unescape(&v[..close]));
            s = &v[close + 1..];
        } else {
            out.insert(name, String::new());
        }
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The text of every `<pre class="cmd">` (commands hold no markup).
fn commands(dom: &str) -> Vec<String> {
    let open = "<pre class=\"cmd\">";
    dom.match_indices(open)
        .map(|(at, _)| {
            let rest = &dom[at + open.len()..];
            unescape(&rest[..rest.find("</pre>").expect("pre ends")])
        })
        .collect()
}

/// `dom` from `start` to the first `end` after it.
fn between<'a>(dom: &'a str, start: &str, end: &str) -> &'a str {
    let at = dom
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in the DOM"));
    let rest = &dom[at..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

fn class_has(attrs: &BTreeMap<String, String>, class: &str) -> bool {
    attrs
        .get("class")
        .is_some_and(|c| c.split_whitespace().any(|x| x == class))
}

// ----- the checks -----

struct Page {
    dom: String,
    screenshot: PathBuf,
}

/// Renders `report` (a file) with `preflight render --format html`, then loads it in Chromium.
fn render_and_load(browser: &Path, name: &str, report: &Path, expect_code: i32) -> Page {
    let out = bin()
        .args(["render", "--format", "html"])
        .arg(report)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(expect_code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    load(browser, name, &out.stdout)
}

fn load(browser: &Path, name: &str, html: &[u8]) -> Page {
    let keep = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html");
    std::fs::create_dir_all(&keep).unwrap();
    let work = tempfile::tempdir().unwrap();
    let page = work.path().join(format!("{name}.html"));
    std::fs::write(&page, html).unwrap();
    let dom = browse(browser, &page, &["--dump-dom"], work.path());
    let screenshot = keep.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    browse(
        browser,
        &page,
        &[
            &format!("--screenshot={}", screenshot.display()),
            "--window-size=1280,2000",
        ],
        work.path(),
    );
    let size = std::fs::metadata(&screenshot)
        .unwrap_or_else(|e| panic!("no screenshot {}: {e}", screenshot.display()))
        .len();
    assert!(size > 20_000, "{}: {size} bytes", screenshot.display());
    Page { dom, screenshot }
}

/// Everything the page must show of `report`, read from the DOM after the script ran.
fn check_page(report: &Report, page: &Page) {
    let dom = &page.dom;
    let ctx = page.screenshot.display();
    // The script ran: it marks the page and gives every command a Copy button.
    assert!(
        dom.contains("data-ready=\"1\""),
        "{ctx}: the script did not run"
    );
    let cmds = commands(dom);
    let buttons = tags(dom, "button")
        .into_iter()
        .filter(|(_, a)| class_has(a, "copy"))
        .count();
    assert_eq!(buttons, cmds.len(), "{ctx}: one Copy button per command");
    assert_eq!(
        tags(dom, "script").len(),
        1,
        "{ctx}: only the page's own script"
    );
    // The verdict.
    let verdict = tags(dom, "header");
    assert_eq!(
        verdict[0].1.get("data-status").map(String::as_str),
        Some(report.status.as_str()),
        "{ctx}"
    );
    // Every finding, by id, status and node, as many times as the report has it.
    let mut want: Vec<(String, String, String)> = report
        .findings
        .iter()
        .map(|f| {
            (
                f.id.clone(),
                f.status.to_string(),
                f.node.map(|n| n.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    let findings = between(dom, "<section id=\"findings\"", "</section>");
    let mut got: Vec<(String, String, String)> = tags(findings, "div")
        .into_iter()
        .filter(|(_, a)| class_has(a, "finding"))
        .map(|(_, a)| {
            (
                a["data-id"].clone(),
                a["data-status"].clone(),
                a["data-node"].clone(),
            )
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{ctx}: findings");
    // Every fix and launch command, verbatim.
    let rec = report.recommendation.as_ref();
    let every = report
        .findings
        .iter()
        .filter_map(|f| f.fix.as_ref())
        .flat_map(|f| f.commands.iter())
        .chain(
            rec.into_iter()
                .flat_map(|r| r.launch.iter().map(|l| &l.command)),
        )
        .chain(rec.and_then(|r| r.standalone.as_ref()));
    for c in every {
        assert!(cmds.contains(c), "{ctx}: command {c:?} is not in a pre.cmd");
    }
    // The matrix: n x n cells, each link's result in its cell.
    let n = report.nodes.len();
    if report.links.is_empty() {
        assert!(!dom.contains("id=\"matrix\""), "{ctx}");
    } else {
        let mut cells: Vec<(u32, u32, String)> = Vec::new();
        let tables: Vec<&str> = dom
            .match_indices("<table class=\"matrix\"")
            .map(|(at, _)| {
                let rest = &dom[at..];
                &rest[..rest.find("</table>").unwrap()]
            })
            .collect();
        assert!(
            tags(dom, "table")
                .iter()
                .any(|(_, a)| a.get("id").map(String::as_str) == Some("matrix"))
        );
        for t in tables {
            let tds: Vec<_> = tags(t, "td").into_iter().map(|(_, a)| a).collect();
            assert_eq!(tds.len(), n * n, "{ctx}: an n x n matrix");
            cells.extend(tds.iter().map(|a| {
                (
                    a["data-from"].parse().unwrap(),
                    a["data-to"].parse().unwrap(),
                    a["data-result"].clone(),
                )
            }));
        }
        for l in &report.links {
            let result = serde_json::to_value(l.result).unwrap();
            let result = result.as_str().unwrap();
            assert!(
                cells.contains(&(l.from, l.to, result.to_string())),
                "{ctx}: link {}->{} {result} has no such cell",
                l.from,
                l.to
            );
        }
        let bad = report
            .links
            .iter()
            .filter(|l| l.result != LinkOutcome::Ok)
            .count();
        let bad_cells = cells
            .iter()
            .filter(|(_, _, r)| !["ok", "self", "none"].contains(&r.as_str()))
            .count();
        assert_eq!(bad_cells, bad, "{ctx}: failed cells");
    }
    // The chart: one point per size of each all-reduce.
    if report.collectives.is_empty() {
        assert!(!dom.contains("busbw-chart"), "{ctx}");
    } else {
        let svg = between(dom, "<svg id=\"busbw-chart\"", "</svg>");
        for (i, c) in report.collectives.iter().enumerate() {
            let series = between(svg, &format!("data-index=\"{i}\""), "</g>");
            let points: Vec<u64> = tags(series, "circle")
                .into_iter()
                .map(|(_, a)| a["data-bytes"].parse().unwrap())
                .collect();
            let mut sizes: Vec<u64> = c.rows.iter().map(|r| r.bytes).collect();
            sizes.sort_unstable();
            assert_eq!(points, sizes, "{ctx}: one point per size");
        }
    }
    // The node table: a row per node, the hostname as text.
    let nodes = between(dom, "<table class=\"nodes\"", "</table>");
    assert_eq!(
        tags(nodes, "tr").len(),
        n + 1,
        "{ctx}: header and a row per node"
    );
}

fn saved(name: &str) -> (PathBuf, Report) {
    let path = fixture(&format!("reports/{name}.json"));
    let report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, report)
}

fn browser_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        skip_or_fail("needs chromium (apt-get install chromium) for the HTML report tests");
    }
    found
}

fn check_saved(name: &str, code: i32) {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (path, report) = saved(name);
    let page = render_and_load(&browser, name, &path, code);
    check_page(&report, &page);
}

#[test]
fn browser_three_healthy_nodes() {
    check_saved("cluster-3-healthy", 0);
}

#[test]
fn browser_three_nodes_with_a_filtered_pair_and_a_slow_node() {
    check_saved("cluster-3-filtered-slow", 1);
}

#[test]
fn browser_eight_nodes() {
    check_saved("cluster-8-nodes", 0);
}

/// `preflight check --format html` prints the page itself, and `render` takes the node's JSON.
#[test]
fn browser_node_check() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let facts = fixture("facts/docker-bond-host.json");
    let direct = bin()
        .args(["check", "--no-gpu", "--format", "html", "--facts"])
        .arg(&facts)
        .output()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let json = work.path().join("node.json");
    let saved = bin()
        .args(["check", "--no-gpu", "--format", "json", "--facts"])
        .arg(&facts)
        .output()
        .unwrap();
    assert_eq!(saved.status.code(), direct.status.code());
    std::fs::write(&json, &saved.stdout).unwrap();
    let report: Report = serde_json::from_slice(&saved.stdout).unwrap();
    let page = load(&browser, "node-check", &direct.stdout);
    check_page(&report, &page);
    let again = bin()
        .args(["render", "--format", "html"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), direct.status.code());
    assert_eq!(
        again.stdout, direct.stdout,
        "render of the saved JSON is the same page"
    );
}

/// Hostnames, summaries and commands come from peers: they render as text, never as markup.
#[test]
fn browser_hostile_strings_are_text() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let (_, mut report) = saved("cluster-3-filtered-slow");
    let hostile = "<script>document.title='pwned'</script><b id=\"inj\">x</b>";
    report.nodes[1].hostname = hostile.to_string();
    let evil_cmd = "echo '</pre><img id=\"inj2\" src=x>' && rm -rf \"$HOME\"";
    let f = report
        .findings
        .iter_mut()
        .find(|f| f.fix.is_some())
        .unwrap();
    f.summary = "<img id=\"inj3\" src=x onerror=\"document.title='pwned'\">".into();
    f.fix.as_mut().unwrap().commands.push(evil_cmd.into());
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("hostile.json");
    std::fs::write(&path, serde_json::to_vec(&report).unwrap()).unwrap();
    let page = render_and_load(&browser, "hostile", &path, 1);
    check_page(&report, &page);
    let dom = &page.dom;
    assert!(!dom.contains("<b id=\"inj\""), "the hostname became markup");
    assert!(
        tags(dom, "img").is_empty(),
        "a summary or command became markup"
    );
    assert!(
        !dom.contains("pwned</title>"),
        "a report string ran as script"
    );
    let row = between(dom, "<tr data-rank=\"1\">", "</tr>");
    assert!(
        row.contains(
            "&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;b id=\"inj\"&gt;x&lt;/b&gt;"
        ),
        "the hostname is text in the node table: {row}"
    );
    assert!(commands(dom).contains(&evil_cmd.to_string()));
}

// ----- `preflight render` without a browser -----

#[test]
fn render_exits_as_check_and_round_trips_json() {
    for (name, code) in [("cluster-3-healthy", 0), ("cluster-3-filtered-slow", 1)] {
        let (path, report) = saved(name);
        let out = bin()
            .args(["render", "--format", "json"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{name}");
        let again: Report = serde_json::from_slice(&out.stdout).unwrap();
        // A report saved before findings carried actions gets its catalog's, nothing else.
        let mut report = report;
        preflight_checks::registry::assign_remedies(&mut report.findings);
        assert_eq!(again, report, "{name}");
        let table = bin().args(["render"]).arg(&path).output().unwrap();
        assert_eq!(table.status.code(), Some(code), "{name}");
        let text = String::from_utf8(table.stdout).unwrap();
        // The node table: one row for the three alike nodes, their hosts as a hostlist.
        assert!(
            text.contains("gpu[01-03]") || text.contains("gpu[11-13]"),
            "{text}"
        );
    }
    // Warnings count with --strict, as for check.
    let (path, _) = saved("cluster-3-healthy");
    bin()
        .args(["render", "--strict", "--format", "html"])
        .arg(&path)
        .assert()
        .code(1);
}

#[test]
fn render_refuses_what_is_not_a_report() {
    let work = tempfile::tempdir().unwrap();
    let garbage = work.path().join("x.json");
    std::fs::write(&garbage, "{\"hello\": 1}").unwrap();
    let out = bin()
        .args(["render", "--format", "html"])
        .arg(&garbage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a preflight JSON report"), "{err}");
    let out = bin()
        .args(["render", "--format", "html", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let missing = work.path().join("missing.json");
    let out = bin().args(["render"]).arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// 1024 nodes (two networks, one refused pair): the saved report renders through
/// `preflight render` to a page under 10 MB whose script draws one pixel per ordered pair on a
/// canvas per network, loaded by Chromium in seconds, the refused pair listed as text.
#[test]
fn browser_1024_nodes_heatmap() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let report = crate::synthetic::cluster_1024();
    let work = tempfile::tempdir().unwrap();
    let saved = work.path().join("cluster-1024.json");
    std::fs::write(&saved, preflight::render::json::render(report)).unwrap();
    let out = bin()
        .args(["render", "--format", "html"])
        .arg(&saved)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let size = out.stdout.len();
    eprintln!("1024-node page: {size} bytes");
    assert!(size <= 10_000_000, "the 1024-node page is {size} bytes");
    let started = Instant::now();
    let page = load(&browser, "cluster-1024", &out.stdout);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "Chromium took {took:?} (a dump and a screenshot)"
    );
    let canvases = tags(&page.dom, "canvas");
    assert_eq!(canvases.len(), 2, "one map per network");
    for (_, a) in &canvases {
        assert_eq!(a.get("data-n").map(String::as_str), Some("1024"), "{a:?}");
        // The script drew every measured pair.
        assert_eq!(
            a.get("data-drawn").map(String::as_str),
            Some((1024 * 1023).to_string().as_str()),
            "{a:?}"
        );
    }
    let first = &canvases[0].1;
    assert_eq!(first.get("id").map(String::as_str), Some("matrix"));
    assert_eq!(
        first.get("data-failed").map(String::as_str),
        Some("1"),
        "{first:?}"
    );
    let worst = tags(&page.dom, "tr");
    assert!(
        worst
            .iter()
            .any(|(_, a)| a.get("data-from").map(String::as_str) == Some("3")
                && a.get("data-to").map(String::as_str) == Some("9")),
        "the refused pair 3 -> 9 is listed"
    );
    assert!(
        page.dom.contains("refused"),
        "{}",
        page.screenshot.display()
    );
}

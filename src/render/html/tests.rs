use super::*;

fn fixture(name: &str) -> Report {
    let path = format!(
        "{}/tests/fixtures/reports/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn base64_matches_the_rfc_vectors() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(plain.as_bytes()), encoded);
    }
}

#[test]
fn report_strings_are_text_not_markup() {
    let mut r = fixture("cluster-3-filtered-slow");
    r.nodes[1].hostname = "<script>alert(1)</script>\"'&".into();
    r.findings[0].summary = "</p><img src=x onerror=alert(2)>".into();
    let page = render(&r);
    assert_eq!(
        page.matches("<script").count(),
        1,
        "only the page's own script"
    );
    assert!(!page.contains("<img"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"));
}

#[test]
fn one_cell_per_pair_and_every_finding() {
    let r = fixture("cluster-8-nodes");
    let page = render(&r);
    assert_eq!(
        page.matches("<td class=\"r-").count() + page.matches("<td class=\"self\"").count(),
        64
    );
    assert_eq!(
        page.matches("<div class=\"finding ").count(),
        r.findings.len()
    );
    assert_eq!(
        page.matches("<circle class=\"pt").count(),
        r.collectives[0].rows.len()
    );
}

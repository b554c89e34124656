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

#[test]
fn the_faster_set_has_its_section_with_the_prediction_and_the_launch() {
    use preflight_checks::model::{FasterSetAdvice, HealthyConstraints, HealthyLaunch};
    let mut r = fixture("cluster-3-filtered-slow");
    assert!(!render(&r).contains("id=\"faster-set\""));
    let launch = |node: u32, rank: u32| HealthyLaunch {
        node,
        hostname: format!("node{node}"),
        node_rank: rank,
        command: format!("torchrun --nnodes=2 --node-rank={rank} train.py"),
    };
    let faster = FasterSetAdvice {
        summary: "faster without <b>x</b>: ~9.0x".into(),
        slow: vec![2],
        slow_hosts: "<b>x</b>".into(),
        nodes_with: 3,
        nodes_without: 2,
        ring_gbit_s_with: 0.1,
        ring_gbit_s_without: 0.9,
        busbw_gb_s_with: 0.0125,
        busbw_gb_s_without: 0.1125,
        measured: false,
        speedup: 9.0,
        break_even: 1.5,
        set: preflight_checks::model::HealthySetAdvice {
            hosts: "node[0-1]".into(),
            launch: vec![launch(0, 0), launch(1, 1)],
            constraints: HealthyConstraints {
                met: true,
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    r.recommendation.as_mut().unwrap().faster_set = Some(faster);
    let page = render(&r);
    assert!(page.contains("<section id=\"faster-set\" data-slow=\"&lt;b&gt;x&lt;/b&gt;\">"));
    assert!(!page.contains("<b>x</b>"));
    assert!(page.contains("<a href=\"#faster-set\">"));
    assert!(page.contains("<tr data-set=\"without\"><td>without</td><td>2</td><td>0.900</td>"));
    assert_eq!(page.matches("<div class=\"launch\" data-node=").count(), 2);
    assert!(page.contains("torchrun --nnodes=2 --node-rank=1 train.py"));
}

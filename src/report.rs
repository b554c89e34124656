//! The one place a [`Report`] is put together: schema, tool, mode, nodes, findings (each with
//! its action: `registry::assign_remedies`), and the status recomputed over every finding
//! whenever one is added.

use preflight_checks::model::{
    self, CollectiveResult, Finding, LinkResult, Mode, NodeEntry, NodeFacts, Recommendation,
    Report, SCHEMA, Tool,
};

/// Bytes of a value's JSON, counted without building it.
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, value);
    c.0
}

/// This tool's name and version, as written in every report.
pub fn tool() -> Tool {
    Tool {
        name: "preflight".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Builds a report; [`ReportBuilder::build`] sets the status from the findings.
#[derive(Debug)]
pub struct ReportBuilder {
    report: Report,
}

impl ReportBuilder {
    pub fn new(mode: Mode) -> ReportBuilder {
        ReportBuilder {
            report: Report {
                schema: SCHEMA.to_string(),
                tool: tool(),
                mode,
                status: model::Status::Pass,
                nodes: Vec::new(),
                findings: Vec::new(),
                links: Vec::new(),
                collectives: Vec::new(),
                recommendation: None,
                placement: None,
                trimmed: None,
                measurement: None,
                link_matrix: None,
                run_id: None,
            },
        }
    }

    /// A report about one node: its facts as `rank`.
    pub fn single(mode: Mode, rank: u32, facts: NodeFacts) -> ReportBuilder {
        ReportBuilder::new(mode).node(rank, facts)
    }

    pub fn node(mut self, rank: u32, facts: NodeFacts) -> ReportBuilder {
        self.report.nodes.push(NodeEntry {
            rank,
            hostname: facts.hostname.clone(),
            facts,
        });
        self
    }

    pub fn findings(mut self, findings: impl IntoIterator<Item = Finding>) -> ReportBuilder {
        self.report.findings.extend(findings);
        self
    }

    pub fn links(mut self, links: Vec<LinkResult>) -> ReportBuilder {
        self.report.links = links;
        self
    }

    pub fn collectives(mut self, collectives: Vec<CollectiveResult>) -> ReportBuilder {
        self.report.collectives = collectives;
        self
    }

    pub fn recommendation(mut self, rec: Option<Recommendation>) -> ReportBuilder {
        self.report.recommendation = rec;
        self
    }

    pub fn placement(mut self, placement: Option<model::PlacementInfo>) -> ReportBuilder {
        self.report.placement = placement;
        self
    }

    /// [`ReportBuilder::build`], then the links compacted above 64 nodes
    /// ([`crate::report_compact::compact`]): how the cluster's report is built.
    pub fn build_compact(self) -> Report {
        crate::report_compact::compacted(self.build())
    }

    pub fn build(mut self) -> Report {
        preflight_checks::registry::assign_remedies(&mut self.report.findings);
        self.report.status = model::overall_status(&self.report.findings);
        self.report
    }
}

/// Adds findings to a finished report: each gets its action, and the status is recomputed
/// (`registry::add_findings`, the one way to add to a built report).
pub fn add_findings(report: &mut Report, findings: impl IntoIterator<Item = Finding>) {
    preflight_checks::registry::add_findings(report, findings);
}

#[cfg(test)]
mod tests {
    use super::*;
    use preflight_checks::model::Status;

    #[test]
    fn status_is_the_worst_finding_and_follows_additions() {
        let mut r = ReportBuilder::single(Mode::Node, 3, NodeFacts::default())
            .findings([Finding::new(
                preflight_checks::core::FindingId::new("a.b"),
                Status::Warn,
                "x",
                "y",
            )])
            .build();
        assert_eq!(
            (r.status, r.nodes[0].rank, r.schema.as_str()),
            (Status::Warn, 3, SCHEMA)
        );
        add_findings(
            &mut r,
            [Finding::new(
                preflight_checks::core::FindingId::new("c.d"),
                Status::Fail,
                "x",
                "y",
            )],
        );
        assert_eq!(r.status, Status::Fail);
        assert_eq!(
            ReportBuilder::new(Mode::Cluster).build().status,
            Status::Pass
        );
    }
}

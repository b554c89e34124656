//! Runs a parsed command and returns the exit code; all output goes through `render` and `output`.

use crate::cli::{CheckArgs, Cli, Command, FactsArgs, Format, exit};
use crate::node::{NodeRun, judge, load_facts, probe_facts};
use crate::output;
use crate::render::{self, Style};
use preflight_checks::model::{Report, Status};
use preflight_checks::root::Root;

/// Runs the command; `Err` means the tool could not run (exit 2).
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Check(args) => check(args),
        Command::Facts(args) => facts(args),
        Command::Cluster(args) => crate::cluster::run(args),
        Command::NcclWorker(args) => Ok(crate::measure::nccl::worker::main(&args)),
        Command::Launch(args) => crate::launch_recipe::run(args),
        Command::Torchrun(args) => crate::torchrun::run(args),
        Command::Explain(args) => crate::explain::run(&args),
        Command::Schema => {
            output::stdout(&preflight_checks::schema::report_schema_text())?;
            Ok(exit::OK)
        }
    }
}

fn check(args: CheckArgs) -> anyhow::Result<u8> {
    let facts = match &args.facts {
        Some(path) => load_facts(path)?,
        None => probe_facts(
            &Root::at(&args.probe.root),
            args.master_port,
            args.probe.no_gpu,
        ),
    };
    let run = NodeRun {
        master_port: args.master_port,
        nproc_per_node: args.job.nproc_per_node,
        expect_gpus: args.job.expect_gpus,
        script: args.script.clone(),
    };
    let report = judge(facts, &run);
    emit(&report, args.job.format, args.job.output.as_deref())?;
    Ok(exit_code(&report, args.job.strict))
}

fn facts(args: FactsArgs) -> anyhow::Result<u8> {
    let facts = probe_facts(
        &Root::at(&args.probe.root),
        args.master_port,
        args.probe.no_gpu,
    );
    let mut text = serde_json::to_string_pretty(&facts)?;
    text.push('\n');
    match &args.output {
        Some(path) => output::file(path, &text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => output::stdout(&text)?,
    }
    Ok(exit::OK)
}

/// Prints the report in `format` and writes the JSON to `file` when asked.
pub fn emit(report: &Report, format: Format, file: Option<&std::path::Path>) -> anyhow::Result<()> {
    emit_cluster(report, format, file, 0)
}

/// Cluster output: JSON is the whole report on every node; the table is whole on rank 0 and
/// this node's own findings and command elsewhere.
pub fn emit_cluster(
    report: &Report,
    format: Format,
    file: Option<&std::path::Path>,
    rank: u32,
) -> anyhow::Result<()> {
    if let Some(path) = file {
        output::file(path, &render::json::render(report))
            .map_err(|e| anyhow::anyhow!("cannot write report to {}: {e}", path.display()))?;
    }
    let text = match format {
        Format::Json => render::json::render(report),
        Format::Junit => render::junit::render(report),
        Format::Table => render::table::render_for_rank(report, Style::detect(), rank),
    };
    output::stdout(&text)?;
    Ok(())
}

/// 0 when nothing failed (and, with `strict`, nothing warned); 1 otherwise.
pub fn exit_code(report: &Report, strict: bool) -> u8 {
    let bad = report.findings.iter().any(|f| {
        matches!(f.status, Status::Fail | Status::Error) || (strict && f.status == Status::Warn)
    });
    if bad { exit::FINDINGS } else { exit::OK }
}

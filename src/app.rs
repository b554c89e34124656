//! Runs a parsed command: validates it, runs it, and renders its outcome. The only caller of
//! `render` and `output`; the event stream of the run is drawn here too.

use crate::cli::{Cli, Format, exit};
use crate::commands::{self, Outcome, Shown};
use crate::config::{self, Job};
use crate::output;
use crate::render::{self, Style};
use crate::transport::events::Events;

/// Runs the command; `Err` means the tool could not run (exit 2).
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    let env = preflight_checks::probe::env::all();
    let job = config::job(cli, &env)?;
    let events = events_for(&job);
    let outcome = commands::run(job, &events)?;
    show(outcome, &events)
}

/// Progress drawn as a bar only for the table on a terminal; log lines on stderr always.
fn events_for(job: &Job) -> Events {
    let bar = match job {
        Job::Cluster(_, view) => view.format == Format::Table,
        Job::Torchrun(j) => j.view.format == Format::Table,
        _ => false,
    };
    render::progress::stderr_events(bar)
}

fn show(outcome: Outcome, events: &Events) -> anyhow::Result<u8> {
    let code = outcome.exit_code();
    match outcome {
        Outcome::Report(shown) => show_report(&shown)?,
        Outcome::Facts { facts, output } => {
            let mut text = serde_json::to_string_pretty(&facts)?;
            text.push('\n');
            match &output {
                Some(path) => output::file(path, &text)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
                None => output::stdout(&text)?,
            }
        }
        Outcome::Explain(entry) => output::stdout(&render::explain::render(entry))?,
        Outcome::ExplainList => output::stdout(&render::explain::render_list())?,
        Outcome::Schema => output::stdout(&preflight_checks::schema::report_schema_text())?,
        Outcome::Launch {
            plan,
            format,
            source,
        } => {
            output::stdout(&render::launch::render(&plan, format))?;
            if code != exit::OK {
                events.log(format!(
                    "{} has failing findings (status {}): the launch above is what preflight recommends, but fix those first",
                    source.display(),
                    plan.status
                ));
            }
        }
        Outcome::NcclWorker(spec) => {
            let stdin = std::io::stdin();
            let mut stdout = std::io::stdout();
            return Ok(crate::measure::nccl::worker::serve(
                &spec,
                &mut stdin.lock(),
                &mut stdout,
            ));
        }
        Outcome::Exit(_) => {}
    }
    Ok(code)
}

/// JSON is the whole report on every node; the table is whole on rank 0 and this node's own
/// findings and command elsewhere. `-o FILE` always gets the JSON.
fn show_report(s: &Shown) -> anyhow::Result<()> {
    if let Some(path) = &s.view.output {
        output::file(path, &render::json::render(&s.report))
            .map_err(|e| anyhow::anyhow!("cannot write report to {}: {e}", path.display()))?;
    }
    let text = match s.view.format {
        Format::Json => render::json::render(&s.report),
        Format::Junit => render::junit::render(&s.report),
        Format::Table => {
            let mut t = render::table::render_for_rank(&s.report, Style::detect(), s.rank);
            if let Some(c) = &s.your_command {
                t.push_str(&render::launch::your_command(
                    c.rank,
                    &c.command,
                    c.corrections,
                ));
            }
            t
        }
    };
    output::stdout(&text)?;
    Ok(())
}

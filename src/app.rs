//! Runs a parsed command: validates it, runs it, and renders its outcome. The only caller of
//! `render` and `output`; the event stream of the run is drawn here too.

use crate::cleanup;
use crate::cli::{Cli, Format, exit};
use crate::commands::{self, Outcome, Shown};
use crate::config::{self, Job};
use crate::output;
use crate::render::{self, Style};
use crate::transport::events::Events;

/// Runs the command; `Err` means the tool could not run (exit 2).
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    let started = Started {
        at: std::time::SystemTime::now(),
        clock: std::time::Instant::now(),
    };
    let env = preflight_checks::probe::env::all();
    let job = config::job(cli, &env)?;
    let events = events_for(&job);
    // The NCCL worker keeps the default actions: its parent kills its whole group.
    if !matches!(job, Job::NcclWorker(_) | Job::GemmWorker(_)) {
        watch_signals(&events)?;
    }
    let result = commands::run(job, &events);
    if cleanup::global().is_draining() {
        // Interrupted: the signal thread is cleaning up and ends the process; show nothing
        // (the run was cut short, and the report could blame the killed worker).
        loop {
            std::thread::park();
        }
    }
    show(result?, &events, started)
}

/// When the run began, for the metrics' timestamp and duration.
#[derive(Clone, Copy)]
struct Started {
    at: std::time::SystemTime,
    clock: std::time::Instant,
}

/// SIGINT and SIGTERM: signal-hook's handler only records the signal; a dedicated thread
/// reads it, undoes what [`cleanup::global`] holds (child process groups, temp files) on a
/// thread of its own, and exits 130 (SIGINT) or 143 (SIGTERM). A second signal while that
/// runs exits at once with the code of the first.
fn watch_signals(events: &Events) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| anyhow::anyhow!("cannot watch SIGINT and SIGTERM: {e}"))?;
    let events = events.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut first: Option<u8> = None;
            for sig in signals.forever() {
                if let Some(code) = first {
                    // At once: SIGKILL to the child groups (no waiting), then _exit.
                    cleanup::global().kill_now();
                    signal_hook::low_level::exit(i32::from(code));
                }
                let (name, code) = if sig == SIGINT {
                    ("SIGINT", exit::INTERRUPTED)
                } else {
                    ("SIGTERM", exit::TERMINATED)
                };
                first = Some(code);
                let events = events.clone();
                let _ = std::thread::Builder::new()
                    .name("cleanup".into())
                    .spawn(move || {
                        events.log(format!(
                            "{name}: stopping; cleaning up (again to exit at once)"
                        ));
                        let done = cleanup::global().drain(cleanup::TERM_GRACE);
                        events.log(describe_cleanup(name, &done));
                        std::process::exit(i32::from(code));
                    });
            }
        })?;
    Ok(())
}

fn describe_cleanup(name: &str, d: &cleanup::Drained) -> String {
    let mut s = format!(
        "{name}: stopped {} child process group(s){}, removed {} temp path(s)",
        d.groups,
        if d.killed > 0 {
            format!(" ({} needed SIGKILL)", d.killed)
        } else {
            String::new()
        },
        d.removed.len()
    );
    if !d.stubborn.is_empty() {
        s.push_str(&format!(
            "; process group(s) {:?} still have live members",
            d.stubborn
        ));
    }
    for (path, e) in &d.failed {
        s.push_str(&format!("; cannot remove {}: {e}", path.display()));
    }
    s
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

fn show(outcome: Outcome, events: &Events, started: Started) -> anyhow::Result<u8> {
    let code = outcome.exit_code();
    match outcome {
        Outcome::Report(shown) => {
            keep(&shown, started)?;
            show_report(&shown)?
        }
        Outcome::Hook(h) => {
            keep(&h.shown, started)?;
            let text = crate::commands::hooks::stamped(&h.result.lines, &h.shown.report);
            output::stdout(&text)?
        }
        Outcome::Facts { facts, output } => {
            let mut text = serde_json::to_string_pretty(&crate::commands::facts_document(&facts))?;
            text.push('\n');
            match &output {
                Some(path) => output::file(path, &text)
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
                None => output::stdout(&text)?,
            }
        }
        Outcome::Explain(entry, here) => {
            output::stdout(&render::explain::render_here(entry, here.as_ref()))?
        }
        Outcome::ExplainSignature(s) => output::stdout(&render::explain_signature::render(s))?,
        Outcome::ExplainJobCause(j) => output::stdout(&render::explain_signature::render_job(j))?,
        Outcome::ExplainList => output::stdout(&format!(
            "{}{}",
            render::explain::render_list(),
            render::explain_signature::render_list(
                &preflight_checks::explain_log::SIGNATURES,
                preflight_checks::explain_log::signatures_sources::JOB
            )
        ))?,
        Outcome::ExplainCoverage(json) => output::stdout(&if json {
            render::explain_log::coverage_json()
        } else {
            render::explain_log::coverage(Style::detect(false))
        })?,
        Outcome::ExplainLog(e, json) => output::stdout(&if json {
            render::explain_log::json(&e)
        } else {
            render::explain_log::render(&e, Style::detect(false))
        })?,
        Outcome::Schema => output::stdout(&preflight_checks::schema::report_schema_text())?,
        Outcome::History(view, json) => output::stdout(&if json {
            render::history::json(&view)
        } else {
            render::history::table(&view, Style::detect(false))
        })?,
        Outcome::Text(text) => output::stdout(&text)?,
        Outcome::Simulated {
            report,
            heading,
            output,
        } => {
            if let Some(path) = &output {
                output::file(path, &render::json::render(&report))
                    .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            }
            output::stdout(&render::simulation::render(&report, &heading))?;
        }
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
        Outcome::GemmWorker(spec) => {
            let mut stdout = std::io::stdout();
            return Ok(crate::measure::gemm::worker::serve(&spec, &mut stdout));
        }
        Outcome::Exit(_) => {}
    }
    Ok(code)
}

/// The files a report is kept in: `-o FILE` (JSON), `--prom-file` (metrics, atomically) and
/// `--nodes-failed`/`--nodes-passed` (hostlists, atomically: every node of a job may write the
/// same shared file).
fn keep(s: &Shown, started: Started) -> anyhow::Result<()> {
    if let Some(path) = &s.view.output {
        output::report_file(path, &render::json::render(&s.report))
            .map_err(|e| anyhow::anyhow!("cannot write report to {}: {e}", path.display()))?;
    }
    if let Some(path) = &s.view.prom_file {
        let time = render::prom::RunTime {
            started_unix_s: started
                .at
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            duration_s: started.clock.elapsed().as_secs_f64(),
        };
        output::atomic_file(path, &render::prom::render(&s.report, time)).map_err(|e| {
            anyhow::anyhow!(
                "cannot write metrics to {}: {e} (give a file in node_exporter's --collector.textfile.directory)",
                path.display()
            )
        })?;
    }
    let (failed, passed) = render::nodesets::split(&s.report);
    for (path, names, what) in [
        (&s.view.nodes_failed, &failed, "failed"),
        (&s.view.nodes_passed, &passed, "passed"),
    ] {
        if let Some(path) = path {
            output::atomic_file(path, &render::nodesets::file_text(names)).map_err(|e| {
                anyhow::anyhow!("cannot write the {what} nodes to {}: {e}", path.display())
            })?;
        }
    }
    Ok(())
}

/// JSON is the whole report on every node; the table is whole on rank 0 (on every rank with
/// `--full-report`) and a few lines elsewhere: this node's verdict and problems, the cluster's
/// verdict, its own command and where the whole report is. `-o FILE` always gets the JSON.
fn show_report(s: &Shown) -> anyhow::Result<()> {
    let text = match s.view.format {
        Format::Json => render::json::render(&s.report),
        Format::TaskProlog => render::taskprolog::render(&s.report, s.rank),
        Format::Npd => render::npd::render(&s.report, s.view.strict),
        Format::Junit => render::junit::render(&s.report),
        Format::Ctrf => render::ctrf::render(&s.report),
        Format::Html => render::html::render(&s.report),
        // The one call of the terminal renderer (`preflight render --format table` too).
        Format::Table => {
            // One command per node: with the user's own command, the generic launch lines go.
            let mut shown = std::borrow::Cow::Borrowed(&s.report);
            if s.your_command.is_some() {
                if let Some(rec) = shown.to_mut().recommendation.as_mut() {
                    rec.launch.clear();
                    rec.standalone = None;
                }
            }
            let style = Style::detect(s.view.verbose);
            let mut t = render::doctor::render_view(&shown, style, s.rank, s.view.full_report);
            if let Some(c) = &s.your_command {
                t.push_str(&render::launch::your_command(
                    c.rank,
                    &c.command,
                    c.corrections,
                    &c.env_replaced,
                ));
            }
            t
        }
    };
    output::stdout(&text)?;
    Ok(())
}

//! Entry point: parse, run, exit code. Errors that stop the tool exit with 2.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = preflight::argv::parse();
    match preflight::app::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Errors can quote a peer or a file (serde's text): escaped and bounded.
            let msg = format!("{e:#}");
            eprintln!(
                "preflight: error: {}",
                preflight::render::sanitize::line(&msg)
            );
            ExitCode::from(preflight::cli::exit::CANNOT_RUN)
        }
    }
}

//! Entry point: parse, run, exit code. Errors that stop the tool exit with 2.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = preflight::cli::parse();
    match preflight::app::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("preflight: error: {e:#}");
            ExitCode::from(preflight::cli::exit::CANNOT_RUN)
        }
    }
}

//! A progress bar on stderr while measuring: only on a terminal, never in JSON mode.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;

/// The bar in use, so log lines can be printed above it instead of through it.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Steps of the cluster measurements (phases, throughput rounds, all-reduce sizes).
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar of `total` steps when `wanted` and stderr is a terminal; a no-op otherwise.
    pub fn new(wanted: bool, total: u64) -> Progress {
        if !wanted || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {wide_msg}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        if let Ok(mut a) = ACTIVE.lock() {
            *a = Some(bar.clone());
        }
        Progress { bar: Some(bar) }
    }

    pub fn is_drawn(&self) -> bool {
        self.bar.is_some()
    }

    /// What is being measured now.
    pub fn phase(&self, msg: impl Into<String>) {
        if let Some(b) = &self.bar {
            b.set_message(msg.into());
        }
    }

    pub fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
            if let Ok(mut a) = ACTIVE.lock() {
                *a = None;
            }
        }
    }
}

/// Writes a line to stderr above the bar when one is drawn.
pub fn eprint_line(line: &str) {
    use std::io::Write;
    let bar = ACTIVE.lock().ok().and_then(|a| a.clone());
    match bar {
        Some(b) => b.suspend(|| {
            let _ = writeln!(std::io::stderr(), "{line}");
        }),
        None => {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_wanted_draws_nothing() {
        let p = Progress::new(false, 10);
        assert!(!p.is_drawn());
        p.inc();
        p.phase("x");
    }

    #[test]
    fn never_drawn_when_stderr_is_not_a_terminal() {
        // cargo test captures stderr through a pipe, so a wanted bar still stays hidden.
        if !std::io::stderr().is_terminal() {
            assert!(!Progress::new(true, 10).is_drawn());
        }
    }
}

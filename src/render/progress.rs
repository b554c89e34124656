//! The event stream on stderr: log lines prefixed `preflight:`, and a progress bar while
//! measuring, drawn only when wanted (the table format) and stderr is a terminal.

use super::sanitize;
use crate::transport::events::{Event, Events};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

/// Events rendered on stderr; `bar` asks for a progress bar (shown only on a terminal).
pub fn stderr_events(bar: bool) -> Events {
    let drawer = StderrDrawer {
        bar_wanted: bar && std::io::stderr().is_terminal(),
        bar: Mutex::new(None),
    };
    Events::to(move |e| drawer.draw(e))
}

struct StderrDrawer {
    bar_wanted: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl StderrDrawer {
    fn draw(&self, event: &Event) {
        let Ok(mut slot) = self.bar.lock() else {
            return;
        };
        match event {
            Event::Log(msg) => {
                let line = log_text(msg);
                match slot.as_ref() {
                    Some(b) => b.suspend(|| eprint_line(&line)),
                    None => eprint_line(&line),
                }
            }
            Event::Start { total } if self.bar_wanted => {
                if let Some(old) = slot.take() {
                    old.finish_and_clear();
                }
                *slot = Some(new_bar(*total));
            }
            Event::Phase(what) => {
                if let Some(b) = slot.as_ref() {
                    b.set_message(sanitize::line(what).into_owned());
                }
            }
            Event::Step => {
                if let Some(b) = slot.as_ref() {
                    b.inc(1);
                }
            }
            Event::Finish => {
                if let Some(b) = slot.take() {
                    b.finish_and_clear();
                }
            }
            Event::Start { .. } => {}
        }
    }
}

fn new_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {wide_msg}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// One log line as shown: messages quote peers (their frames, serde's errors about them) and
/// the OS, so they are escaped and bounded (`render::sanitize`).
fn log_text(msg: &str) -> String {
    format!("preflight: {}", sanitize::line(msg))
}

/// A line on stderr; a closed stderr is ignored.
fn eprint_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_escape_what_a_peer_sent() {
        let msg = "coordinator: dropped connection from 10.0.0.9:4242: malformed message: \
                   unknown variant `\u{1b}]0;pwned\u{7}\u{202e}x`";
        let line = log_text(msg);
        assert!(!line.chars().any(crate::shell::is_control), "{line:?}");
        assert!(
            line.ends_with(r"unknown variant `\e]0;pwned\x07\u202ex`"),
            "{line}"
        );
        assert!(log_text(&"x".repeat(1 << 20)).len() < 17 * 1024);
    }

    #[test]
    fn no_bar_when_stderr_is_not_a_terminal() {
        // cargo test captures stderr through a pipe, so a wanted bar still stays hidden.
        if !std::io::stderr().is_terminal() {
            let d = StderrDrawer {
                bar_wanted: false,
                bar: Mutex::new(None),
            };
            d.draw(&Event::Start { total: 3 });
            d.draw(&Event::Step);
            assert!(d.bar.lock().unwrap().is_none());
        }
    }

    #[test]
    fn a_wanted_bar_lives_from_start_to_finish() {
        let d = StderrDrawer {
            bar_wanted: true,
            bar: Mutex::new(None),
        };
        d.draw(&Event::Start { total: 3 });
        d.draw(&Event::Phase("throughput".into()));
        d.draw(&Event::Step);
        assert_eq!(
            d.bar.lock().unwrap().as_ref().map(|b| b.position()),
            Some(1)
        );
        d.draw(&Event::Finish);
        assert!(d.bar.lock().unwrap().is_none());
    }
}

//! Renderers: Report -> text. No logic beyond presentation; nothing else prints.

pub mod ctrf;
pub mod doctor;
pub mod drain;
pub mod explain;
pub mod explain_hang;
pub mod explain_log;
pub mod explain_signature;
pub mod history;
pub mod html;
pub mod json;
pub mod junit;
pub mod launch;
pub mod nodesets;
pub mod npd;
pub mod progress;
pub mod prom;
pub mod sanitize;
pub mod simulation;
pub mod taskprolog;

pub use doctor::collective;

/// How the terminal report may decorate its output.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// ANSI colours (a terminal, and NO_COLOR unset).
    pub color: bool,
    /// Width in columns that prose is wrapped to and tables fit in.
    pub width: u16,
    /// Marks and borders in Unicode (`✓`, `│`); ASCII (`[ok]`, `|`) when the locale is not UTF-8.
    pub unicode: bool,
    /// `-v`: passed and skipped findings too, the reasons of the advice, interfaces per node.
    pub verbose: bool,
}

impl Style {
    /// Colour only on a terminal and when NO_COLOR is unset (https://no-color.org); width of
    /// the terminal, else `COLUMNS`, else 80; Unicode when the locale says UTF-8.
    pub fn detect(verbose: bool) -> Self {
        use std::io::IsTerminal;
        let tty = std::io::stdout().is_terminal();
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let no_color = var("NO_COLOR").is_some();
        let columns = var("COLUMNS").and_then(|c| c.trim().parse::<u16>().ok());
        let width = if tty { terminal_width() } else { None }
            .or(columns)
            .unwrap_or(DEFAULT_WIDTH)
            .max(MIN_WIDTH);
        Style {
            color: tty && !no_color,
            width,
            unicode: utf8_locale(var("LC_ALL"), var("LC_CTYPE"), var("LANG")),
            verbose,
        }
    }

    /// Plain, Unicode, 80 columns, not verbose: for tests and files.
    pub fn plain() -> Self {
        Style {
            color: false,
            width: DEFAULT_WIDTH,
            unicode: true,
            verbose: false,
        }
    }
}

/// Width when neither the terminal nor `COLUMNS` says.
pub const DEFAULT_WIDTH: u16 = 80;
/// Narrowest width prose is wrapped to.
const MIN_WIDTH: u16 = 40;

/// The locale's character set is UTF-8: the first of LC_ALL, LC_CTYPE, LANG that is set says.
fn utf8_locale(lc_all: Option<String>, lc_ctype: Option<String>, lang: Option<String>) -> bool {
    lc_all.or(lc_ctype).or(lang).is_some_and(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("utf-8") || l.contains("utf8")
    })
}

fn terminal_width() -> Option<u16> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes a winsize into the struct we own; the fd is stdout.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(ws.ws_col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locale_decides_unicode() {
        let s = |v: &str| Some(v.to_string());
        assert!(utf8_locale(None, None, s("C.UTF-8")));
        assert!(utf8_locale(None, None, s("en_US.utf8")));
        assert!(!utf8_locale(s("C"), None, s("en_US.UTF-8")));
        assert!(!utf8_locale(None, None, None));
        assert!(utf8_locale(None, s("de_DE.UTF-8"), s("C")));
    }
}

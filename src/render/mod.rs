//! Renderers: Report -> text. No logic beyond presentation; nothing else prints.

pub mod cluster;
pub mod collective;
pub mod explain;
pub mod html;
pub mod json;
pub mod junit;
pub mod launch;
pub mod progress;
pub mod sanitize;
pub mod table;

/// How the table renderer may decorate its output.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub color: bool,
    /// Table width in columns.
    pub width: u16,
}

impl Style {
    /// Colour only on a terminal and when NO_COLOR is unset; width from the terminal, else 120.
    pub fn detect() -> Self {
        use std::io::IsTerminal;
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let width = if tty {
            terminal_width().unwrap_or(120)
        } else {
            120
        };
        Style {
            color: tty && !no_color,
            width,
        }
    }

    /// Plain and fixed-width: for tests and files.
    pub fn plain() -> Self {
        Style {
            color: false,
            width: 120,
        }
    }
}

fn terminal_width() -> Option<u16> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes a winsize into the struct we own; the fd is stdout.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col >= 60).then_some(ws.ws_col)
}

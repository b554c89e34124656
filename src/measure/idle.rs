//! The idle test on one authenticated connection: ask the listener to echo, see one echo, stay silent, then send again and wait a bounded time for the echo; and the listener's side, which never closes on its own read timeout before the announced silence is over.

use crate::transport::wire::{Msg, write_msg};
use preflight_checks::model::IdleOutcome;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The longest silence a listener accepts to wait through (`--idle-test` is capped there too).
pub const MAX_IDLE: Duration = Duration::from_secs(3600);
/// What a listener waits beyond the announced silence before it gives the connection up: the
/// phases between the hold and the reuse, and the reuse's own answer wait.
const LISTENER_MARGIN: Duration = Duration::from_secs(120);
/// Echoes a listener gives on one connection at most (the test needs two).
const MAX_ECHOES: u32 = 8;

/// Starts the idle test on an authenticated connection: asks for echoes and sees one within
/// `answer`. Returns when the echo came: the silence starts then.
pub fn start(stream: &mut TcpStream, idle: Duration, answer: Duration) -> io::Result<Instant> {
    write_msg(
        stream,
        &Msg::IdleReq {
            idle_ms: idle.as_millis() as u64,
        },
    )
    .map_err(io::Error::other)?;
    echo(stream, 1, answer).map_err(|(_, e)| e)?;
    Ok(Instant::now())
}

/// What using a held connection again gave: its echo, or how it failed and the error.
pub type Reused = Result<(), (IdleOutcome, io::Error)>;

/// Uses a held connection again: one byte out, its echo back within `answer`.
pub fn reuse(stream: &mut TcpStream, answer: Duration) -> Reused {
    echo(stream, 2, answer)
}

fn echo(
    stream: &mut TcpStream,
    byte: u8,
    answer: Duration,
) -> Result<(), (IdleOutcome, io::Error)> {
    let classify = |e: io::Error| (outcome_of(&e), e);
    stream.set_write_timeout(Some(answer)).map_err(classify)?;
    stream.set_read_timeout(Some(answer)).map_err(classify)?;
    stream.write_all(&[byte]).map_err(classify)?;
    let mut b = [0u8; 1];
    match stream.read(&mut b) {
        Ok(0) => Err((
            IdleOutcome::Closed,
            io::Error::new(io::ErrorKind::UnexpectedEof, "closed by the other side"),
        )),
        Ok(_) if b[0] == byte => Ok(()),
        Ok(_) => Err((
            IdleOutcome::Closed,
            io::Error::other(format!("answered {} instead of {byte}", b[0])),
        )),
        Err(e) => Err(classify(e)),
    }
}

/// What an error on a reused connection means.
pub fn outcome_of(e: &io::Error) -> IdleOutcome {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionAborted => IdleOutcome::Reset,
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => IdleOutcome::NoAnswer,
        io::ErrorKind::UnexpectedEof => IdleOutcome::Closed,
        _ => match e.raw_os_error() {
            Some(libc::ETIMEDOUT) | Some(libc::EHOSTUNREACH) => IdleOutcome::NoAnswer,
            _ => IdleOutcome::Reset,
        },
    }
}

/// The listener's side: echoes every byte until the prober closes, waiting up to the announced
/// silence plus [`LISTENER_MARGIN`] for each (never its own short read timeout: closing first
/// would be the very failure the test looks for).
pub fn serve(stream: &mut TcpStream, idle_ms: u64) -> Result<(), String> {
    let wait = Duration::from_millis(idle_ms).min(MAX_IDLE) + LISTENER_MARGIN;
    stream.set_read_timeout(Some(wait)).ok();
    stream.set_write_timeout(Some(Duration::from_secs(10))).ok();
    let mut b = [0u8; 1];
    for _ in 0..MAX_ECHOES {
        match stream.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(_) => stream.write_all(&b).map_err(|e| e.to_string())?,
            Err(e) => return Err(format!("idle test: {e}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    #[test]
    fn a_held_connection_answers_after_its_silence() {
        let (mut c, mut s) = pair();
        let server = std::thread::spawn(move || {
            let Msg::IdleReq { idle_ms } = crate::transport::wire::read_msg(&mut s).unwrap() else {
                panic!("not an idle request")
            };
            serve(&mut s, idle_ms)
        });
        let quiet_from = start(&mut c, Duration::from_millis(300), Duration::from_secs(2)).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        reuse(&mut c, Duration::from_secs(2)).unwrap();
        assert!(quiet_from.elapsed() >= Duration::from_millis(300));
        drop(c);
        assert_eq!(server.join().unwrap(), Ok(()));
    }

    #[test]
    fn a_silent_peer_is_no_answer_and_a_closed_one_is_closed() {
        let (mut c, s) = pair();
        let t = Instant::now();
        let (outcome, _) = reuse(&mut c, Duration::from_millis(200)).unwrap_err();
        assert_eq!(outcome, IdleOutcome::NoAnswer);
        assert!(t.elapsed() < Duration::from_secs(2));
        drop(s);
        let (outcome, _) = reuse(&mut c, Duration::from_millis(500)).unwrap_err();
        assert!(
            matches!(outcome, IdleOutcome::Closed | IdleOutcome::Reset),
            "{outcome:?}"
        );
    }
}

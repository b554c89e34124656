//! One stream of progress and log events from the runtime to whatever renders them.
//!
//! The runtime and the measurements never print: they send [`Event`]s through an [`Events`]
//! handle. `app` decides what listens (a progress bar and stderr lines on a terminal, plain
//! stderr lines otherwise, nothing in tests), so every output format sees the same stream.

use std::sync::Arc;

/// Something a person watching the run may want to know.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A line for the log (stderr): what happened and where.
    Log(String),
    /// The measurements start: `total` steps follow.
    Start { total: u64 },
    /// What is being measured now.
    Phase(String),
    /// One step done.
    Step,
    /// The measurements are over (also sent when they end early).
    Finish,
}

type Sink = dyn Fn(&Event) + Send + Sync;

/// A cheap, cloneable handle to the listener; [`Events::none`] drops everything.
#[derive(Clone, Default)]
pub struct Events(Option<Arc<Sink>>);

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Events(listening)"
        } else {
            "Events(none)"
        })
    }
}

impl Events {
    /// Events sent to `sink`, from any thread.
    pub fn to(sink: impl Fn(&Event) + Send + Sync + 'static) -> Events {
        Events(Some(Arc::new(sink)))
    }

    /// Nobody listens.
    pub fn none() -> Events {
        Events(None)
    }

    pub fn send(&self, event: Event) {
        if let Some(sink) = &self.0 {
            sink(&event);
        }
    }

    /// A log line (the renderer adds the `preflight:` prefix).
    pub fn log(&self, msg: impl Into<String>) {
        self.send(Event::Log(msg.into()));
    }

    pub fn start(&self, total: u64) {
        self.send(Event::Start { total });
    }

    pub fn phase(&self, what: impl Into<String>) {
        self.send(Event::Phase(what.into()));
    }

    pub fn step(&self) {
        self.send(Event::Step);
    }

    pub fn finish(&self) {
        self.send(Event::Finish);
    }
}

/// Sends [`Event::Finish`] when dropped, so a bar never outlives the work it measures.
pub struct FinishOnDrop<'a>(pub &'a Events);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn events_reach_the_sink_in_order_and_none_drops_them() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let ev = Events::to(move |e| s.lock().unwrap().push(e.clone()));
        {
            let _f = FinishOnDrop(&ev);
            ev.start(2);
            ev.phase("connectivity");
            ev.step();
            ev.log("hello");
        }
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                Event::Start { total: 2 },
                Event::Phase("connectivity".into()),
                Event::Step,
                Event::Log("hello".into()),
                Event::Finish
            ]
        );
        Events::none().log("dropped");
    }
}

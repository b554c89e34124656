//! Unit tests of the Flight Recorder verdict on the real dumps under tests/fixtures/flight-recorder.

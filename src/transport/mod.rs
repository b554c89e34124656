//! How nodes talk: the HMAC handshake, length-prefixed JSON frames, and the event stream the
//! runtime reports progress through. Names nothing above it.

pub mod auth;
pub mod events;
pub mod gate;
pub mod wire;

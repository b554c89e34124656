//! The nodes rank 0 admitted, as the coordinator and the phases hold them: their control
//! connections, facts and listeners ([`joined`]); sending orders ([`send`]), reading answers
//! from all at once ([`gather`]), the links they report ([`links`]) and the bounds on what they
//! may say ([`limits`]).

pub mod gather;
pub mod joined;
pub mod limits;
pub mod links;
pub mod send;

pub use gather::{Step, Wait, gather};
pub use joined::{JoinedNode, alive_facts, listener_for, log_losses};
pub use links::{find, sort_links};
pub use send::{send_frames, send_orders};

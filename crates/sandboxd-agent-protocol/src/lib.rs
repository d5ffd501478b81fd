//! The protocol between sandboxd (the host) and `sandboxd-agent` (inside a sandbox):
//! length-prefixed frames on one unix-socket connection, multiplexed by channel id.
//! Pure encoding and decoding; both sides bring their own I/O. Described in
//! `docs/agent-protocol.md`.
#![forbid(unsafe_code)]

mod frame;
mod messages;

pub use frame::{Decoder, Frame, FrameError, HEADER_LEN, Kind, MAX_PAYLOAD, header};
pub use messages::*;

/// Version spoken by this build; the agent announces its own in [`Hello`].
pub const PROTOCOL_VERSION: u32 = 1;

//! The protocol between sandboxd (the host) and `sandboxd-agent` (inside a sandbox):
//! length-prefixed frames on one unix-socket connection, multiplexed by channel id.
//! Pure encoding and decoding; both sides bring their own I/O. Described in
//! `docs/agent-protocol.md`.
#![forbid(unsafe_code)]

mod credit;
mod frame;
mod messages;

pub use credit::{
    DOWNLOAD_WINDOW, Inflow, Outflow, Overdrawn, PORT_WINDOW_IN, PORT_WINDOW_OUT, UPLOAD_WINDOW,
};
pub use frame::{Decoder, Frame, FrameError, HEADER_LEN, Kind, MAX_PAYLOAD, Partial, header};
pub use messages::*;

/// Version spoken by this build; the agent announces its own in [`Hello`]. Version 2
/// adds the streamed transfers (`upload`, `download`) and their flow control (Credit,
/// Cancel); version 3 the connections to the sandbox's ports (`openPort`); version 4
/// the egress proxy's connections (`acceptEgress`); version 5 what E2B's in-sandbox
/// daemon does (`followProcess`, `resizeProcess`, `stat`, `rename`, `remove`,
/// `setMetadata`, the watchers, a spawn's tag and terminal, a listing's metadata);
/// version 6 a new key for the agent (`rekey`); version 7 a watcher's read that waits
/// for its first event (`watcherEvents` with `waitMs`). The host sends none of them to
/// an agent that announced less.
pub const PROTOCOL_VERSION: u32 = 7;
/// The first version that speaks the streamed transfers.
pub const TRANSFERS_VERSION: u32 = 2;
/// The first version that opens connections to the sandbox's ports.
pub const PORTS_VERSION: u32 = 3;
/// The first version that hands over the egress proxy's connections.
pub const EGRESS_VERSION: u32 = 4;
/// The first version that does what E2B's in-sandbox daemon does.
pub const DAEMON_VERSION: u32 = 5;
/// The first version that takes a new key (`rekey`).
pub const REKEY_VERSION: u32 = 6;
/// The first version whose watcher reads wait for a first event.
pub const WATCH_WAIT_VERSION: u32 = 7;

/// The port on the sandbox's loopback where the agent takes the connections of the
/// sandbox's programs to the egress proxy (`HTTP_PROXY=http://127.0.0.1:49980`), which
/// sandboxd serves.
pub const EGRESS_PROXY_PORT: u16 = 49980;

/// The file of the agent's socket directory that holds the sandbox's key while the
/// container starts: the supervisor reads it then, keeps the key in memory and hands it
/// to each worker over a pipe; sandboxd takes the file away once an agent proved it
/// holds the key, before any of the sandbox's code runs. A connection whose [`Hello`]
/// lacks the key is refused.
pub const AGENT_KEY_FILE: &str = "agent.key";

/// The environment variable through which containers made by older versions of
/// sandboxd handed the agent its key (read when there is no [`AGENT_KEY_FILE`]); it is
/// never in the environment of a command the agent starts.
pub const AGENT_KEY_VAR: &str = "SANDBOXD_AGENT_KEY";

/// The variable giving the agent's supervisor its first lease, in milliseconds from its
/// start (then renewed by `Request::Lease`).
pub const LEASE_VAR: &str = "SANDBOXD_LEASE_MS";

//! The values that cross between the service and what it drives (an engine, the agent):
//! what a command is and did, what an engine reports, and why an engine operation
//! failed; the [`Engine`] contract (the service drives any engine through it), the
//! [`SandboxChannel`] contract (the way into one running sandbox: its agent or the engine)
//! the [`AgentHost`] contract (where agents connect) and the [`Connector`] contract
//! (remote servers). Defined here, so that neither side
//! depends on the other's crate.
//!
//! The values: `ExecSpec`, `ExecOutcome`, `OutputStream`, `ContainerDeath`, and
//! `EngineError` / `ReadFileError` with the engine's own error kept as a boxed source.
//! The engine adapter and the agent host depend on them rather than on each other, and
//! the service depends on neither an engine adapter nor HTTP. The store has no contract:
//! it is the concrete `sandboxd_store::Store`.
#![forbid(unsafe_code)]

mod agents;
mod channel;
mod engine;
mod errors;
mod events;
mod exec;
mod remote;

pub use agents::{AgentHost, AgentHostError, KeyHandover};
pub use channel::{
    AgentChannels, ChannelError, Download, FollowEvent, FollowFrom, OutputSlice, PathEntry,
    PathKind, ProcessExit, ProcessFollow, ProcessInfo, ProcessSpec, ProcessStream, Refusal,
    RefusalKind, SandboxChannel, Terminal, TerminalEvent, TerminalSpec, UploadShape, UploadSink,
    Via, WatchEvent, WatchKind,
};
pub use engine::{
    Chunks, Commit, Deaths, Engine, EnsuredImage, HostResources, ImageFacts, UsageSample,
};
pub use errors::{EngineError, ReadFileError};
pub use events::ContainerDeath;
pub use exec::{ExecOutcome, ExecSpec, OutputStream, OutputTx};
pub use remote::{
    AgentConnections, ByteStream, ConnectError, Connector, Probe, Reachability, RemoteAgent,
    RemoteAgents, RemoteDialer, RemoteServer, RemoteSpec,
};

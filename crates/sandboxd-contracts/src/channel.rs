//! The sandbox channel contract: what the service asks of one running sandbox — commands,
//! files, streamed transfers, background processes, terminals, connections to its
//! ports. Two adapters implement
//! it: the sandbox's agent (`sandboxd-agent-host`), the path production takes, and the
//! engine's exec and archive API (`sandboxd-service`), the fallback, which does no
//! processes or terminals. Tests implement it with a recording double.
//!
//! The values of processes, output slices and refusals are the agent protocol's own
//! (`sandboxd-agent-protocol`, a crate of plain data): they are what a sandbox's
//! processes are, whichever adapter reports them.
//!
//! `SandboxChannel` covers exec, files, streamed transfers (an `UploadSink` or a
//! `Download`), leases, background processes and terminals; the operations only an agent
//! does (processes, terminals, leases, following a process, resizing its terminal, a
//! path's stat, entries, metadata, rename and removal, watchers: what E2B's daemon needs)
//! default to `NeedsAgent`. `ChannelError`: `NotSent` (another channel may serve it),
//! `NeedsAgent`, `Refused` (the agent protocol's refusal kinds), `Body`, `Lost` (the
//! request left and the channel failed), `Engine`. `AgentChannels` is where the channels
//! of connected agents come from.

use std::fmt::Debug;
use std::time::Duration;

pub use sandboxd_agent_protocol::{
    DirEntry as PathEntry, EntryKind as PathKind, Exit as ProcessExit, Failure as Refusal,
    FailureKind as RefusalKind, OutputSlice, ProcessInfo, ProcessStream, WatchEvent, WatchKind,
};
use sandboxd_core::api::{FileEntry, TransferFormat};

use crate::{ByteStream, Chunks, EngineError, ExecOutcome, ExecSpec};

/// Which adapter a channel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Agent,
    Engine,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Engine => "engine",
        }
    }
}

/// Why an operation over a channel failed.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The request never reached the sandbox: another channel may safely serve it.
    #[error("the request was not sent")]
    NotSent,
    /// Only the sandbox's agent does this (processes, terminals, leases).
    #[error("this needs the sandbox agent")]
    NeedsAgent,
    /// The sandbox could not do it (a missing file, not a directory, too large, …).
    #[error("{}", .0.message)]
    Refused(Refusal),
    /// An upload's own body failed (the client went away, or sent nothing).
    #[error("the upload's body failed: {0}")]
    Body(std::io::Error),
    /// The channel failed after the request left (it went away, did not answer in time
    /// or broke its protocol): whether the sandbox acted is unknown; the cause is kept.
    #[error(transparent)]
    Lost(Box<dyn std::error::Error + Send + Sync>),
    /// The engine failed the operation.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl ChannelError {
    /// A refusal of `kind` with `message`.
    pub fn refused(kind: RefusalKind, message: impl Into<String>) -> Self {
        Self::Refused(Refusal {
            kind,
            message: message.into(),
        })
    }
}

/// What an upload writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadShape {
    /// One file of `size` bytes with `mode`, put in place once whole.
    File { size: u64, mode: u32 },
    /// One file of `size` bytes with `mode`, written where it goes as it arrives.
    FileInPlace { size: u64, mode: u32 },
    /// A tar unpacked under the directory.
    Tree,
}

/// A download under way: its shape, a file's size, and its bytes.
pub struct Download {
    pub format: TransferFormat,
    /// A file's size (raw); a tar's is not known before it ends.
    pub size: Option<u64>,
    pub body: Chunks,
}

impl Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("format", &self.format)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// An upload the sandbox accepted: its content is sent with [`UploadSink::send`].
/// Dropped before the end, it is cancelled.
#[async_trait::async_trait]
pub trait UploadSink: Send {
    /// Streams `body` in; the bytes written.
    async fn send(self: Box<Self>, body: Chunks) -> Result<u64, ChannelError>;
}

/// A background process to start.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Its handle, chosen by the caller.
    pub id: String,
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    /// Its standard input is kept open for writes.
    pub stdin: bool,
    /// A name the caller gives it, reported back by the listing.
    pub tag: Option<String>,
    /// Columns and rows of a terminal to run it on (its output then comes as stdout,
    /// writes are typed in).
    pub pty: Option<(u16, u16)>,
}

/// What following a background process yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEvent {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// It ended, and all its output was yielded before.
    Exit(ProcessExit),
}

/// Where following a process starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowFrom {
    /// The oldest output still kept.
    Start,
    /// These offsets of its stdout and stderr (the byte counts of a listing taken
    /// before: output from then on, none of it lost to a race with the following).
    Offsets { stdout: u64, stderr: u64 },
}

/// A background process being followed. Dropped, the following stops (the process
/// runs on).
#[async_trait::async_trait]
pub trait ProcessFollow: Send + Debug {
    /// The next output, or its exit (after which nothing follows).
    async fn next(&mut self) -> Result<FollowEvent, ChannelError>;
}

/// A terminal session to open.
#[derive(Debug, Clone)]
pub struct TerminalSpec {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub cols: u16,
    pub rows: u16,
}

/// What a terminal session yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalEvent {
    Output(Vec<u8>),
    Exit(i64),
}

/// A running terminal session. Dropped before its command ended, the command is killed.
#[async_trait::async_trait]
pub trait Terminal: Send + Sync + Debug {
    /// Types `keys` into the terminal.
    async fn input(&self, keys: &[u8]) -> Result<(), ChannelError>;
    async fn resize(&self, cols: u16, rows: u16) -> Result<(), ChannelError>;
    /// The next output, or the exit code once the command ended.
    async fn next(&mut self) -> Result<TerminalEvent, ChannelError>;
}

/// One running sandbox's way in. Every call is bounded in time by the implementation;
/// what comes back is the sandbox's and is checked by it (sizes, counts, shapes).
#[async_trait::async_trait]
pub trait SandboxChannel: Send + Sync + Debug {
    fn via(&self) -> Via;

    /// Whether the channel is still open (a closed one answers [`ChannelError::NotSent`]).
    fn is_open(&self) -> bool {
        true
    }

    /// Runs a command. A timed-out command whose kill did not take comes back with
    /// `kill_incomplete`: what to do about it is the caller's policy.
    async fn exec(&self, spec: ExecSpec) -> Result<ExecOutcome, ChannelError>;

    /// Writes `content` to `path` with `mode`, parents created, as the sandbox user;
    /// the size written.
    async fn write_file(&self, path: &str, content: &[u8], mode: u32) -> Result<u64, ChannelError>;

    /// Reads a regular file of at most `max` bytes.
    async fn read_file(&self, path: &str, max: usize) -> Result<Vec<u8>, ChannelError>;

    /// Lists a directory, the answer at most `max` bytes, in no particular order.
    async fn list_dir(&self, path: &str, max: usize) -> Result<Vec<FileEntry>, ChannelError>;

    /// Creates a directory and its parents with `mode` as the sandbox user.
    async fn make_dir(&self, path: &str, mode: u32) -> Result<(), ChannelError>;

    /// Opens an upload into `path` (a file, or a directory a tree is unpacked under).
    async fn open_upload(
        &self,
        path: &str,
        shape: UploadShape,
    ) -> Result<Box<dyn UploadSink>, ChannelError>;

    /// Streams `path` out: a file's bytes (or, as `Tar`, a tar of it) or a directory's
    /// tar; `format` `None` lets the path's kind decide. At most `cap` bytes.
    async fn download(
        &self,
        path: &str,
        format: Option<TransferFormat>,
        cap: u64,
    ) -> Result<Download, ChannelError>;

    /// Tells the sandbox how long it may live without hearing from sandboxd again.
    async fn lease(&self, _duration: Duration) -> Result<(), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// A connection to `127.0.0.1:<port>` inside the sandbox, as a byte stream both
    /// ways; dropping it drops the connection.
    async fn open_port(&self, _port: u16) -> Result<Box<dyn ByteStream>, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// The next connection a program in the sandbox makes to its egress proxy's address,
    /// once one arrives (no deadline); dropping the future withdraws the wait.
    async fn accept_egress(&self) -> Result<Box<dyn ByteStream>, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Starts a background process.
    async fn spawn_process(&self, _spec: ProcessSpec) -> Result<ProcessInfo, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// The background processes, in no particular order.
    async fn processes(&self) -> Result<Vec<ProcessInfo>, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Waits up to `timeout` for a process to end; the process as it is then.
    async fn wait_process(
        &self,
        _id: &str,
        _timeout: Duration,
    ) -> Result<ProcessInfo, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Signals a process's group.
    async fn signal_process(&self, _id: &str, _signal: i32) -> Result<ProcessInfo, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Reads up to `max` bytes of a process's `stream` from `offset`.
    async fn read_process(
        &self,
        _id: &str,
        _stream: ProcessStream,
        _offset: u64,
        _max: u64,
    ) -> Result<(OutputSlice, Vec<u8>), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Writes to a process's standard input, closing it after when `close`; the bytes
    /// written.
    async fn write_process(
        &self,
        _id: &str,
        _data: &[u8],
        _close: bool,
    ) -> Result<u64, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Follows a background process's output and exit.
    async fn follow_process(
        &self,
        _id: &str,
        _from: FollowFrom,
    ) -> Result<Box<dyn ProcessFollow>, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Resizes the terminal of a background process that runs on one.
    async fn resize_process(&self, _id: &str, _cols: u16, _rows: u16) -> Result<(), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// A path's metadata, not following a final symbolic link.
    async fn stat(&self, _path: &str) -> Result<PathEntry, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// A directory's entries with owners, link targets and metadata; at most `max`
    /// bytes of listing are taken.
    async fn entries(&self, _path: &str, _max: usize) -> Result<Vec<PathEntry>, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Replaces a path's metadata (E2B's `user.e2b.` extended attributes).
    async fn set_metadata(
        &self,
        _path: &str,
        _metadata: std::collections::BTreeMap<String, String>,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Renames a path (a file at `to` is replaced).
    async fn rename(&self, _from: &str, _to: &str) -> Result<(), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Removes a file, a link, or a directory with everything under it.
    async fn remove(&self, _path: &str) -> Result<(), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Starts watcher `id` of a directory (and with `recursive`, of everything under it).
    async fn add_watcher(
        &self,
        _id: &str,
        _path: &str,
        _recursive: bool,
    ) -> Result<(), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// The events of a watcher since the last read (every change made before the call);
    /// with `wait`, a read that would find none waits up to that long for the first.
    async fn watcher_events(
        &self,
        _id: &str,
        _wait: std::time::Duration,
    ) -> Result<Vec<WatchEvent>, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Stops a watcher.
    async fn remove_watcher(&self, _id: &str) -> Result<(), ChannelError> {
        Err(ChannelError::NeedsAgent)
    }

    /// Opens a terminal session.
    async fn open_terminal(&self, _spec: TerminalSpec) -> Result<Box<dyn Terminal>, ChannelError> {
        Err(ChannelError::NeedsAgent)
    }
}

/// Where the agents' channels come from: the one of a sandbox whose agent is connected.
pub trait AgentChannels: Send + Sync + Debug {
    fn channel(&self, sandbox_id: &str) -> Option<std::sync::Arc<dyn SandboxChannel>>;
}

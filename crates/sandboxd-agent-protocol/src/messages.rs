//! The JSON messages carried by control frames.

use serde::{Deserialize, Serialize};

/// First frame of a connection: who the agent is, and the sandbox's agent key, which
/// proves it (see [`crate::AGENT_KEY_FILE`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    pub version: u32,
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
}

/// An agent key carried in a request; never printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentKey(pub String);

impl std::fmt::Debug for AgentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentKey(..)")
    }
}

/// Never prints the key.
impl std::fmt::Debug for Hello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hello")
            .field("version", &self.version)
            .field("pid", &self.pid)
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .finish_non_exhaustive()
    }
}

/// What the host asks on a new channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Request {
    /// Run `argv` in its own process group; output comes as Stdout/Stderr frames, then
    /// Exit. Every process carries `marker` (a `NAME=value` entry) in its environment.
    /// With `stdin`, Data frames are written to its standard input and End closes it.
    #[serde(rename_all = "camelCase")]
    Exec {
        argv: Vec<String>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
        marker: (String, String),
        #[serde(default)]
        stdin: bool,
    },
    /// Run `argv` on a new terminal of `cols` × `rows`, in its own session; output comes
    /// as Stdout frames, Data frames are typed in, Resize frames resize it, then Exit.
    #[serde(rename_all = "camelCase")]
    Pty {
        argv: Vec<String>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
        marker: (String, String),
        cols: u16,
        rows: u16,
    },
    /// Write a file from the Data frames that follow until End; parents are created.
    #[serde(rename_all = "camelCase")]
    WriteFile { path: String, mode: u32 },
    /// Read a regular file of at most `max` bytes as Data frames, then Done.
    #[serde(rename_all = "camelCase")]
    ReadFile { path: String, max: u64 },
    /// List a directory: Data frames of JSON arrays of [`DirEntry`], then Done; with
    /// `metadata`, each entry's metadata too.
    #[serde(rename_all = "camelCase")]
    ListDir {
        path: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        metadata: bool,
    },
    /// Create a directory and its parents.
    #[serde(rename_all = "camelCase")]
    Mkdir { path: String, mode: u32 },
    /// Start a background process that outlives connections; its output is kept in a
    /// ring buffer per stream. Replies Data([`ProcessInfo`]), Done.
    #[serde(rename_all = "camelCase")]
    Spawn {
        id: String,
        argv: Vec<String>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
        marker: (String, String),
        stdin: bool,
        /// A name the caller gives the process, reported back by `processes`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tag: Option<String>,
        /// Runs it on a new terminal of this size (its own session, the terminal as
        /// its controlling terminal): its output comes as stdout, writes are typed in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pty: Option<Resize>,
    },
    /// Resizes the terminal of a background process: Data([`ProcessInfo`]), Done.
    #[serde(rename_all = "camelCase")]
    ResizeProcess { id: String, cols: u16, rows: u16 },
    /// Follows a background process: its output from the offsets (clamped to what is
    /// kept; `u64::MAX`: from now) as Stdout and Stderr frames as it comes, then Exit
    /// once it ended and everything was sent. Cancel from the host stops following
    /// (answered by Done).
    #[serde(rename_all = "camelCase")]
    FollowProcess {
        id: String,
        stdout_offset: u64,
        stderr_offset: u64,
    },
    /// Replaces a path's metadata (extended attributes of the `user.e2b.` namespace,
    /// named without it). Done.
    #[serde(rename_all = "camelCase")]
    SetMetadata {
        path: String,
        metadata: std::collections::BTreeMap<String, String>,
    },
    /// Metadata of a path, not following a final symbolic link, with its metadata:
    /// Data([`DirEntry`]), Done.
    #[serde(rename_all = "camelCase")]
    Stat { path: String },
    /// Renames `from` to `to` (on one file system; a file at `to` is replaced). Done.
    #[serde(rename_all = "camelCase")]
    Rename { from: String, to: String },
    /// Removes a file, a link, or a directory with everything under it. Done.
    #[serde(rename_all = "camelCase")]
    Remove { path: String },
    /// Starts watching the directory `path` (with `recursive`, every directory under
    /// it too, and those made later) as watcher `id`: Done. Its events wait in the
    /// kernel until read.
    #[serde(rename_all = "camelCase")]
    AddWatcher {
        id: String,
        path: String,
        #[serde(default)]
        recursive: bool,
    },
    /// The events of a watcher since the last read: Data frames of `[WatchEvent]`, Done.
    /// With `wait_ms` (version 7), a read that finds none waits that long (at most a
    /// second) for the first to come.
    #[serde(rename_all = "camelCase")]
    WatcherEvents {
        id: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        wait_ms: u32,
    },
    /// Stops a watcher. Done.
    #[serde(rename_all = "camelCase")]
    RemoveWatcher { id: String },
    /// The background processes: Data(`[ProcessInfo]`), Done.
    #[serde(rename_all = "camelCase")]
    Processes {},
    /// Waits up to `timeout_ms` for a process to end: Data([`ProcessInfo`]), Done.
    #[serde(rename_all = "camelCase")]
    WaitProcess { id: String, timeout_ms: u64 },
    /// Signals a process (its group and marked processes): Data([`ProcessInfo`]), Done.
    #[serde(rename_all = "camelCase")]
    SignalProcess { id: String, signal: i32 },
    /// Reads a stream of a process from `offset`, at most `max` bytes: Data([`OutputSlice`])
    /// then Data frames of raw bytes, Done.
    #[serde(rename_all = "camelCase")]
    ReadProcess {
        id: String,
        stream: ProcessStream,
        offset: u64,
        max: u64,
    },
    /// Writes the Data frames that follow, up to End, to a process's standard input; with
    /// `close`, closes it after. Done.
    #[serde(rename_all = "camelCase")]
    WriteProcess { id: String, close: bool },
    /// A streamed upload: one file of `size` bytes and `mode` (`raw`: renamed into place
    /// once whole, or with `inPlace` written where it goes as it arrives), or a tar
    /// unpacked under the directory `path` (`tar`). The agent grants Credit once ready;
    /// the host sends Data frames within it, then End. Done.
    #[serde(rename_all = "camelCase")]
    Upload {
        path: String,
        shape: TransferShape,
        #[serde(default)]
        mode: u32,
        #[serde(default)]
        size: Option<u64>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        in_place: bool,
    },
    /// The sandbox may live `for_ms` more milliseconds (counted on the agent's own
    /// clock, so the host's and a server's clocks need not agree). When that passes with
    /// no newer lease, the sandbox's main process ends it: sandboxd is gone or cut off,
    /// and nothing else would. Done.
    #[serde(rename_all = "camelCase")]
    Lease { for_ms: u64 },
    /// The agent's key from now on: the one it presents when it connects again, kept by
    /// its supervisor for the workers it starts later. Given to a sandbox restored from
    /// a checkpoint (a fork, a snapshot with memory), whose agent came back with the key
    /// of the sandbox it was saved from. Done.
    Rekey { key: AgentKey },
    /// A TCP connection to `127.0.0.1:port` inside the sandbox, made by the agent. Once
    /// it is made the agent grants Credit: what the host sends toward the port goes as
    /// Data within it. The host grants Credit for what the port sends back, which comes
    /// as Data within it. End from either side ends that direction (a half-close); the
    /// agent answers Done once both are ended, Error when the connection cannot be
    /// made. Cancel from the host drops the connection.
    #[serde(rename_all = "camelCase")]
    OpenPort { port: u16 },
    /// The next connection a program in the sandbox makes to the egress proxy's address
    /// ([`crate::EGRESS_PROXY_PORT`] on its loopback, where the agent listens from the
    /// first such request on). The agent answers nothing until a connection arrives
    /// (connections wait in the listener's backlog while no request waits); from then
    /// on, as `openPort` once connected: Credit, Data both ways within it, End, Done.
    /// Error when the agent cannot listen there. Cancel before a connection arrived
    /// withdraws the request; the next connection goes to another one.
    AcceptEgress {},
    /// A streamed download of `path`: a file's bytes (`raw`) or a tar of it (`tar`);
    /// without `shape`, raw for a file and tar for a directory. At most `max` bytes. The
    /// host grants Credit; the agent replies Data([`DownloadStart`]), then Data frames of
    /// content within the credit, then Done.
    #[serde(rename_all = "camelCase")]
    Download {
        path: String,
        #[serde(default)]
        shape: Option<TransferShape>,
        max: u64,
    },
}

/// How a transfer's content is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TransferShape {
    /// One file's bytes.
    Raw,
    /// A tar of a tree (or of one file).
    Tar,
}

/// More bytes of content the receiver of a transfer takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credit {
    pub bytes: u64,
}

/// The first reply to a download: what follows, and a raw file's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadStart {
    pub shape: TransferShape,
    #[serde(default)]
    pub size: Option<u64>,
}

/// A stream of a background process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ProcessStream {
    Stdout,
    Stderr,
}

/// A background process as the agent knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessInfo {
    pub id: String,
    pub argv: Vec<String>,
    pub pid: u32,
    pub started_ms: i64,
    pub exit: Option<Exit>,
    pub ended_ms: Option<i64>,
    pub stdin_open: bool,
    /// Bytes written to each stream since the start.
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// The name the caller gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The directory it started in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// It runs on a terminal.
    #[serde(default)]
    pub pty: bool,
}

/// What changed under a watched directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WatchKind {
    Create,
    Write,
    Remove,
    Rename,
    Chmod,
    /// The kernel's queue overflowed: events were lost.
    Overflow,
}

/// One change under a watched directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchEvent {
    /// The path that changed, relative to the watched directory.
    pub name: String,
    /// The same, absolute.
    pub path: String,
    pub kind: WatchKind,
}

/// Where a read of a process stream starts and ends: the buffer keeps the last bytes
/// only, so `start` is later than the offset asked for when older output was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputSlice {
    pub start: u64,
    pub end: u64,
    /// The process had ended when this was read, so no output follows `end`.
    #[serde(default)]
    pub exited: bool,
}

/// Signal sent to a running command's process group and marked processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signal {
    pub signal: i32,
}

/// New size of a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resize {
    pub cols: u16,
    pub rows: u16,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    NotFound,
    NotAFile,
    NotADirectory,
    TooLarge,
    PermissionDenied,
    Invalid,
    Io,
    /// A bound of the sandbox is reached (running background processes).
    Limit,
    /// Nothing accepts connections there (a port nobody listens on).
    Unreachable,
}

/// A failed request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// A request that succeeded, with the size it moved where that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Done {
    pub size: u64,
}

/// Kind of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EntryKind {
    Directory,
    File,
    Symlink,
    Other,
}

/// One directory entry, with metadata from `lstat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
    pub size: u64,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
    /// Modification time, milliseconds since the epoch.
    pub modified_ms: i64,
    /// Owner and group ids.
    #[serde(default)]
    pub uid: u32,
    #[serde(default)]
    pub gid: u32,
    /// Where a symbolic link leads: the absolute path it resolves to, or its text when
    /// it dangles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
    /// The names of the owner and the group, where the sandbox has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Its metadata (`user.e2b.` extended attributes), when asked for and it has some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<std::collections::BTreeMap<String, String>>,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_json() {
        let request = Request::ReadFile {
            path: "/a".into(),
            max: 10,
        };
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(text, r#"{"op":"readFile","path":"/a","max":10}"#);
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
        assert!(serde_json::from_str::<Request>(r#"{"op":"rm","path":"/"}"#).is_err());
    }
}

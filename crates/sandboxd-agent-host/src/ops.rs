//! Operations over an agent connection: exec with capped output and a timeout, and the
//! file operations. The agent shares its sandbox with the sandbox's code, so everything
//! it sends is untrusted: replies are checked (a frame of the wrong kind, more bytes
//! than were asked, a range the request did not allow end the operation with a
//! protocol error), and every operation runs under one overall deadline that covers
//! each send and each receive, so an agent that drips frames or stops reading cannot
//! hold a request past it.
//!
//! The deadline is one `Deadline` per operation, for its open, its sends and its
//! receives.

use std::time::Duration;

use sandboxd_agent_protocol::{
    DirEntry, Done, Exit, Failure, Frame, Kind, MAX_PAYLOAD, OutputSlice, ProcessInfo,
    ProcessStream, Request, Signal, WatchEvent,
};
use sandboxd_contracts::{
    ExecOutcome, ExecSpec, FollowEvent, FollowFrom, OutputStream, TerminalEvent, TerminalSpec,
};
use sandboxd_core::exec_kill::MARKER_ENV;
use sandboxd_core::limits::{KILL_GRACE_MS, TIMEOUT_EXIT_CODE};

use super::conn::{AgentConn, AgentError, Channel};

/// Unix signal number of SIGKILL.
const SIGKILL: i32 = 9;
/// Bytes of watch events one read takes at most (the agent sends at most 4 MiB of
/// names and paths, and their JSON around them).
const MAX_WATCH_BYTES: usize = 8 * 1024 * 1024;
/// How long a waiting read of a watcher waits before it reads, for an agent whose reads
/// cannot wait (before version 7): what a client following the watcher polled at.
const OLD_AGENT_POLL: Duration = Duration::from_millis(25);
/// File content is sent in chunks of this size.
const CHUNK: usize = 256 * 1024;
/// A kill sent after an exec timed out must leave within this long.
const SIGNAL_SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// How long telling an agent its lease may take.
const LEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// One operation's deadline: opening its channel, every frame sent and every frame
/// received count against it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(tokio::time::Instant);

impl Deadline {
    pub(crate) fn after(limit: Duration) -> Self {
        Self(tokio::time::Instant::now() + limit)
    }

    pub(crate) async fn open(
        &self,
        conn: &AgentConn,
        request: &Request,
    ) -> Result<Channel, AgentError> {
        tokio::time::timeout_at(self.0, conn.open(request))
            .await
            .map_err(|_| AgentError::Timeout)?
    }

    /// `future` within the deadline.
    pub(crate) async fn bound<T>(
        &self,
        future: impl Future<Output = Result<T, AgentError>>,
    ) -> Result<T, AgentError> {
        tokio::time::timeout_at(self.0, future)
            .await
            .map_err(|_| AgentError::Timeout)?
    }

    pub(crate) async fn recv(&self, channel: &mut Channel) -> Result<Frame, AgentError> {
        tokio::time::timeout_at(self.0, channel.recv())
            .await
            .map_err(|_| AgentError::Timeout)?
    }

    pub(crate) async fn send(
        &self,
        channel: &Channel,
        kind: Kind,
        payload: Vec<u8>,
    ) -> Result<(), AgentError> {
        tokio::time::timeout_at(self.0, channel.send(kind, payload))
            .await
            .map_err(|_| AgentError::Timeout)?
    }
}

/// How an agent file operation failed.
#[derive(Debug)]
pub enum FileOpError {
    /// The agent could not do it (missing file, not a directory, too large, …).
    Refused(Failure),
    Agent(AgentError),
}

impl From<AgentError> for FileOpError {
    fn from(error: AgentError) -> Self {
        Self::Agent(error)
    }
}

pub(crate) fn unexpected(frame: &Frame) -> AgentError {
    AgentError::Protocol(format!("unexpected {:?} frame", frame.kind))
}

fn push_capped(buf: &mut Vec<u8>, bytes: &[u8], max: usize, truncated: &mut bool) {
    let take = max.saturating_sub(buf.len()).min(bytes.len());
    buf.extend_from_slice(&bytes[..take]);
    if take < bytes.len() {
        *truncated = true;
    }
}

/// Random hex for exec markers.
fn marker() -> String {
    let mut bytes = [0u8; 16];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl AgentConn {
    /// Runs a command as the sandbox user (`spec.user` is the engine's and ignored).
    /// The outcome, and whether the command ended: `false` when it timed out and did
    /// not end after the kill (the caller then restarts the container).
    pub async fn exec(&self, spec: ExecSpec) -> Result<(ExecOutcome, bool), AgentError> {
        let request = Request::Exec {
            argv: spec.argv,
            cwd: spec.cwd,
            env: spec.env,
            marker: (MARKER_ENV.to_owned(), marker()),
            stdin: false,
        };
        let mut channel = Deadline::after(self.op_timeout)
            .open(self, &request)
            .await?;
        // If this future is dropped (the client went away), the command is killed.
        let mut guard = channel.kill_on_drop(SIGKILL);
        let mut outcome = ExecOutcome::default();
        let mut truncated = false;
        let deadline = tokio::time::Instant::now() + spec.timeout;
        let mut kill_deadline: Option<tokio::time::Instant> = None;
        loop {
            let until = kill_deadline.unwrap_or(deadline);
            let frame = match tokio::time::timeout_at(until, channel.recv()).await {
                Ok(frame) => frame?,
                Err(_) if kill_deadline.is_none() => {
                    outcome.timed_out = true;
                    let kill = serde_json::to_vec(&Signal { signal: SIGKILL }).unwrap_or_default();
                    Deadline::after(SIGNAL_SEND_TIMEOUT)
                        .send(&channel, Kind::Signal, kill)
                        .await?;
                    kill_deadline =
                        Some(tokio::time::Instant::now() + Duration::from_millis(KILL_GRACE_MS));
                    continue;
                }
                // Killed but not ended: the kill did not take.
                Err(_) => {
                    guard.disarm();
                    outcome.truncated = truncated;
                    outcome.exit_code = TIMEOUT_EXIT_CODE;
                    return Ok((outcome, false));
                }
            };
            let which = match frame.kind {
                Kind::Stdout => OutputStream::Stdout,
                Kind::Stderr => OutputStream::Stderr,
                Kind::Exit => {
                    guard.disarm();
                    let exit: Exit = frame
                        .parse()
                        .map_err(|e| AgentError::Protocol(e.to_string()))?;
                    outcome.truncated = truncated;
                    outcome.exit_code = if outcome.timed_out {
                        TIMEOUT_EXIT_CODE
                    } else {
                        match (exit.code, exit.signal) {
                            (Some(code), _) => i64::from(code),
                            (None, Some(signal)) => 128 + i64::from(signal),
                            (None, None) => 1,
                        }
                    };
                    return Ok((outcome, true));
                }
                _ => return Err(unexpected(&frame)),
            };
            let buf = match which {
                OutputStream::Stdout => &mut outcome.stdout,
                OutputStream::Stderr => &mut outcome.stderr,
            };
            push_capped(buf, &frame.payload, spec.max_output, &mut truncated);
            if let Some(tx) = &spec.stream {
                // A consumer that reads slowly cannot hold the command past its deadline:
                // once it passes, the next receive times out and the command is killed.
                let until = kill_deadline.unwrap_or(deadline);
                let _ =
                    tokio::time::timeout_at(until, tx.send((which, frame.payload.into()))).await;
            }
        }
    }

    /// Writes a file (parents created) with `mode`.
    pub async fn write_file(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
    ) -> Result<u64, FileOpError> {
        let request = Request::WriteFile {
            path: path.to_owned(),
            mode,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        for chunk in content.chunks(CHUNK) {
            deadline.send(&channel, Kind::Data, chunk.to_vec()).await?;
        }
        deadline.send(&channel, Kind::End, Vec::new()).await?;
        let done: Done = finish(&mut channel, deadline).await?;
        Ok(done.size)
    }

    /// `mkdir -p` then `chmod` as the sandbox user. The `chmod` succeeds only for the
    /// directory's owner, so success means the user owns it.
    pub async fn make_dir(&self, path: &str, mode: u32) -> Result<(), FileOpError> {
        let request = Request::Mkdir {
            path: path.to_owned(),
            mode,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// Tells the sandbox how much longer it may live if nothing more is heard from
    /// sandboxd (the dead-man's switch of its main process).
    pub async fn lease(&self, duration: Duration) -> Result<(), FileOpError> {
        let request = Request::Lease {
            for_ms: duration.as_millis() as u64,
        };
        let deadline = Deadline::after(self.op_timeout.min(LEASE_TIMEOUT));
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// Gives the agent `key`, the one it presents from its next connection on.
    pub async fn rekey(&self, key: &str) -> Result<(), FileOpError> {
        let request = Request::Rekey {
            key: sandboxd_agent_protocol::AgentKey(key.to_owned()),
        };
        let deadline = Deadline::after(self.op_timeout.min(LEASE_TIMEOUT));
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// Reads a regular file of at most `max` bytes.
    pub async fn read_file(&self, path: &str, max: usize) -> Result<Vec<u8>, FileOpError> {
        let request = Request::ReadFile {
            path: path.to_owned(),
            max: max as u64,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        let mut content = Vec::new();
        loop {
            let frame = deadline.recv(&mut channel).await?;
            match frame.kind {
                Kind::Data if content.len() + frame.payload.len() <= max => {
                    content.extend_from_slice(&frame.payload)
                }
                Kind::Data => {
                    return Err(AgentError::Protocol("file larger than announced".into()).into());
                }
                Kind::Done => return Ok(content),
                Kind::Error => return Err(FileOpError::Refused(parse(&frame)?)),
                _ => return Err(unexpected(&frame).into()),
            }
        }
    }

    /// Lists a directory; at most `max_bytes` of listing are accepted.
    pub async fn list_dir(
        &self,
        path: &str,
        max_bytes: usize,
        metadata: bool,
    ) -> Result<Vec<DirEntry>, FileOpError> {
        let request = Request::ListDir {
            path: path.to_owned(),
            metadata,
        };
        self.batches(&request, max_bytes, "listing too large").await
    }
}

impl AgentConn {
    /// Sends `request` and takes its reply of Data frames, each a JSON array, up to
    /// Done: at most `max_bytes` of them (past that, `too_much`).
    async fn batches<T: serde::de::DeserializeOwned>(
        &self,
        request: &Request,
        max_bytes: usize,
        too_much: &str,
    ) -> Result<Vec<T>, FileOpError> {
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, request).await?;
        let mut items = Vec::new();
        let mut bytes = 0usize;
        loop {
            let frame = deadline.recv(&mut channel).await?;
            match frame.kind {
                Kind::Data => {
                    bytes += frame.payload.len();
                    if bytes > max_bytes {
                        return Err(AgentError::Protocol(too_much.into()).into());
                    }
                    let batch: Vec<T> = parse(&frame)?;
                    items.extend(batch);
                }
                Kind::Done => return Ok(items),
                Kind::Error => return Err(FileOpError::Refused(parse(&frame)?)),
                _ => return Err(unexpected(&frame).into()),
            }
        }
    }
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(frame: &Frame) -> Result<T, AgentError> {
    if frame.payload.len() > MAX_PAYLOAD {
        return Err(AgentError::Protocol("oversized message".into()));
    }
    frame
        .parse()
        .map_err(|e| AgentError::Protocol(e.to_string()))
}

/// Waits for Done (or Error) closing a channel.
async fn finish(channel: &mut Channel, deadline: Deadline) -> Result<Done, FileOpError> {
    let frame = deadline.recv(channel).await?;
    match frame.kind {
        Kind::Done => Ok(parse(&frame)?),
        Kind::Error => Err(FileOpError::Refused(parse(&frame)?)),
        _ => Err(unexpected(&frame).into()),
    }
}

/// Whether an output range announced by the agent is one a request for `max` bytes
/// from `offset` allows: not reversed, no more than `max` bytes, starting at `offset` or
/// later (older output may have been dropped) unless empty (`offset` past the end).
fn slice_allowed(slice: &OutputSlice, offset: u64, max: u64) -> bool {
    slice.start <= slice.end
        && slice.end - slice.start <= max
        && (slice.start >= offset || slice.start == slice.end)
}

/// A running terminal session. Dropping it before the command ended kills the command.
#[derive(Debug)]
pub struct PtySession {
    channel: Channel,
    guard: super::conn::SendOnDrop,
}

/// Keys are sent in frames of at most this size.
const INPUT_CHUNK: usize = 64 * 1024;

impl AgentConn {
    /// Opens a terminal session running `spec.argv`.
    pub async fn pty(&self, spec: TerminalSpec) -> Result<PtySession, AgentError> {
        let request = Request::Pty {
            argv: spec.argv,
            cwd: spec.cwd,
            env: spec.env,
            marker: (MARKER_ENV.to_owned(), marker()),
            cols: spec.cols,
            rows: spec.rows,
        };
        let channel = self.open(&request).await?;
        let guard = channel.kill_on_drop(SIGKILL);
        Ok(PtySession { channel, guard })
    }
}

impl PtySession {
    /// Types `keys` into the terminal.
    pub async fn input(&self, keys: &[u8]) -> Result<(), AgentError> {
        for chunk in keys.chunks(INPUT_CHUNK) {
            self.channel.send(Kind::Data, chunk.to_vec()).await?;
        }
        Ok(())
    }

    /// Resizes the terminal.
    pub async fn resize(&self, cols: u16, rows: u16) -> Result<(), AgentError> {
        let resize =
            serde_json::to_vec(&sandboxd_agent_protocol::Resize { cols, rows }).unwrap_or_default();
        self.channel.send(Kind::Resize, resize).await
    }

    /// The next output, or the exit code once the command ended.
    pub async fn next(&mut self) -> Result<TerminalEvent, AgentError> {
        let frame = self.channel.recv().await?;
        match frame.kind {
            Kind::Stdout | Kind::Stderr => Ok(TerminalEvent::Output(frame.payload)),
            Kind::Exit => {
                self.guard.disarm();
                let exit: Exit = frame
                    .parse()
                    .map_err(|e| AgentError::Protocol(e.to_string()))?;
                Ok(TerminalEvent::Exit(match (exit.code, exit.signal) {
                    (Some(code), _) => i64::from(code),
                    (None, Some(signal)) => 128 + i64::from(signal),
                    (None, None) => 1,
                }))
            }
            _ => Err(unexpected(&frame)),
        }
    }
}

/// A background process being followed; dropped, the agent is told to stop.
#[derive(Debug)]
pub struct Following {
    channel: Channel,
    guard: super::conn::SendOnDrop,
    ended: bool,
}

impl Following {
    /// The next output or the exit. What the agent sends is checked: output frames, then
    /// one exit; anything else ends the following with a protocol error.
    pub async fn next(&mut self) -> Result<FollowEvent, FileOpError> {
        if self.ended {
            return Err(AgentError::Protocol("the process already ended".into()).into());
        }
        let frame = self.channel.recv().await?;
        match frame.kind {
            Kind::Stdout => Ok(FollowEvent::Stdout(frame.payload)),
            Kind::Stderr => Ok(FollowEvent::Stderr(frame.payload)),
            Kind::Exit => {
                self.ended = true;
                self.guard.disarm();
                Ok(FollowEvent::Exit(parse(&frame)?))
            }
            Kind::Error => {
                self.ended = true;
                self.guard.disarm();
                Err(FileOpError::Refused(parse(&frame)?))
            }
            _ => Err(unexpected(&frame).into()),
        }
    }
}

/// Background processes, kept by the agent across connections.
impl AgentConn {
    /// Sends `request` and reads the JSON reply (one Data frame, then Done).
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        request: &Request,
        wait: Duration,
    ) -> Result<T, FileOpError> {
        let deadline = Deadline::after(wait);
        let mut channel = deadline.open(self, request).await?;
        let mut reply = None;
        loop {
            let frame = deadline.recv(&mut channel).await?;
            match frame.kind {
                Kind::Data if reply.is_none() => reply = Some(parse::<T>(&frame)?),
                Kind::Done => {
                    return reply
                        .ok_or_else(|| AgentError::Protocol("reply without data".into()).into());
                }
                Kind::Error => return Err(FileOpError::Refused(parse(&frame)?)),
                _ => return Err(unexpected(&frame).into()),
            }
        }
    }

    /// Starts a background process.
    pub async fn spawn_process(
        &self,
        id: &str,
        argv: Vec<String>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
        (stdin, tag, pty): (bool, Option<String>, Option<(u16, u16)>),
    ) -> Result<ProcessInfo, FileOpError> {
        let request = Request::Spawn {
            id: id.to_owned(),
            argv,
            cwd,
            env,
            marker: (MARKER_ENV.to_owned(), marker()),
            stdin,
            tag,
            pty: pty.map(|(cols, rows)| sandboxd_agent_protocol::Resize { cols, rows }),
        };
        self.ask(&request, self.op_timeout).await
    }

    /// Resizes the terminal of a background process.
    pub async fn resize_process(
        &self,
        id: &str,
        cols: u16,
        rows: u16,
    ) -> Result<ProcessInfo, FileOpError> {
        let request = Request::ResizeProcess {
            id: id.to_owned(),
            cols,
            rows,
        };
        self.ask(&request, self.op_timeout).await
    }

    /// Follows a background process from `from`. Nothing bounds how long it lasts:
    /// the caller holds it as long as it wants the output.
    pub async fn follow_process(
        &self,
        id: &str,
        from: FollowFrom,
    ) -> Result<Following, AgentError> {
        let (stdout_offset, stderr_offset) = match from {
            FollowFrom::Start => (0, 0),
            FollowFrom::Offsets { stdout, stderr } => (stdout, stderr),
        };
        let request = Request::FollowProcess {
            id: id.to_owned(),
            stdout_offset,
            stderr_offset,
        };
        let deadline = Deadline::after(self.op_timeout);
        let channel = deadline.open(self, &request).await?;
        let guard = channel.cancel_on_drop();
        Ok(Following {
            channel,
            guard,
            ended: false,
        })
    }

    /// A path's metadata, not following a final symbolic link.
    pub async fn stat(&self, path: &str) -> Result<DirEntry, FileOpError> {
        let request = Request::Stat {
            path: path.to_owned(),
        };
        self.ask(&request, self.op_timeout).await
    }

    /// Replaces a path's metadata.
    pub async fn set_metadata(
        &self,
        path: &str,
        metadata: std::collections::BTreeMap<String, String>,
    ) -> Result<(), FileOpError> {
        let request = Request::SetMetadata {
            path: path.to_owned(),
            metadata,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// Starts watcher `id` of the directory `path`.
    pub async fn add_watcher(
        &self,
        id: &str,
        path: &str,
        recursive: bool,
    ) -> Result<(), FileOpError> {
        let request = Request::AddWatcher {
            id: id.to_owned(),
            path: path.to_owned(),
            recursive,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// The events of watcher `id` since the last read; at most [`MAX_WATCH_BYTES`] of
    /// them are taken. With `wait`, a read that would find none waits up to that long
    /// (at most a second) for the first: in the agent, or, for an agent that cannot
    /// (before version 7), by waiting [`OLD_AGENT_POLL`] before the read.
    pub async fn watcher_events(
        &self,
        id: &str,
        wait: Duration,
    ) -> Result<Vec<WatchEvent>, FileOpError> {
        let wait_ms = if self.hello.version >= sandboxd_agent_protocol::WATCH_WAIT_VERSION {
            u32::try_from(wait.min(Duration::from_secs(1)).as_millis()).unwrap_or(1000)
        } else {
            if !wait.is_zero() {
                tokio::time::sleep(wait.min(OLD_AGENT_POLL)).await;
            }
            0
        };
        let request = Request::WatcherEvents {
            id: id.to_owned(),
            wait_ms,
        };
        self.batches(&request, MAX_WATCH_BYTES, "too many watch events")
            .await
    }

    /// Stops watcher `id`.
    pub async fn remove_watcher(&self, id: &str) -> Result<(), FileOpError> {
        let request = Request::RemoveWatcher { id: id.to_owned() };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// Renames a path.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), FileOpError> {
        let request = Request::Rename {
            from: from.to_owned(),
            to: to.to_owned(),
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// Removes a path and everything under it.
    pub async fn remove(&self, path: &str) -> Result<(), FileOpError> {
        let request = Request::Remove {
            path: path.to_owned(),
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        finish(&mut channel, deadline).await?;
        Ok(())
    }

    /// The background processes.
    pub async fn processes(&self) -> Result<Vec<ProcessInfo>, FileOpError> {
        self.ask(&Request::Processes {}, self.op_timeout).await
    }

    /// Waits up to `timeout` for a process to end.
    pub async fn wait_process(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<ProcessInfo, FileOpError> {
        let request = Request::WaitProcess {
            id: id.to_owned(),
            timeout_ms: timeout.as_millis() as u64,
        };
        self.ask(&request, timeout + self.op_timeout).await
    }

    /// Signals a process's group.
    pub async fn signal_process(&self, id: &str, signal: i32) -> Result<ProcessInfo, FileOpError> {
        self.ask(
            &Request::SignalProcess {
                id: id.to_owned(),
                signal,
            },
            self.op_timeout,
        )
        .await
    }

    /// Reads up to `max` bytes of a process's stream from `offset`.
    pub async fn read_process(
        &self,
        id: &str,
        stream: ProcessStream,
        offset: u64,
        max: u64,
    ) -> Result<(OutputSlice, Vec<u8>), FileOpError> {
        let request = Request::ReadProcess {
            id: id.to_owned(),
            stream,
            offset,
            max,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        let mut slice: Option<OutputSlice> = None;
        let mut bytes = Vec::new();
        loop {
            let frame = deadline.recv(&mut channel).await?;
            match (frame.kind, slice) {
                // The range is the agent's word: it must be one the request allowed.
                (Kind::Data, None) => {
                    let announced: OutputSlice = parse(&frame)?;
                    if !slice_allowed(&announced, offset, max) {
                        return Err(AgentError::Protocol(format!(
                            "output range {}..{} not within what was asked",
                            announced.start, announced.end
                        ))
                        .into());
                    }
                    slice = Some(announced);
                }
                (Kind::Data, Some(s))
                    if (bytes.len() + frame.payload.len()) as u64 <= s.end - s.start =>
                {
                    bytes.extend_from_slice(&frame.payload)
                }
                (Kind::Data, Some(_)) => {
                    return Err(AgentError::Protocol("more output than announced".into()).into());
                }
                (Kind::Done, Some(s)) if bytes.len() as u64 == s.end - s.start => {
                    return Ok((s, bytes));
                }
                (Kind::Error, _) => return Err(FileOpError::Refused(parse(&frame)?)),
                _ => return Err(unexpected(&frame).into()),
            }
        }
    }

    /// Writes to a process's standard input, closing it after when `close`.
    pub async fn write_process(
        &self,
        id: &str,
        data: &[u8],
        close: bool,
    ) -> Result<u64, FileOpError> {
        let request = Request::WriteProcess {
            id: id.to_owned(),
            close,
        };
        let deadline = Deadline::after(self.op_timeout);
        let mut channel = deadline.open(self, &request).await?;
        for chunk in data.chunks(CHUNK) {
            deadline.send(&channel, Kind::Data, chunk.to_vec()).await?;
        }
        deadline.send(&channel, Kind::End, Vec::new()).await?;
        Ok(finish(&mut channel, deadline).await?.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(start: u64, end: u64) -> OutputSlice {
        OutputSlice {
            start,
            end,
            exited: false,
        }
    }

    #[test]
    fn an_announced_range_must_be_one_the_request_allowed() {
        assert!(slice_allowed(&slice(0, 10), 0, 10));
        assert!(slice_allowed(&slice(5, 9), 0, 10), "older output dropped");
        assert!(slice_allowed(&slice(20, 20), 30, 10), "offset past the end");
        assert!(
            !slice_allowed(&slice(0, u64::MAX), 0, 1 << 20),
            "more than asked"
        );
        assert!(!slice_allowed(&slice(0, 11), 0, 10));
        assert!(!slice_allowed(&slice(9, 5), 0, 10), "reversed");
        assert!(!slice_allowed(&slice(2, 4), 3, 10), "before the offset");
    }
}

//! The agent adapter of the sandbox channel contract: a connection to a sandbox's agent
//! serves every operation of [`SandboxChannel`], and the hub hands out the channel of
//! each sandbox whose agent is connected ([`AgentChannels`]).
//!
//! The agent's errors become `ChannelError`s, `NotSent` kept apart from a channel lost
//! after the request left; directory entries become the API's, a `PtySession` a
//! `Terminal`.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_agent_protocol::{DirEntry, EntryKind, TransferShape};
use sandboxd_contracts::{
    AgentChannels, ChannelError, Chunks, Download, ExecOutcome, ExecSpec, FollowEvent, FollowFrom,
    OutputSlice, PathEntry, ProcessFollow, ProcessInfo, ProcessSpec, ProcessStream, SandboxChannel,
    Terminal, TerminalEvent, TerminalSpec, UploadShape, UploadSink, Via, WatchEvent,
};
use sandboxd_core::api::{FileEntry, FileType, TransferFormat};
use sandboxd_core::rfc3339::format_millis;

use crate::transfer::{TransferError, Upload};
use crate::{AgentConn, AgentError, AgentHub, FileOpError, Following, PortError, PtySession};

impl From<AgentError> for ChannelError {
    fn from(error: AgentError) -> Self {
        match error {
            AgentError::NotSent => Self::NotSent,
            lost => Self::Lost(Box::new(lost)),
        }
    }
}

impl From<FileOpError> for ChannelError {
    fn from(error: FileOpError) -> Self {
        match error {
            FileOpError::Refused(failure) => Self::Refused(failure),
            FileOpError::Agent(error) => error.into(),
        }
    }
}

impl From<TransferError> for ChannelError {
    fn from(error: TransferError) -> Self {
        match error {
            TransferError::Refused(failure) => Self::Refused(failure),
            TransferError::Agent(error) => error.into(),
            TransferError::Body(error) => Self::Body(error),
        }
    }
}

impl From<PortError> for ChannelError {
    fn from(error: PortError) -> Self {
        match error {
            PortError::Refused(failure) => Self::Refused(failure),
            PortError::Busy => Self::refused(
                sandboxd_contracts::RefusalKind::Limit,
                format!(
                    "the sandbox has {} connections to its ports open, the most it may",
                    crate::port::PORTS
                ),
            ),
            PortError::Agent(error) => error.into(),
        }
    }
}

fn file_entry(entry: DirEntry) -> FileEntry {
    FileEntry {
        name: entry.name,
        kind: match entry.kind {
            EntryKind::Directory => FileType::Directory,
            EntryKind::File => FileType::File,
            EntryKind::Symlink => FileType::Symlink,
            EntryKind::Other => FileType::Other,
        },
        size: Some(entry.size),
        mode: Some(format!("{:o}", entry.mode)),
        modified_at: Some(format_millis(entry.modified_ms)),
    }
}

fn shape(format: TransferFormat) -> TransferShape {
    match format {
        TransferFormat::Raw => TransferShape::Raw,
        TransferFormat::Tar => TransferShape::Tar,
    }
}

fn format_of(shape: TransferShape) -> TransferFormat {
    match shape {
        TransferShape::Raw => TransferFormat::Raw,
        TransferShape::Tar => TransferFormat::Tar,
    }
}

#[async_trait::async_trait]
impl UploadSink for Upload {
    async fn send(self: Box<Self>, body: Chunks) -> Result<u64, ChannelError> {
        Ok(Upload::send(*self, body).await?)
    }
}

#[async_trait::async_trait]
impl Terminal for PtySession {
    async fn input(&self, keys: &[u8]) -> Result<(), ChannelError> {
        Ok(PtySession::input(self, keys).await?)
    }

    async fn resize(&self, cols: u16, rows: u16) -> Result<(), ChannelError> {
        Ok(PtySession::resize(self, cols, rows).await?)
    }

    async fn next(&mut self) -> Result<TerminalEvent, ChannelError> {
        Ok(PtySession::next(self).await?)
    }
}

#[async_trait::async_trait]
impl SandboxChannel for AgentConn {
    fn via(&self) -> Via {
        Via::Agent
    }

    fn is_open(&self) -> bool {
        AgentConn::is_open(self)
    }

    async fn exec(&self, spec: ExecSpec) -> Result<ExecOutcome, ChannelError> {
        let (mut outcome, ended) = AgentConn::exec(self, spec).await?;
        outcome.kill_incomplete |= !ended;
        Ok(outcome)
    }

    async fn write_file(&self, path: &str, content: &[u8], mode: u32) -> Result<u64, ChannelError> {
        Ok(AgentConn::write_file(self, path, content, mode).await?)
    }

    async fn open_port(
        &self,
        port: u16,
    ) -> Result<Box<dyn sandboxd_contracts::ByteStream>, ChannelError> {
        Ok(Box::new(AgentConn::open_port(self, port).await?))
    }

    async fn accept_egress(&self) -> Result<Box<dyn sandboxd_contracts::ByteStream>, ChannelError> {
        Ok(Box::new(AgentConn::accept_egress(self).await?))
    }

    async fn read_file(&self, path: &str, max: usize) -> Result<Vec<u8>, ChannelError> {
        Ok(AgentConn::read_file(self, path, max).await?)
    }

    async fn list_dir(&self, path: &str, max: usize) -> Result<Vec<FileEntry>, ChannelError> {
        let entries = AgentConn::list_dir(self, path, max, false).await?;
        Ok(entries.into_iter().map(file_entry).collect())
    }

    async fn make_dir(&self, path: &str, mode: u32) -> Result<(), ChannelError> {
        Ok(AgentConn::make_dir(self, path, mode).await?)
    }

    /// An agent older than the streamed transfers takes none: another path serves them.
    async fn open_upload(
        &self,
        path: &str,
        shape: UploadShape,
    ) -> Result<Box<dyn UploadSink>, ChannelError> {
        if !self.speaks_transfers() {
            return Err(ChannelError::NotSent);
        }
        Ok(Box::new(AgentConn::open_upload(self, path, shape).await?))
    }

    async fn download(
        &self,
        path: &str,
        format: Option<TransferFormat>,
        cap: u64,
    ) -> Result<Download, ChannelError> {
        if !self.speaks_transfers() {
            return Err(ChannelError::NotSent);
        }
        let download = AgentConn::download(self, path, format.map(shape), cap).await?;
        Ok(Download {
            format: format_of(download.shape),
            size: download.size,
            body: download.body,
        })
    }

    async fn lease(&self, duration: Duration) -> Result<(), ChannelError> {
        Ok(AgentConn::lease(self, duration).await?)
    }

    async fn spawn_process(&self, spec: ProcessSpec) -> Result<ProcessInfo, ChannelError> {
        if spec.tag.is_some() || spec.pty.is_some() {
            daemon(self)?;
        }
        Ok(AgentConn::spawn_process(
            self,
            &spec.id,
            spec.argv,
            spec.cwd,
            spec.env,
            (spec.stdin, spec.tag, spec.pty),
        )
        .await?)
    }

    async fn processes(&self) -> Result<Vec<ProcessInfo>, ChannelError> {
        Ok(AgentConn::processes(self).await?)
    }

    async fn wait_process(&self, id: &str, timeout: Duration) -> Result<ProcessInfo, ChannelError> {
        Ok(AgentConn::wait_process(self, id, timeout).await?)
    }

    async fn signal_process(&self, id: &str, signal: i32) -> Result<ProcessInfo, ChannelError> {
        Ok(AgentConn::signal_process(self, id, signal).await?)
    }

    async fn read_process(
        &self,
        id: &str,
        stream: ProcessStream,
        offset: u64,
        max: u64,
    ) -> Result<(OutputSlice, Vec<u8>), ChannelError> {
        Ok(AgentConn::read_process(self, id, stream, offset, max).await?)
    }

    async fn write_process(&self, id: &str, data: &[u8], close: bool) -> Result<u64, ChannelError> {
        Ok(AgentConn::write_process(self, id, data, close).await?)
    }

    async fn open_terminal(&self, spec: TerminalSpec) -> Result<Box<dyn Terminal>, ChannelError> {
        Ok(Box::new(AgentConn::pty(self, spec).await?))
    }

    async fn follow_process(
        &self,
        id: &str,
        from: FollowFrom,
    ) -> Result<Box<dyn ProcessFollow>, ChannelError> {
        daemon(self)?;
        Ok(Box::new(AgentConn::follow_process(self, id, from).await?))
    }

    async fn resize_process(&self, id: &str, cols: u16, rows: u16) -> Result<(), ChannelError> {
        daemon(self)?;
        AgentConn::resize_process(self, id, cols, rows).await?;
        Ok(())
    }

    async fn stat(&self, path: &str) -> Result<PathEntry, ChannelError> {
        daemon(self)?;
        Ok(AgentConn::stat(self, path).await?)
    }

    async fn entries(&self, path: &str, max: usize) -> Result<Vec<PathEntry>, ChannelError> {
        daemon(self)?;
        Ok(AgentConn::list_dir(self, path, max, true).await?)
    }

    async fn set_metadata(
        &self,
        path: &str,
        metadata: std::collections::BTreeMap<String, String>,
    ) -> Result<(), ChannelError> {
        daemon(self)?;
        Ok(AgentConn::set_metadata(self, path, metadata).await?)
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), ChannelError> {
        daemon(self)?;
        Ok(AgentConn::rename(self, from, to).await?)
    }

    async fn remove(&self, path: &str) -> Result<(), ChannelError> {
        daemon(self)?;
        Ok(AgentConn::remove(self, path).await?)
    }

    async fn add_watcher(&self, id: &str, path: &str, recursive: bool) -> Result<(), ChannelError> {
        daemon(self)?;
        Ok(AgentConn::add_watcher(self, id, path, recursive).await?)
    }

    async fn watcher_events(
        &self,
        id: &str,
        wait: std::time::Duration,
    ) -> Result<Vec<WatchEvent>, ChannelError> {
        daemon(self)?;
        Ok(AgentConn::watcher_events(self, id, wait).await?)
    }

    async fn remove_watcher(&self, id: &str) -> Result<(), ChannelError> {
        daemon(self)?;
        Ok(AgentConn::remove_watcher(self, id).await?)
    }
}

/// Refuses what only an agent of [`sandboxd_agent_protocol::DAEMON_VERSION`] does.
fn daemon(conn: &AgentConn) -> Result<(), ChannelError> {
    if conn.speaks_daemon() {
        return Ok(());
    }
    Err(ChannelError::refused(
        sandboxd_contracts::RefusalKind::Invalid,
        "this sandbox's agent is older than this server: E2B's calls need a sandbox made by this version",
    ))
}

#[async_trait::async_trait]
impl ProcessFollow for Following {
    async fn next(&mut self) -> Result<FollowEvent, ChannelError> {
        Ok(Following::next(self).await?)
    }
}

impl AgentChannels for AgentHub {
    fn channel(&self, sandbox_id: &str) -> Option<Arc<dyn SandboxChannel>> {
        self.connection(sandbox_id)
            .map(|conn| Arc::new(conn) as Arc<dyn SandboxChannel>)
    }
}

//! A recording agent channel: it stands for the agent of every sandbox while it is
//! "connected", keeps every call the service makes in order, holds files in memory and
//! a list of background processes, and answers as the test scripts (by default,
//! everything succeeds).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use sandboxd_contracts::{
    AgentChannels, ChannelError, Chunks, Download, ExecOutcome, ExecSpec, OutputSlice, ProcessInfo,
    ProcessSpec, ProcessStream, RefusalKind, SandboxChannel, UploadShape, UploadSink, Via,
};
use sandboxd_core::api::{FileEntry, FileType, TransferFormat};

/// One call the service made of the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCall {
    Exec(Vec<String>),
    WriteFile(String),
    ReadFile(String),
    ListDir(String),
    MakeDir(String),
    Upload(String),
    Download(String),
    Spawn(String),
    OpenPort(u16),
    Processes,
    Signal(String, i32),
}

/// How the agent answers an exec.
#[derive(Debug)]
pub enum Answer {
    Ran(ExecOutcome),
    /// The request never left: another path may serve it.
    NotSent,
    /// The agent went away after the request left.
    Lost,
}

/// What the agent answers.
#[derive(Debug, Default)]
pub struct AgentScript {
    /// Whether the agent is connected at all.
    pub connected: bool,
    /// Answers of the next execs, in order; an exec with none left exits 0.
    pub exec: VecDeque<Answer>,
    /// Each exec waits here for a permit when set (a test's hold).
    pub exec_gate: Option<Arc<tokio::sync::Semaphore>>,
    /// The agent takes no streamed transfers (an older agent).
    pub no_transfers: bool,
    /// Directories that exist and are not the sandbox user's: making one is refused.
    pub foreign_dirs: Vec<String>,
    /// Files by path, and directories (by path) they list under.
    pub files: BTreeMap<String, Vec<u8>>,
    pub processes: Vec<ProcessInfo>,
    /// The environment each exec was given, in order.
    pub exec_envs: Vec<Vec<(String, String)>>,
    /// Each lease told, in order.
    pub leases: Vec<std::time::Duration>,
}

#[derive(Debug, Default)]
pub struct RecordingAgent {
    calls: Mutex<Vec<AgentCall>>,
    pub script: Mutex<AgentScript>,
}

impl RecordingAgent {
    pub fn calls(&self) -> Vec<AgentCall> {
        self.calls.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        self.calls.lock().unwrap().clear();
    }

    fn record(&self, call: AgentCall) {
        self.calls.lock().unwrap().push(call);
    }
}

/// The agents' channels: the one recording agent for every sandbox while connected.
#[derive(Debug, Clone)]
pub struct RecordingAgents(pub Arc<RecordingAgent>);

impl AgentChannels for RecordingAgents {
    fn channel(&self, _sandbox_id: &str) -> Option<Arc<dyn SandboxChannel>> {
        let connected = self.0.script.lock().unwrap().connected;
        connected.then(|| Arc::new(Channel(self.0.clone())) as Arc<dyn SandboxChannel>)
    }
}

#[derive(Debug)]
struct Channel(Arc<RecordingAgent>);

fn lost() -> ChannelError {
    ChannelError::Lost("the agent went away (scripted)".into())
}

struct Sink {
    agent: Arc<RecordingAgent>,
    path: String,
    shape: UploadShape,
}

#[async_trait::async_trait]
impl UploadSink for Sink {
    async fn send(self: Box<Self>, mut body: Chunks) -> Result<u64, ChannelError> {
        let mut content = Vec::new();
        while let Some(chunk) = body.next().await {
            content.extend_from_slice(&chunk.map_err(ChannelError::Body)?);
        }
        let size = content.len() as u64;
        if let UploadShape::File {
            size: announced, ..
        } = self.shape
            && announced != size
        {
            return Err(ChannelError::refused(RefusalKind::Io, "a short file"));
        }
        let mut script = self.agent.script.lock().unwrap();
        script.files.insert(self.path, content);
        Ok(size)
    }
}

#[async_trait::async_trait]
impl SandboxChannel for Channel {
    fn via(&self) -> Via {
        Via::Agent
    }

    async fn lease(&self, duration: std::time::Duration) -> Result<(), ChannelError> {
        self.0.script.lock().unwrap().leases.push(duration);
        Ok(())
    }

    async fn exec(&self, spec: ExecSpec) -> Result<ExecOutcome, ChannelError> {
        self.0.record(AgentCall::Exec(spec.argv.clone()));
        let (gate, answer) = {
            let mut script = self.0.script.lock().unwrap();
            script.exec_envs.push(spec.env.clone());
            (script.exec_gate.clone(), script.exec.pop_front())
        };
        if let Some(gate) = gate {
            gate.acquire().await.unwrap().forget();
        }
        match answer {
            None => Ok(ExecOutcome::default()),
            Some(Answer::Ran(outcome)) => Ok(outcome),
            Some(Answer::NotSent) => Err(ChannelError::NotSent),
            Some(Answer::Lost) => Err(lost()),
        }
    }

    async fn write_file(
        &self,
        path: &str,
        content: &[u8],
        _mode: u32,
    ) -> Result<u64, ChannelError> {
        self.0.record(AgentCall::WriteFile(path.into()));
        let mut script = self.0.script.lock().unwrap();
        script.files.insert(path.into(), content.to_vec());
        Ok(content.len() as u64)
    }

    async fn read_file(&self, path: &str, max: usize) -> Result<Vec<u8>, ChannelError> {
        self.0.record(AgentCall::ReadFile(path.into()));
        let script = self.0.script.lock().unwrap();
        match script.files.get(path) {
            None => Err(ChannelError::refused(RefusalKind::NotFound, "no such file")),
            Some(content) if content.len() > max => {
                Err(ChannelError::refused(RefusalKind::TooLarge, "too large"))
            }
            Some(content) => Ok(content.clone()),
        }
    }

    async fn list_dir(&self, path: &str, _max: usize) -> Result<Vec<FileEntry>, ChannelError> {
        self.0.record(AgentCall::ListDir(path.into()));
        let script = self.0.script.lock().unwrap();
        let prefix = format!("{}/", path.trim_end_matches('/'));
        let mut entries: BTreeMap<String, FileType> = BTreeMap::new();
        for name in script.files.keys() {
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((dir, _)) => entries.insert(dir.into(), FileType::Directory),
                None => entries.insert(rest.into(), FileType::File),
            };
        }
        if entries.is_empty() {
            return Err(ChannelError::refused(
                RefusalKind::NotFound,
                "no such directory",
            ));
        }
        // In no particular order, as the port allows: the last first.
        Ok(entries
            .into_iter()
            .rev()
            .map(|(name, kind)| FileEntry {
                name,
                kind,
                size: Some(0),
                mode: Some("644".into()),
                modified_at: None,
            })
            .collect())
    }

    async fn make_dir(&self, path: &str, _mode: u32) -> Result<(), ChannelError> {
        self.0.record(AgentCall::MakeDir(path.into()));
        if self
            .0
            .script
            .lock()
            .unwrap()
            .foreign_dirs
            .iter()
            .any(|d| d == path)
        {
            return Err(ChannelError::refused(
                RefusalKind::PermissionDenied,
                "operation not permitted",
            ));
        }
        Ok(())
    }

    async fn open_upload(
        &self,
        path: &str,
        shape: UploadShape,
    ) -> Result<Box<dyn UploadSink>, ChannelError> {
        if self.0.script.lock().unwrap().no_transfers {
            return Err(ChannelError::NotSent);
        }
        self.0.record(AgentCall::Upload(path.into()));
        Ok(Box::new(Sink {
            agent: self.0.clone(),
            path: path.into(),
            shape,
        }))
    }

    async fn download(
        &self,
        path: &str,
        _format: Option<TransferFormat>,
        _cap: u64,
    ) -> Result<Download, ChannelError> {
        if self.0.script.lock().unwrap().no_transfers {
            return Err(ChannelError::NotSent);
        }
        self.0.record(AgentCall::Download(path.into()));
        let content = self
            .0
            .script
            .lock()
            .unwrap()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| ChannelError::refused(RefusalKind::NotFound, "no such path"))?;
        let size = content.len() as u64;
        Ok(Download {
            format: TransferFormat::Raw,
            size: Some(size),
            body: Box::pin(futures_util::stream::once(async move {
                Ok(Bytes::from(content))
            })),
        })
    }

    /// An echo server on every port but 9, where nothing listens.
    async fn open_port(
        &self,
        port: u16,
    ) -> Result<Box<dyn sandboxd_contracts::ByteStream>, ChannelError> {
        self.0.record(AgentCall::OpenPort(port));
        if port == 9 {
            return Err(ChannelError::refused(
                RefusalKind::Unreachable,
                "nothing accepts connections on port 9",
            ));
        }
        let (ours, mut theirs) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            let (mut read, mut write) = tokio::io::split(&mut theirs);
            let _ = tokio::io::copy(&mut read, &mut write).await;
        });
        Ok(Box::new(ours))
    }

    async fn spawn_process(&self, spec: ProcessSpec) -> Result<ProcessInfo, ChannelError> {
        self.0.record(AgentCall::Spawn(spec.id.clone()));
        let info = ProcessInfo {
            id: spec.id,
            argv: spec.argv,
            pid: 42,
            started_ms: 1,
            exit: None,
            ended_ms: None,
            stdin_open: spec.stdin,
            stdout_bytes: 0,
            stderr_bytes: 0,
            tag: spec.tag,
            cwd: spec.cwd,
            pty: spec.pty.is_some(),
        };
        self.0.script.lock().unwrap().processes.push(info.clone());
        Ok(info)
    }

    async fn processes(&self) -> Result<Vec<ProcessInfo>, ChannelError> {
        self.0.record(AgentCall::Processes);
        Ok(self.0.script.lock().unwrap().processes.clone())
    }

    async fn signal_process(&self, id: &str, signal: i32) -> Result<ProcessInfo, ChannelError> {
        self.0.record(AgentCall::Signal(id.into(), signal));
        let script = self.0.script.lock().unwrap();
        script
            .processes
            .iter()
            .find(|p| p.id == id)
            .cloned()
            .ok_or_else(|| ChannelError::refused(RefusalKind::NotFound, "no such process"))
    }

    async fn wait_process(
        &self,
        id: &str,
        _timeout: Duration,
    ) -> Result<ProcessInfo, ChannelError> {
        self.signal_process(id, 0).await
    }

    async fn read_process(
        &self,
        _id: &str,
        _stream: ProcessStream,
        offset: u64,
        _max: u64,
    ) -> Result<(OutputSlice, Vec<u8>), ChannelError> {
        Ok((
            OutputSlice {
                start: offset,
                end: offset,
                exited: false,
            },
            Vec::new(),
        ))
    }
}

//! Interactive terminals: a shell (or a command) on a terminal inside the sandbox,
//! through its agent. Each session is on the sandbox's timeline: written when it opens,
//! and again when it closes (`NotedTerminal`, when its last handle goes).

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::activity::{ActivityBy, ActivityEntry, TerminalActivity};
use sandboxd_core::model::{Principal, Sandbox};

use std::sync::Mutex;

use super::Commands;
use crate::activity::recording::Recording;
use crate::activity::{Noted, by};
use crate::{Service, ServiceError, now_ms};
use sandboxd_contracts::{ChannelError, Terminal, TerminalEvent, TerminalSpec};

/// A new terminal session's id.
pub(crate) fn new_terminal_id() -> Result<String, ServiceError> {
    Ok(format!("t_{}", &sandboxd_store::new_id()?[..12]))
}

impl Commands {
    /// Opens a terminal in a running sandbox of the caller's. `cmd` runs through `sh -c`;
    /// without it, `sh` itself is the session. Needs the sandbox's agent.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn open_terminal(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        cmd: Option<String>,
        cols: u16,
        rows: u16,
    ) -> Result<Box<dyn Terminal>, ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let argv = match cmd {
            Some(cmd) => vec!["sh".into(), "-c".into(), cmd],
            None => vec!["sh".into()],
        };
        let spec = TerminalSpec {
            argv,
            cwd: Some(sandbox.workdir.clone()),
            env: self.service.command_env(&sandbox, Vec::new()).await?,
            cols,
            rows,
        };
        match agent.open_terminal(spec).await {
            Ok(terminal) => {
                let terminal_id = new_terminal_id()?;
                let recording = self
                    .service
                    .activity()
                    .start_recording(&sandbox, &terminal_id, (cols, rows))
                    .await;
                let activity = TerminalActivity {
                    terminal_id,
                    cols,
                    rows,
                    duration_ms: None,
                    recorded: recording.is_some(),
                };
                let noted = self.note_terminal(caller, &sandbox, activity.clone());
                Ok(Box::new(NotedTerminal {
                    inner: terminal,
                    recording: recording.map(Mutex::new),
                    closing: Some(Closing {
                        service: self.service.clone(),
                        sandbox,
                        noted,
                        by: by(caller),
                        activity,
                    }),
                }))
            }
            Err(error) => Err(self
                .service
                .channel_failed(&sandbox.sandbox_id, error)
                .await),
        }
    }

    /// Notes a terminal session opened; the entry to write again when it closes.
    pub(crate) fn note_terminal(
        &self,
        caller: &Principal,
        sandbox: &Sandbox,
        activity: TerminalActivity,
    ) -> Noted {
        let timeline = self.service.timeline();
        let noted = timeline.start();
        timeline.write(
            sandbox,
            &noted,
            ActivityEntry::terminal("open", by(caller), activity),
        );
        noted
    }

    /// Refreshes a sandbox's activity (a terminal in use).
    pub async fn touch(&self, sandbox_id: &str) -> Result<(), ServiceError> {
        Ok(self.service.store().touch(sandbox_id, now_ms()).await?)
    }
}

/// What writes a terminal's entry again when it closes.
#[derive(Debug)]
struct Closing {
    service: Service,
    sandbox: Sandbox,
    noted: Noted,
    by: Option<ActivityBy>,
    activity: TerminalActivity,
}

/// A terminal whose session is on the sandbox's timeline, and recorded.
#[derive(Debug)]
struct NotedTerminal {
    inner: Box<dyn Terminal>,
    recording: Option<Mutex<Recording>>,
    closing: Option<Closing>,
}

impl NotedTerminal {
    fn record(&self, what: impl FnOnce(&mut Recording)) {
        if let Some(recording) = &self.recording {
            what(&mut recording.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }
}

#[async_trait::async_trait]
impl Terminal for NotedTerminal {
    async fn input(&self, keys: &[u8]) -> Result<(), ChannelError> {
        self.record(|recording| recording.input(keys));
        self.inner.input(keys).await
    }

    async fn resize(&self, cols: u16, rows: u16) -> Result<(), ChannelError> {
        self.record(|recording| recording.resize(cols, rows));
        self.inner.resize(cols, rows).await
    }

    async fn next(&mut self) -> Result<TerminalEvent, ChannelError> {
        let event = self.inner.next().await;
        if let Ok(TerminalEvent::Output(bytes)) = &event {
            self.record(|recording| recording.output(bytes));
        }
        event
    }
}

impl Drop for NotedTerminal {
    fn drop(&mut self) {
        self.record(Recording::finish);
        let Some(mut closing) = self.closing.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        closing.activity.duration_ms = Some(closing.noted.elapsed_ms());
        closing.service.timeline().write(
            &closing.sandbox,
            &closing.noted,
            ActivityEntry::terminal("close", closing.by, closing.activity),
        );
    }
}

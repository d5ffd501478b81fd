//! Background processes: kept by the sandbox's agent, so they outlive client connections
//! (and restarts of sandboxd), and die with the sandbox.

use sandboxd_core::access::SandboxNeed;
use std::time::Duration;

use sandboxd_contracts::{ChannelError, ProcessInfo, ProcessSpec, ProcessStream, RefusalKind};
use sandboxd_core::api::{Encoding, ProcessOutputResult, ProcessView, StreamName};
use sandboxd_core::model::Principal;
use sandboxd_core::validate::StartProcess;

use super::Commands;
use crate::ServiceError;
use sandboxd_core::rfc3339::format_millis as rfc3339;

/// A read of process output returns at most this much.
const MAX_READ: u64 = 1024 * 1024;

fn view(sandbox_id: &str, info: ProcessInfo) -> ProcessView {
    let exit_code = info.exit.map(|exit| match (exit.code, exit.signal) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => 128 + i64::from(signal),
        (None, None) => 1,
    });
    ProcessView {
        process_id: info.id,
        sandbox_id: sandbox_id.to_owned(),
        // Started as `sh -c CMD`: show CMD.
        cmd: info
            .argv
            .get(2)
            .cloned()
            .unwrap_or_else(|| info.argv.join(" ")),
        pid: info.pid,
        status: if exit_code.is_some() {
            "exited"
        } else {
            "running"
        }
        .into(),
        exit_code,
        started_at: rfc3339(info.started_ms),
        ended_at: info.ended_ms.map(rfc3339),
        stdin_open: info.stdin_open,
        stdout_bytes: info.stdout_bytes,
        stderr_bytes: info.stderr_bytes,
    }
}

pub(super) fn process_error(error: ChannelError) -> ServiceError {
    match error {
        ChannelError::Refused(failure) => match failure.kind {
            RefusalKind::NotFound => ServiceError::NotFound("process"),
            RefusalKind::Io | RefusalKind::Limit => ServiceError::Conflict(failure.message),
            _ => ServiceError::Refused(failure.message),
        },
        ChannelError::NotSent | ChannelError::NeedsAgent => {
            ServiceError::Unavailable(crate::executor::NEEDS_AGENT.into())
        }
        ChannelError::Lost(cause) => ServiceError::Agent(cause),
        ChannelError::Body(error) => ServiceError::Refused(error.to_string()),
        ChannelError::Engine(error) => error.into(),
    }
}

fn new_process_id() -> Result<String, ServiceError> {
    Ok(format!("p_{}", &sandboxd_store::new_id()?[..12]))
}

impl Commands {
    /// Starts a background process and returns its handle at once.
    #[tracing::instrument(skip_all, fields(sandbox_id = %start.command.sandbox_id))]
    pub async fn start_process(
        &self,
        caller: &Principal,
        start: StartProcess,
    ) -> Result<ProcessView, ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, &start.command.sandbox_id, SandboxNeed::Use)
            .await?;
        let id = new_process_id()?;
        let cwd = start.command.cwd.unwrap_or_else(|| sandbox.workdir.clone());
        self.note_started(
            caller,
            &sandbox,
            (&start.command.cmd, &cwd),
            &id,
            &start.command.env,
        )
        .await;
        let argv = vec!["sh".into(), "-c".into(), start.command.cmd];
        let cwd = Some(cwd);
        let info = agent
            .spawn_process(ProcessSpec {
                id,
                argv,
                cwd,
                env: self
                    .service
                    .command_env(&sandbox, start.command.env)
                    .await?,
                stdin: start.stdin,
                tag: None,
                pty: None,
            })
            .await
            .map_err(process_error)?;
        Ok(view(&sandbox.sandbox_id, info))
    }

    /// The background processes of a sandbox, oldest first.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn list_processes(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Vec<ProcessView>, ServiceError> {
        let infos = self.process_infos(caller, sandbox_id).await?;
        Ok(infos
            .into_iter()
            .map(|info| view(sandbox_id, info))
            .collect())
    }

    /// Waits up to `timeout` for a process to end.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn wait_process(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        process_id: &str,
        timeout: Duration,
    ) -> Result<ProcessView, ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        let info = agent
            .wait_process(process_id, timeout)
            .await
            .map_err(process_error)?;
        Ok(view(&sandbox.sandbox_id, info))
    }

    /// Signals a process's group.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn signal_process(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        process_id: &str,
        signal: i32,
    ) -> Result<ProcessView, ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let info = agent
            .signal_process(process_id, signal)
            .await
            .map_err(process_error)?;
        Ok(view(&sandbox.sandbox_id, info))
    }

    /// Writes to a process's standard input.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn write_process(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        process_id: &str,
        data: &[u8],
        close: bool,
    ) -> Result<u64, ServiceError> {
        let (_, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        agent
            .write_process(process_id, data, close)
            .await
            .map_err(process_error)
    }

    /// Reads a process's output from `offset`.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn read_process(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        process_id: &str,
        stream: StreamName,
        offset: u64,
        encoding: Encoding,
    ) -> Result<ProcessOutputResult, ServiceError> {
        let (_, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        let which = match stream {
            StreamName::Stdout => ProcessStream::Stdout,
            StreamName::Stderr => ProcessStream::Stderr,
        };
        let (slice, bytes) = agent
            .read_process(process_id, which, offset, MAX_READ)
            .await
            .map_err(process_error)?;
        let data = encoding.encode(&bytes);
        Ok(ProcessOutputResult {
            process_id: process_id.to_owned(),
            stream,
            start: slice.start,
            end: slice.end,
            encoding,
            data,
            exited: slice.exited,
        })
    }
}

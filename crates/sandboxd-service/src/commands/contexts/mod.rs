//! Interpreter contexts: a background Python process running a small driver
//! (`driver.py`) that keeps its globals between runs. A run writes one JSON line to the
//! driver's standard input and reads the driver's reply, marked by an ASCII record
//! separator, from its output from where it stood before the run.

use sandboxd_core::access::SandboxNeed;
use std::time::{Duration, Instant};

use sandboxd_core::api::{
    ContextCreateRequest, ContextError, ContextRunRequest, ContextRunResult, ContextView,
};
use sandboxd_core::error::Invalid;
use sandboxd_core::limits::{
    DEFAULT_EXEC_TIMEOUT_MS, MAX_CMD_BYTES, MAX_EXEC_TIMEOUT_MS, MIN_EXEC_TIMEOUT_MS,
};
use sandboxd_core::model::Principal;
use sandboxd_ports::{ProcessSpec, ProcessStream, SandboxChannel};
use serde::Deserialize;

use super::processes::process_error;
use crate::ServiceError;
use crate::commands::Commands;
use sandboxd_core::rfc3339::format_millis as rfc3339;

const DRIVER: &str = include_str!("driver.py");
const RECORD: u8 = 0x1e;
const SIGINT: i32 = 2;
const SIGKILL: i32 = 9;
/// After an interrupt, the reply has this long to come before the context is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);
/// How long a removal waits for the interpreter to be gone.
const REMOVE_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
struct Reply {
    id: u64,
    stdout: String,
    stderr: String,
    result: Option<String>,
    error: Option<ContextError>,
    #[serde(default)]
    count: u64,
}

/// A context to start.
#[derive(Debug, Clone, Default)]
pub struct NewContext<'a> {
    /// Only `python`.
    pub language: Option<&'a str>,
    /// Where it runs; the sandbox's working directory when unset.
    pub cwd: Option<&'a str>,
    /// Its id (`c_…`); a new one when unset.
    pub id: Option<String>,
}

/// A run in a context.
#[derive(Debug, Clone, Default)]
pub struct ContextRun<'a> {
    pub code: &'a str,
    pub timeout_ms: Option<u64>,
    /// Environment variables set for this run only.
    pub env: std::collections::BTreeMap<String, String>,
}

/// Finds the reply to run `id` in `buf`: records after a separator, up to a newline.
fn find_reply(buf: &[u8], id: u64) -> Option<Reply> {
    buf.split(|b| *b == RECORD)
        .skip(1)
        .filter_map(|record| record.split(|b| *b == b'\n').next())
        .filter_map(|line| serde_json::from_slice::<Reply>(line).ok())
        .find(|reply| reply.id == id)
}

impl<'a> From<&'a ContextCreateRequest> for NewContext<'a> {
    fn from(request: &'a ContextCreateRequest) -> Self {
        Self {
            language: request.language.as_deref(),
            ..Self::default()
        }
    }
}

impl<'a> From<&'a ContextRunRequest> for ContextRun<'a> {
    fn from(request: &'a ContextRunRequest) -> Self {
        Self {
            code: &request.code,
            timeout_ms: request.timeout_ms,
            env: Default::default(),
        }
    }
}

fn run_timeout(value: Option<u64>) -> Result<Duration, Invalid> {
    let ms = value.unwrap_or(DEFAULT_EXEC_TIMEOUT_MS);
    if !(MIN_EXEC_TIMEOUT_MS..=MAX_EXEC_TIMEOUT_MS).contains(&ms) {
        return Err(Invalid::one(
            "timeoutMs",
            "must be between 1000 (1 s) and 600000 (10 min)",
        ));
    }
    Ok(Duration::from_millis(ms))
}

impl Commands {
    /// Starts a Python context in a running sandbox of the caller's.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn create_context(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        new: NewContext<'_>,
    ) -> Result<ContextView, ServiceError> {
        if new.language.is_some_and(|l| l != "python") {
            return Err(Invalid::one("language", "only python is supported").into());
        }
        if new
            .cwd
            .is_some_and(|cwd| !cwd.starts_with('/') || cwd.contains('\0'))
        {
            return Err(Invalid::one("cwd", "must be an absolute path").into());
        }
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let id = match new.id {
            Some(id) if id.starts_with("c_") && id.len() <= 64 => id,
            Some(_) => return Err(Invalid::one("contextId", "must start with c_").into()),
            None => format!("c_{}", &sandboxd_store::new_id()?[..12]),
        };
        let argv = vec!["python3".into(), "-u".into(), "-c".into(), DRIVER.into()];
        let cwd = new
            .cwd
            .map_or_else(|| sandbox.workdir.clone(), str::to_owned);
        let info = agent
            .spawn_process(ProcessSpec {
                id: id.clone(),
                argv,
                cwd: Some(cwd.clone()),
                env: self.service.command_env(&sandbox, Vec::new()).await?,
                stdin: true,
                tag: None,
                pty: None,
            })
            .await
            .map_err(process_error)?;
        Ok(ContextView {
            context_id: id,
            sandbox_id: sandbox.sandbox_id,
            language: "python".into(),
            status: if info.exit.is_some() {
                "exited"
            } else {
                "running"
            }
            .into(),
            started_at: rfc3339(info.started_ms),
            cwd: Some(cwd),
        })
    }

    /// The contexts of a sandbox, running or ended, oldest first.
    pub async fn contexts(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Vec<ContextView>, ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let mut listed = agent.processes().await.map_err(process_error)?;
        listed
            .retain(|p| p.id.starts_with("c_") && p.argv.get(3).is_some_and(|code| code == DRIVER));
        listed.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
        Ok(listed
            .into_iter()
            .map(|p| ContextView {
                status: if p.exit.is_some() {
                    "exited"
                } else {
                    "running"
                }
                .into(),
                started_at: rfc3339(p.started_ms),
                context_id: p.id,
                sandbox_id: sandbox.sandbox_id.clone(),
                language: "python".into(),
                cwd: p.cwd,
            })
            .collect())
    }

    /// Runs code in a context; its globals persist between runs.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn run_in_context(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        context_id: &str,
        run: &ContextRun<'_>,
    ) -> Result<ContextRunResult, ServiceError> {
        let code = run.code;
        if code.is_empty() || code.len() > MAX_CMD_BYTES {
            return Err(Invalid::one("code", "must be 1 to 65536 bytes").into());
        }
        if let Some(name) = sandboxd_core::env_vars::unsettable(&run.env) {
            return Err(
                Invalid::one("envVars", format!("{name:?} is not a variable one can set")).into(),
            );
        }
        let timeout = run_timeout(run.timeout_ms)?;
        let (_, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let info = agent
            .processes()
            .await
            .map_err(process_error)?
            .into_iter()
            .find(|p| p.id == context_id && p.id.starts_with("c_"))
            .ok_or(ServiceError::NotFound("context"))?;
        if info.exit.is_some() {
            return Err(ServiceError::Conflict(
                "the context's interpreter has ended".into(),
            ));
        }
        let run_id = u64::from_le_bytes(
            sandboxd_store::new_id()?.as_bytes()[..8]
                .try_into()
                .map_err(|_| ServiceError::Unavailable("no randomness".into()))?,
        ) >> 11;
        let mut line =
            serde_json::to_vec(&serde_json::json!({"id": run_id, "code": code, "env": run.env}))
                .unwrap_or_default();
        line.push(b'\n');
        agent
            .write_process(context_id, &line, false)
            .await
            .map_err(process_error)?;
        // A caller that goes away (a client disconnected) takes its run with it: the
        // interpreter is interrupted, so that the next run does not wait behind it.
        let mut pending = InterruptOnDrop {
            agent: Some((agent.clone(), context_id.to_owned())),
        };
        let started = Instant::now();
        let mut reader = ReplyReader {
            agent: agent.as_ref(),
            id: context_id,
            offset: info.stdout_bytes,
            buf: Vec::new(),
        };
        if let Some(reply) = reader.until(run_id, timeout).await? {
            pending.agent = None;
            return Ok(result(reply, false));
        }
        pending.agent = None;
        // Interrupt the run; the context and its state stay.
        agent
            .signal_process(context_id, SIGINT)
            .await
            .map_err(process_error)?;
        if let Some(reply) = reader.until(run_id, INTERRUPT_GRACE).await? {
            return Ok(result(reply, true));
        }
        agent
            .signal_process(context_id, SIGKILL)
            .await
            .map_err(process_error)?;
        Err(ServiceError::Conflict(format!(
            "the run did not stop after {:?}; the context was ended",
            started.elapsed()
        )))
    }

    /// Ends a context.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn remove_context(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        context_id: &str,
    ) -> Result<(), ServiceError> {
        if !context_id.starts_with("c_") {
            return Err(ServiceError::NotFound("context"));
        }
        let (_, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        agent
            .signal_process(context_id, SIGKILL)
            .await
            .map_err(process_error)?;
        // Returns once the interpreter is gone, so a run that follows is told it ended
        // rather than finding its input closed on the way out.
        let deadline = Instant::now() + REMOVE_WAIT;
        while Instant::now() < deadline {
            let processes = agent.processes().await.map_err(process_error)?;
            let running = processes
                .iter()
                .any(|p| p.id == context_id && p.exit.is_none());
            if !running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

/// Interrupts a context's run when dropped armed: its caller went away before the
/// reply.
struct InterruptOnDrop {
    agent: Option<(std::sync::Arc<dyn SandboxChannel>, String)>,
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if let Some((agent, id)) = self.agent.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = agent.signal_process(&id, SIGINT).await;
            });
        }
    }
}

fn result(reply: Reply, timed_out: bool) -> ContextRunResult {
    ContextRunResult {
        stdout: reply.stdout,
        stderr: reply.stderr,
        result: reply.result,
        error: reply.error,
        timed_out,
        execution_count: reply.count,
    }
}

/// Reads a context's output from an offset, looking for one reply.
struct ReplyReader<'a> {
    agent: &'a dyn SandboxChannel,
    id: &'a str,
    offset: u64,
    buf: Vec<u8>,
}

impl ReplyReader<'_> {
    /// The reply to `run_id`, or `None` when `wait` passed first.
    async fn until(&mut self, run_id: u64, wait: Duration) -> Result<Option<Reply>, ServiceError> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(2);
        loop {
            let (slice, bytes) = self
                .agent
                .read_process(self.id, ProcessStream::Stdout, self.offset, 1024 * 1024)
                .await
                .map_err(process_error)?;
            self.offset = slice.end;
            self.buf.extend_from_slice(&bytes);
            if let Some(reply) = find_reply(&self.buf, run_id) {
                return Ok(Some(reply));
            }
            // It ended before replying: its whole output was read.
            if slice.exited {
                return Err(ServiceError::Conflict(
                    "the context's interpreter has ended".into(),
                ));
            }
            // Replies are small: keep only what may hold the start of one.
            if self.buf.len() > 4 * 1024 * 1024 {
                let keep = self.buf.len() - 1024 * 1024;
                self.buf.drain(..keep);
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_its_reply_among_other_output() {
        let buf = b"noise\n\x1e{\"id\":1,\"stdout\":\"a\",\"stderr\":\"\",\"result\":null,\"error\":null}\n\
            \x1e{\"id\":2,\"stdout\":\"b\",\"stderr\":\"\",\"result\":\"42\",\"error\":null}\n";
        assert_eq!(
            find_reply(buf, 2).map(|r| r.result),
            Some(Some("42".into()))
        );
        assert_eq!(find_reply(buf, 1).map(|r| r.stdout), Some("a".into()));
        assert!(find_reply(buf, 3).is_none());
        assert!(
            find_reply(b"\x1e{\"id\":2,\"stdo", 2).is_none(),
            "an incomplete reply"
        );
    }
}

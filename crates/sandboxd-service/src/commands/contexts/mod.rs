//! Interpreter contexts: a background process running a small driver that keeps its
//! state between runs: `driver.py` for Python (with `notebook.py`, IPython's display
//! and formats, and `charts.py`, what a figure draws as data) and, given `bash`, for a
//! bash shell; `driver.js` for JavaScript. A run
//! writes one JSON line to the driver's standard input and follows the driver's output
//! from where it stood before the run: what the code prints and displays, as it comes,
//! then the run's reply (`records`).

use sandboxd_core::access::SandboxNeed;
use std::time::{Duration, Instant};

use sandboxd_contracts::{
    FollowEvent, FollowFrom, ProcessFollow, ProcessInfo, ProcessSpec, SandboxChannel,
};
use sandboxd_core::api::{
    CONTEXT_LANGUAGES, ContextCreateRequest, ContextResult, ContextRunRequest, ContextRunResult,
    ContextView, context_language,
};
use sandboxd_core::error::Invalid;
use sandboxd_core::limits::{
    DEFAULT_EXEC_TIMEOUT_MS, MAX_CMD_BYTES, MAX_EXEC_OUTPUT_BYTES, MAX_EXEC_TIMEOUT_MS,
    MIN_EXEC_TIMEOUT_MS,
};
use sandboxd_core::model::Principal;

use super::processes::process_error;
use crate::ServiceError;
use crate::commands::Commands;
pub use records::{Formats, RunOutput};
use records::{Gathered, Record, Records, Reply, formats};
use sandboxd_core::activity::{MAX_LINE_CHARS, OutputSummary, shown};

mod records;
use sandboxd_core::rfc3339::format_millis as rfc3339;

const PYTHON_DRIVER: &str = concat!(
    include_str!("charts.py"),
    include_str!("notebook.py"),
    include_str!("driver.py")
);
const JAVASCRIPT_DRIVER: &str = include_str!("driver.js");

/// The command line of a context of `language` (as `context_language` names it).
fn argv_of(language: &str) -> Vec<String> {
    let python = || {
        ["python3", "-u", "-c", PYTHON_DRIVER]
            .map(str::to_owned)
            .to_vec()
    };
    match language {
        "javascript" => ["node", "-e", JAVASCRIPT_DRIVER]
            .map(str::to_owned)
            .to_vec(),
        "bash" => {
            let mut argv = python();
            argv.push("bash".into());
            argv
        }
        _ => python(),
    }
}

/// The language of a process, if it is a context's.
/// Its tag names it (`context:<language>`); a context started before contexts had tags is
/// known by the start of its driver (a listing shows the start of a long command line).
fn language_of(process: &ProcessInfo) -> Option<&'static str> {
    if let Some(tag) = &process.tag {
        return CONTEXT_LANGUAGES
            .iter()
            .copied()
            .find(|language| tag.strip_prefix(TAG_PREFIX) == Some(language));
    }
    let drives = |code: &str, driver: &str| code.len() >= 1024 && driver.starts_with(code);
    let args: Vec<&str> = process.argv.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["python3", "-u", "-c", code, "bash"] if drives(code, PYTHON_DRIVER) => Some("bash"),
        ["python3", "-u", "-c", code, ..] if drives(code, PYTHON_DRIVER) => Some("python"),
        ["node", "-e", code] if drives(code, JAVASCRIPT_DRIVER) => Some("javascript"),
        _ => None,
    }
}

/// What a context's tag starts with; its language follows.
const TAG_PREFIX: &str = "context:";
const SIGINT: i32 = 2;
const SIGKILL: i32 = 9;
/// After an interrupt, the reply has this long to come before the context is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);
/// How long a removal waits for the interpreter to be gone.
const REMOVE_WAIT: Duration = Duration::from_secs(2);

/// A context to start.
#[derive(Debug, Clone, Default)]
pub struct NewContext<'a> {
    /// `python` (the default), `javascript` or `bash`, or another name of one
    /// (`context_language`).
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
    /// Starts a context in a running sandbox of the caller's.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn create_context(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        new: NewContext<'_>,
    ) -> Result<ContextView, ServiceError> {
        let language = match new.language {
            None => "python",
            Some(name) => context_language(name)
                .ok_or_else(|| Invalid::one("language", "must be python, javascript or bash"))?,
        };
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
        let argv = argv_of(language);
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
                tag: Some(format!("{TAG_PREFIX}{language}")),
                pty: None,
            })
            .await
            .map_err(process_error)?;
        Ok(ContextView {
            context_id: id,
            sandbox_id: sandbox.sandbox_id,
            language: language.to_owned(),
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
        let mut listed: Vec<_> = agent
            .processes()
            .await
            .map_err(process_error)?
            .into_iter()
            .filter(|p| p.id.starts_with("c_"))
            .filter_map(|p| language_of(&p).map(|language| (language, p)))
            .collect();
        listed.sort_by(|(_, a), (_, b)| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
        Ok(listed
            .into_iter()
            .map(|(language, p)| ContextView {
                status: if p.exit.is_some() {
                    "exited"
                } else {
                    "running"
                }
                .into(),
                started_at: rfc3339(p.started_ms),
                context_id: p.id,
                sandbox_id: sandbox.sandbox_id.clone(),
                language: language.into(),
                cwd: p.cwd,
            })
            .collect())
    }

    /// Runs code in a context; its globals persist between runs. Its stdout and
    /// stderr are gathered, each up to [`MAX_EXEC_OUTPUT_BYTES`], and what it displays
    /// before its final value.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn run_in_context(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        context_id: &str,
        run: &ContextRun<'_>,
    ) -> Result<ContextRunResult, ServiceError> {
        let mut sink = Sink::Gather(Gathered::default());
        let mut ran = self
            .run(caller, sandbox_id, context_id, run, &mut sink)
            .await?;
        if let Sink::Gather(mut gathered) = sink {
            for main in std::mem::take(&mut ran.results) {
                gathered.add_result(main.data, main.is_main_result);
            }
            ran.stdout = gathered.stdout;
            ran.stderr = gathered.stderr;
            ran.results = gathered.results;
            ran.truncated = gathered.truncated;
        }
        Ok(ran)
    }

    /// Runs code in a context, sending its output to `out` as it is printed or
    /// displayed (the answer's stdout and stderr are empty, its results only the final
    /// value). A caller that goes away ends the run.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn stream_in_context(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        context_id: &str,
        run: &ContextRun<'_>,
        out: &tokio::sync::mpsc::Sender<RunOutput>,
    ) -> Result<ContextRunResult, ServiceError> {
        self.run(caller, sandbox_id, context_id, run, &mut Sink::Forward(out))
            .await
    }

    async fn run(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        context_id: &str,
        run: &ContextRun<'_>,
        sink: &mut Sink<'_>,
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
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let env: Vec<(String, String)> = run
            .env
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let pending = self
            .service
            .activity()
            .command(&sandbox, caller, "code", (code, &sandbox.workdir), &env)
            .await;
        let done = self.run_on(agent, context_id, run, sink, timeout).await;
        match &done {
            Ok(ran) => pending.finish(|command, masker| {
                command.process_id = Some(context_id.to_owned());
                command.timed_out = ran.timed_out;
                command.stdout = Some(OutputSummary::of(
                    ran.stdout.as_bytes(),
                    ran.stdout.len() as u64,
                    masker,
                ));
                command.stderr = Some(OutputSummary::of(
                    ran.stderr.as_bytes(),
                    ran.stderr.len() as u64,
                    masker,
                ));
                command.error = ran.error.as_ref().map(|error| {
                    shown(
                        &masker.mask(&format!("{}: {}", error.name, error.value)),
                        MAX_LINE_CHARS,
                    )
                });
            }),
            Err(error) => pending.fail(error),
        }
        done
    }

    async fn run_on(
        &self,
        agent: std::sync::Arc<dyn sandboxd_contracts::SandboxChannel>,
        context_id: &str,
        run: &ContextRun<'_>,
        sink: &mut Sink<'_>,
        timeout: Duration,
    ) -> Result<ContextRunResult, ServiceError> {
        let code = run.code;
        let info = agent
            .processes()
            .await
            .map_err(process_error)?
            .into_iter()
            .find(|p| p.id == context_id && p.id.starts_with("c_"))
            .ok_or(ServiceError::NotFound("context"))?;
        if info.exit.is_some() {
            return Err(ended());
        }
        let run_id = u64::from_le_bytes(
            sandboxd_store::new_id()?.as_bytes()[..8]
                .try_into()
                .map_err(|_| ServiceError::Unavailable("no randomness".into()))?,
        ) >> 11;
        // Followed from where its output stood before the run: nothing of the run's
        // is missed, nothing of an earlier one read.
        let from = FollowFrom::Offsets {
            stdout: info.stdout_bytes,
            stderr: info.stderr_bytes,
        };
        let mut reader = RunReader {
            follow: agent
                .follow_process(context_id, from)
                .await
                .map_err(process_error)?,
            records: Records::of_run(run_id),
        };
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
        if let Some(reply) = reader.until(sink, started + timeout).await? {
            pending.agent = None;
            return Ok(result(reply, false));
        }
        pending.agent = None;
        // Interrupt the run; the context and its state stay.
        agent
            .signal_process(context_id, SIGINT)
            .await
            .map_err(process_error)?;
        if let Some(reply) = reader.until(sink, Instant::now() + INTERRUPT_GRACE).await? {
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

fn ended() -> ServiceError {
    ServiceError::Conflict("the context's interpreter has ended".into())
}

fn result(reply: Reply, timed_out: bool) -> ContextRunResult {
    // A driver of an earlier version answers text only.
    let main = reply.bundle.and_then(formats).or_else(|| {
        let text = reply.result.clone()?;
        Some(Formats::from([("text/plain".to_owned(), text.into())]))
    });
    ContextRunResult {
        stdout: String::new(),
        stderr: String::new(),
        results: main
            .map(|data| ContextResult {
                data,
                is_main_result: true,
            })
            .into_iter()
            .collect(),
        result: reply.result,
        error: reply.error,
        timed_out,
        truncated: false,
        execution_count: reply.count,
    }
}

/// Where a run's output goes as it is printed.
enum Sink<'s> {
    Gather(Gathered),
    Forward(&'s tokio::sync::mpsc::Sender<RunOutput>),
}

impl Sink<'_> {
    async fn put(&mut self, output: RunOutput) -> Result<(), ServiceError> {
        match self {
            Self::Gather(gathered) => {
                gathered.add(output, MAX_EXEC_OUTPUT_BYTES);
                Ok(())
            }
            Self::Forward(out) => out
                .send(output)
                .await
                .map_err(|_| ServiceError::Conflict("the run's caller went away".into())),
        }
    }
}

/// Reads one run's records from its context's output as they come.
struct RunReader {
    follow: Box<dyn ProcessFollow>,
    records: Records,
}

impl RunReader {
    /// The run's reply, its output sent to `sink` on the way; `None` when `deadline`
    /// passed first.
    async fn until(
        &mut self,
        sink: &mut Sink<'_>,
        deadline: Instant,
    ) -> Result<Option<Reply>, ServiceError> {
        loop {
            let event = match tokio::time::timeout_at(deadline.into(), self.follow.next()).await {
                Err(_) => return Ok(None),
                Ok(event) => event.map_err(process_error)?,
            };
            match event {
                FollowEvent::Stdout(bytes) => {
                    for record in self.records.push(&bytes) {
                        match record {
                            Record::Output(output) => sink.put(output).await?,
                            Record::Reply(reply) => return Ok(Some(reply)),
                        }
                    }
                }
                // The interpreter's own complaints, not the run's.
                FollowEvent::Stderr(_) => {}
                FollowEvent::Exit(_) => return Err(ended()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(argv: Vec<String>, tag: Option<&str>) -> ProcessInfo {
        ProcessInfo {
            id: "c_x".into(),
            argv,
            pid: 1,
            started_ms: 0,
            exit: None,
            ended_ms: None,
            stdin_open: true,
            stdout_bytes: 0,
            stderr_bytes: 0,
            tag: tag.map(str::to_owned),
            cwd: None,
            pty: false,
        }
    }

    #[test]
    fn a_contexts_language_is_its_tags_or_its_drivers() {
        for language in CONTEXT_LANGUAGES {
            let tagged = process(argv_of(language), Some(&format!("{TAG_PREFIX}{language}")));
            assert_eq!(language_of(&tagged), Some(language));
        }
        assert_eq!(language_of(&process(argv_of("python"), Some("mine"))), None);
        // Untagged (started before tags), as a listing shows it: the start of the driver.
        let cut = |mut argv: Vec<String>| {
            argv[2].truncate(8000);
            argv
        };
        assert_eq!(
            language_of(&process(cut(argv_of("python")), None)),
            Some("python")
        );
        assert_eq!(
            language_of(&process(argv_of("javascript"), None)),
            Some("javascript")
        );
        // Anything else is no context.
        let own = vec![
            "python3".into(),
            "-u".into(),
            "-c".into(),
            "print(1)".into(),
        ];
        assert_eq!(language_of(&process(own, None)), None);
    }
}

//! E2B's code interpreter (port 49999, `sandboxd_core::e2b::interpreter`) on
//! sandboxd's contexts: `POST /execute` runs code in the context named, or in the
//! sandbox's default one of the language named (made at its first use), and answers
//! E2B's lines of JSON as the code prints and displays; `/contexts` makes, lists,
//! removes and restarts contexts.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sandboxd_core::api::{ContextResult, ContextView};
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::interpreter::{
    ContextAnswer, ExecuteRequest, INTERPRETER_PORT, LISTED_DEFAULTS, NewContextRequest, current,
    default_context, default_language, ending_lines, language_served, listed, output_line,
    restarted_id, result_line,
};
use sandboxd_core::limits::MAX_EXEC_TIMEOUT_MS;

use super::files::FilesError;
use super::rpc::RpcError;
use super::{Envd, envd_on};
use crate::AppState;
use crate::service::{ContextRun, NewContext, RunOutput, ServiceError};

type Answer<T> = Result<T, FilesError>;

async fn caller(state: &AppState, headers: &HeaderMap) -> Answer<Envd> {
    Ok(envd_on(state, headers, None, INTERPRETER_PORT).await?)
}

fn invalid(message: impl Into<String>) -> FilesError {
    FilesError::from(RpcError::new(Code::InvalidArgument, message))
}

fn body<T: serde::de::DeserializeOwned + Default>(bytes: &[u8]) -> Answer<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|error| invalid(format!("invalid body: {error}")))
}

fn check_language(language: Option<&str>) -> Answer<&'static str> {
    language_served(language).ok_or_else(|| {
        invalid(format!(
            "python, javascript and bash are served here, not {:?}",
            language.unwrap_or_default()
        ))
    })
}

/// The processes of the sandbox's contexts.
async fn contexts_of(state: &AppState, who: &Envd) -> Answer<Vec<ContextView>> {
    Ok(state
        .service
        .commands()
        .contexts(&who.caller, &who.sandbox_id)
        .await?)
}

/// Starts a context's process.
async fn start(
    state: &AppState,
    who: &Envd,
    language: &str,
    id: Option<String>,
    cwd: Option<&str>,
) -> Answer<ContextView> {
    let new = NewContext {
        language: Some(language),
        cwd,
        id,
    };
    Ok(state
        .service
        .commands()
        .create_context(&who.caller, &who.sandbox_id, new)
        .await?)
}

/// The running process of context `id`: a default one is made (or made again) when
/// it is not running; any other must be.
async fn running(state: &AppState, who: &Envd, id: &str) -> Answer<ContextView> {
    let contexts = contexts_of(state, who).await?;
    let default = default_language(id);
    match (current(&contexts, id), default) {
        (Some(context), _) if context.status == "running" => Ok(context.clone()),
        (Some(ended), Some(language)) => {
            let id = restarted_id(&ended.context_id);
            start(state, who, language, Some(id), ended.cwd.as_deref()).await
        }
        (None, Some(language)) => {
            match start(state, who, language, Some(id.to_owned()), None).await {
                Ok(made) => Ok(made),
                // Made by a run beside this one meanwhile; any other failure (no `python3`
                // or `node` in the image) is the caller's to read.
                Err(error) => match current(&contexts_of(state, who).await?, id) {
                    Some(made) if made.status == "running" => Ok(made.clone()),
                    _ => Err(error),
                },
            }
        }
        (Some(_), None) => Err(FilesError::from(RpcError::new(
            Code::FailedPrecondition,
            format!("context {id} has ended; restart it"),
        ))),
        (None, None) => Err(not_found(id)),
    }
}

/// `POST /execute`.
pub(super) async fn execute(
    State(state): State<AppState>,
    headers: HeaderMap,
    bytes: bytes::Bytes,
) -> Answer<Response> {
    let who = caller(&state, &headers).await?;
    let asked: ExecuteRequest = body(&bytes)?;
    if asked.context_id.is_some() && asked.language.is_some() {
        return Err(invalid("name a context or a language, not both"));
    }
    let language = check_language(asked.language.as_deref())?;
    let id = asked
        .context_id
        .clone()
        .unwrap_or_else(|| default_context(language));
    if let Some(name) = asked
        .env_vars
        .as_ref()
        .and_then(sandboxd_core::env_vars::unsettable)
    {
        return Err(invalid(format!(
            "env_vars: {name:?} is not a variable one can set"
        )));
    }
    let context = running(&state, &who, &id).await?;
    let (process, python) = (context.context_id, context.language == "python");
    // The answer starts at once and its lines come as the code prints: a run that
    // fails (its sandbox killed) cuts the answer short, which E2B's SDK reads as the
    // sandbox gone; a client that goes away drops the run, which interrupts it.
    let (lines, body) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(4);
    let commands = state.service.commands();
    tokio::spawn(async move {
        let run = ContextRun {
            code: &asked.code,
            // The client bounds a run with its own timeout; this is the server's bound.
            timeout_ms: Some(MAX_EXEC_TIMEOUT_MS),
            env: asked.env_vars.clone().unwrap_or_default(),
        };
        let (out, mut printed) = tokio::sync::mpsc::channel::<RunOutput>(64);
        let running =
            commands.stream_in_context(&who.caller, &who.sandbox_id, &process, &run, &out);
        tokio::pin!(running);
        let ran = loop {
            tokio::select! {
                ran = &mut running => break ran,
                Some(piece) = printed.recv() => {
                    if lines.send(Ok(printed_lines(piece, &mut printed, python))).await.is_err() {
                        return;
                    }
                }
                () = lines.closed() => return,
            }
        };
        if let Ok(piece) = printed.try_recv() {
            let _ = lines
                .send(Ok(printed_lines(piece, &mut printed, python)))
                .await;
        }
        let answer = match ran {
            Ok(ran) => Ok(ndjson(ending_lines(&ran, python))),
            Err(error) => Err(std::io::Error::other(error.to_string())),
        };
        let _ = lines.send(answer).await;
    });
    let body = futures_util::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|item| (item, body))
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(body),
    )
        .into_response())
}

/// The lines of `first` and of what else was printed or displayed by now, as one
/// piece of the body.
fn printed_lines(
    first: RunOutput,
    more: &mut tokio::sync::mpsc::Receiver<RunOutput>,
    python: bool,
) -> bytes::Bytes {
    let now_ns = crate::time::now_ms().saturating_mul(1_000_000);
    let lines = std::iter::once(first)
        .chain(std::iter::from_fn(|| more.try_recv().ok()))
        .map(|piece| match piece {
            RunOutput::Stdout(text) => output_line("stdout", &text, now_ns),
            RunOutput::Stderr(text) => output_line("stderr", &text, now_ns),
            RunOutput::Display(data) => result_line(
                &ContextResult {
                    data,
                    is_main_result: false,
                },
                python,
            ),
        });
    ndjson(lines)
}

/// Lines of JSON.
fn ndjson(lines: impl IntoIterator<Item = serde_json::Value>) -> bytes::Bytes {
    let mut text = Vec::new();
    for line in lines {
        let _ = serde_json::to_writer(&mut text, &line);
        text.push(b'\n');
    }
    text.into()
}

/// `POST /contexts`.
pub(super) async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    bytes: bytes::Bytes,
) -> Answer<Json<ContextAnswer>> {
    let who = caller(&state, &headers).await?;
    let asked: NewContextRequest = body(&bytes)?;
    let language = check_language(asked.language.as_deref())?;
    let made = start(&state, &who, language, None, asked.cwd.as_deref()).await?;
    Ok(Json(ContextAnswer {
        id: made.context_id,
        language: made.language,
        cwd: made.cwd.unwrap_or_default(),
    }))
}

/// `GET /contexts`: the default contexts (Python's and JavaScript's) are made first when
/// they are not running, as E2B's server has them from its start; one the image cannot
/// run (no `node`) is left out.
pub(super) async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Answer<Json<Vec<ContextAnswer>>> {
    let who = caller(&state, &headers).await?;
    for language in LISTED_DEFAULTS {
        let _ = running(&state, &who, &default_context(language)).await;
    }
    Ok(Json(listed(&contexts_of(&state, &who).await?, "")))
}

/// The process of a context that exists, running or not.
async fn existing(state: &AppState, who: &Envd, id: &str) -> Answer<ContextView> {
    current(&contexts_of(state, who).await?, id)
        .cloned()
        .ok_or_else(|| not_found(id))
}

fn not_found(id: &str) -> FilesError {
    FilesError::from(RpcError::new(
        Code::NotFound,
        format!("context {id} not found"),
    ))
}

/// Ends the interpreter of context `id` (which must exist): the caller, and the
/// context as it was.
async fn end(state: &AppState, headers: &HeaderMap, id: &str) -> Answer<(Envd, ContextView)> {
    let who = caller(state, headers).await?;
    let context = existing(state, &who, id).await?;
    match state
        .service
        .commands()
        .remove_context(&who.caller, &who.sandbox_id, &context.context_id)
        .await
    {
        Ok(()) | Err(ServiceError::NotFound(_)) => Ok((who, context)),
        Err(error) => Err(error.into()),
    }
}

/// `DELETE /contexts/{id}`.
pub(super) async fn remove(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer<StatusCode> {
    end(&state, &headers, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /contexts/{id}/restart`: its state is gone; its id and directory stay.
pub(super) async fn restart(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Answer<StatusCode> {
    let (who, context) = end(&state, &headers, &id).await?;
    start(
        &state,
        &who,
        &context.language,
        Some(restarted_id(&context.context_id)),
        context.cwd.as_deref(),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

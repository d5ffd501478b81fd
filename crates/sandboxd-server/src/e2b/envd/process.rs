//! `process.Process`: commands start as the agent's background processes (so they
//! outlive the client, as E2B's do) and are followed for as long as a stream wants
//! them; a `Start` with a timeout kills its process when the timeout passes, whether
//! or not anyone still follows it.
//!
//! A task follows each process, sending `start`, output, `end` and keepalives, and
//! notices a client gone.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use sandboxd_contracts::{
    ChannelError, FollowEvent, FollowFrom, ProcessFollow, ProcessInfo, RefusalKind,
};
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::filesystem::resolve;
use sandboxd_core::e2b::process::{
    self as wire, Event, EventMessage, ListAnswer, ListedConfig, ListedProcess, Output, Selector,
};
use sandboxd_service::Launch;
use tokio::time::Instant;

use super::rpc::{self, RpcError, StreamOut};
use super::{Envd, envd};
use crate::AppState;

const SIGKILL: i32 = 9;
/// How long a kill waits for the process to be gone, so that its pid is free when the
/// answer arrives.
const KILL_SETTLE: Duration = Duration::from_secs(5);

pub(super) async fn call(
    State(state): State<AppState>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let streaming = matches!(method.as_str(), "Start" | "Connect");
    let who = match envd(&state, &headers, None).await {
        Ok(who) => who,
        Err(error) if streaming => return rpc::stream_error(error),
        Err(error) => return error.into_response(),
    };
    let answered = match method.as_str() {
        "Start" => return start(state, who, &headers, &body).await,
        "Connect" => return connect(state, who, &headers, &body).await,
        "List" => list(&state, &who).await,
        "SendInput" => send_input(&state, &who, &body).await,
        "SendSignal" => send_signal(&state, &who, &body).await,
        "CloseStdin" => close_stdin(&state, &who, &body).await,
        "Update" => update(&state, &who, &body).await,
        "StreamInput" => Err(RpcError::new(
            Code::Unimplemented,
            "process.Process/StreamInput is not served: send input with SendInput",
        )),
        _ => Err(RpcError::new(
            Code::Unimplemented,
            format!("process.Process/{method} does not exist"),
        )),
    };
    answered.unwrap_or_else(IntoResponse::into_response)
}

/// A failure of the sandbox's channel while following.
fn follow_error(sandbox_id: &str, error: ChannelError) -> RpcError {
    match error {
        ChannelError::Refused(refusal) if refusal.kind == RefusalKind::NotFound => {
            RpcError::new(Code::NotFound, refusal.message)
        }
        ChannelError::Refused(refusal) => RpcError::new(Code::Internal, refusal.message),
        _ => RpcError::new(
            Code::Unavailable,
            format!("the connection to sandbox {sandbox_id} ended before the stream completed"),
        ),
    }
}

/// Once the client of a stream is gone (never, when it already was).
async fn closed(out: &Option<StreamOut>) {
    match out {
        Some(out) => out.closed().await,
        None => std::future::pending().await,
    }
}

fn base64(bytes: &[u8]) -> String {
    base64_simd::STANDARD.encode_to_string(bytes)
}

/// Whose process a `Start`'s timeout kills.
struct KillAt {
    state: AppState,
    who: Envd,
    id: String,
}

/// What a stream does when its timeout passes.
enum AtDeadline {
    /// Kill the process (a `Start`'s timeout bounds the command).
    Kill(Box<KillAt>),
    /// End the stream only (a `Connect`'s bounds the following).
    End,
}

/// Streams a followed process: `start`, its output, its `end`; keepalives while it is
/// quiet; `deadline_exceeded` when the timeout passes. When the client goes away, a
/// process with a deadline is still followed until it ends or the deadline kills it.
async fn pump(
    out: StreamOut,
    mut follow: Box<dyn ProcessFollow>,
    (sandbox_id, pid, pty): (String, u32, bool),
    (deadline, at_deadline): (Option<Instant>, AtDeadline),
    keepalive: Option<Duration>,
) {
    let mut out = Some(out);
    let send = async |out: &mut Option<StreamOut>, event: Event| {
        if let Some(stream) = out
            && !stream.send(&EventMessage { event }).await
        {
            *out = None;
        }
    };
    send(&mut out, Event::Start { pid }).await;
    let far = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    loop {
        if out.is_none() && !matches!(at_deadline, AtDeadline::Kill(_) if deadline.is_some()) {
            return;
        }
        let tick = keepalive
            .filter(|_| out.is_some())
            .map_or(far, |k| Instant::now() + k);
        tokio::select! {
            event = follow.next() => match event {
                Ok(FollowEvent::Stdout(bytes)) if pty => {
                    send(&mut out, Event::Data(Output::Pty(base64(&bytes)))).await;
                }
                Ok(FollowEvent::Stdout(bytes)) => {
                    send(&mut out, Event::Data(Output::Stdout(base64(&bytes)))).await;
                }
                Ok(FollowEvent::Stderr(bytes)) => {
                    send(&mut out, Event::Data(Output::Stderr(base64(&bytes)))).await;
                }
                Ok(FollowEvent::Exit(exit)) => {
                    let mut end = wire::end_of(exit.code, exit.signal);
                    if end.exit_code != 0 {
                        end.error = Some(end.status.clone());
                    }
                    send(&mut out, Event::End(end)).await;
                    if let Some(out) = out {
                        out.end(None).await;
                    }
                    return;
                }
                Err(error) => {
                    if let Some(out) = out {
                        out.end(Some(follow_error(&sandbox_id, error))).await;
                    }
                    return;
                }
            },
            () = tokio::time::sleep_until(deadline.unwrap_or(far)) => {
                if let AtDeadline::Kill(kill) = &at_deadline {
                    let KillAt { state, who, id } = kill.as_ref();
                    let _ = state
                        .service
                        .commands()
                        .signal_process(&who.caller, &who.sandbox_id, id, SIGKILL)
                        .await;
                }
                if let Some(out) = out {
                    out.end(Some(RpcError::new(
                        Code::DeadlineExceeded,
                        "the command's timeout passed",
                    )))
                    .await;
                }
                return;
            }
            () = tokio::time::sleep_until(tick) => {
                send(&mut out, Event::Keepalive {}).await;
            }
            () = closed(&out) => {
                out = None;
            }
        }
    }
}

async fn start(state: AppState, who: Envd, headers: &HeaderMap, body: &Bytes) -> Response {
    match start_following(&state, &who, body).await {
        Ok((info, follow)) => {
            let deadline = rpc::timeout(headers).map(|t| Instant::now() + t);
            let (out, response) = rpc::stream_answer();
            let at_deadline = AtDeadline::Kill(Box::new(KillAt {
                state: state.clone(),
                who: who.clone(),
                id: info.id.clone(),
            }));
            tokio::spawn(pump(
                out,
                follow,
                (who.sandbox_id.clone(), info.pid, info.pty),
                (deadline, at_deadline),
                rpc::keepalive(headers),
            ));
            response
        }
        Err(error) => rpc::stream_error(error),
    }
}

async fn start_following(
    state: &AppState,
    who: &Envd,
    body: &Bytes,
) -> Result<(ProcessInfo, Box<dyn ProcessFollow>), RpcError> {
    let request: wire::StartRequest = rpc::stream_request(body)?;
    let launch = wire::launch_of(request).map_err(crate::error::ApiError::from)?;
    let cwd = match launch.cwd {
        Some(cwd) => Some(resolve(&cwd, "process.cwd").map_err(crate::error::ApiError::from)?),
        None => None,
    };
    let commands = state.service.commands();
    let info = commands
        .launch(
            &who.caller,
            &who.sandbox_id,
            Launch {
                argv: launch.argv,
                cwd,
                env: launch.env,
                stdin: launch.stdin,
                tag: launch.tag,
                pty: launch.pty,
            },
        )
        .await?;
    let follow = commands
        .follow(&who.caller, &who.sandbox_id, &info.id, FollowFrom::Start)
        .await?;
    Ok((info, follow))
}

/// The process a selector names: the running one of that pid or tag, else the latest.
async fn find(
    state: &AppState,
    who: &Envd,
    selector: Option<Selector>,
) -> Result<ProcessInfo, RpcError> {
    let selector = selector.unwrap_or_default();
    let infos = state
        .service
        .commands()
        .process_infos(&who.caller, &who.sandbox_id)
        .await?;
    let named = match (&selector.pid, &selector.tag) {
        (Some(pid), _) => format!("pid {pid}"),
        (None, Some(tag)) => format!("tag {tag:?}"),
        (None, None) => {
            return Err(RpcError::new(
                Code::InvalidArgument,
                "process: a pid or a tag is required",
            ));
        }
    };
    let selected = |p: &ProcessInfo| match (&selector.pid, &selector.tag) {
        (Some(pid), _) => p.pid == *pid,
        (None, tag) => p.tag.as_ref() == tag.as_ref(),
    };
    infos
        .into_iter()
        .filter(|p| selected(p))
        .max_by_key(|p| (p.exit.is_none(), p.started_ms))
        .ok_or_else(|| RpcError::new(Code::NotFound, format!("process with {named} not found")))
}

async fn connect(state: AppState, who: Envd, headers: &HeaderMap, body: &Bytes) -> Response {
    let followed = async {
        let request: wire::SelectRequest = rpc::stream_request(body)?;
        let info = find(&state, &who, request.process).await?;
        let follow = state
            .service
            .commands()
            .follow(
                &who.caller,
                &who.sandbox_id,
                &info.id,
                FollowFrom::Offsets {
                    stdout: info.stdout_bytes,
                    stderr: info.stderr_bytes,
                },
            )
            .await?;
        Ok::<_, RpcError>((info, follow))
    };
    match followed.await {
        Ok((info, follow)) => {
            let deadline = rpc::timeout(headers).map(|t| Instant::now() + t);
            let (out, response) = rpc::stream_answer();
            tokio::spawn(pump(
                out,
                follow,
                (who.sandbox_id.clone(), info.pid, info.pty),
                (deadline, AtDeadline::End),
                rpc::keepalive(headers),
            ));
            response
        }
        Err(error) => rpc::stream_error(error),
    }
}

async fn list(state: &AppState, who: &Envd) -> Result<Response, RpcError> {
    let infos = state
        .service
        .commands()
        .process_infos(&who.caller, &who.sandbox_id)
        .await?;
    let processes = infos
        .into_iter()
        .filter(|info| info.exit.is_none())
        .map(|info| {
            let mut argv = info.argv.into_iter();
            ListedProcess {
                config: ListedConfig {
                    cmd: argv.next().unwrap_or_default(),
                    args: argv.collect(),
                    envs: Default::default(),
                    cwd: info.cwd,
                },
                pid: info.pid,
                tag: info.tag,
            }
        })
        .collect();
    Ok(rpc::unary_answer(&ListAnswer { processes }))
}

async fn send_input(state: &AppState, who: &Envd, body: &Bytes) -> Result<Response, RpcError> {
    let request: wire::SendInputRequest = rpc::unary_request(body)?;
    let input = request.input.unwrap_or_default();
    let to_terminal = input.pty.is_some();
    let data = base64_simd::STANDARD
        .decode_to_vec(input.pty.or(input.stdin).unwrap_or_default())
        .map_err(|_| RpcError::new(Code::InvalidArgument, "input: invalid base64"))?;
    let info = find(state, who, request.process).await?;
    if to_terminal != info.pty {
        return Err(RpcError::new(
            Code::FailedPrecondition,
            if info.pty {
                "the process runs on a terminal: send its input as pty"
            } else {
                "the process has no terminal: send its input as stdin"
            },
        ));
    }
    state
        .service
        .commands()
        .write_process(&who.caller, &who.sandbox_id, &info.id, &data, false)
        .await?;
    Ok(rpc::unary_answer(&serde_json::json!({})))
}

async fn send_signal(state: &AppState, who: &Envd, body: &Bytes) -> Result<Response, RpcError> {
    let request: wire::SendSignalRequest = rpc::unary_request(body)?;
    let signal = wire::signal_of(request.signal.as_ref()).map_err(crate::error::ApiError::from)?;
    let info = find(state, who, request.process).await?;
    let commands = state.service.commands();
    commands
        .signal_process(&who.caller, &who.sandbox_id, &info.id, signal)
        .await?;
    if signal == SIGKILL {
        commands
            .wait_process(&who.caller, &who.sandbox_id, &info.id, KILL_SETTLE)
            .await?;
    }
    Ok(rpc::unary_answer(&serde_json::json!({})))
}

async fn update(state: &AppState, who: &Envd, body: &Bytes) -> Result<Response, RpcError> {
    let request: wire::UpdateRequest = rpc::unary_request(body)?;
    let size = request
        .pty
        .and_then(|pty| pty.size)
        .filter(|size| (1..=1000).contains(&size.cols) && (1..=1000).contains(&size.rows))
        .ok_or_else(|| {
            RpcError::new(
                Code::InvalidArgument,
                "pty.size: columns and rows must be 1 to 1000",
            )
        })?;
    let info = find(state, who, request.process).await?;
    state
        .service
        .commands()
        .resize_process(
            &who.caller,
            &who.sandbox_id,
            &info.id,
            (size.cols as u16, size.rows as u16),
        )
        .await?;
    Ok(rpc::unary_answer(&serde_json::json!({})))
}

async fn close_stdin(state: &AppState, who: &Envd, body: &Bytes) -> Result<Response, RpcError> {
    let request: wire::SelectRequest = rpc::unary_request(body)?;
    let info = find(state, who, request.process).await?;
    state
        .service
        .commands()
        .write_process(&who.caller, &who.sandbox_id, &info.id, &[], true)
        .await?;
    Ok(rpc::unary_answer(&serde_json::json!({})))
}

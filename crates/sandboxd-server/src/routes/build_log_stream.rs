//! `template.buildLogStream`: a build's log as server-sent events, each line as it is
//! written. The lines come from the store, so any replica serves the stream; this
//! replica's own builds wake it at once (`Builds::written`), another's within 250 ms.
//! The stream ends with an `end` event once the build has ended and every line was sent.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::template_build::BUILDING;
use sandboxd_service::Builds;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::time::rfc3339;

/// How long a stream waits before asking the store again without a wake-up.
const LOOK_AGAIN: Duration = Duration::from_millis(250);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(build_log_stream))
}

struct Follow {
    builds: Builds,
    caller: Principal,
    build_id: String,
    offset: i64,
    written: tokio::sync::watch::Receiver<u64>,
    queue: VecDeque<Event>,
    done: bool,
}

fn json_event(name: &str, value: &impl serde::Serialize) -> Event {
    Event::default()
        .event(name)
        .json_data(value)
        .unwrap_or_else(|_| Event::default().event(name))
}

impl Follow {
    /// The next event, waiting for lines while the build runs.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            self.written.mark_unchanged();
            let (build, lines) = match self
                .builds
                .log(&self.caller, &self.build_id, self.offset)
                .await
            {
                Ok(read) => read,
                Err(_) => {
                    self.done = true;
                    self.queue
                        .push_back(json_event("end", &serde_json::json!({"status": "unknown"})));
                    continue;
                }
            };
            if !lines.is_empty() {
                for line in lines {
                    let entry = BuildLogEntry {
                        time: rfc3339(line.time),
                        step: line.step,
                        stream: line.stream,
                        line: line.line,
                    };
                    self.queue
                        .push_back(json_event("entry", &entry).id(self.offset.to_string()));
                    self.offset += 1;
                }
                continue;
            }
            if build.status != BUILDING {
                self.done = true;
                let error = build.error_message.map(|message| BuildError {
                    step: build.error_step.unwrap_or_default(),
                    message,
                });
                self.queue.push_back(json_event(
                    "end",
                    &serde_json::json!({"status": build.status, "nextOffset": self.offset, "error": error}),
                ));
                continue;
            }
            let _ = tokio::time::timeout(LOOK_AGAIN, self.written.changed()).await;
        }
    }
}

/// A build's log as it is written, as server-sent events (`text/event-stream`): an
/// `entry` event per line (its data a `BuildLogEntry`, its id the line's offset), and an
/// `end` event with the build's `status`, `nextOffset` and `error` once it has ended.
/// `offset` starts further on (a reconnecting client gives its last id plus one).
#[utoipa::path(get, path = "/api/template.buildLogStream", operation_id = "template-buildLogStream", tag = "template",
    params(BuildLogQuery),
    responses((status = 200, content_type = "text/event-stream", body = String),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn build_log_stream(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<BuildLogQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let offset = sandboxd_core::validate::build_log_offset(req.offset)?;
    let builds = state.service.builds();
    // Not found before anything is streamed.
    let build = builds.build_for(&caller, &req.build_id).await?;
    let follow = Follow {
        written: builds.written(),
        builds,
        caller,
        build_id: build.build_id,
        offset,
        queue: VecDeque::new(),
        done: false,
    };
    let events = futures_util::stream::unfold(follow, Follow::next);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

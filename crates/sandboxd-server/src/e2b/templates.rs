//! E2B's template builder under `/e2b` (`sandboxd_core::e2b::templates` for the wire
//! format, the service's `Builds` for the work): `POST /v3/templates` names a build,
//! `GET /templates/{id}/files/{hash}` says whether a `COPY`'s files are held and else
//! where to upload them, `PUT /template-files/{project}/{hash}?token=` takes the
//! upload (E2B's SDK sends it without its key: the URL's token, derived from the master
//! key, names the key it was made for, which must still be able to build there),
//! `POST /v2/templates/{id}/builds/{buildID}` starts the build with its steps,
//! `GET /templates/{id}/builds/{buildID}/status` answers its status and log,
//! `GET /templates/aliases/{name}` whether a template of that name exists, and
//! `/templates/tags` and `GET /templates/{id}/tags` its tags.

use std::sync::LazyLock;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post, put};
use sandboxd_core::e2b::host::{E2bHost, e2b_host};
use sandboxd_core::e2b::tags::{AssignTags, AssignedTags, RemoveTags, TagAnswer};
use sandboxd_core::e2b::templates::{
    self, AliasAnswer, BuildStart, FileUploadAnswer, StatusAnswer, TemplateRequest,
    TemplateRequestAnswer,
};
use serde::Deserialize;

use super::calls::{E2bResult, body, caller, place_of};
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::service::ServiceError;

/// The path of uploads, under E2B's API root.
pub const UPLOADS: &str = "/template-files/";
/// How long an upload URL works, seconds.
const UPLOAD_URL_SECS: i64 = 60 * 60;
/// Uploads held in memory at once (each up to the build's body limit).
static UPLOADS_AT_ONCE: LazyLock<tokio::sync::Semaphore> =
    LazyLock::new(|| tokio::sync::Semaphore::new(2));

/// The routes.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/e2b/v3/templates", post(request_build))
        .route("/e2b/templates/aliases/{alias}", get(alias))
        .route("/e2b/templates/{id}/files/{hash}", get(upload_link))
        .route("/e2b/template-files/{project}/{hash}", put(upload))
        .route("/e2b/v2/templates/{id}/builds/{build}", post(start_build))
        .route("/e2b/templates/{id}/builds/{build}/status", get(status))
        .route("/e2b/templates/tags", post(assign_tags).delete(remove_tags))
        .route("/e2b/templates/{id}/tags", get(tags))
}

/// Puts tags on the build a `name:tag` names: 201.
async fn assign_tags(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    asked: Result<Json<AssignTags>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<(StatusCode, Json<AssignedTags>)> {
    let who = caller(who)?;
    let asked = body(asked)?;
    let (project_id, _) = place_of(&state, &who).await?;
    let tagged = state
        .service
        .builds()
        .e2b_assign_tags(&who, &project_id, &asked.target, &asked.tags)
        .await?;
    Ok((StatusCode::CREATED, Json(tagged)))
}

/// Takes tags off a template's builds: 204.
async fn remove_tags(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    asked: Result<Json<RemoveTags>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<StatusCode> {
    let who = caller(who)?;
    let asked = body(asked)?;
    let (project_id, _) = place_of(&state, &who).await?;
    state
        .service
        .builds()
        .e2b_remove_tags(&who, &project_id, &asked.name, &asked.tags)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A template's tags, with the build each names.
async fn tags(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(template): Path<String>,
) -> E2bResult<Json<Vec<TagAnswer>>> {
    let who = caller(who)?;
    let (project_id, _) = place_of(&state, &who)
        .await
        .map_err(|_| ServiceError::NotFound("template"))?;
    Ok(Json(
        state
            .service
            .builds()
            .e2b_tags(&who, &project_id, &template)
            .await?,
    ))
}

/// Names a build: 202 with its template's and its own id.
async fn request_build(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    asked: Result<Json<TemplateRequest>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<(StatusCode, Json<TemplateRequestAnswer>)> {
    let who = caller(who)?;
    let asked = body(asked)?;
    let (name, tags) = templates::name_and_tags(&asked)?;
    let (project_id, _) = place_of(&state, &who).await?;
    let build = state
        .service
        .builds()
        .e2b_request(
            &who,
            &project_id,
            name,
            tags,
            asked.cpu_count,
            asked.memory_mb,
        )
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TemplateRequestAnswer {
            template_id: build.template_id,
            build_id: build.build_id,
            public: false,
            names: vec![build.name.clone()],
            tags: build.tags,
            aliases: vec![build.name],
        }),
    ))
}

/// Where E2B's SDK is reached: its API root as the request names it (the API host of
/// the E2B domain serves it at `/`, sandboxd's own address under `/e2b`).
fn api_root(state: &AppState, headers: &HeaderMap) -> String {
    let base = state.previews.base(headers);
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let on_api_host = state
        .e2b_domain
        .as_deref()
        .is_some_and(|domain| e2b_host(host, domain) == Some(E2bHost::Api));
    if on_api_host {
        // E2B's SDKs reach the domain over TLS only (a proxy in front ends it), whether
        // or not the proxy says so.
        match base.strip_prefix("http://") {
            Some(rest) if !forwarded_http(headers) => format!("https://{rest}"),
            _ => base,
        }
    } else {
        format!("{base}/e2b")
    }
}

/// Whether a proxy in front said the request came over plain HTTP.
fn forwarded_http(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("http"))
}

/// Whether a `COPY`'s files are held (201), and else where to upload them.
async fn upload_link(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    headers: HeaderMap,
    Path((id, hash)): Path<(String, String)>,
) -> E2bResult<(StatusCode, Json<FileUploadAnswer>)> {
    let who = caller(who)?;
    let place = state
        .service
        .builds()
        .e2b_upload_place(&who, &id, &hash)
        .await?;
    let url = (!place.present).then(|| {
        let expires = crate::time::now_ms() / 1000 + UPLOAD_URL_SECS;
        let token =
            state
                .service
                .store()
                .e2b_upload_token(&place.project_id, &hash, &who.key_id, expires);
        format!(
            "{}{UPLOADS}{}/{hash}?token={token}",
            api_root(&state, &headers),
            place.project_id
        )
    });
    Ok((
        StatusCode::CREATED,
        Json(FileUploadAnswer {
            present: place.present,
            url,
        }),
    ))
}

#[derive(Debug, Deserialize)]
struct UploadQuery {
    token: String,
}

/// Takes the archive of a `COPY`'s files, sent to an upload URL: the body is read only
/// once the token is checked, and then within the build's body limit, two at a time.
async fn upload(
    State(state): State<AppState>,
    Path((project, hash)): Path<(String, String)>,
    query: Result<Query<UploadQuery>, axum::extract::rejection::QueryRejection>,
    body: Body,
) -> E2bResult<StatusCode> {
    let refused = || ApiError::Unauthorized;
    let Ok(Query(query)) = query else {
        return Err(refused().into());
    };
    let store = state.service.store();
    let now_s = crate::time::now_ms() / 1000;
    let key_id = store
        .e2b_upload_key(&project, &hash, &query.token, now_s)
        .ok_or_else(refused)?;
    let principal = crate::auth::key_holder(&state, &key_id)
        .await?
        .ok_or_else(refused)?;
    let _turn = UPLOADS_AT_ONCE
        .acquire()
        .await
        .map_err(|_| ServiceError::Unavailable("the server is stopping".into()))?;
    let archive = axum::body::to_bytes(body, sandboxd_core::template_build::MAX_BUILD_BODY_BYTES)
        .await
        .map_err(|error| ApiError::TooLarge(format!("the upload could not be read: {error}")))?;
    state
        .service
        .builds()
        .e2b_upload(&principal, &project, &hash, &archive)
        .await?;
    Ok(StatusCode::OK)
}

/// Starts a build named before with its steps: 202.
async fn start_build(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path((id, build)): Path<(String, String)>,
    start: Result<Json<BuildStart>, axum::extract::rejection::JsonRejection>,
) -> E2bResult<StatusCode> {
    let who = caller(who)?;
    let start = body(start)?;
    state
        .service
        .builds()
        .e2b_start(&who, &id, &build, start)
        .await?;
    Ok(StatusCode::ACCEPTED)
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusQuery {
    logs_offset: Option<i64>,
    limit: Option<i64>,
}

/// A build's status, with the lines of its log from `logsOffset` on (at most `limit`,
/// 100 at most).
async fn status(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path((id, build)): Path<(String, String)>,
    query: Result<Query<StatusQuery>, axum::extract::rejection::QueryRejection>,
) -> E2bResult<Json<StatusAnswer>> {
    let who = caller(who)?;
    let Query(query) = query.map_err(|rejection| {
        ApiError::BadRequest(format!("invalid query: {}", rejection.body_text()))
    })?;
    let answer = state
        .service
        .builds()
        .e2b_status(
            &who,
            &id,
            &build,
            query.logs_offset.unwrap_or(0),
            query.limit.unwrap_or(templates::MAX_STATUS_ENTRIES),
        )
        .await?;
    Ok(Json(answer))
}

/// Whether a template of this name exists: a configured one (public: every key sees
/// it), or one built in the caller's project: 200, else 404.
async fn alias(
    State(state): State<AppState>,
    who: Result<Caller, ApiError>,
    Path(alias): Path<String>,
) -> E2bResult<Json<AliasAnswer>> {
    let who = caller(who)?;
    if state.service.templates().get(&alias).is_some() {
        return Ok(Json(AliasAnswer {
            template_id: alias,
            public: true,
        }));
    }
    // Without a project, nothing of that name exists.
    let (project_id, _) = place_of(&state, &who)
        .await
        .map_err(|_| ServiceError::NotFound("template"))?;
    let name = alias
        .split_once(':')
        .map_or(alias.as_str(), |(name, _)| name);
    let builds = state
        .service
        .builds()
        .one(&who, None, Some(name), Some(&project_id))
        .await?;
    Ok(Json(AliasAnswer {
        template_id: builds[0].template_id.clone(),
        public: false,
    }))
}

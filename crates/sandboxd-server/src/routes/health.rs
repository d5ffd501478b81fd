//! `/health`: the server answers, and how it serves sandboxes. `/ready`: whether it can
//! serve now, its store and its engine checked apart (for a load balancer in front of
//! replicas, and for an operator finding which one fails).
//!
//! `/health` says the exec path; `/ready` checks the store and the engine each within 2
//! s, the error only in the log.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;

/// How commands and files reach new sandboxes.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecPath {
    /// Through the in-sandbox agent: fast exec and files; terminals, background
    /// processes and interpreter contexts.
    Agent,
    /// Through the engine's exec and archive API only (sandboxd runs without an agent):
    /// slower, and terminals, processes and contexts answer 503.
    Engine,
}

/// The server's health.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok` whenever the server answers.
    #[schema(example = "ok")]
    pub status: &'static str,
    /// The sandboxd version.
    pub version: &'static str,
    /// How commands and files reach new sandboxes.
    pub exec_path: ExecPath,
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
}

/// Whether the server answers, its version, and whether sandboxes get the agent.
#[utoipa::path(get, path = "/health", operation_id = "health", tag = "server",
    responses((status = 200, body = Health)))]
async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        exec_path: if state.service.agents().enabled() {
            ExecPath::Agent
        } else {
            ExecPath::Engine
        },
    })
}

/// How long each part of a readiness check may take.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// One part of the readiness check.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartHealth {
    /// `ok`, `failing` (it answered with an error) or `timeout` (no answer within 2 s).
    /// The error itself is in the server's log, not here: `/ready` needs no key.
    #[schema(example = "ok")]
    pub status: &'static str,
    /// How long the check took.
    pub latency_ms: f64,
}

/// The store's part: its check, and how it is kept.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreHealth {
    #[serde(flatten)]
    pub check: PartHealth,
    /// `sqlite` or `postgres`.
    #[schema(example = "sqlite")]
    pub backend: &'static str,
    /// Whether the key and row caches serve (on PostgreSQL: while the change feed of
    /// the other replicas is heard).
    pub caches: bool,
}

/// Whether the server can serve now.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    /// `ready` when the store and the engine answer, else `unready` (with status 503).
    #[schema(example = "ready")]
    pub status: &'static str,
    pub store: StoreHealth,
    /// The local engine.
    pub engine: PartHealth,
}

async fn check<E: std::error::Error>(
    part: &'static str,
    probe: impl std::future::Future<Output = Result<(), E>>,
) -> PartHealth {
    let started = Instant::now();
    let status = match tokio::time::timeout(READY_TIMEOUT, probe).await {
        Ok(Ok(())) => "ok",
        Ok(Err(error)) => {
            tracing::warn!(part, error = %sandboxd_core::error::chain(&error), "readiness check failed");
            "failing"
        }
        Err(_) => {
            tracing::warn!(part, "readiness check timed out");
            "timeout"
        }
    };
    PartHealth {
        status,
        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
    }
}

/// Whether the store and the engine answer, each checked apart (2 s at most each).
#[utoipa::path(get, path = "/ready", operation_id = "ready", tag = "server",
    responses(
        (status = 200, description = "Store and engine answer", body = Readiness),
        (status = 503, description = "The store or the engine does not answer", body = Readiness),
    ))]
async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let service = &state.service;
    let store = service.store();
    let (store_check, engine_check) = tokio::join!(
        check("store", store.ping(READY_TIMEOUT)),
        check("engine", async {
            service.engine().host().await.map(|_| ())
        }),
    );
    let ready = store_check.status == "ok" && engine_check.status == "ok";
    let body = Readiness {
        status: if ready { "ready" } else { "unready" },
        store: StoreHealth {
            check: store_check,
            backend: match store.backend() {
                sandboxd_store::Backend::Sqlite => "sqlite",
                sandboxd_store::Backend::Postgres => "postgres",
            },
            caches: store.caches_on(),
        },
        engine: engine_check,
    };
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

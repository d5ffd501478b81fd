//! `/health`: the server answers, and how it serves sandboxes.

use axum::Json;
use axum::extract::State;
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
    OpenApiRouter::new().routes(routes!(health))
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

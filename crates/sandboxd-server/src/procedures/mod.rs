//! The procedures served from their definitions (`sandboxd_core::api::definition`): each
//! is one function ([`Serve`]) from which its REST route and OpenAPI operation (here) and
//! its MCP tool (`mcp::defined`) are made. The procedures that need a handler of their
//! own (streams, the probes) are listed in [`HANDWRITTEN`].

mod access;
mod changes;
mod contexts;
mod egress;
mod ports;
mod processes;
mod projects;
mod sandboxes;
mod servers;
mod snapshots;
mod volumes;

use std::future::Future;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{MethodRouter, get, post};
use sandboxd_core::api::definition::{self, Definition, Takes};
use sandboxd_core::api::procedures::Method;
use sandboxd_core::model::Principal;
use utoipa::openapi::path::{PathItem, Paths};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::previews::PreviewSettings;
use crate::service::Service;

/// Where a call came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surface {
    Rest,
    Mcp,
}

/// What serving a call may read besides its caller and request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    pub service: &'a Service,
    /// The request's headers (previews' URLs are made from `Host`).
    pub headers: &'a HeaderMap,
    pub previews: &'a PreviewSettings,
    pub surface: Surface,
}

/// A procedure's one function: its request, checked and carried out for its caller.
pub(crate) trait Serve: Definition {
    fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: Self::Request,
    ) -> impl Future<Output = Result<Self::Response, ApiError>> + Send;
}

/// Procedures with a REST handler of their own (`routes/`), and why (the tests check
/// that these and the ones served from their definitions are the procedure table).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const HANDWRITTEN: &[(&str, &str)] = &[
    (
        "sandbox.readFile",
        "its answer is encoded by hand, the content written once (a 10 MiB file is not copied into a JSON string)",
    ),
    ("sandbox.upload", "a raw byte stream in, of any length"),
    ("sandbox.download", "a raw byte stream out, of any length"),
    ("health", "a probe: no key, and it cannot fail"),
    ("ready", "a probe: no key, 503 with what is not ready"),
];

/// Calls `$visit!` with every procedure served from its definition.
macro_rules! each_served {
    ($visit:ident) => {
        $visit!(
            sandboxd_core::api::procedures::SandboxCreate,
            sandboxd_core::api::procedures::SandboxExec,
            sandboxd_core::api::procedures::SandboxWriteFile,
            sandboxd_core::api::procedures::SandboxListFiles,
            sandboxd_core::api::procedures::SandboxSetTimeout,
            sandboxd_core::api::procedures::SandboxSetEgress,
            sandboxd_core::api::procedures::SandboxEgressLog,
            sandboxd_core::api::procedures::SandboxRequestEgress,
            sandboxd_core::api::procedures::EgressRequests,
            sandboxd_core::api::procedures::EgressDecide,
            sandboxd_core::api::procedures::SandboxList,
            sandboxd_core::api::procedures::SandboxOne,
            sandboxd_core::api::procedures::SandboxStats,
            sandboxd_core::api::procedures::SandboxPause,
            sandboxd_core::api::procedures::SandboxResume,
            sandboxd_core::api::procedures::SandboxChanges,
            sandboxd_core::api::procedures::SandboxSnapshot,
            sandboxd_core::api::procedures::SandboxFork,
            sandboxd_core::api::procedures::SandboxKill,
            sandboxd_core::api::procedures::SandboxRemove,
            sandboxd_core::api::procedures::SandboxTemplates,
            sandboxd_core::api::procedures::SandboxExecToken,
            sandboxd_core::api::procedures::SnapshotAll,
            sandboxd_core::api::procedures::SnapshotOne,
            sandboxd_core::api::procedures::SnapshotRemove,
            sandboxd_core::api::procedures::SandboxExposePort,
            sandboxd_core::api::procedures::SandboxPorts,
            sandboxd_core::api::procedures::SandboxUnexposePort,
            sandboxd_core::api::procedures::SandboxProcessStart,
            sandboxd_core::api::procedures::SandboxProcessList,
            sandboxd_core::api::procedures::SandboxProcessWait,
            sandboxd_core::api::procedures::SandboxProcessSignal,
            sandboxd_core::api::procedures::SandboxProcessWrite,
            sandboxd_core::api::procedures::SandboxProcessOutput,
            sandboxd_core::api::procedures::SandboxContextCreate,
            sandboxd_core::api::procedures::SandboxContextRun,
            sandboxd_core::api::procedures::SandboxContextRemove,
            sandboxd_core::api::procedures::ProjectAll,
            sandboxd_core::api::procedures::ProjectCreate,
            sandboxd_core::api::procedures::EnvironmentCreate,
            sandboxd_core::api::procedures::OrganizationAll,
            sandboxd_core::api::procedures::OrganizationCreate,
            sandboxd_core::api::procedures::MemberAll,
            sandboxd_core::api::procedures::MemberCreate,
            sandboxd_core::api::procedures::MemberUpdate,
            sandboxd_core::api::procedures::MemberRemove,
            sandboxd_core::api::procedures::ApiKeyAll,
            sandboxd_core::api::procedures::ApiKeyCreate,
            sandboxd_core::api::procedures::ApiKeyCurrent,
            sandboxd_core::api::procedures::ApiKeyRevoke,
            sandboxd_core::api::procedures::AuditList,
            sandboxd_core::api::procedures::ServerAll,
            sandboxd_core::api::procedures::ServerOne,
            sandboxd_core::api::procedures::ServerCreate,
            sandboxd_core::api::procedures::ServerUpdate,
            sandboxd_core::api::procedures::ServerRemove,
            sandboxd_core::api::procedures::ServerTest,
            sandboxd_core::api::procedures::VolumeCreate,
            sandboxd_core::api::procedures::VolumeAll,
            sandboxd_core::api::procedures::VolumeOne,
            sandboxd_core::api::procedures::VolumeRemove,
        )
    };
}
pub(crate) use each_served;

/// The REST routes, with their OpenAPI operations, of every procedure served from its
/// definition.
pub(crate) fn router() -> OpenApiRouter<AppState> {
    macro_rules! routes {
        ($($procedure:ty),* $(,)?) => {
            OpenApiRouter::new()$(.routes(route::<$procedure>()))*
        };
    }
    each_served!(routes)
}

/// `D`'s route and its operation.
fn route<D: Serve>() -> UtoipaMethodRouter<AppState> {
    let (method, operation, components) = definition::operation::<D>();
    let paths = Paths::builder()
        .path(D::PROCEDURE.path, PathItem::new(method, operation))
        .build();
    let handler: MethodRouter<AppState> = match (D::TAKES, D::PROCEDURE.method) {
        (Takes::Body, _) => post(by_body::<D>),
        (Takes::Query, _) => get(by_query::<D>),
        (Takes::Nothing, Method::Get) => get(by_query::<D>),
        (Takes::Nothing, Method::Post) => post(by_query::<D>),
    };
    (components, paths, handler)
}

async fn by_body<D: Serve>(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    ApiJson(request): ApiJson<D::Request>,
) -> Result<Json<D::Response>, ApiError> {
    Ok(Json(
        D::serve(rest(&state, &headers), caller, request).await?,
    ))
}

async fn by_query<D: Serve>(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    ApiQuery(request): ApiQuery<D::Request>,
) -> Result<Json<D::Response>, ApiError> {
    Ok(Json(
        D::serve(rest(&state, &headers), caller, request).await?,
    ))
}

fn rest<'a>(state: &'a AppState, headers: &'a HeaderMap) -> Context<'a> {
    Context {
        service: &state.service,
        headers,
        previews: &state.previews,
        surface: Surface::Rest,
    }
}

#[cfg(test)]
mod tests {
    use sandboxd_core::api::definition::Definition;
    use sandboxd_core::api::procedures::PROCEDURES;

    /// Every procedure of the table is served from its definition or listed with the
    /// reason it has a handler of its own, not both.
    #[test]
    fn every_procedure_is_served_from_its_definition_or_listed_as_handwritten() {
        macro_rules! names {
            ($($procedure:ty),* $(,)?) => {
                vec![$(<$procedure as Definition>::PROCEDURE.name),*]
            };
        }
        let mut served = each_served!(names);
        served.extend(super::HANDWRITTEN.iter().map(|(name, _)| *name));
        served.sort_unstable();
        let mut table: Vec<&str> = PROCEDURES.iter().map(|p| p.name).collect();
        table.sort_unstable();
        assert_eq!(served, table);
    }
}

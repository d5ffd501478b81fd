//! The procedures served from their definitions (`sandboxd_core::api::definition`): each
//! is one function ([`Serve`]) from which its REST route and OpenAPI operation (here) and
//! its MCP tool (`mcp::defined`) are made. The procedures that need a handler of their
//! own (streams, the probes) are `sandboxd_core::api::procedures::HANDWRITTEN`, served
//! by `routes/`.
//!
//! `Serve` takes a `Context`, the caller and the request, and answers the response or an
//! `ApiError`; the generic REST handlers take a JSON body or the query string. The
//! `Context` says whether a call came over REST or MCP (`Surface`: `sandbox.setEgress`
//! only narrows a list over MCP) and carries the request's headers (a preview's URL is
//! made from `Host`). The routes are made from `sandboxd_core::each_defined!`;
//! `<group>.rs` holds the `Serve` functions by resource.

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
mod templates;
mod volumes;

use std::future::Future;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
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

/// The REST routes, with their OpenAPI operations, of every procedure served from its
/// definition.
pub(crate) fn router() -> OpenApiRouter<AppState> {
    macro_rules! routes {
        ($($procedure:ty),* $(,)?) => {
            OpenApiRouter::new()$(.routes(route::<$procedure>()))*
        };
    }
    sandboxd_core::each_defined!(routes)
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

/// The answer's status: its definition's.
fn success<D: Definition>() -> StatusCode {
    StatusCode::from_u16(D::SUCCESS).unwrap_or(StatusCode::OK)
}

async fn by_body<D: Serve>(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    ApiJson(request): ApiJson<D::Request>,
) -> Result<(StatusCode, Json<D::Response>), ApiError> {
    Ok((
        success::<D>(),
        Json(D::serve(rest(&state, &headers), caller, request).await?),
    ))
}

async fn by_query<D: Serve>(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    ApiQuery(request): ApiQuery<D::Request>,
) -> Result<(StatusCode, Json<D::Response>), ApiError> {
    Ok((
        success::<D>(),
        Json(D::serve(rest(&state, &headers), caller, request).await?),
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
    use sandboxd_core::api::procedures::{HANDWRITTEN, PROCEDURES};

    /// The routes are the procedure table's: each defined procedure's generic route and
    /// the handwritten ones'.
    #[test]
    fn the_table_is_the_defined_procedures_and_the_handwritten_ones() {
        let (_, document) = super::router().split_for_parts();
        let mut served: Vec<&str> = document.paths.paths.keys().map(String::as_str).collect();
        served.extend(HANDWRITTEN.iter().map(|(procedure, _)| procedure.path));
        served.sort_unstable();
        let mut table: Vec<&str> = PROCEDURES.iter().map(|p| p.path).collect();
        table.sort_unstable();
        assert_eq!(served, table);
    }
}

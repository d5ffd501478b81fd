//! Prometheus metrics at `/metrics`: request latency per procedure, which path served
//! each operation, sandboxes running per server, background removals in flight, reaper
//! and reconcile durations, rate-limit refusals. Names and labels are bounded: routes are
//! the matched templates, never raw paths or ids.
//!
//! One Prometheus recorder per process; the per-route latency middleware is here.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use sandboxd_contracts::Reachability;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

pub const HTTP_DURATION: &str = "sandboxd_http_request_duration_seconds";
pub const RUNNING: &str = "sandboxd_sandboxes_running";
/// Health of each remote server's connection: 1 for its state, 0 for the others.
pub const SERVER_HEALTH: &str = "sandboxd_server_health";
pub const REMOVALS_PENDING: &str = "sandboxd_container_removals_pending";
pub const REAPER_DURATION: &str = "sandboxd_reaper_duration_seconds";
pub const RECONCILE_DURATION: &str = "sandboxd_reconcile_duration_seconds";

/// Histogram buckets, in seconds: from a fast API call to a slow create.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

/// The process's recorder: installed once, shared by every server of the process.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets(&BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder already installed (an embedding program's): ours then renders
        // nothing, which is better than failing the server.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// Times each request under its route template and status class.
pub async fn record(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = match response.status().as_u16() {
        200..=299 => "2xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    };
    metrics::histogram!(HTTP_DURATION, "route" => route, "status" => status)
        .record(started.elapsed().as_secs_f64());
    response
}

/// `GET /metrics` on the API's address: for a key holding `organization:admin` (the
/// figures are the whole server's: counts and latencies, never ids or secrets).
pub async fn render(State(state): State<AppState>, Caller(caller): Caller) -> Response {
    if let Err(error) = state.service.access().require(
        &caller,
        sandboxd_core::access::Permission::OrganizationAdmin,
    ) {
        return ApiError::Service(error).into_response();
    }
    render_open(State(state.service)).await
}

/// `GET /metrics` on the operator's own metrics address (`metrics_listen`): no key.
pub async fn render_open(State(service): State<crate::Service>) -> Response {
    match service.store().running_per_server().await {
        Ok(mut counts) => {
            // A server with nothing running still reports 0, not its last count.
            if !counts.iter().any(|(server, _)| server == "local") {
                counts.push(("local".into(), 0));
            }
            for (server, count) in counts {
                metrics::gauge!(RUNNING, "server" => server).set(count as f64);
            }
        }
        Err(error) => return ApiError::Service(error.into()).into_response(),
    }
    metrics::gauge!(REMOVALS_PENDING).set(service.removals_pending() as f64);
    // One series per state, 1 for the current one (servers used since start).
    for (server, now) in service.fleet().servers_health().await {
        for state in [
            Reachability::Reachable,
            Reachability::Degraded,
            Reachability::Unreachable,
        ] {
            metrics::gauge!(SERVER_HEALTH, "server" => server.clone(), "state" => state.as_str())
                .set(if state == now { 1.0 } else { 0.0 });
        }
    }
    // Claims happen between refill passes: the gauge is read fresh at each scrape.
    for (labels, ready) in service.pools().ready_series() {
        metrics::gauge!(crate::service::POOL_READY, &labels).set(ready as f64);
    }
    let handle = handle();
    handle.run_upkeep();
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        handle.render(),
    )
        .into_response()
}

//! A request handler that panics answers 500 with the API's error body, and the panic's
//! message goes to the request log; the client gets a response, not a dropped connection.
//!
//! `tower_http`'s `CatchPanicLayer`.

use std::any::Any;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sandboxd_core::api::ErrorBody;
use tracing::Level;

use crate::error::Failure;

/// The response for a panic caught in a handler (`CatchPanicLayer::custom`).
pub fn respond(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    let body = ErrorBody {
        code: "INTERNAL_SERVER_ERROR".into(),
        message: "internal error".into(),
        issues: vec![],
    };
    let mut response = (StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response();
    response.extensions_mut().insert(Failure {
        level: Level::ERROR,
        cause: format!("a request handler panicked: {message}"),
    });
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::Router;
    use axum::routing::get;
    use tower_http::catch_panic::CatchPanicLayer;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_json() {
        async fn boom() -> &'static str {
            panic!("a year past 9999")
        }
        let app = Router::new()
            .route("/boom", get(boom))
            .route("/fine", get(|| async { "fine" }))
            .layer(CatchPanicLayer::custom(super::respond));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::new();
        let response = client.get(format!("{url}/boom")).send().await.unwrap();
        assert_eq!(
            response.status(),
            reqwest::StatusCode::INTERNAL_SERVER_ERROR
        );
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["code"], "INTERNAL_SERVER_ERROR");
        assert_eq!(body["message"], "internal error");
        // The server goes on serving.
        let fine = client.get(format!("{url}/fine")).send().await.unwrap();
        assert_eq!(fine.text().await.unwrap(), "fine");
    }
}

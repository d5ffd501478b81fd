//! E2B's in-sandbox daemon ("envd") under `/e2b/envd`: E2B's SDKs send every call of
//! every sandbox to this one base URL (`E2B_SANDBOX_URL`), naming the sandbox in the
//! `E2b-Sandbox-Id` header and proving the right to it with the `X-Access-Token` that
//! create and connect answered (or a sandboxd key in `X-API-Key`). Processes
//! (`process`), paths (`filesystem`) and file contents (`files`) are the sandbox
//! agent's, reached through the service as every other route reaches them.
//!
//! The store derives the access token (`envd_tokens.rs` there); nothing stores it.

mod files;
mod filesystem;
mod fs;
mod interpreter;
mod process;
mod rpc;
pub(crate) mod uploads;
mod watch;

use axum::Router;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::signed::{FileOperation, SignatureRefusal, SignedFileUrl};
use sandboxd_core::model::Principal;

use crate::AppState;
use crate::auth::{self, token_from};
use rpc::RpcError;

/// The port of the daemon itself; the SDK names it in `E2b-Sandbox-Port`.
pub(super) const ENVD_PORT: u16 = 49983;
/// The sandbox's user as E2B names it: the only one sandboxd runs anything as.
const USER: &str = "user";

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/e2b/envd/process.Process/{method}", post(process::call))
        .route(
            "/e2b/envd/filesystem.Filesystem/{method}",
            post(filesystem::call),
        )
        .route("/e2b/envd/files", get(files::download).post(files::upload))
        .route("/e2b/envd/health", get(health))
        .route("/e2b/envd/execute", post(interpreter::execute))
        .route(
            "/e2b/envd/contexts",
            get(interpreter::list).post(interpreter::create),
        )
        .route(
            "/e2b/envd/contexts/{id}",
            axum::routing::delete(interpreter::remove),
        )
        .route(
            "/e2b/envd/contexts/{id}/restart",
            post(interpreter::restart),
        )
}

/// Who calls, for which sandbox.
#[derive(Debug, Clone)]
struct Envd {
    caller: Principal,
    sandbox_id: String,
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The user a call names (`Authorization: Basic base64("<user>:")`, or `?username=`
/// for `/files`): only the sandbox's user is served.
fn check_user(headers: &HeaderMap, username: Option<&str>) -> Result<(), RpcError> {
    let from_header = header(headers, "authorization")
        .and_then(|value| value.strip_prefix("Basic "))
        .and_then(|encoded| base64_simd::STANDARD.decode_to_vec(encoded.trim()).ok())
        .map(|decoded| {
            let text = String::from_utf8_lossy(&decoded).into_owned();
            text.split_once(':')
                .map_or(text.clone(), |(user, _)| user.to_owned())
        });
    match from_header.as_deref().or(username) {
        None | Some("") | Some(USER) => Ok(()),
        Some(other) => Err(RpcError::new(
            Code::PermissionDenied,
            format!(
                "sandboxd runs everything in a sandbox as its user {USER:?}; {other:?} is not available"
            ),
        )),
    }
}

/// The sandbox a call names in `E2b-Sandbox-Id`.
fn sandbox_named(headers: &HeaderMap) -> Result<String, RpcError> {
    header(headers, "e2b-sandbox-id")
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| {
            RpcError::new(
                Code::InvalidArgument,
                "the E2b-Sandbox-Id header is required",
            )
        })
}

/// The caller and sandbox of a call: the sandbox by `E2b-Sandbox-Id`, the caller by
/// the sandbox's access token (the key it was made for, as that key stands now) or by
/// a sandboxd key; counted against the caller's rate limit like every other request.
async fn envd(
    state: &AppState,
    headers: &HeaderMap,
    username: Option<&str>,
) -> Result<Envd, RpcError> {
    envd_on(state, headers, username, ENVD_PORT).await
}

/// The caller and sandbox of a call to the sandbox's `port` (the daemon's, or the code
/// interpreter's), which the call must name in `E2b-Sandbox-Port` if it names one. The
/// access token may come as `E2B-Traffic-Access-Token` too (the code interpreter's
/// SDK sends only that one on some calls).
async fn envd_on(
    state: &AppState,
    headers: &HeaderMap,
    username: Option<&str>,
    port: u16,
) -> Result<Envd, RpcError> {
    let sandbox_id = sandbox_named(headers)?;
    if let Some(named) = header(headers, "e2b-sandbox-port")
        && named.parse::<u16>() != Ok(port)
    {
        return Err(RpcError::new(
            Code::Unimplemented,
            format!("port {named} of a sandbox is not served at this path; port {port} is"),
        ));
    }
    let token =
        header(headers, "x-access-token").or_else(|| header(headers, "e2b-traffic-access-token"));
    let caller = if let Some(token) = token {
        let store = state.service.store();
        let refused = || RpcError::new(Code::Unauthenticated, "invalid access token");
        let key_id = store
            .envd_token_key(&sandbox_id, token)
            .ok_or_else(refused)?;
        auth::key_holder(state, &key_id)
            .await?
            .ok_or_else(refused)?
    } else if let Some(key) = token_from(headers) {
        auth::principal(state, key).await?
    } else {
        return Err(RpcError::new(
            Code::Unauthenticated,
            "an X-Access-Token (or X-API-Key) header is required",
        ));
    };
    check_user(headers, username)?;
    Ok(Envd { caller, sandbox_id })
}

/// The most keys of an organization tried against a signed URL.
const MAX_SIGNERS: usize = 1_000;

/// The caller and sandbox of a signed file URL (E2B's `download_url`, `upload_url`),
/// sent without any header but the sandbox's (`E2b-Sandbox-Id`, which the daemon's
/// host sets): signed with the access token of one of the keys of the sandbox's
/// organization, which it then acts as, as that key stands now.
async fn signed(
    state: &AppState,
    headers: &HeaderMap,
    url: &SignedFileUrl<'_>,
) -> Result<Envd, RpcError> {
    let (principal, sandbox_id) = signer(state, headers, url).await?;
    let caller = auth::limited(state, principal)?;
    // The user is the one signed for: a header naming another does not stand in for it.
    check_user(headers, None)?;
    check_user(&HeaderMap::new(), Some(url.user))?;
    Ok(Envd { caller, sandbox_id })
}

/// The key that signed a file URL, as it stands now, and the sandbox.
async fn signer(
    state: &AppState,
    headers: &HeaderMap,
    url: &SignedFileUrl<'_>,
) -> Result<(Principal, String), RpcError> {
    let sandbox_id = sandbox_named(headers)?;
    let unauthenticated = |message: &str| RpcError::new(Code::Unauthenticated, message);
    let store_failure = |error| RpcError::from(crate::service::ServiceError::from(error));
    let store = state.service.store();
    let sandbox = store
        .sandbox(&sandbox_id)
        .await
        .map_err(store_failure)?
        .ok_or_else(|| unauthenticated("invalid signature"))?;
    let keys = store
        .keys(&sandbox.organization_id, None)
        .await
        .map_err(store_failure)?;
    let signers: Vec<(&str, String)> = keys
        .iter()
        .filter(|key| key.revoked_at.is_none())
        .take(MAX_SIGNERS)
        .map(|key| {
            (
                key.key_id.as_str(),
                store.envd_token(&sandbox_id, &key.key_id),
            )
        })
        .collect();
    let now_s = crate::time::now_ms() / 1000;
    let token = url
        .signer(signers.iter().map(|(_, token)| token.as_str()), now_s)
        .map_err(|refusal| match refusal {
            SignatureRefusal::Expired => unauthenticated("signature is already expired"),
            SignatureRefusal::Invalid => unauthenticated("invalid signature"),
            SignatureRefusal::OtherUser => {
                unauthenticated("a signed URL is made for the sandbox's user alone")
            }
        })?;
    let key_id = signers
        .iter()
        .find_map(|(key_id, signer)| (signer == token).then_some(*key_id))
        .ok_or_else(|| unauthenticated("invalid signature"))?;
    let principal = store
        .principal_of_key(key_id)
        .await
        .map_err(store_failure)?
        .ok_or_else(|| unauthenticated("invalid signature"))?;
    Ok((principal, sandbox_id))
}

/// Whether a call names a caller for the sandbox it names (its access token, a key,
/// or a signed file URL): checked by a replica before it passes the call on to the one
/// that holds the sandbox's agent, which checks it again in full (the caller's access,
/// user, port and rate limit).
pub(crate) async fn admitted(state: &AppState, parts: &Parts) -> Result<(), Response> {
    let path = parts.uri.path();
    // The daemon's RPCs answer Connect's errors; the other routes `{code, message}`.
    let answered = |error: RpcError| {
        if path.starts_with("/e2b/envd/process.") || path.starts_with("/e2b/envd/filesystem.") {
            error.into_response()
        } else {
            files::FilesError::from(error).into_response()
        }
    };
    let headers = &parts.headers;
    let unauthenticated = |message: &str| answered(RpcError::new(Code::Unauthenticated, message));
    let sandbox_id = sandbox_named(headers).map_err(answered)?;
    let store = state.service.store();
    let token =
        header(headers, "x-access-token").or_else(|| header(headers, "e2b-traffic-access-token"));
    if let Some(token) = token {
        return store
            .envd_token_key(&sandbox_id, token)
            .map(drop)
            .ok_or_else(|| unauthenticated("invalid access token"));
    }
    if let Some(key) = token_from(headers) {
        return match store.authenticate(key.trim()).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(unauthenticated("invalid API key")),
            Err(error) => Err(answered(RpcError::from(
                crate::service::ServiceError::from(error),
            ))),
        };
    }
    let operation = if parts.method == Method::GET {
        FileOperation::Read
    } else {
        FileOperation::Write
    };
    let query = (path == "/e2b/envd/files")
        .then(|| files::FilesQuery::of(&parts.uri))
        .flatten();
    if let Some(url) = query
        .as_ref()
        .and_then(|q| q.signed_url(headers, operation))
    {
        return signer(state, headers, &url)
            .await
            .map(drop)
            .map_err(answered);
    }
    Err(unauthenticated(
        "an X-Access-Token (or X-API-Key) header is required",
    ))
}

/// `GET /health`: 204 while the sandbox runs; 502 saying it "was not found" once it
/// is gone (what E2B's SDKs read as a sandbox no longer running).
async fn health(
    axum::extract::State(state): axum::extract::State<AppState>,
    headers: HeaderMap,
) -> Result<StatusCode, files::FilesError> {
    let who = envd(&state, &headers, None).await?;
    let sandbox = state
        .service
        .access()
        .sandbox_for(
            &who.caller,
            &who.sandbox_id,
            sandboxd_core::access::SandboxNeed::Read,
        )
        .await;
    match sandbox {
        Ok(sandbox)
            if sandbox.status == sandboxd_core::model::SandboxStatus::Running
                && !super::calls::ended(&state, &sandbox) =>
        {
            Ok(StatusCode::NO_CONTENT)
        }
        Ok(_) | Err(crate::service::ServiceError::NotFound(_)) => {
            Err(files::FilesError::gone(&who.sandbox_id))
        }
        Err(error) => Err(RpcError::from(error).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sandbox_user_is_served() {
        let mut headers = HeaderMap::new();
        assert!(check_user(&headers, None).is_ok());
        assert!(check_user(&headers, Some("user")).is_ok());
        assert!(check_user(&headers, Some("root")).is_err());
        headers.insert("authorization", "Basic dXNlcjo=".parse().unwrap());
        assert!(check_user(&headers, None).is_ok());
        headers.insert("authorization", "Basic cm9vdDo=".parse().unwrap());
        let error = check_user(&headers, None).unwrap_err();
        assert_eq!(error.code, Code::PermissionDenied);
    }
}

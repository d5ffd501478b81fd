//! `filesystem.Filesystem`: a path's entry, directories made, moved, listed to a depth
//! and removed, as E2B's daemon answers them (see `sandboxd_core::e2b::filesystem`).
//! Watchers are `watch`'s.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use sandboxd_contracts::PathKind;
use sandboxd_core::e2b::connect::Code;
use sandboxd_core::e2b::filesystem::{
    self as wire, EntryAnswer, EntryInfo, ListAnswer, MAX_ENTRIES, depth_of, resolve,
};

use super::envd;
use super::fs::{Fs, not_found};
use super::rpc::{self, RpcError};
use crate::AppState;
use crate::error::ApiError;
use crate::service::ServiceError;

pub(super) async fn call(
    State(state): State<AppState>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let answered = async {
        let who = envd(&state, &headers, None).await?;
        let fs = Fs {
            state: &state,
            who: &who,
        };
        match method.as_str() {
            "Stat" => {
                let request: wire::PathRequest = rpc::unary_request(&body)?;
                let path = resolve(&request.path, "path").map_err(ApiError::from)?;
                let entry = fs.entry(&path).await?;
                Ok(rpc::unary_answer(&EntryAnswer { entry }))
            }
            "MakeDir" => fs.make_dir(&body).await,
            "Move" => fs.rename(&body).await,
            "ListDir" => fs.list(&body).await,
            "Remove" => {
                let request: wire::PathRequest = rpc::unary_request(&body)?;
                let path = resolve(&request.path, "path").map_err(ApiError::from)?;
                match fs.files().remove(&who.caller, &who.sandbox_id, &path).await {
                    Ok(()) | Err(ServiceError::NotFound("path")) => {
                        Ok(rpc::unary_answer(&serde_json::json!({})))
                    }
                    Err(error) => Err(error.into()),
                }
            }
            "WatchDir" => return Ok(super::watch::watch_dir(&fs, &headers, &body).await),
            "CreateWatcher" => super::watch::create(&fs, &body).await,
            "GetWatcherEvents" => super::watch::events(&fs, &body).await,
            "RemoveWatcher" => super::watch::remove(&fs, &body).await,
            _ => Err(RpcError::new(
                Code::Unimplemented,
                format!("filesystem.Filesystem/{method} does not exist"),
            )),
        }
    };
    answered.await.unwrap_or_else(IntoResponse::into_response)
}

impl Fs<'_> {
    /// `MakeDir`: `already_exists` when the directory is there, `invalid_argument` when
    /// something else is.
    async fn make_dir(&self, body: &Bytes) -> Result<Response, RpcError> {
        let request: wire::PathRequest = rpc::unary_request(body)?;
        let path = resolve(&request.path, "path").map_err(ApiError::from)?;
        match self.stat(&path).await {
            Ok(entry) if entry.kind == PathKind::Directory => {
                return Err(RpcError::new(
                    Code::AlreadyExists,
                    format!("directory '{path}' already exists"),
                ));
            }
            Ok(_) => {
                return Err(RpcError::new(
                    Code::InvalidArgument,
                    format!("path '{path}' already exists and is not a directory"),
                ));
            }
            Err(error) if error.code == Code::NotFound => {}
            Err(error) => return Err(error),
        }
        self.files()
            .make_dir(&self.who.caller, &self.who.sandbox_id, &path)
            .await?;
        let entry = self.entry(&path).await?;
        Ok(rpc::unary_answer(&EntryAnswer { entry }))
    }

    /// `Move`: the destination's parents made, then a rename.
    async fn rename(&self, body: &Bytes) -> Result<Response, RpcError> {
        let request: wire::MoveRequest = rpc::unary_request(body)?;
        let source = resolve(&request.source, "source").map_err(ApiError::from)?;
        let destination = resolve(&request.destination, "destination").map_err(ApiError::from)?;
        self.stat(&source).await?;
        if let Some((parent, _)) = destination.rsplit_once('/')
            && !parent.is_empty()
        {
            self.files()
                .make_dir(&self.who.caller, &self.who.sandbox_id, parent)
                .await?;
        }
        self.files()
            .rename(
                &self.who.caller,
                &self.who.sandbox_id,
                &source,
                &destination,
            )
            .await?;
        let entry = self.entry(&destination).await?;
        Ok(rpc::unary_answer(&EntryAnswer { entry }))
    }

    /// `ListDir`: depth first, in name order, down to the depth; paths under the one
    /// asked for; a link to a directory at the top is followed.
    async fn list(&self, body: &Bytes) -> Result<Response, RpcError> {
        let request: wire::ListDirRequest = rpc::unary_request(body)?;
        let path = resolve(&request.path, "path").map_err(ApiError::from)?;
        let depth = depth_of(request.depth).map_err(ApiError::from)?;
        let top = self.stat(&path).await?;
        let listed_dir = match (top.kind, top.link_target.as_deref()) {
            (PathKind::Directory, _) => path.clone(),
            (PathKind::Symlink, Some(target)) if target.starts_with('/') => {
                match self.stat(target).await {
                    Ok(entry) if entry.kind == PathKind::Directory => target.to_owned(),
                    _ => return Err(not_a_directory(&path)),
                }
            }
            _ => return Err(not_a_directory(&path)),
        };
        let mut entries = Vec::new();
        self.walk(&listed_dir, &path, depth, &mut entries).await?;
        Ok(rpc::unary_answer(&ListAnswer { entries }))
    }

    /// Lists `dir` (shown as `shown`) into `out`, and its directories down to `depth`.
    async fn walk(
        &self,
        dir: &str,
        shown: &str,
        depth: u32,
        out: &mut Vec<EntryInfo>,
    ) -> Result<(), RpcError> {
        let mut listed = match self
            .files()
            .entries(&self.who.caller, &self.who.sandbox_id, dir)
            .await
        {
            Err(ServiceError::NotFound("path")) => return Err(not_found(shown)),
            other => other?,
        };
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in listed {
            if out.len() >= MAX_ENTRIES {
                return Err(RpcError::new(
                    Code::ResourceExhausted,
                    format!("the listing has more than {MAX_ENTRIES} entries: ask for less depth"),
                ));
            }
            let name = entry.name.clone();
            let is_dir = entry.kind == PathKind::Directory;
            let child_shown = format!("{}/{name}", shown.trim_end_matches('/'));
            out.push(self.described(&child_shown, entry).await?);
            if is_dir && depth > 1 {
                let child_dir = format!("{}/{name}", dir.trim_end_matches('/'));
                Box::pin(self.walk(&child_dir, &child_shown, depth - 1, out)).await?;
            }
        }
        Ok(())
    }
}

fn not_a_directory(path: &str) -> RpcError {
    RpcError::new(
        Code::InvalidArgument,
        format!("path '{path}' is not a directory"),
    )
}

//! Build contexts streamed as a tar (`template.context`), for builds whose files are
//! more than `template.build`'s `files` take.
//!
//! An upload is read as it comes into a temporary file (bounded in bytes, in time, and
//! to `UPLOADS_AT_ONCE` per organization), then read as a tar
//! (`sandboxd_core::template_build::read_tar`): each file's content appended to a blob
//! and digested as it goes. The blob is kept in the store in chunks with an index of
//! the files, so that any replica's build reads it; it expires after `CONTEXT_KEPT_MS`.
//! A build naming the context checks its Dockerfile against the index, and copies the
//! blob into a temporary file on its own replica before its steps run. The temporary
//! files are unlinked at once: nothing is left behind, whatever ends the process.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Seek as _};
use std::time::Duration;

use futures_util::StreamExt as _;
use sandboxd_contracts::Chunks;
use sandboxd_core::error::Invalid;
use sandboxd_core::model::Principal;
use sandboxd_core::quotas::QuotaExceeded;
use sandboxd_core::template_build::{
    ArchiveError, ContextIndex, FileBody, FileBounds, IntoBlob, check_file_names, read_tar,
};
use sandboxd_core::validate::{BuildAsked, BuildTemplate, GivenFiles, build_of};
use sandboxd_store::{ContextContents, NewTemplateContext, new_id};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::Builds;
use crate::{Resource, ServiceError, now_ms};

/// How long a context is kept after its upload, ms.
pub const CONTEXT_KEPT_MS: i64 = 60 * 60 * 1000;
/// How many uploads one organization sends at once, and the whole server.
const UPLOADS_AT_ONCE: usize = 2;
const SERVER_UPLOADS_AT_ONCE: usize = 8;
/// How long an upload may take, and wait for its next bytes.
const UPLOAD_TIME: Duration = Duration::from_secs(30 * 60);
const UPLOAD_IDLE: Duration = Duration::from_secs(60);
/// The bytes of one chunk kept in the store.
const CHUNK_BYTES: usize = 4 << 20;

/// The uploads under way, per organization.
#[derive(Debug, Default)]
pub(crate) struct Uploads(std::sync::Mutex<HashMap<String, usize>>);

/// One upload's place among its organization's and the server's; let go when dropped.
struct UploadSlot {
    service: crate::Service,
    organization_id: String,
}

impl UploadSlot {
    fn take(service: &crate::Service, organization_id: &str) -> Result<Self, ServiceError> {
        let uploads = &service.inner.context_uploads;
        let mut under_way = uploads
            .0
            .lock()
            .map_err(|_| ServiceError::Unavailable("the uploads' count is poisoned".into()))?;
        if under_way.values().sum::<usize>() >= SERVER_UPLOADS_AT_ONCE {
            return Err(ServiceError::Unavailable(format!(
                "the server receives {SERVER_UPLOADS_AT_ONCE} build contexts at once, its most; try again in a moment"
            )));
        }
        let n = under_way.entry(organization_id.to_owned()).or_default();
        if *n >= UPLOADS_AT_ONCE {
            return Err(ServiceError::Conflict(format!(
                "the organization sends {UPLOADS_AT_ONCE} build contexts at once, its most; wait for one to end"
            )));
        }
        *n += 1;
        Ok(Self {
            service: service.clone(),
            organization_id: organization_id.to_owned(),
        })
    }
}

impl Drop for UploadSlot {
    fn drop(&mut self) {
        if let Ok(mut under_way) = self.service.inner.context_uploads.0.lock()
            && let Some(n) = under_way.get_mut(&self.organization_id)
        {
            *n -= 1;
            if *n == 0 {
                under_way.remove(&self.organization_id);
            }
        }
    }
}

/// A context kept.
#[derive(Debug, Clone, PartialEq)]
pub struct UploadedContext {
    pub context_id: String,
    pub project_id: String,
    pub files: i64,
    pub bytes: i64,
    pub expires_at: i64,
}

fn scratch_failed(error: std::io::Error) -> ServiceError {
    ServiceError::Unavailable(format!(
        "the server could not write the context to its temporary directory: {error}"
    ))
}

impl Builds {
    /// Keeps a context streamed as a tar for the builds of a project.
    pub async fn upload_context(
        &self,
        caller: &Principal,
        project_id: Option<&str>,
        body: Chunks,
    ) -> Result<UploadedContext, ServiceError> {
        let project_id = self
            .service
            .volumes()
            .project_of(caller, project_id)
            .await?;
        self.service
            .access()
            .check_create_in(caller, &project_id)
            .await?;
        let slot = UploadSlot::take(&self.service, &caller.organization_id)?;
        // The upload runs to its end (or its cleanup) whatever the client's connection
        // does: a request dropped half-way never leaves a context behind.
        let builds = self.clone();
        let caller = caller.clone();
        tokio::spawn(async move {
            let _slot = slot;
            builds.receive_context(&caller, project_id, body).await
        })
        .await
        .map_err(|_| ServiceError::Unavailable("the upload stopped on an internal error".into()))?
    }

    async fn receive_context(
        &self,
        caller: &Principal,
        project_id: String,
        body: Chunks,
    ) -> Result<UploadedContext, ServiceError> {
        let options = &self.service.inner.options.builds;
        let now = now_ms();
        let context = NewTemplateContext {
            context_id: new_id()?,
            organization_id: caller.organization_id.clone(),
            project_id: project_id.clone(),
            created_by: caller.user_id.clone(),
            created_at: now,
            expires_at: now + CONTEXT_KEPT_MS,
        };
        let store = self.service.store();
        let room = store
            .begin_template_context(&context, options.contexts_bytes)
            .await?;
        let room = room.max(0) as u64;
        let bounds = FileBounds::context(options.context_bytes.min(room));
        let kept = self.keep_context(&context, bounds, body).await;
        let (files, bytes) = match kept {
            Ok(kept) => kept,
            Err(error) => {
                let _ = store.remove_template_context(&context.context_id).await;
                // Over what the organization may still keep: its quota, not the bound
                // of one context.
                if let ServiceError::TooLarge(_) = error
                    && room < options.context_bytes
                {
                    let limit = options.contexts_bytes >> 20;
                    return Err(QuotaExceeded::Contexts {
                        limit,
                        used: limit - (room >> 20) as i64,
                    }
                    .into());
                }
                return Err(error);
            }
        };
        self.service
            .access()
            .record(
                &caller.organization_id,
                Some(caller),
                "template.context",
                Resource {
                    kind: "buildContext",
                    id: &context.context_id,
                    name: None,
                },
                json!({"projectId": project_id, "files": files, "bytes": bytes}),
            )
            .await;
        Ok(UploadedContext {
            context_id: context.context_id,
            project_id,
            files,
            bytes,
            expires_at: context.expires_at,
        })
    }

    /// Reads the upload, keeps its blob in chunks and makes the context ready; answers
    /// its files and bytes.
    async fn keep_context(
        &self,
        context: &NewTemplateContext,
        bounds: FileBounds,
        body: Chunks,
    ) -> Result<(i64, i64), ServiceError> {
        let raw = receive(body, bounds).await?;
        let (index, mut blob, bytes) = tokio::task::spawn_blocking(move || index_of(raw, bounds))
            .await
            .map_err(|_| ServiceError::Unavailable("the context could not be read".into()))??;
        let store = self.service.store();
        let mut chunks = 0i64;
        let mut buffer = vec![0u8; CHUNK_BYTES];
        loop {
            let mut filled = 0;
            while filled < CHUNK_BYTES {
                let n = blob
                    .read(&mut buffer[filled..])
                    .await
                    .map_err(scratch_failed)?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                break;
            }
            store
                .put_template_context_chunk(&context.context_id, chunks, &buffer[..filled])
                .await?;
            chunks += 1;
        }
        let files = (index.files.len() + index.links.len()) as i64;
        let index_json = serde_json::to_string(&index)
            .map_err(|e| ServiceError::Unavailable(format!("the context's index: {e}")))?;
        let contents = ContextContents {
            files,
            bytes: bytes as i64,
            chunks,
            index_json,
        };
        store
            .finish_template_context(
                &context.organization_id,
                &context.context_id,
                &contents,
                self.service.inner.options.builds.contexts_bytes,
                now_ms(),
            )
            .await?;
        Ok((files, bytes as i64))
    }

    /// Starts a build asked for with its files or naming a context.
    pub async fn start_asked(
        &self,
        caller: &Principal,
        asked: BuildAsked,
    ) -> Result<sandboxd_core::template_build::TemplateBuild, ServiceError> {
        let (context_id, head, instructions) = match asked {
            BuildAsked::Whole(cmd) => return self.start(caller, *cmd).await,
            BuildAsked::WithContext {
                context_id,
                head,
                instructions,
            } => (context_id, head, instructions),
        };
        let project_id = self
            .service
            .volumes()
            .project_of(caller, head.project_id.as_deref())
            .await?;
        // Who may not build in the project learns nothing of its contexts.
        self.service
            .access()
            .check_create_in(caller, &project_id)
            .await?;
        let context = self
            .service
            .store()
            .template_context(&caller.organization_id, &context_id, now_ms())
            .await?
            .filter(|context| context.project_id == project_id)
            .ok_or(ServiceError::NotFound("build context"))?;
        let bounds = FileBounds::context(self.service.inner.options.builds.context_bytes);
        // An index of up to 100,000 files, read and matched against every copy's
        // sources off the runtime's threads.
        let mut cmd: BuildTemplate = tokio::task::spawn_blocking(move || {
            let index: ContextIndex = serde_json::from_str(&context.index_json)
                .map_err(|e| ServiceError::Unavailable(format!("the context's index: {e}")))?;
            let given = GivenFiles {
                contents: index
                    .files
                    .into_iter()
                    .map(|(name, stored)| (name, FileBody::Stored(stored)))
                    .collect(),
                modes: index.modes,
                links: index.links,
            };
            Ok::<_, ServiceError>(build_of(head, instructions, given, bounds)?)
        })
        .await
        .map_err(|_| ServiceError::Unavailable("the context could not be read".into()))??;
        cmd.context_id = Some(context_id);
        self.start(caller, cmd).await
    }
}

/// The upload's bytes in a temporary file, within what a context of `bounds` may take
/// as a tar (its files, and a header for each), in time.
async fn receive(mut body: Chunks, bounds: FileBounds) -> Result<std::fs::File, ServiceError> {
    let most = bounds.bytes + (bounds.files as u64 + 16) * 2048;
    let file = tempfile::tempfile().map_err(scratch_failed)?;
    let mut out = tokio::fs::File::from_std(file);
    let deadline = tokio::time::Instant::now() + UPLOAD_TIME;
    let mut received = 0u64;
    loop {
        let next = tokio::time::timeout_at(
            deadline.min(tokio::time::Instant::now() + UPLOAD_IDLE),
            body.next(),
        )
        .await
        .map_err(|_| {
            Invalid::one(
                "body",
                "the upload stopped sending, or took longer than 30 minutes",
            )
        })?;
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| Invalid::one("body", format!("the upload failed: {e}")))?;
        received += chunk.len() as u64;
        if received > most {
            return Err(ServiceError::TooLarge(format!(
                "the context is over its bound of {} MiB of files",
                bounds.bytes >> 20
            )));
        }
        out.write_all(&chunk).await.map_err(scratch_failed)?;
    }
    out.flush().await.map_err(scratch_failed)?;
    Ok(out.into_std().await)
}

/// Reads an upload as a tar: the index of its files, the blob of their contents (read
/// from its start) and its bytes.
fn index_of(
    mut raw: std::fs::File,
    bounds: FileBounds,
) -> Result<(ContextIndex, tokio::fs::File, u64), ServiceError> {
    raw.rewind().map_err(scratch_failed)?;
    let blob = tempfile::tempfile().map_err(scratch_failed)?;
    let mut given = GivenFiles::default();
    let mut keep = IntoBlob::new(BufWriter::new(blob));
    read_tar(
        BufReader::new(raw),
        bounds,
        &mut given,
        &mut keep,
        "archive the file it names instead (tar --hard-dereference)",
    )
    .map_err(|error| match error {
        ArchiveError::TooLarge(message) => ServiceError::TooLarge(message),
        ArchiveError::Refused(message) => Invalid::one("body", message).into(),
    })?;
    check_file_names(
        given
            .contents
            .keys()
            .chain(given.links.keys())
            .map(String::as_str),
    )?;
    let (writer, bytes) = keep.finish().map_err(scratch_failed)?;
    let mut blob = writer
        .into_inner()
        .map_err(|e| scratch_failed(e.into_error()))?;
    blob.rewind().map_err(scratch_failed)?;
    let files = given
        .contents
        .into_iter()
        .filter_map(|(name, body)| match body {
            FileBody::Stored(stored) => Some((name, stored)),
            FileBody::Bytes(_) => None,
        })
        .collect();
    let index = ContextIndex {
        files,
        modes: given.modes,
        links: given.links,
    };
    Ok((index, tokio::fs::File::from_std(blob), bytes))
}

/// A context's blob copied from the store into a temporary file on this replica, read
/// from its start.
pub(super) async fn fetch_blob(
    store: &sandboxd_store::Store,
    organization_id: &str,
    context_id: &str,
) -> Result<std::fs::File, String> {
    let gone = || "the build context expired before the build read it".to_owned();
    let context = store
        .template_context(organization_id, context_id, now_ms())
        .await
        .map_err(|e| format!("the build context could not be read: {e}"))?
        .ok_or_else(gone)?;
    let file =
        tempfile::tempfile().map_err(|e| format!("the build context could not be written: {e}"))?;
    let mut out = tokio::fs::File::from_std(file);
    let mut written = 0i64;
    for seq in 0..context.chunks {
        let chunk = store
            .template_context_chunk(context_id, seq)
            .await
            .map_err(|e| format!("the build context could not be read: {e}"))?
            .ok_or_else(gone)?;
        written += chunk.len() as i64;
        out.write_all(&chunk)
            .await
            .map_err(|e| format!("the build context could not be written: {e}"))?;
    }
    if written != context.bytes {
        return Err(gone());
    }
    out.flush()
        .await
        .map_err(|e| format!("the build context could not be written: {e}"))?;
    let mut file = out.into_std().await;
    file.rewind()
        .map_err(|e| format!("the build context could not be read: {e}"))?;
    Ok(file)
}

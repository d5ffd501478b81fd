//! Streamed transfers through the engine's archive API. An uploaded file lands under a
//! temporary name next to its place and is renamed into place (as the sandbox user)
//! only once whole, so a refused, failed or cut upload leaves no partial file; a tree
//! is unpacked under its directory as it arrives. A download is a file's bytes cut out
//! of the engine's tar of it (its size known from its header before any byte goes), or
//! a directory's tar as the engine makes it; capped as it flows, and cut when the
//! engine sends nothing for a minute.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use sandboxd_contracts::UploadSink;
use sandboxd_contracts::{ChannelError, Chunks, Download, EngineError, RefusalKind, UploadShape};
use sandboxd_core::api::TransferFormat;
use sandboxd_core::paths;
use sandboxd_core::transfer::{self, FileOut, TransferRefused};

use super::engine::EngineChannel;
use crate::files::transfers::{capped, with_idle_deadline};
use crate::now_ms;

/// An upload into one path of the container.
pub(super) struct EngineUpload {
    pub(super) channel: EngineChannel,
    pub(super) path: String,
    pub(super) shape: UploadShape,
}

#[async_trait::async_trait]
impl UploadSink for EngineUpload {
    async fn send(self: Box<Self>, body: Chunks) -> Result<u64, ChannelError> {
        let Self {
            channel,
            path,
            shape,
        } = *self;
        match shape {
            // The engine's archive puts every file in place whole.
            UploadShape::File { size, mode } | UploadShape::FileInPlace { size, mode } => {
                put_file(&channel, &path, size, mode, body).await?;
                Ok(size)
            }
            UploadShape::Tree => {
                channel.make_dirs(&path).await?;
                channel
                    .engine
                    .put_archive(&channel.container, &path, body, &channel.user())
                    .await?;
                // The bytes are counted by the caller, which checks the tar as it flows.
                Ok(0)
            }
        }
    }
}

/// `body` (`size` bytes) into `path` with `mode`: a tar of it under a temporary name,
/// then a rename as the sandbox user.
async fn put_file(
    channel: &EngineChannel,
    path: &str,
    size: u64,
    mode: u32,
    body: Chunks,
) -> Result<(), ChannelError> {
    let (dir, name) = paths::split_file(path)
        .ok_or_else(|| ChannelError::refused(RefusalKind::Invalid, "path must point to a file"))?;
    channel.make_dirs(dir).await?;
    let id = sandboxd_store::new_id()
        .map_err(|error| ChannelError::refused(RefusalKind::Io, error.to_string()))?;
    let temp = format!(".{name}.sandboxd-upload-{}", &id[..12]);
    let header = transfer::raw_entry(
        &temp,
        size,
        mode,
        channel.owner,
        (now_ms() / 1000).max(0) as u64,
    );
    let trailer = vec![0u8; (transfer::padded(size) - size) as usize + 2 * transfer::BLOCK];
    let tar: Chunks = Box::pin(
        stream::once(async move { Ok(Bytes::from(header)) })
            .chain(body)
            .chain(stream::once(async move { Ok(Bytes::from(trailer)) })),
    );
    let temp_path = format!("{}/{temp}", dir.trim_end_matches('/'));
    let placed = match channel
        .engine
        .put_archive(&channel.container, dir, tar, &channel.user())
        .await
    {
        Ok(()) => channel
            .as_user(&["mv", "-f", "--", &temp_path, path])
            .await
            .map_err(|reason| {
                ChannelError::refused(
                    RefusalKind::Io,
                    format!("could not move the upload into place: {reason}"),
                )
            }),
        Err(error) => Err(ChannelError::Engine(error)),
    };
    if placed.is_err() {
        // Nothing partial stays behind.
        let _ = channel.as_user(&["rm", "-f", "--", &temp_path]).await;
    }
    placed
}

/// What a transfer's checks refused, as the channel reports it.
fn refused(refusal: TransferRefused) -> ChannelError {
    let kind = match refusal {
        TransferRefused::OverCap { .. } | TransferRefused::TooManyEntries { .. } => {
            RefusalKind::TooLarge
        }
        _ => RefusalKind::Invalid,
    };
    ChannelError::refused(kind, refusal.to_string())
}

/// A download through the engine's archive API.
pub(super) async fn download(
    channel: &EngineChannel,
    path: &str,
    format: Option<TransferFormat>,
    cap: u64,
) -> Result<Download, ChannelError> {
    let archive = channel
        .engine
        .get_archive(&channel.container, path, &channel.user())
        .await
        .map_err(|error| match error {
            EngineError::NotFound { .. } => {
                ChannelError::refused(RefusalKind::NotFound, "path not found")
            }
            other => other.into(),
        })?;
    if format == Some(TransferFormat::Tar) {
        return Ok(Download {
            format: TransferFormat::Tar,
            size: None,
            body: capped(with_idle_deadline(archive), cap),
        });
    }
    let mut archive = with_idle_deadline(archive);
    let mut reader = FileOut::new(cap);
    let mut first = Vec::new();
    // What was read before the file's header: a directory's tar starts with it.
    let mut read = Vec::new();
    let size = loop {
        let chunk = archive
            .next()
            .await
            .ok_or_else(|| {
                ChannelError::refused(RefusalKind::Io, "the engine's archive ended early")
            })?
            .map_err(|e| {
                ChannelError::refused(RefusalKind::Io, format!("the download failed: {e}"))
            })?;
        read.push(chunk.clone());
        match reader.push(chunk, &mut first) {
            Ok(()) => {
                if let Some(size) = reader.size() {
                    break size;
                }
            }
            Err(TransferRefused::NotAFile(_)) if format.is_none() => {
                let body = stream::iter(read.into_iter().map(Ok)).chain(archive);
                return Ok(Download {
                    format: TransferFormat::Tar,
                    size: None,
                    body: capped(Box::pin(body), cap),
                });
            }
            Err(refusal) => return Err(refused(refusal)),
        }
    };
    drop(read);
    let reader = Arc::new(Mutex::new(reader));
    let rest = archive.map(move |chunk| {
        let mut out = Vec::new();
        let mut reader = reader.lock().unwrap_or_else(|e| e.into_inner());
        reader
            .push(chunk?, &mut out)
            .map_err(std::io::Error::other)?;
        Ok::<_, std::io::Error>(stream::iter(out.into_iter().map(Ok)))
    });
    let body = stream::iter(first.into_iter().map(Ok)).chain(rest.try_flatten());
    Ok(Download {
        format: TransferFormat::Raw,
        size: Some(size),
        body: Box::pin(body),
    })
}

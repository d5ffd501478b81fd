//! `sandbox.download {changes: true}`: what `sandbox.changes` lists, as one tar made as
//! it is sent: added and changed files with their content (each read raw through the
//! sandbox's channel, as the sandbox's user), new directories, links, and a whiteout
//! (`.wh.<name>`, as image layers mark it) for each removed path. Names are relative to
//! the root; entries are owned by the sandbox's user. A file that went since it was
//! listed, or that the sandbox's user may not read, is left out; one that cannot be
//! read otherwise (larger than what the transfer may still carry), is cut short or
//! grows ends the archive with an error (it would lie about it). A path named like a whiteout (`.wh.…`) is
//! left out: it would read as a removal.
//!
//! Past 10,000 paths the download is refused (413). Each file's header is written once
//! its size is known; the archive counts against the transfer cap, with the downloads'
//! deadlines.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt as _, stream};
use sandboxd_contracts::{ChannelError, Download, RefusalKind};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{ChangeEntry, ChangeKind, FileType, TransferFormat};
use sandboxd_core::changes::{archive_name, is_whiteout, whiteout_name};
use sandboxd_core::limits::transfer_deadline_secs;
use sandboxd_core::model::{Principal, Sandbox};
use sandboxd_core::plan;
use sandboxd_core::transfer::{BLOCK, dir_entry, link_entry, padded, raw_entry};
use tokio::sync::mpsc;

use super::{consumer_deadline, overall_deadline};
use crate::executor::through;
use crate::files::Files;
use crate::{Service, ServiceError};

type Sender = mpsc::Sender<std::io::Result<Bytes>>;

fn failure(message: String) -> std::io::Error {
    std::io::Error::other(message)
}

impl Files {
    /// The tar of a sandbox's changes (under its user's areas, or everywhere).
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn download_changes(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        all: bool,
    ) -> Result<Download, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        let listing = self.listing(&sandbox, all).await?;
        if listing.truncated {
            return Err(ServiceError::TooLarge(
                "more than 10,000 paths changed: download the directories that hold them instead"
                    .into(),
            ));
        }
        let cap = self.transfer_cap();
        let (tx, rx) = mpsc::channel(4);
        let service = self.service.clone();
        tokio::spawn(async move {
            if let Err(error) = send_changes(&service, &sandbox, &listing.changes, cap, &tx).await {
                let _ = tx.send(Err(error)).await;
            }
        });
        let body = Box::pin(stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }));
        Ok(Download {
            format: TransferFormat::Tar,
            size: None,
            body: consumer_deadline(overall_deadline(
                body,
                Duration::from_secs(transfer_deadline_secs(cap)),
            )),
        })
    }
}

/// What is sent, counted against the transfer's cap.
struct Out<'t> {
    tx: &'t Sender,
    sent: u64,
    cap: u64,
}

impl Out<'_> {
    async fn send(&mut self, bytes: Bytes) -> std::io::Result<()> {
        self.sent += bytes.len() as u64;
        if self.sent > self.cap {
            return Err(failure(format!(
                "the changes are larger than the transfer limit of {} bytes",
                self.cap
            )));
        }
        self.tx
            .send(Ok(bytes))
            .await
            .map_err(|_| failure("the download was abandoned".into()))
    }
}

async fn send_changes(
    service: &Service,
    sandbox: &Sandbox,
    entries: &[ChangeEntry],
    cap: u64,
    tx: &Sender,
) -> std::io::Result<()> {
    let executor = service
        .executor(sandbox)
        .await
        .map_err(|e| failure(e.to_string()))?;
    let owner = sandbox
        .user
        .as_deref()
        .and_then(plan::parse_user)
        .unwrap_or((0, 0));
    let mtime = u64::try_from(crate::now_ms() / 1000).unwrap_or_default();
    let mode = |entry: &ChangeEntry, default: u32| {
        entry
            .mode
            .as_deref()
            .and_then(|m| u32::from_str_radix(m, 8).ok())
            .unwrap_or(default)
    };
    let mut out = Out { tx, sent: 0, cap };
    for entry in entries {
        let name = archive_name(&entry.path);
        // A name that reads as a whiteout would say a removal that did not happen.
        if is_whiteout(&entry.path) {
            continue;
        }
        match (entry.kind, entry.file_type) {
            (ChangeKind::Removed, _) => {
                let header = raw_entry(&whiteout_name(&entry.path), 0, 0o644, owner, mtime);
                out.send(Bytes::from(header)).await?;
            }
            (_, Some(FileType::Directory)) => {
                let header = dir_entry(&name, mode(entry, 0o755), owner, mtime);
                out.send(Bytes::from(header)).await?;
            }
            (_, Some(FileType::Symlink)) => {
                let target = entry.link_target.as_deref().unwrap_or_default();
                out.send(Bytes::from(link_entry(&name, target, owner, mtime)))
                    .await?;
            }
            (_, Some(FileType::File)) => {
                let left = cap.saturating_sub(out.sent);
                let (_, result) = through!(&executor, |channel| channel.download(
                    &entry.path,
                    Some(TransferFormat::Raw),
                    left
                ));
                let download = match result {
                    Ok(download) => download,
                    // Gone, or no longer a file, since it was listed, or not its user's
                    // to read (the listing still shows it).
                    Err(ChannelError::Refused(refusal))
                        if matches!(
                            refusal.kind,
                            RefusalKind::NotFound
                                | RefusalKind::NotAFile
                                | RefusalKind::PermissionDenied
                        ) =>
                    {
                        continue;
                    }
                    Err(error) => {
                        return Err(failure(format!(
                            "{} could not be read: {error}",
                            entry.path
                        )));
                    }
                };
                let Some(size) = download.size else {
                    return Err(failure(format!("{} came without its size", entry.path)));
                };
                let header = raw_entry(&name, size, mode(entry, 0o644), owner, mtime);
                out.send(Bytes::from(header)).await?;
                let mut body = download.body;
                let mut seen = 0u64;
                while let Some(chunk) = body.next().await {
                    let chunk = chunk?;
                    seen += chunk.len() as u64;
                    if seen > size {
                        return Err(failure(format!("{} grew while it was read", entry.path)));
                    }
                    out.send(chunk).await?;
                }
                if seen < size {
                    return Err(failure(format!(
                        "{} was cut short while it was read",
                        entry.path
                    )));
                }
                let padding = (padded(size) - size) as usize;
                if padding > 0 {
                    out.send(Bytes::from(vec![0u8; padding])).await?;
                }
            }
            _ => {}
        }
    }
    out.send(Bytes::from(vec![0u8; 2 * BLOCK])).await
}

//! Uploads. A file's length is checked against its body as it flows; either channel
//! puts it in place only once whole, so a refused, failed or cut upload leaves no
//! partial file. A tar is checked and rewritten as it flows (`CheckedTar`), unpacked
//! under its directory as it arrives.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use sandboxd_contracts::{Chunks, UploadShape};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{TransferFormat, UploadResult};
use sandboxd_core::limits::MAX_TRANSFER_ENTRIES;
use sandboxd_core::model::Principal;
use sandboxd_core::paths;
use sandboxd_core::transfer::{self, TarIn, TarPolicy, TransferRefused};
use sandboxd_core::validate::Upload;

use super::{Cut, overall_deadline, refused, with_idle_deadline};
use crate::ServiceError;
use crate::executor::Executor;
use crate::files::{Files, outcome};
use sandboxd_core::limits::transfer_deadline_secs;
use std::time::Duration;

impl Files {
    /// Streams `body` into the sandbox (see the module's text); `length` is the body's
    /// length when the client sent it (required for a raw file).
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id))]
    pub async fn upload(
        &self,
        caller: &Principal,
        cmd: Upload,
        length: Option<u64>,
        body: Chunks,
    ) -> Result<UploadResult, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        let cut = Cut::default();
        let limit = Duration::from_secs(transfer_deadline_secs(self.transfer_cap()));
        let body = cut.watch(with_idle_deadline(overall_deadline(body, limit)));
        let path = cmd.path.clone();
        let uploaded = match cmd.format {
            TransferFormat::Raw => self.upload_file(&executor, cmd, length, body, &cut).await,
            TransferFormat::Tar => self.upload_tree(&executor, cmd, body, &cut).await,
        };
        self.note(
            caller,
            &sandbox,
            "upload",
            (&path, None),
            outcome(&uploaded, |done| Some(done.bytes)),
        )
        .await;
        let uploaded = uploaded?;
        self.service
            .while_touching(&sandbox.sandbox_id, std::future::ready(()))
            .await;
        Ok(uploaded)
    }

    async fn upload_file(
        &self,
        executor: &Executor<'_>,
        cmd: Upload,
        length: Option<u64>,
        body: Chunks,
        cut: &Cut,
    ) -> Result<UploadResult, ServiceError> {
        let cap = self.transfer_cap();
        if paths::split_file(&cmd.path).is_none() {
            return Err(ServiceError::Refused("path must point to a file".into()));
        }
        let length = length.ok_or_else(|| {
            ServiceError::Refused(
                "a file upload needs its length (Content-Length); send a tar to stream one of unknown length".into(),
            )
        })?;
        if length > cap {
            return Err(ServiceError::TooLarge(format!(
                "the transfer is larger than the limit of {cap} bytes"
            )));
        }
        let mode = cmd.mode.unwrap_or(0o644);
        let mut seen = 0u64;
        let content: Chunks = Box::pin(body.map(move |chunk| {
            let chunk = chunk?;
            seen += chunk.len() as u64;
            if seen > length {
                return Err(std::io::Error::other("the body is longer than its length"));
            }
            Ok(chunk)
        }));
        let what = if cmd.in_place {
            UploadShape::FileInPlace { size: length, mode }
        } else {
            UploadShape::File { size: length, mode }
        };
        executor.upload(&cmd.path, what, content, cut).await?;
        Ok(uploaded(cmd.path, 1, length))
    }

    async fn upload_tree(
        &self,
        executor: &Executor<'_>,
        cmd: Upload,
        body: Chunks,
        cut: &Cut,
    ) -> Result<UploadResult, ServiceError> {
        let checked = CheckedTar::new(TarPolicy {
            owner: executor.owner(),
            max_bytes: self.transfer_cap(),
            max_entries: MAX_TRANSFER_ENTRIES,
        });
        let tar = checked.clone().wrap(body);
        let put = executor
            .upload(&cmd.path, UploadShape::Tree, tar, cut)
            .await;
        // A refused entry ends the archive cleanly: the refusal is the answer.
        if let Some(refusal) = checked.refusal() {
            return Err(refused(refusal));
        }
        put?;
        let summary = checked.summary();
        Ok(uploaded(cmd.path, summary.entries, summary.bytes))
    }
}

fn uploaded(path: String, entries: u64, bytes: u64) -> UploadResult {
    UploadResult {
        path,
        entries,
        bytes,
    }
}

/// An upload's tar checked as it passes, keeping why it was refused.
#[derive(Clone)]
struct CheckedTar {
    state: Arc<Mutex<(TarIn, Option<TransferRefused>)>>,
}

impl CheckedTar {
    fn new(policy: TarPolicy) -> Self {
        Self {
            state: Arc::new(Mutex::new((TarIn::new(policy), None))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (TarIn, Option<TransferRefused>)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refusal(&self) -> Option<TransferRefused> {
        self.lock().1.clone()
    }

    fn summary(&self) -> transfer::TarSummary {
        self.lock().0.summary()
    }

    /// The rewritten stream of `body`. A refused entry ends the archive cleanly before
    /// it (the entries before it are whole; the refusal is kept for the answer); an
    /// archive cut inside an entry, or a failed body, ends it with an error.
    fn wrap(self, body: Chunks) -> Chunks {
        let chunks = stream::unfold(
            (body, self, false),
            |(mut body, checked, done)| async move {
                if done {
                    return None;
                }
                let item = body.next().await;
                let mut out = Vec::new();
                let outcome = {
                    let mut state = checked.lock();
                    let (tar, refusal) = &mut *state;
                    match item {
                        Some(Ok(chunk)) => match tar.push(chunk, &mut out) {
                            Ok(()) => Ok(false),
                            Err(refused) => {
                                *refusal = Some(refused);
                                out.push(Bytes::from_static(&[0; 2 * transfer::BLOCK]));
                                Ok(true)
                            }
                        },
                        Some(Err(error)) => Err(error),
                        None => match tar.finish(&mut out) {
                            Ok(_) => Ok(true),
                            Err(refused) => {
                                *refusal = Some(refused.clone());
                                Err(std::io::Error::other(refused))
                            }
                        },
                    }
                };
                match outcome {
                    Ok(done) => Some((Ok(out), (body, checked, done))),
                    Err(error) => Some((Err(error), (body, checked, true))),
                }
            },
        );
        Box::pin(
            chunks
                .map_ok(|out| stream::iter(out.into_iter().map(Ok)))
                .try_flatten(),
        )
    }
}

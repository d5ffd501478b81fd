//! Downloads: through the agent (`through_agent.rs`), or through the engine: a file's
//! bytes cut out of the engine's tar of it (its size known from its header before any
//! byte goes), or a directory's tar as the engine makes it; capped as they flow. Either
//! way the source is cut when it sends nothing for a minute, and so is the download when
//! its consumer takes nothing for as long.

use std::sync::{Arc, Mutex};

use futures_util::{StreamExt, TryStreamExt, stream};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::TransferFormat;
use sandboxd_core::model::Principal;
use sandboxd_core::transfer::{FileOut, TransferRefused};
use sandboxd_ports::EngineError;

use super::through_agent;
use super::{Download, capped, consumer_deadline, overall_deadline, refused, with_idle_deadline};
use crate::executor::Executor;
use crate::{ServedBy, Service, ServiceError};
use sandboxd_core::limits::transfer_deadline_secs;
use std::time::Duration;

impl Service {
    /// Streams a file's bytes (raw) or a directory's tar out of the sandbox; `None` as
    /// the format picks by what `path` is.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn download(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
        format: Option<TransferFormat>,
    ) -> Result<Download, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        let executor = self.executor(&sandbox).await?;
        let cap = self.transfer_cap();
        let download = match through_agent::download(&executor, path, format, cap).await? {
            Some(download) => download,
            None => {
                executor.served(ServedBy::Engine);
                self.download_from_engine(&executor, path, format, cap)
                    .await?
            }
        };
        self.while_touching(&sandbox.sandbox_id, std::future::ready(()))
            .await;
        Ok(Download {
            body: consumer_deadline(overall_deadline(
                download.body,
                Duration::from_secs(transfer_deadline_secs(cap)),
            )),
            ..download
        })
    }

    /// A download through the engine's archive API.
    async fn download_from_engine(
        &self,
        executor: &Executor<'_>,
        path: &str,
        format: Option<TransferFormat>,
        cap: u64,
    ) -> Result<Download, ServiceError> {
        let archive = executor
            .engine()
            .get_archive(executor.container(), path, &executor.user())
            .await
            .map_err(|error| match error {
                EngineError::NotFound { .. } => ServiceError::NotFound("path"),
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
                .ok_or_else(|| ServiceError::Refused("the engine's archive ended early".into()))?
                .map_err(|e| ServiceError::Refused(format!("the download failed: {e}")))?;
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
}

//! Downloads: a file's bytes or a directory's tar through the sandbox's channel, capped
//! as they flow. Whichever channel serves it, the whole download is bounded in time,
//! and it is cut when its consumer takes nothing for a minute.

use sandboxd_contracts::Download;
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::TransferFormat;
use sandboxd_core::model::Principal;

use super::{consumer_deadline, overall_deadline};
use crate::ServiceError;
use crate::executor::{refusal_error, through};
use crate::files::{Files, outcome};
use sandboxd_core::limits::transfer_deadline_secs;
use std::time::Duration;

impl Files {
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
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        let cap = self.transfer_cap();
        let (_, result) = through!(&executor, |channel| channel.download(path, format, cap));
        let download = executor
            .settled(result, |refusal| refusal_error(refusal, "path"))
            .await;
        self.note(
            caller,
            &sandbox,
            "download",
            (path, None),
            outcome(&download, |done| done.size),
        )
        .await;
        let download = download?;
        self.service
            .while_touching(&sandbox.sandbox_id, std::future::ready(()))
            .await;
        Ok(Download {
            body: consumer_deadline(overall_deadline(
                download.body,
                Duration::from_secs(transfer_deadline_secs(cap)),
            )),
            ..download
        })
    }
}

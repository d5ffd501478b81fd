//! `sandbox.*`: a sandbox's life, commands and files.

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::egress_requests::ListChange;
use sandboxd_core::model::{Principal, Sandbox};
use sandboxd_core::validate;

use super::{Context, Serve, Surface};
use crate::error::ApiError;
use crate::time::rfc3339;

fn view(sandbox: &Sandbox) -> SandboxView {
    SandboxView::from_sandbox(sandbox, rfc3339)
}

impl Serve for procedures::SandboxCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateSandboxRequest,
    ) -> Result<SandboxView, ApiError> {
        let cmd = validate::create_sandbox(request)?;
        Ok(view(&cx.service.sandboxes().create(&caller, cmd).await?))
    }
}

impl Serve for procedures::SandboxRename {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: RenameSandboxRequest,
    ) -> Result<SandboxView, ApiError> {
        let (id, name) = validate::rename(request)?;
        Ok(view(
            &cx.service.sandboxes().rename(&caller, &id, &name).await?,
        ))
    }
}

impl Serve for procedures::SandboxExec {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ExecRequest,
    ) -> Result<ExecResult, ApiError> {
        let cmd = validate::exec(request)?;
        Ok(cx.service.commands().exec(&caller, cmd).await?)
    }
}

impl Serve for procedures::SandboxWriteFile {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: WriteFileRequest,
    ) -> Result<WriteFileResult, ApiError> {
        let cmd = validate::write_file(request)?;
        Ok(cx.service.files().write_file(&caller, cmd).await?)
    }
}

impl Serve for procedures::SandboxListFiles {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ListFilesQuery,
    ) -> Result<ListFilesResult, ApiError> {
        let cmd = validate::list_files(request)?;
        Ok(cx.service.files().list_files(&caller, cmd).await?)
    }
}

impl Serve for procedures::SandboxSetTimeout {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SetTimeoutRequest,
    ) -> Result<SandboxView, ApiError> {
        let (id, timeout) = validate::set_timeout(request)?;
        Ok(view(
            &cx.service
                .sandboxes()
                .set_timeout(&caller, &id, timeout)
                .await?,
        ))
    }
}

impl Serve for procedures::SandboxSetEgress {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SetEgressRequest,
    ) -> Result<SandboxView, ApiError> {
        let (id, allow) = validate::set_egress(request)?;
        Ok(view(
            &cx.service
                .sandboxes()
                .set_egress(
                    &caller,
                    &id,
                    &allow,
                    // An agent only ever narrows its list (asking is sandbox-requestEgress);
                    // a key with `egress:decide` may widen it over REST.
                    match cx.surface {
                        Surface::Rest => ListChange::MayWiden,
                        Surface::Mcp => ListChange::NarrowOnly,
                    },
                )
                .await?,
        ))
    }
}

impl Serve for procedures::SandboxList {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ListSandboxesQuery,
    ) -> Result<Vec<SandboxView>, ApiError> {
        let scope = validate::list_scope(request)?;
        let sandboxes = cx.service.sandboxes().list(&caller, scope).await?;
        Ok(sandboxes.iter().map(view).collect())
    }
}

impl Serve for procedures::SandboxOne {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxIdQuery,
    ) -> Result<SandboxView, ApiError> {
        Ok(view(
            &cx.service
                .access()
                .sandbox_for(&caller, &request.sandbox_id, SandboxNeed::Read)
                .await?,
        ))
    }
}

impl Serve for procedures::SandboxStats {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxIdQuery,
    ) -> Result<SandboxStats, ApiError> {
        Ok(cx
            .service
            .sandboxes()
            .sandbox_stats(&caller, &request.sandbox_id)
            .await?)
    }
}

impl Serve for procedures::SandboxMetrics {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxMetricsQuery,
    ) -> Result<SandboxMetrics, ApiError> {
        let range = validate::metrics_range(request, crate::time::parse_rfc3339)?;
        Ok(cx.service.sandboxes().metrics(&caller, range).await?)
    }
}

impl Serve for procedures::SandboxActivity {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ActivityQuery,
    ) -> Result<ActivityView, ApiError> {
        let read = validate::activity(request)?;
        let page = cx.service.activity().read(&caller, &read).await?;
        Ok(ActivityView::new(
            page.entries,
            page.next,
            page.more,
            page.dropped,
            crate::time::rfc3339,
        ))
    }
}

impl Serve for procedures::SandboxRecording {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: RecordingQuery,
    ) -> Result<RecordingView, ApiError> {
        let (sandbox_id, terminal_id) = validate::recording(request)?;
        let cast = cx
            .service
            .activity()
            .recording(&caller, &sandbox_id, &terminal_id)
            .await?;
        Ok(RecordingView {
            sandbox_id,
            terminal_id,
            cast,
        })
    }
}

impl Serve for procedures::SandboxPause {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxPauseBody,
    ) -> Result<SandboxView, ApiError> {
        Ok(view(
            &cx.service
                .sandboxes()
                .pause_for(
                    &caller,
                    &request.sandbox_id,
                    request.memory.unwrap_or_default(),
                )
                .await?,
        ))
    }
}

impl Serve for procedures::SandboxResume {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxIdBody,
    ) -> Result<SandboxView, ApiError> {
        Ok(view(
            &cx.service
                .sandboxes()
                .resume_for(&caller, &request.sandbox_id)
                .await?,
        ))
    }
}

impl Serve for procedures::SandboxKill {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxIdBody,
    ) -> Result<SandboxView, ApiError> {
        Ok(view(
            &cx.service
                .sandboxes()
                .kill_for(&caller, &request.sandbox_id)
                .await?,
        ))
    }
}

impl Serve for procedures::SandboxRemove {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxIdBody,
    ) -> Result<bool, ApiError> {
        cx.service
            .sandboxes()
            .remove_for(&caller, &request.sandbox_id)
            .await?;
        Ok(true)
    }
}

impl Serve for procedures::SandboxTemplates {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<TemplateView>, ApiError> {
        let mut views = cx.service.templates().views();
        let groups = match cx.service.builds().all(&caller).await {
            Ok(groups) => groups,
            // A key that may not read sees the configured ones only.
            Err(sandboxd_service::ServiceError::Forbidden(_)) => Vec::new(),
            Err(error) => return Err(error.into()),
        };
        for builds in groups {
            let Some(ready) = builds.iter().find(|b| b.status == "ready") else {
                continue;
            };
            views.push(TemplateView {
                name: ready.name.clone(),
                kind: "built".into(),
                project_id: Some(ready.project_id.clone()),
                image: ready.image.clone().unwrap_or_default(),
                user: ready.user.clone(),
                workdir: ready
                    .workdir
                    .clone()
                    .unwrap_or_else(|| sandboxd_core::limits::DEFAULT_WORKDIR.into()),
                description: format!("built from a Dockerfile, version {}", ready.version),
                isolation: ready
                    .isolation
                    .as_deref()
                    .and_then(sandboxd_core::model::Isolation::parse),
            });
        }
        Ok(views)
    }
}

impl Serve for procedures::SandboxExecToken {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxIdBody,
    ) -> Result<stream::ExecTokenView, ApiError> {
        let (token, expires) = cx
            .service
            .commands()
            .exec_token(&caller, &request.sandbox_id)
            .await?;
        Ok(stream::ExecTokenView {
            token,
            sandbox_id: request.sandbox_id,
            expires_at: rfc3339(expires),
        })
    }
}

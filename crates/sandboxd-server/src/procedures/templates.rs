//! `template.*`: templates users build.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::template_build::{LogLine, TemplateBuild};
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;
use crate::time::rfc3339;

fn error_of(build: &TemplateBuild) -> Option<BuildError> {
    build.error_message.as_ref().map(|message| BuildError {
        step: build.error_step.unwrap_or_default(),
        message: message.clone(),
    })
}

/// A template's view from its builds, newest version first.
fn view(builds: &[TemplateBuild]) -> BuiltTemplateView {
    let first = &builds[0];
    let ready = builds.iter().find(|b| b.status == "ready");
    BuiltTemplateView {
        template_id: first.template_id.clone(),
        name: first.name.clone(),
        project_id: first.project_id.clone(),
        version: ready.map(|b| b.version),
        user: ready.and_then(|b| b.user.clone()),
        workdir: ready.and_then(|b| b.workdir.clone()),
        start_command: ready.and_then(|b| b.start.clone()),
        ready_command: ready.and_then(|b| b.ready.clone()),
        cpu: ready.and_then(|b| b.cpu),
        memory_mb: ready.and_then(|b| b.memory_mb),
        isolation: ready.and_then(|b| b.isolation.clone()),
        versions: builds
            .iter()
            .map(|b| BuiltTemplateVersion {
                build_id: b.build_id.clone(),
                version: b.version,
                status: b.status.clone(),
                created_at: rfc3339(b.created_at),
                finished_at: b.finished_at.map(rfc3339),
                error: error_of(b),
            })
            .collect(),
    }
}

fn entry(line: LogLine) -> BuildLogEntry {
    BuildLogEntry {
        time: rfc3339(line.time),
        step: line.step,
        stream: line.stream,
        line: line.line,
    }
}

impl Serve for procedures::TemplateBuild {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: BuildTemplateRequest,
    ) -> Result<BuildStarted, ApiError> {
        let asked = validate::build_asked(request)?;
        let build = cx.service.builds().start_asked(&caller, asked).await?;
        Ok(BuildStarted {
            template_id: build.template_id,
            build_id: build.build_id,
            version: build.version,
            status: build.status,
        })
    }
}

impl Serve for procedures::TemplateBuildLog {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: BuildLogQuery,
    ) -> Result<BuildLogView, ApiError> {
        let offset = validate::build_log_offset(request.offset)?;
        let (build, lines) = cx
            .service
            .builds()
            .log(&caller, &request.build_id, offset)
            .await?;
        Ok(BuildLogView {
            status: build.status.clone(),
            next_offset: offset + lines.len() as i64,
            entries: lines.into_iter().map(entry).collect(),
            error: error_of(&build),
        })
    }
}

impl Serve for procedures::TemplateAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<BuiltTemplateView>, ApiError> {
        let all = cx.service.builds().all(&caller).await?;
        Ok(all.iter().map(|builds| view(builds)).collect())
    }
}

impl Serve for procedures::TemplateOne {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: TemplateQuery,
    ) -> Result<BuiltTemplateView, ApiError> {
        let builds = cx
            .service
            .builds()
            .one(
                &caller,
                request.template_id.as_deref(),
                request.name.as_deref(),
                request.project_id.as_deref(),
            )
            .await?;
        Ok(view(&builds))
    }
}

impl Serve for procedures::TemplateRemove {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: TemplateIdBody,
    ) -> Result<bool, ApiError> {
        cx.service
            .builds()
            .remove(&caller, &request.template_id)
            .await?;
        Ok(true)
    }
}

//! `sandbox.exposePort`, `sandbox.ports` and `sandbox.unexposePort`: previews' URLs are made from the request's `Host`.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;

impl Serve for procedures::SandboxExposePort {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ExposePortRequest,
    ) -> Result<ExposedPortView, ApiError> {
        let cmd = validate::expose_port(request)?;
        let exposed = cx.service.ports().expose(&caller, cmd).await?;
        Ok(cx.previews.view(cx.headers, &exposed))
    }
}

impl Serve for procedures::SandboxPorts {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: SandboxIdQuery,
    ) -> Result<Vec<ExposedPortView>, ApiError> {
        let id = validate::sandbox_id(&request.sandbox_id)?;
        let exposed = cx.service.ports().exposed_ports(&caller, &id).await?;
        Ok(exposed
            .iter()
            .map(|e| cx.previews.view(cx.headers, e))
            .collect())
    }
}

impl Serve for procedures::SandboxUnexposePort {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: PortRequest,
    ) -> Result<UnexposedView, ApiError> {
        let (id, port) = validate::unexpose_port(request)?;
        let removed = cx.service.ports().unexpose(&caller, &id, port).await?;
        Ok(UnexposedView { port, removed })
    }
}

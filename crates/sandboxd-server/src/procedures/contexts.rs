//! `sandbox.context*`: interpreter contexts (the agent's).
//!
//! The service's `commands/contexts/`: a background process running `driver.py`, a run
//! being one JSON line in, and out what it prints as it prints, then its reply, each a
//! marked line.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;

use super::{Context, Serve};
use crate::error::ApiError;
use crate::service::{ContextRun, NewContext};

impl Serve for procedures::SandboxContextCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ContextCreateRequest,
    ) -> Result<ContextView, ApiError> {
        Ok(cx
            .service
            .commands()
            .create_context(&caller, &request.sandbox_id, NewContext::from(&request))
            .await?)
    }
}

impl Serve for procedures::SandboxContextRun {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ContextRunRequest,
    ) -> Result<ContextRunResult, ApiError> {
        let result = cx
            .service
            .commands()
            .run_in_context(
                &caller,
                &request.sandbox_id,
                &request.context_id,
                &ContextRun::from(&request),
            )
            .await?;
        Ok(result)
    }
}

impl Serve for procedures::SandboxContextRemove {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ContextIdBody,
    ) -> Result<bool, ApiError> {
        cx.service
            .commands()
            .remove_context(&caller, &request.sandbox_id, &request.context_id)
            .await?;
        Ok(true)
    }
}

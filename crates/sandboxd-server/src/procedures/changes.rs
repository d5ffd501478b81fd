//! `sandbox.changes`.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;

use super::{Context, Serve};
use crate::error::ApiError;

impl Serve for procedures::SandboxChanges {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ChangesQuery,
    ) -> Result<ChangesResult, ApiError> {
        Ok(cx
            .service
            .files()
            .changes(&caller, &request.sandbox_id, request.all.unwrap_or(false))
            .await?)
    }
}

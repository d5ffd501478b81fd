//! `sandbox.process*`: background processes (the agent's).
//!
//! The service's `commands/processes.rs`; the agent keeps them (`procs.rs` there),
//! reached through the agent host's `ops.rs`.

use std::time::Duration;

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;

impl Serve for procedures::SandboxProcessStart {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ProcessStartRequest,
    ) -> Result<ProcessView, ApiError> {
        let start = validate::process_start(request)?;
        Ok(cx.service.commands().start_process(&caller, start).await?)
    }
}

impl Serve for procedures::SandboxProcessList {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ProcessListQuery,
    ) -> Result<Vec<ProcessView>, ApiError> {
        Ok(cx
            .service
            .commands()
            .list_processes(&caller, &request.sandbox_id)
            .await?)
    }
}

impl Serve for procedures::SandboxProcessWait {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ProcessWaitRequest,
    ) -> Result<ProcessView, ApiError> {
        let process_id = validate::process_id(&request.process_id)?;
        let wait = Duration::from_millis(validate::process_wait_ms(request.timeout_ms)?);
        Ok(cx
            .service
            .commands()
            .wait_process(&caller, &request.sandbox_id, &process_id, wait)
            .await?)
    }
}

impl Serve for procedures::SandboxProcessSignal {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ProcessSignalRequest,
    ) -> Result<ProcessView, ApiError> {
        let process_id = validate::process_id(&request.process_id)?;
        let signal = validate::signal_number(request.signal.as_deref())?;
        Ok(cx
            .service
            .commands()
            .signal_process(&caller, &request.sandbox_id, &process_id, signal)
            .await?)
    }
}

impl Serve for procedures::SandboxProcessWrite {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ProcessWriteRequest,
    ) -> Result<ProcessWriteResult, ApiError> {
        let process_id = validate::process_id(&request.process_id)?;
        let data = validate::process_data(request.data, request.encoding)?;
        let written = cx
            .service
            .commands()
            .write_process(
                &caller,
                &request.sandbox_id,
                &process_id,
                &data,
                request.close,
            )
            .await?;
        Ok(ProcessWriteResult { written })
    }
}

impl Serve for procedures::SandboxProcessOutput {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: ProcessOutputQuery,
    ) -> Result<ProcessOutputResult, ApiError> {
        let process_id = validate::process_id(&request.process_id)?;
        let result = cx
            .service
            .commands()
            .read_process(
                &caller,
                &request.sandbox_id,
                &process_id,
                request.stream,
                request.offset,
                request.encoding,
            )
            .await?;
        Ok(result)
    }
}

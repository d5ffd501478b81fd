//! `sandbox.requestEgress`, `egress.*` and `sandbox.egressLog`.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::validate;

use super::{Context, Serve};
use crate::error::ApiError;
use crate::time::rfc3339;

fn request_view(
    request: &sandboxd_core::egress_requests::EgressRequestRecord,
) -> EgressRequestView {
    EgressRequestView::from_record(request, rfc3339)
}

impl Serve for procedures::SandboxEgressLog {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: EgressLogQuery,
    ) -> Result<EgressLogView, ApiError> {
        let read = validate::egress_log(request)?;
        let page = cx.service.egress().log(&caller, &read).await?;
        Ok(EgressLogView::new(
            &page.entries,
            page.next,
            page.more,
            rfc3339,
        ))
    }
}

impl Serve for procedures::SandboxRequestEgress {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: RequestEgressRequest,
    ) -> Result<EgressRequestView, ApiError> {
        let ask = validate::request_egress(request)?;
        let request = cx.service.egress().ask(&caller, ask).await?;
        Ok(request_view(&request))
    }
}

impl Serve for procedures::EgressRequests {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: EgressRequestsQuery,
    ) -> Result<Vec<EgressRequestView>, ApiError> {
        let (pending_only, sandbox_id) = validate::egress_requests(request)?;
        let requests = cx
            .service
            .egress()
            .requests(&caller, pending_only, sandbox_id.as_deref())
            .await?;
        Ok(requests.iter().map(request_view).collect())
    }
}

impl Serve for procedures::EgressDecide {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: DecideEgressRequest,
    ) -> Result<EgressRequestView, ApiError> {
        let (request_id, approve) = validate::decide_egress(request)?;
        let request = cx
            .service
            .egress()
            .decide(&caller, &request_id, approve)
            .await?;
        Ok(request_view(&request))
    }
}

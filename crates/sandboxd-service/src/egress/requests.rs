//! Asking for one more host and deciding: a key that may use an `allowlist` sandbox
//! asks (`sandbox.requestEgress`, also an agent's tool); a key of another holding
//! `egress:decide` approves, which adds the host to the running sandbox's list at once,
//! or denies.
//!
//! `Egress::ask`, the listing, and `Egress::decide`: `egress_requests::check_decider`,
//! then the store's `add_egress`, a compare-and-set on the list.

use sandboxd_core::access::{self, SandboxNeed};
use sandboxd_core::egress_requests::{
    self, EgressRequestRecord, MAX_PENDING_PER_SANDBOX, RequestStatus,
};
use sandboxd_core::model::{NetworkMode, Principal};
use sandboxd_core::validate::EgressAsk;
use sandboxd_store::{AccessList, Asked};
use serde_json::json;

use super::Egress;
use crate::{Resource, ServiceError, now_ms};

impl Egress {
    /// Asks for `ask.host` for a running `allowlist` sandbox the caller may use; the
    /// same host asked again while waiting is the same request.
    pub async fn ask(
        &self,
        caller: &Principal,
        ask: EgressAsk,
    ) -> Result<EgressRequestRecord, ServiceError> {
        let access = self.service.access();
        let sandbox = access
            .sandbox_for(caller, &ask.sandbox_id, SandboxNeed::Use)
            .await?;
        self.service.wake(&sandbox).await?;
        if sandbox.network_mode != NetworkMode::Allowlist {
            return Err(ServiceError::Refused(format!(
                "the sandbox's network mode is {}: egress is asked for only by `allowlist` sandboxes",
                sandbox.network_mode.as_str()
            )));
        }
        if sandbox.egress.contains(&ask.host) {
            return Err(ServiceError::Conflict(format!(
                "{} is in the sandbox's list already",
                ask.host
            )));
        }
        let request = EgressRequestRecord {
            request_id: String::new(),
            organization_id: sandbox.organization_id.clone(),
            sandbox_id: sandbox.sandbox_id.clone(),
            host: ask.host,
            reason: ask.reason,
            status: RequestStatus::Pending,
            requested_by_user: caller.user_id.clone(),
            requested_by_key: caller.key_id.clone(),
            created_at: 0,
            decided_at: None,
            decided_by_user: None,
            decided_by_key: None,
        };
        match self.service.store().ask_egress(request, now_ms()).await? {
            Asked::Waiting(same) => Ok(same),
            Asked::TooMany => Err(ServiceError::Conflict(format!(
                "the sandbox has {MAX_PENDING_PER_SANDBOX} requests waiting for a decision"
            ))),
            Asked::Made(made) => {
                access
                    .record(
                        &sandbox.organization_id,
                        Some(caller),
                        "sandbox.requestEgress",
                        Resource::sandbox(&sandbox),
                        json!({"requestId": made.request_id, "host": made.host, "reason": made.reason}),
                    )
                    .await;
                Ok(made)
            }
        }
    }

    /// The requests of the caller's organization for sandboxes the caller may read,
    /// newest first: pending ones (of running sandboxes) or all of the latest.
    pub async fn requests(
        &self,
        caller: &Principal,
        pending_only: bool,
        sandbox_id: Option<&str>,
    ) -> Result<Vec<EgressRequestRecord>, ServiceError> {
        let access = self.service.access();
        if let Some(id) = sandbox_id {
            access.sandbox_for(caller, id, SandboxNeed::Read).await?;
        } else {
            access.require(caller, SandboxNeed::Read.permission())?;
        }
        let store = self.service.store();
        let org = &caller.organization_id;
        let requests = store.egress_requests(org, pending_only, sandbox_id).await?;
        if access::sees_everything(caller.role) {
            return Ok(requests);
        }
        let listed = store
            .access_list(AccessList::Sandboxes, org, &caller.user_id)
            .await?;
        Ok(requests
            .into_iter()
            .filter(|r| listed.binary_search(&r.sandbox_id).is_ok())
            .collect())
    }

    /// Approves (the host added to the running sandbox's list at once) or denies a
    /// pending request, for a caller holding `egress:decide` who may use the sandbox,
    /// with another key than the one that asked.
    pub async fn decide(
        &self,
        caller: &Principal,
        request_id: &str,
        approve: bool,
    ) -> Result<EgressRequestRecord, ServiceError> {
        let store = self.service.store();
        let org = &caller.organization_id;
        let request = store
            .egress_request(org, request_id)
            .await?
            .ok_or(ServiceError::NotFound("egress request"))?;
        let access = self.service.access();
        let sandbox = access
            .sandbox_for(caller, &request.sandbox_id, SandboxNeed::Use)
            .await?;
        egress_requests::check_decider(caller, &request)?;
        if request.status != RequestStatus::Pending {
            return Err(ServiceError::Conflict(format!(
                "the request was {} already",
                request.status.as_str()
            )));
        }
        if approve {
            // Refused before deciding when it could not be added now.
            self.service.wake(&sandbox).await?;
            egress_requests::approved_list(&sandbox.egress, &request.host)
                .map_err(ServiceError::Conflict)?;
        }
        let status = if approve {
            RequestStatus::Approved
        } else {
            RequestStatus::Denied
        };
        let decided = store
            .decide_egress(
                org,
                request_id,
                status,
                &caller.user_id,
                &caller.key_id,
                now_ms(),
            )
            .await?
            .ok_or_else(|| ServiceError::Conflict("the request was decided already".into()))?;
        access
            .record(
                org,
                Some(caller),
                "egress.decide",
                Resource::sandbox(&sandbox),
                json!({"requestId": decided.request_id, "host": decided.host, "approve": approve}),
            )
            .await;
        if approve {
            // Added to the list as it stands now, whatever changed it meanwhile.
            let Some(changed) = store.add_egress(&sandbox.sandbox_id, &decided.host).await? else {
                return Err(ServiceError::Conflict(
                    "approved, but the sandbox stopped running meanwhile".into(),
                ));
            };
            access
                .record(
                    org,
                    Some(caller),
                    "sandbox.setEgress",
                    Resource::sandbox(&changed),
                    json!({"allow": changed.egress, "requestId": decided.request_id}),
                )
                .await;
        }
        Ok(decided)
    }
}

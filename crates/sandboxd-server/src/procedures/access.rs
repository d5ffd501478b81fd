//! `organization.*`, `member.*`, `apiKey.*` and `audit.list`.

use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::{ApiKey, Member, Principal};
use sandboxd_core::validate;
use sandboxd_store::NewKey;

use super::{Context, Serve};
use crate::error::ApiError;
use crate::time::{parse_rfc3339, rfc3339};

fn member_view(member: &Member) -> MemberView {
    MemberView::from_member(member, rfc3339)
}

fn key_view(key: &ApiKey) -> ApiKeyView {
    ApiKeyView::from_key(key, rfc3339)
}

fn created(key: NewKey) -> ApiKeyCreated {
    ApiKeyCreated {
        key: key_view(&key.record),
        secret: key.secret,
    }
}

impl Serve for procedures::OrganizationAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<OrganizationView>, ApiError> {
        let orgs = cx.service.tenancy().organizations(&caller).await?;
        Ok(orgs
            .iter()
            .map(|o| OrganizationView::from_organization(o, rfc3339))
            .collect())
    }
}

impl Serve for procedures::OrganizationCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateOrganizationRequest,
    ) -> Result<OrganizationCreated, ApiError> {
        let name = validate::name(request.name)?;
        let (org, key) = cx
            .service
            .tenancy()
            .create_organization(&caller, &name)
            .await?;
        Ok(OrganizationCreated {
            organization: OrganizationView::from_organization(&org, rfc3339),
            api_key: created(key),
        })
    }
}

impl Serve for procedures::MemberAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<MemberView>, ApiError> {
        let members = cx.service.tenancy().members(&caller).await?;
        Ok(members.iter().map(member_view).collect())
    }
}

impl Serve for procedures::MemberCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateMemberRequest,
    ) -> Result<MemberView, ApiError> {
        let new = validate::create_member(request)?;
        Ok(member_view(
            &cx.service.tenancy().create_member(&caller, new).await?,
        ))
    }
}

impl Serve for procedures::MemberUpdate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: UpdateMemberRequest,
    ) -> Result<MemberView, ApiError> {
        let (user_id, changes) = validate::update_member(request)?;
        Ok(member_view(
            &cx.service
                .tenancy()
                .update_member(&caller, &user_id, changes)
                .await?,
        ))
    }
}

impl Serve for procedures::MemberRemove {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: UserIdBody,
    ) -> Result<bool, ApiError> {
        let user_id = validate::user_id(request.user_id)?;
        cx.service
            .tenancy()
            .remove_member(&caller, &user_id)
            .await?;
        Ok(true)
    }
}

impl Serve for procedures::ApiKeyAll {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<Vec<ApiKeyView>, ApiError> {
        let keys = cx.service.tenancy().keys(&caller).await?;
        Ok(keys.iter().map(key_view).collect())
    }
}

impl Serve for procedures::ApiKeyCreate {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: CreateApiKeyRequest,
    ) -> Result<ApiKeyCreated, ApiError> {
        let new = validate::create_key(request)?;
        Ok(created(
            cx.service.tenancy().create_key(&caller, new).await?,
        ))
    }
}

impl Serve for procedures::ApiKeyCurrent {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        _: procedures::NoArguments,
    ) -> Result<CurrentKeyView, ApiError> {
        let key = cx.service.tenancy().current_key(&caller).await?;
        Ok(CurrentKeyView {
            key: key_view(&key),
            organization_id: caller.organization_id.clone(),
            role: caller.role,
            permissions: caller.permissions.names(),
        })
    }
}

impl Serve for procedures::ApiKeyRevoke {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: KeyIdBody,
    ) -> Result<ApiKeyView, ApiError> {
        let key_id = validate::key_id(request.key_id)?;
        Ok(key_view(
            &cx.service.tenancy().revoke_key(&caller, &key_id).await?,
        ))
    }
}

impl Serve for procedures::AuditList {
    async fn serve(
        cx: Context<'_>,
        caller: Principal,
        request: AuditQuery,
    ) -> Result<AuditPageView, ApiError> {
        let selection = validate::audit_query(request, parse_rfc3339)?;
        let (entries, next) = cx.service.tenancy().audit_page(&caller, selection).await?;
        Ok(AuditPageView {
            entries: entries
                .iter()
                .map(|e| AuditEntryView::from_record(e, rfc3339))
                .collect(),
            next_cursor: next.map(|(at, id)| validate::audit_cursor(at, &id)),
        })
    }
}

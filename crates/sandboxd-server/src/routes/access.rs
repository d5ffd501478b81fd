//! `/api/organization.*`, `/api/member.*`, `/api/apiKey.*` and `/api/audit.list`.

use axum::Json;
use axum::extract::State;
use sandboxd_core::api::*;
use sandboxd_core::model::{ApiKey, Member};
use sandboxd_core::validate;
use sandboxd_store::NewKey;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::time::{parse_rfc3339, rfc3339};

type ApiResult<T> = Result<Json<T>, ApiError>;

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

/// The tenancy procedures.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_organization))
        .routes(routes!(all_organizations))
        .routes(routes!(all_members))
        .routes(routes!(create_member))
        .routes(routes!(update_member))
        .routes(routes!(remove_member))
        .routes(routes!(create_key))
        .routes(routes!(all_keys))
        .routes(routes!(current_key))
        .routes(routes!(revoke_key))
        .routes(routes!(audit_list))
}

/// Create an organization owned by the caller (owners only). The reply holds an owner
/// key for it: keys belong to one organization.
#[utoipa::path(post, path = "/api/organization.create", operation_id = "organization-create", tag = "organization",
    request_body = CreateOrganizationRequest,
    responses((status = 200, body = OrganizationCreated), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create_organization(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateOrganizationRequest>,
) -> ApiResult<OrganizationCreated> {
    let name = validate::name(req.name)?;
    let (org, key) = state
        .service
        .tenancy()
        .create_organization(&caller, &name)
        .await?;
    Ok(Json(OrganizationCreated {
        organization: OrganizationView::from_organization(&org, rfc3339),
        api_key: created(key),
    }))
}

/// The organizations the caller belongs to, with their role in each.
#[utoipa::path(get, path = "/api/organization.all", operation_id = "organization-all", tag = "organization",
    responses((status = 200, body = Vec<OrganizationView>), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn all_organizations(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<Vec<OrganizationView>> {
    let orgs = state.service.tenancy().organizations(&caller).await?;
    Ok(Json(
        orgs.iter()
            .map(|o| OrganizationView::from_organization(o, rfc3339))
            .collect(),
    ))
}

/// The members of the caller's organization (owners and admins see everyone, members
/// themselves).
#[utoipa::path(get, path = "/api/member.all", operation_id = "member-all", tag = "member",
    responses((status = 200, body = Vec<MemberView>), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn all_members(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<Vec<MemberView>> {
    let members = state.service.tenancy().members(&caller).await?;
    Ok(Json(members.iter().map(member_view).collect()))
}

/// Add a user to the organization with a role, permissions and access lists
/// (`organization:admin`; only owners add owners and admins).
#[utoipa::path(post, path = "/api/member.create", operation_id = "member-create", tag = "member",
    request_body = CreateMemberRequest,
    responses((status = 200, body = MemberView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create_member(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateMemberRequest>,
) -> ApiResult<MemberView> {
    let new = validate::create_member(req)?;
    Ok(Json(member_view(
        &state.service.tenancy().create_member(&caller, new).await?,
    )))
}

/// Change a member's role, permissions or access lists; what is given replaces what
/// was there.
#[utoipa::path(post, path = "/api/member.update", operation_id = "member-update", tag = "member",
    request_body = UpdateMemberRequest,
    responses((status = 200, body = MemberView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn update_member(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<UpdateMemberRequest>,
) -> ApiResult<MemberView> {
    let (user_id, changes) = validate::update_member(req)?;
    Ok(Json(member_view(
        &state
            .service
            .tenancy()
            .update_member(&caller, &user_id, changes)
            .await?,
    )))
}

/// Remove a member; their keys stop working at once.
#[utoipa::path(post, path = "/api/member.remove", operation_id = "member-remove", tag = "member",
    request_body = UserIdBody,
    responses((status = 200, body = bool), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn remove_member(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<UserIdBody>,
) -> ApiResult<bool> {
    let user_id = validate::user_id(req.user_id)?;
    state
        .service
        .tenancy()
        .remove_member(&caller, &user_id)
        .await?;
    Ok(Json(true))
}

/// Create an API key, optionally narrowed to scopes and with an expiry. The reply is
/// the only time the key is shown.
#[utoipa::path(post, path = "/api/apiKey.create", operation_id = "apiKey-create", tag = "apiKey",
    request_body = CreateApiKeyRequest,
    responses((status = 200, body = ApiKeyCreated), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn create_key(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<CreateApiKeyRequest>,
) -> ApiResult<ApiKeyCreated> {
    let new = validate::create_key(req)?;
    Ok(Json(created(
        state.service.tenancy().create_key(&caller, new).await?,
    )))
}

/// The caller's API keys (every key of the organization for owners and admins),
/// without the keys themselves.
#[utoipa::path(get, path = "/api/apiKey.all", operation_id = "apiKey-all", tag = "apiKey",
    responses((status = 200, body = Vec<ApiKeyView>), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn all_keys(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<Vec<ApiKeyView>> {
    let keys = state.service.tenancy().keys(&caller).await?;
    Ok(Json(keys.iter().map(key_view).collect()))
}

/// The key making this request: its name, scopes and expiry, the caller's role, and
/// what the key may do.
#[utoipa::path(get, path = "/api/apiKey.current", operation_id = "apiKey-current", tag = "apiKey",
    responses((status = 200, body = CurrentKeyView), (status = 401, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn current_key(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> ApiResult<CurrentKeyView> {
    let key = state.service.tenancy().current_key(&caller).await?;
    Ok(Json(CurrentKeyView {
        key: key_view(&key),
        organization_id: caller.organization_id.clone(),
        role: caller.role,
        permissions: caller.permissions.names(),
    }))
}

/// Revoke an API key; the next request with it is refused.
#[utoipa::path(post, path = "/api/apiKey.revoke", operation_id = "apiKey-revoke", tag = "apiKey",
    request_body = KeyIdBody,
    responses((status = 200, body = ApiKeyView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn revoke_key(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiJson(req): ApiJson<KeyIdBody>,
) -> ApiResult<ApiKeyView> {
    let key_id = validate::key_id(req.key_id)?;
    Ok(Json(key_view(
        &state.service.tenancy().revoke_key(&caller, &key_id).await?,
    )))
}

/// The organization's audit log, newest first, filtered and paged
/// (`organization:admin`).
#[utoipa::path(get, path = "/api/audit.list", operation_id = "audit-list", tag = "audit",
    params(AuditQuery),
    responses((status = 200, body = AuditPageView), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("apiKey" = [])))]
async fn audit_list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(req): ApiQuery<AuditQuery>,
) -> ApiResult<AuditPageView> {
    let selection = validate::audit_query(req, parse_rfc3339)?;
    let (entries, next) = state
        .service
        .tenancy()
        .audit_page(&caller, selection)
        .await?;
    Ok(Json(AuditPageView {
        entries: entries
            .iter()
            .map(|e| AuditEntryView::from_record(e, rfc3339))
            .collect(),
        next_cursor: next.map(|(at, id)| validate::audit_cursor(at, &id)),
    }))
}

//! Organizations, members, API keys and reading the audit log.

use sandboxd_core::access::{self, Permission};
use sandboxd_core::model::{
    ApiKey, AuditRecord, Member, MemberChanges, Organization, Principal, Role,
};
use sandboxd_core::validate::{AuditSelection, NewKey as NewKeyCommand, NewMember};
use sandboxd_store::{KeySpec, NewKey};
use serde_json::json;

use super::Tenancy;
use crate::{Resource, ServiceError, now_ms};

fn member_resource(member: &Member) -> Resource<'_> {
    Resource {
        kind: "member",
        id: &member.user_id,
        name: Some(&member.name),
    }
}

fn key_resource(key: &ApiKey) -> Resource<'_> {
    Resource {
        kind: "apiKey",
        id: &key.key_id,
        name: Some(&key.name),
    }
}

/// What a member change records: the fields given, never more.
fn change_metadata(changes: &MemberChanges) -> serde_json::Value {
    json!({
        "role": changes.role.map(Role::as_str),
        "permissions": changes.permissions.map(|p| p.names()),
        "projectIds": changes.project_ids,
        "sandboxIds": changes.sandbox_ids,
        "serverIds": changes.server_ids,
    })
}

impl Tenancy {
    /// Creates an organization owned by the caller's user, with an owner key for it.
    /// Only owners create organizations.
    pub async fn create_organization(
        &self,
        caller: &Principal,
        name: &str,
    ) -> Result<(Organization, NewKey), ServiceError> {
        self.access.require(caller, Permission::OrganizationAdmin)?;
        if caller.role != Role::Owner {
            return Err(ServiceError::Forbidden(
                "only an owner can create organizations".into(),
            ));
        }
        // The new organization's owner key is bounded like any key the caller makes.
        let (scopes, expires_at) = access::bound_new_key(caller, None, None)?;
        let (org, key) = self
            .store
            .create_organization(&caller.user_id, name, scopes, expires_at)
            .await?;
        self.access
            .record(
                &org.organization_id,
                Some(caller),
                "organization.create",
                Resource {
                    kind: "organization",
                    id: &org.organization_id,
                    name: Some(&org.name),
                },
                json!({
                    "from": caller.organization_id,
                    "scopes": scopes.map(|s| s.names()),
                    "expiresAt": expires_at,
                }),
            )
            .await;
        Ok((org, key))
    }

    /// The organizations the caller's user belongs to.
    pub async fn organizations(
        &self,
        caller: &Principal,
    ) -> Result<Vec<Organization>, ServiceError> {
        Ok(self.store.organizations_of(&caller.user_id).await?)
    }

    /// The members of the caller's organization: everyone for owners and admins, the
    /// caller alone for members.
    pub async fn members(&self, caller: &Principal) -> Result<Vec<Member>, ServiceError> {
        let org = &caller.organization_id;
        if caller.permissions.contains(Permission::OrganizationAdmin) {
            Ok(self.store.members(org).await?)
        } else {
            Ok(self
                .store
                .member(org, &caller.user_id)
                .await?
                .into_iter()
                .collect())
        }
    }

    /// Adds a new user to the caller's organization.
    pub async fn create_member(
        &self,
        caller: &Principal,
        new: NewMember,
    ) -> Result<Member, ServiceError> {
        access::check_add_member(caller, new.changes.role)?;
        access::check_grant(caller, new.changes.role, new.changes.permissions)?;
        let member = self
            .store
            .create_member(&caller.organization_id, &new.name, &new.changes)
            .await?;
        self.access
            .record(
                &caller.organization_id,
                Some(caller),
                "member.create",
                member_resource(&member),
                change_metadata(&new.changes),
            )
            .await;
        Ok(member)
    }

    async fn member_of(&self, caller: &Principal, user_id: &str) -> Result<Member, ServiceError> {
        self.store
            .member(&caller.organization_id, user_id)
            .await?
            .ok_or(ServiceError::NotFound("member"))
    }

    /// Changes a member's role, permissions or access lists.
    pub async fn update_member(
        &self,
        caller: &Principal,
        user_id: &str,
        changes: MemberChanges,
    ) -> Result<Member, ServiceError> {
        self.access.require(caller, Permission::OrganizationAdmin)?;
        let target = self.member_of(caller, user_id).await?;
        access::check_manage_member(caller, user_id, target.role, changes.role)?;
        access::check_grant(caller, changes.role, changes.permissions)?;
        let member = self
            .store
            .update_member(&caller.organization_id, user_id, &changes)
            .await?
            .ok_or(ServiceError::NotFound("member"))?;
        self.access
            .record(
                &caller.organization_id,
                Some(caller),
                "member.update",
                member_resource(&member),
                change_metadata(&changes),
            )
            .await;
        Ok(member)
    }

    /// Removes a member from the organization; their keys stop working at once.
    pub async fn remove_member(
        &self,
        caller: &Principal,
        user_id: &str,
    ) -> Result<(), ServiceError> {
        self.access.require(caller, Permission::OrganizationAdmin)?;
        let target = self.member_of(caller, user_id).await?;
        access::check_manage_member(caller, user_id, target.role, None)?;
        if !self
            .store
            .remove_member(&caller.organization_id, user_id)
            .await?
        {
            return Err(ServiceError::NotFound("member"));
        }
        self.access
            .record(
                &caller.organization_id,
                Some(caller),
                "member.remove",
                member_resource(&target),
                json!({"role": target.role.as_str()}),
            )
            .await;
        Ok(())
    }

    /// Creates a key for the caller, or (member management) for another member.
    pub async fn create_key(
        &self,
        caller: &Principal,
        new: NewKeyCommand,
    ) -> Result<NewKey, ServiceError> {
        let user_id = new
            .user_id
            .clone()
            .unwrap_or_else(|| caller.user_id.clone());
        let role = if user_id == caller.user_id {
            caller.role
        } else {
            self.access.require(caller, Permission::OrganizationAdmin)?;
            self.member_of(caller, &user_id).await?.role
        };
        access::check_manage_key(caller, &user_id, role)?;
        let asked_expiry = new.expires_in_ms.map(|ttl| now_ms() + ttl);
        let (scopes, expires_at) = access::bound_new_key(caller, new.scopes, asked_expiry)?;
        let key = self
            .store
            .create_key(
                &caller.organization_id,
                &user_id,
                KeySpec {
                    name: &new.name,
                    scopes,
                    expires_at,
                    format: new.format,
                },
                &self.quotas,
            )
            .await?;
        self.access
            .record(
                &caller.organization_id,
                Some(caller),
                "apiKey.create",
                key_resource(&key.record),
                json!({
                    "userId": user_id,
                    "scopes": scopes.map(|s| s.names()),
                    "expiresAt": expires_at,
                    "format": new.format,
                }),
            )
            .await;
        Ok(key)
    }

    /// The caller's keys; every key of the organization for owners and admins.
    pub async fn keys(&self, caller: &Principal) -> Result<Vec<ApiKey>, ServiceError> {
        let only = (!caller.permissions.contains(Permission::OrganizationAdmin))
            .then_some(caller.user_id.as_str());
        Ok(self.store.keys(&caller.organization_id, only).await?)
    }

    /// The key the caller is using.
    pub async fn current_key(&self, caller: &Principal) -> Result<ApiKey, ServiceError> {
        self.store
            .key(&caller.organization_id, &caller.key_id)
            .await?
            .ok_or(ServiceError::NotFound("key"))
    }

    /// Revokes a key: the caller's own, or (member management) another member's.
    pub async fn revoke_key(
        &self,
        caller: &Principal,
        key_id: &str,
    ) -> Result<ApiKey, ServiceError> {
        let key = self
            .store
            .key(&caller.organization_id, key_id)
            .await?
            .ok_or(ServiceError::NotFound("key"))?;
        if key.user_id != caller.user_id {
            // Another user's key: a member without admin rights cannot even see it.
            if !caller.permissions.contains(Permission::OrganizationAdmin) {
                return Err(ServiceError::NotFound("key"));
            }
            let owner = self.member_of(caller, &key.user_id).await?;
            access::check_manage_key(caller, &key.user_id, owner.role)?;
        }
        let revoked = self
            .store
            .revoke_key(&caller.organization_id, key_id)
            .await?
            .ok_or(ServiceError::NotFound("key"))?;
        self.access
            .record(
                &caller.organization_id,
                Some(caller),
                "apiKey.revoke",
                key_resource(&revoked),
                json!({"userId": revoked.user_id}),
            )
            .await;
        Ok(revoked)
    }

    /// A page of the organization's audit log (owners and admins).
    pub async fn audit_page(
        &self,
        caller: &Principal,
        selection: AuditSelection,
    ) -> Result<(Vec<AuditRecord>, Option<(i64, String)>), ServiceError> {
        self.access.require(caller, Permission::OrganizationAdmin)?;
        let page = self
            .store
            .audit_page(&caller.organization_id, &selection)
            .await?;
        Ok((page.entries, page.next))
    }
}

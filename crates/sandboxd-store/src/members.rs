//! Organizations, their members, what members were granted, and their access lists.
//!
//! The access lists name projects, sandboxes and servers.

use sandboxd_core::access::Permissions;
use sandboxd_core::model::{Member, MemberChanges as Grants, Organization, Role};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::keys::{KeySpec, NewKey};
use crate::store::now_ms;
use crate::{Store, StoreError, new_id};

fn role_of(row: &AnyRow) -> Result<Role, StoreError> {
    let role: String = row.try_get("role")?;
    Role::parse(&role).ok_or_else(|| StoreError::Corrupt(format!("unknown role {role}")))
}

impl Store {
    /// The installation's first organization, made by its bootstrap: the operator's.
    pub async fn operator_organization(&self) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT organization_id FROM organizations ORDER BY created_at, organization_id LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| r.try_get("organization_id")).transpose()?)
    }

    /// Creates an organization whose owner is `user_id`, with a first key for it.
    pub async fn create_organization(
        &self,
        user_id: &str,
        name: &str,
        scopes: Option<Permissions>,
        expires_at: Option<i64>,
    ) -> Result<(Organization, NewKey), StoreError> {
        let now = now_ms();
        let organization_id = new_id()?;
        let mut tx = self.write_tx().await?;
        sqlx::query(
            "INSERT INTO organizations (organization_id, name, created_at) VALUES ($1, $2, $3)",
        )
        .bind(&organization_id)
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO members (organization_id, user_id, role, permissions, created_at) \
             VALUES ($1, $2, 'owner', '', $3)",
        )
        .bind(&organization_id)
        .bind(user_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let key = self
            .insert_key(
                &mut tx,
                &organization_id,
                user_id,
                KeySpec {
                    scopes,
                    expires_at,
                    ..KeySpec::named("owner")
                },
            )
            .await?;
        tx.commit().await?;
        Ok((
            Organization {
                organization_id,
                name: name.to_owned(),
                role: Role::Owner,
                created_at: now,
            },
            key,
        ))
    }

    /// The organizations `user_id` belongs to, oldest first.
    pub async fn organizations_of(&self, user_id: &str) -> Result<Vec<Organization>, StoreError> {
        let rows = sqlx::query(
            "SELECT o.organization_id, o.name, o.created_at, m.role FROM organizations o \
             JOIN members m ON m.organization_id = o.organization_id \
             WHERE m.user_id = $1 ORDER BY o.created_at, o.organization_id",
        )
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(Organization {
                    organization_id: row.try_get("organization_id")?,
                    name: row.try_get("name")?,
                    role: role_of(row)?,
                    created_at: row.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// The members of an organization with their grants and access lists (three
    /// queries, whatever the number of members).
    pub async fn members(&self, organization_id: &str) -> Result<Vec<Member>, StoreError> {
        self.members_where(organization_id, None).await
    }

    /// One member of an organization.
    pub async fn member(
        &self,
        organization_id: &str,
        user_id: &str,
    ) -> Result<Option<Member>, StoreError> {
        Ok(self
            .members_where(organization_id, Some(user_id))
            .await?
            .pop())
    }

    async fn members_where(
        &self,
        organization_id: &str,
        user_id: Option<&str>,
    ) -> Result<Vec<Member>, StoreError> {
        let user = user_id.unwrap_or("");
        let rows = sqlx::query(
            "SELECT m.user_id, m.role, m.permissions, m.created_at, u.name FROM members m \
             JOIN users u ON u.user_id = m.user_id \
             WHERE m.organization_id = $1 AND ($2 = '' OR m.user_id = $2) \
             ORDER BY m.created_at, m.user_id",
        )
        .bind(organization_id)
        .bind(user)
        .fetch_all(&self.pool)
        .await?;
        let list = |sql: &'static str| {
            sqlx::query(sql)
                .bind(organization_id)
                .bind(user)
                .fetch_all(&self.pool)
        };
        let projects = list(
            "SELECT user_id, project_id AS id FROM member_projects \
             WHERE organization_id = $1 AND ($2 = '' OR user_id = $2) ORDER BY project_id",
        )
        .await?;
        let sandboxes = list(
            "SELECT user_id, sandbox_id AS id FROM member_sandboxes \
             WHERE organization_id = $1 AND ($2 = '' OR user_id = $2) ORDER BY sandbox_id",
        )
        .await?;
        let servers = list(
            "SELECT user_id, server_id AS id FROM member_servers \
             WHERE organization_id = $1 AND ($2 = '' OR user_id = $2) ORDER BY server_id",
        )
        .await?;
        let ids_of = |rows: &[AnyRow], user_id: &str| -> Result<Vec<String>, StoreError> {
            let mut ids = Vec::new();
            for row in rows {
                if row.try_get::<String, _>("user_id")? == user_id {
                    ids.push(row.try_get("id")?);
                }
            }
            Ok(ids)
        };
        rows.iter()
            .map(|row| {
                let user_id: String = row.try_get("user_id")?;
                let grants: String = row.try_get("permissions")?;
                Ok(Member {
                    organization_id: organization_id.to_owned(),
                    name: row.try_get("name")?,
                    role: role_of(row)?,
                    grants: Permissions::from_text(&grants),
                    project_ids: ids_of(&projects, &user_id)?,
                    sandbox_ids: ids_of(&sandboxes, &user_id)?,
                    server_ids: ids_of(&servers, &user_id)?,
                    created_at: row.try_get("created_at")?,
                    user_id,
                })
            })
            .collect()
    }

    /// Creates a user and makes them a member of the organization.
    pub async fn create_member(
        &self,
        organization_id: &str,
        name: &str,
        grants: &Grants,
    ) -> Result<Member, StoreError> {
        let now = now_ms();
        let user_id = new_id()?;
        let mut tx = self.write_tx().await?;
        sqlx::query("INSERT INTO users (user_id, name, created_at) VALUES ($1, $2, $3)")
            .bind(&user_id)
            .bind(name)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO members (organization_id, user_id, role, permissions, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(organization_id)
        .bind(&user_id)
        .bind(grants.role.unwrap_or(Role::Member).as_str())
        .bind(
            grants
                .permissions
                .unwrap_or_else(Permissions::member_default)
                .to_text(),
        )
        .bind(now)
        .execute(&mut *tx)
        .await?;
        replace_lists(&mut tx, organization_id, &user_id, grants).await?;
        tx.commit().await?;
        self.member(organization_id, &user_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("member vanished after creation".into()))
    }

    /// Changes what is given in `grants` (lists are replaced whole). `None` when there
    /// is no such member. Refuses to leave the organization without an owner.
    pub async fn update_member(
        &self,
        organization_id: &str,
        user_id: &str,
        grants: &Grants,
    ) -> Result<Option<Member>, StoreError> {
        let mut tx = self.write_tx().await?;
        let exists =
            sqlx::query("SELECT role FROM members WHERE organization_id = $1 AND user_id = $2")
                .bind(organization_id)
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await?;
        if exists.is_none() {
            return Ok(None);
        }
        if let Some(role) = grants.role {
            sqlx::query("UPDATE members SET role = $1 WHERE organization_id = $2 AND user_id = $3")
                .bind(role.as_str())
                .bind(organization_id)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
            ensure_an_owner(&mut tx, organization_id).await?;
        }
        if let Some(permissions) = grants.permissions {
            sqlx::query(
                "UPDATE members SET permissions = $1 WHERE organization_id = $2 AND user_id = $3",
            )
            .bind(permissions.to_text())
            .bind(organization_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        }
        replace_lists(&mut tx, organization_id, user_id, grants).await?;
        tx.commit().await?;
        self.auth.invalidate();
        self.member(organization_id, user_id).await
    }

    /// Removes a membership (its keys and access lists go with it). `false` when there
    /// was none. Refuses to remove the last owner.
    pub async fn remove_member(
        &self,
        organization_id: &str,
        user_id: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await?;
        let removed =
            sqlx::query("DELETE FROM members WHERE organization_id = $1 AND user_id = $2")
                .bind(organization_id)
                .bind(user_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        ensure_an_owner(&mut tx, organization_id).await?;
        tx.commit().await?;
        self.auth.invalidate();
        Ok(removed > 0)
    }

    /// The role of a member, `None` when not a member.
    pub async fn role_of(
        &self,
        organization_id: &str,
        user_id: &str,
    ) -> Result<Option<Role>, StoreError> {
        let row =
            sqlx::query("SELECT role FROM members WHERE organization_id = $1 AND user_id = $2")
                .bind(organization_id)
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?;
        row.as_ref().map(role_of).transpose()
    }

    /// Puts a project on a member's access list.
    pub async fn grant_project(
        &self,
        organization_id: &str,
        user_id: &str,
        project_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO member_projects (organization_id, user_id, project_id) \
             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(organization_id)
        .bind(user_id)
        .bind(project_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Whether `id` is on one of a member's access lists.
    pub async fn on_access_list(
        &self,
        list: AccessList,
        organization_id: &str,
        user_id: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        Ok(sqlx::query(list.exists())
            .bind(organization_id)
            .bind(user_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// The ids on one of a member's access lists, sorted.
    pub async fn access_list(
        &self,
        list: AccessList,
        organization_id: &str,
        user_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(list.ids())
            .bind(organization_id)
            .bind(user_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| Ok(row.try_get("id")?)).collect()
    }
}

/// The access lists of a member, and their statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessList {
    Projects,
    Sandboxes,
    Servers,
}

impl AccessList {
    fn ids(self) -> &'static str {
        match self {
            Self::Projects => {
                "SELECT project_id AS id FROM member_projects \
                 WHERE organization_id = $1 AND user_id = $2 ORDER BY project_id"
            }
            Self::Sandboxes => {
                "SELECT sandbox_id AS id FROM member_sandboxes \
                 WHERE organization_id = $1 AND user_id = $2 ORDER BY sandbox_id"
            }
            Self::Servers => {
                "SELECT server_id AS id FROM member_servers \
                 WHERE organization_id = $1 AND user_id = $2 ORDER BY server_id"
            }
        }
    }

    fn exists(self) -> &'static str {
        match self {
            Self::Projects => {
                "SELECT 1 AS one FROM member_projects \
                 WHERE organization_id = $1 AND user_id = $2 AND project_id = $3"
            }
            Self::Sandboxes => {
                "SELECT 1 AS one FROM member_sandboxes \
                 WHERE organization_id = $1 AND user_id = $2 AND sandbox_id = $3"
            }
            Self::Servers => {
                "SELECT 1 AS one FROM member_servers \
                 WHERE organization_id = $1 AND user_id = $2 AND server_id = $3"
            }
        }
    }

    fn clear(self) -> &'static str {
        match self {
            Self::Projects => {
                "DELETE FROM member_projects WHERE organization_id = $1 AND user_id = $2"
            }
            Self::Sandboxes => {
                "DELETE FROM member_sandboxes WHERE organization_id = $1 AND user_id = $2"
            }
            Self::Servers => {
                "DELETE FROM member_servers WHERE organization_id = $1 AND user_id = $2"
            }
        }
    }

    /// Whether the id names a project or sandbox of the organization.
    fn known(self) -> &'static str {
        match self {
            Self::Projects => {
                "SELECT 1 AS one FROM projects WHERE project_id = $1 AND organization_id = $2"
            }
            Self::Sandboxes => {
                "SELECT 1 AS one FROM sandboxes WHERE sandbox_id = $1 AND organization_id = $2"
            }
            Self::Servers => {
                "SELECT 1 AS one FROM servers WHERE server_id = $1 AND organization_id = $2"
            }
        }
    }

    fn add(self) -> &'static str {
        match self {
            Self::Projects => {
                "INSERT INTO member_projects (organization_id, user_id, project_id) \
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
            }
            Self::Sandboxes => {
                "INSERT INTO member_sandboxes (organization_id, user_id, sandbox_id) \
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
            }
            Self::Servers => {
                "INSERT INTO member_servers (organization_id, user_id, server_id) \
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
            }
        }
    }

    fn what(self) -> &'static str {
        match self {
            Self::Projects => "projectId",
            Self::Sandboxes => "sandboxId",
            Self::Servers => "serverId",
        }
    }
}

async fn ensure_an_owner(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    organization_id: &str,
) -> Result<(), StoreError> {
    let owner = sqlx::query(
        "SELECT 1 AS one FROM members WHERE organization_id = $1 AND role = 'owner' LIMIT 1",
    )
    .bind(organization_id)
    .fetch_optional(&mut **tx)
    .await?;
    if owner.is_none() {
        return Err(StoreError::Conflict(
            "an organization keeps at least one owner".into(),
        ));
    }
    Ok(())
}

/// Replaces the access lists given in `grants`. Ids must name projects and sandboxes
/// of the same organization.
async fn replace_lists(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    organization_id: &str,
    user_id: &str,
    grants: &Grants,
) -> Result<(), StoreError> {
    for (list, ids) in [
        (AccessList::Projects, &grants.project_ids),
        (AccessList::Sandboxes, &grants.sandbox_ids),
        (AccessList::Servers, &grants.server_ids),
    ] {
        let Some(ids) = ids else { continue };
        sqlx::query(list.clear())
            .bind(organization_id)
            .bind(user_id)
            .execute(&mut **tx)
            .await?;
        for id in ids {
            let known = sqlx::query(list.known())
                .bind(id)
                .bind(organization_id)
                .fetch_optional(&mut **tx)
                .await?;
            if known.is_none() {
                return Err(StoreError::Unknown(format!("{} {id}", list.what())));
            }
            sqlx::query(list.add())
                .bind(organization_id)
                .bind(user_id)
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}

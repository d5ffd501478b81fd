//! Projects and environments.

use sandboxd_core::access::{self, Denied, Permission};
use sandboxd_core::model::{Environment, Principal, Project};
use sandboxd_store::AccessList;
use serde_json::json;

use super::Tenancy;
use crate::{Resource, ServiceError};

impl Tenancy {
    /// The projects the caller may see, with their environments.
    pub async fn projects(
        &self,
        caller: &Principal,
    ) -> Result<Vec<(Project, Vec<Environment>)>, ServiceError> {
        let all = self
            .store
            .projects_with_environments(&caller.organization_id)
            .await?;
        if access::sees_everything(caller.role) {
            return Ok(all);
        }
        let listed = self
            .store
            .access_list(
                AccessList::Projects,
                &caller.organization_id,
                &caller.user_id,
            )
            .await?;
        Ok(all
            .into_iter()
            .filter(|(project, _)| listed.binary_search(&project.project_id).is_ok())
            .collect())
    }

    /// Creates a project (with an environment `production`); a member who creates one
    /// gets it on their access list.
    pub async fn create_project(
        &self,
        caller: &Principal,
        name: &str,
        description: Option<&str>,
    ) -> Result<(Project, Vec<Environment>), ServiceError> {
        self.access.require(caller, Permission::ProjectCreate)?;
        let (project, environments) = self
            .store
            .create_project(&caller.organization_id, name, description)
            .await?;
        self.store
            .grant_project(
                &caller.organization_id,
                &caller.user_id,
                &project.project_id,
            )
            .await?;
        self.access
            .record(
                &caller.organization_id,
                Some(caller),
                "project.create",
                Resource {
                    kind: "project",
                    id: &project.project_id,
                    name: Some(&project.name),
                },
                json!({}),
            )
            .await;
        Ok((project, environments))
    }

    /// Creates an environment in a project the caller may see.
    pub async fn create_environment(
        &self,
        caller: &Principal,
        project_id: &str,
        name: &str,
        description: Option<&str>,
    ) -> Result<Environment, ServiceError> {
        self.access.require(caller, Permission::ProjectCreate)?;
        if self
            .store
            .project(&caller.organization_id, project_id)
            .await?
            .is_none()
        {
            return Err(ServiceError::NotFound("project"));
        }
        if !self.access.project_listed(caller, project_id).await? {
            return Err(Denied::NotListed("project").into());
        }
        let environment = self
            .store
            .create_environment(&caller.organization_id, project_id, name, description)
            .await?
            .ok_or(ServiceError::NotFound("project"))?;
        self.access
            .record(
                &caller.organization_id,
                Some(caller),
                "environment.create",
                Resource {
                    kind: "environment",
                    id: &environment.environment_id,
                    name: Some(&environment.name),
                },
                json!({"projectId": project_id}),
            )
            .await;
        Ok(environment)
    }
}

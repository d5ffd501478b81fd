//! Projects and environments of an organization.

use sandboxd_core::model::{Environment, Project};

use crate::store::now_ms;
use crate::{Store, StoreError, new_id, rows};

impl Store {
    /// The projects of an organization with their environments, oldest first
    /// (two queries, whatever the number of projects).
    pub async fn projects_with_environments(
        &self,
        organization_id: &str,
    ) -> Result<Vec<(Project, Vec<Environment>)>, StoreError> {
        let projects = sqlx::query(
            "SELECT project_id, organization_id, name, description, created_at FROM projects \
             WHERE organization_id = $1 ORDER BY created_at, name",
        )
        .bind(organization_id)
        .fetch_all(&self.pool)
        .await?;
        let environments = sqlx::query(
            "SELECT environment_id, project_id, organization_id, name, description, created_at \
             FROM environments WHERE organization_id = $1 ORDER BY created_at, name",
        )
        .bind(organization_id)
        .fetch_all(&self.pool)
        .await?;
        let environments: Vec<Environment> = environments
            .iter()
            .map(rows::environment)
            .collect::<Result<_, _>>()?;
        projects
            .iter()
            .map(|row| {
                let project = rows::project(row)?;
                let own = environments
                    .iter()
                    .filter(|e| e.project_id == project.project_id)
                    .cloned()
                    .collect();
                Ok((project, own))
            })
            .collect()
    }

    /// A project, only if it belongs to `organization_id`.
    pub async fn project(
        &self,
        organization_id: &str,
        project_id: &str,
    ) -> Result<Option<Project>, StoreError> {
        let row = sqlx::query(
            "SELECT project_id, organization_id, name, description, created_at FROM projects \
             WHERE project_id = $1 AND organization_id = $2",
        )
        .bind(project_id)
        .bind(organization_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(rows::project).transpose()
    }

    /// An environment, only if it belongs to `organization_id`.
    pub async fn environment(
        &self,
        organization_id: &str,
        environment_id: &str,
    ) -> Result<Option<Environment>, StoreError> {
        let row = sqlx::query(
            "SELECT environment_id, project_id, organization_id, name, description, created_at \
             FROM environments WHERE environment_id = $1 AND organization_id = $2",
        )
        .bind(environment_id)
        .bind(organization_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(rows::environment).transpose()
    }

    /// Creates a project with an environment `production`, as the first one is made.
    pub async fn create_project(
        &self,
        organization_id: &str,
        name: &str,
        description: Option<&str>,
    ) -> Result<(Project, Vec<Environment>), StoreError> {
        let now = now_ms();
        let project = Project {
            project_id: new_id()?,
            organization_id: organization_id.to_owned(),
            name: name.to_owned(),
            description: description.map(str::to_owned),
            created_at: now,
        };
        let environment = Environment {
            environment_id: new_id()?,
            project_id: project.project_id.clone(),
            organization_id: organization_id.to_owned(),
            name: "production".into(),
            description: None,
            created_at: now,
        };
        let mut tx = self.write_tx().await?;
        sqlx::query(
            "INSERT INTO projects (project_id, organization_id, name, description, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&project.project_id)
        .bind(&project.organization_id)
        .bind(&project.name)
        .bind(&project.description)
        .bind(project.created_at)
        .execute(&mut *tx)
        .await?;
        insert_environment(&mut tx, &environment).await?;
        tx.commit().await?;
        Ok((project, vec![environment]))
    }

    /// Creates an environment in a project of the organization; `Ok(None)` when the
    /// project is not the organization's, a conflict when the name is taken.
    pub async fn create_environment(
        &self,
        organization_id: &str,
        project_id: &str,
        name: &str,
        description: Option<&str>,
    ) -> Result<Option<Environment>, StoreError> {
        if self.project(organization_id, project_id).await?.is_none() {
            return Ok(None);
        }
        let environment = Environment {
            environment_id: new_id()?,
            project_id: project_id.to_owned(),
            organization_id: organization_id.to_owned(),
            name: name.to_owned(),
            description: description.map(str::to_owned),
            created_at: now_ms(),
        };
        let mut tx = self.write_tx().await?;
        let taken =
            sqlx::query("SELECT 1 AS one FROM environments WHERE project_id = $1 AND name = $2")
                .bind(project_id)
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
        if taken.is_some() {
            return Err(StoreError::Conflict(format!(
                "environment {name} already exists in this project"
            )));
        }
        insert_environment(&mut tx, &environment).await?;
        tx.commit().await?;
        Ok(Some(environment))
    }
}

pub(crate) async fn insert_environment(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    environment: &Environment,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO environments (environment_id, project_id, organization_id, name, description, \
         created_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&environment.environment_id)
    .bind(&environment.project_id)
    .bind(&environment.organization_id)
    .bind(&environment.name)
    .bind(&environment.description)
    .bind(environment.created_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

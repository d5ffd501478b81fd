//! Tags of the builds asked for through E2B's API (`sandboxd_core::e2b::tags`): kept in
//! each build's `tags` (migration 0020), moved between the builds of a template in one
//! write transaction, so that a tag names one build whatever runs beside it.

use sandboxd_core::e2b::tags::moved;

use crate::e2b_builds::e2b_build;
use crate::{E2bBuild, Store, StoreError};

/// `SELECT` of a build's columns and the rest of the query.
macro_rules! select {
    ($rest:literal) => {
        concat!(
            "SELECT build_id, template_id, organization_id, project_id, name, cpu_milli, \
             memory_mb, tags, steps, created_by, created_at FROM e2b_builds ",
            $rest
        )
    };
}

fn tags_text(tags: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(tags).map_err(|e| StoreError::Corrupt(format!("e2b build tags: {e}")))
}

impl Store {
    /// The builds of template `name` (or of the template of that id) in a project whose
    /// steps came, newest first.
    pub async fn e2b_builds_named(
        &self,
        organization_id: &str,
        project_id: &str,
        name: &str,
    ) -> Result<Vec<E2bBuild>, StoreError> {
        let rows = sqlx::query(select!(
            "WHERE organization_id = $1 AND project_id = $2 \
             AND (name = $3 OR template_id = $3) AND steps IS NOT NULL \
             ORDER BY created_at DESC, build_id"
        ))
        .bind(organization_id)
        .bind(project_id)
        .bind(name)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(e2b_build).collect()
    }

    /// Puts `tags` on build `build_id` of the organization, taking them off the other
    /// builds of its template: the build's tags after, or `None` when there is no such
    /// build.
    pub async fn tag_e2b_build(
        &self,
        organization_id: &str,
        build_id: &str,
        tags: &[String],
    ) -> Result<Option<Vec<String>>, StoreError> {
        let mut tx = self.write_tx().await?;
        let Some(row) = sqlx::query(select!("WHERE organization_id = $1 AND build_id = $2"))
            .bind(organization_id)
            .bind(build_id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(None);
        };
        let build = e2b_build(&row)?;
        let rows = sqlx::query(select!(
            "WHERE organization_id = $1 AND project_id = $2 AND name = $3"
        ))
        .bind(organization_id)
        .bind(&build.project_id)
        .bind(&build.name)
        .fetch_all(&mut *tx)
        .await?;
        let builds = rows
            .iter()
            .map(|row| e2b_build(row).map(|b| (b.build_id, b.tags)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut after = build.tags.clone();
        for (id, tags) in moved(&builds, build_id, tags) {
            sqlx::query("UPDATE e2b_builds SET tags = $1 WHERE build_id = $2")
                .bind(tags_text(&tags)?)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
            if id == build_id {
                after = tags;
            }
        }
        tx.commit().await?;
        Ok(Some(after))
    }

    /// Takes `tags` off the builds of template `name` in a project: how many builds
    /// held one of them.
    pub async fn untag_e2b_builds(
        &self,
        organization_id: &str,
        project_id: &str,
        name: &str,
        tags: &[String],
    ) -> Result<usize, StoreError> {
        let mut tx = self.write_tx().await?;
        let rows = sqlx::query(select!(
            "WHERE organization_id = $1 AND project_id = $2 AND name = $3"
        ))
        .bind(organization_id)
        .bind(project_id)
        .bind(name)
        .fetch_all(&mut *tx)
        .await?;
        let mut changed = 0;
        for row in &rows {
            let build = e2b_build(row)?;
            let kept: Vec<String> = build
                .tags
                .iter()
                .filter(|t| !tags.contains(t))
                .cloned()
                .collect();
            if kept.len() != build.tags.len() {
                sqlx::query("UPDATE e2b_builds SET tags = $1 WHERE build_id = $2")
                    .bind(tags_text(&kept)?)
                    .bind(&build.build_id)
                    .execute(&mut *tx)
                    .await?;
                changed += 1;
            }
        }
        tx.commit().await?;
        Ok(changed)
    }
}

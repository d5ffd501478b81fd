//! Templates users build: one row per build (a version of its template) and the build's
//! log, line by line, so any replica answers for both.
//!
//! Migration 0019. `insert_template_build` gives the build its template's id (the same
//! for every build of the name in the project) and the next version, and bounds the
//! builds an organization runs at once, in its write transaction. A create uses the
//! newest ready version (`ready_template`). A template is removed with every version
//! while no creating, running or paused sandbox uses one of its images.

use sandboxd_core::template_build::{BUILDING, LogLine, MAX_LOG_LINES, TemplateBuild};
use sqlx::Row as _;

use crate::{Store, StoreError};

/// The builds of an organization (`$1`), narrowed by what follows.
macro_rules! select_builds {
    ($rest:literal) => {
        concat!(
            "SELECT build_id, template_id, organization_id, project_id, name, version, status, \
             image, run_as, workdir, start_cmd, ready_cmd, cpu_milli, memory_mb, isolation, error_step, \
             error_message, created_at, finished_at FROM template_builds WHERE organization_id = $1",
            $rest
        )
    };
}

fn argv(row: &sqlx::any::AnyRow, column: &str) -> Result<Option<Vec<String>>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("template {column}: {e}")))
}

fn build(row: &sqlx::any::AnyRow) -> Result<TemplateBuild, StoreError> {
    Ok(TemplateBuild {
        build_id: row.try_get("build_id")?,
        template_id: row.try_get("template_id")?,
        organization_id: row.try_get("organization_id")?,
        project_id: row.try_get("project_id")?,
        name: row.try_get("name")?,
        version: row.try_get("version")?,
        status: row.try_get("status")?,
        image: row.try_get("image")?,
        user: row.try_get("run_as")?,
        workdir: row.try_get("workdir")?,
        start: argv(row, "start_cmd")?,
        ready: argv(row, "ready_cmd")?,
        cpu: row
            .try_get::<Option<i64>, _>("cpu_milli")?
            .map(|milli| milli as f64 / 1000.0),
        memory_mb: row.try_get("memory_mb")?,
        isolation: row.try_get("isolation")?,
        error_step: row.try_get("error_step")?,
        error_message: row.try_get("error_message")?,
        created_at: row.try_get("created_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

impl Store {
    /// Keeps a new build in `building`: its template's id and version are chosen here
    /// (and written into `build`), refused when the organization already runs
    /// `max_building` builds.
    pub async fn insert_template_build(
        &self,
        build: &mut TemplateBuild,
        created_by: &str,
        max_building: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        let running: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM template_builds WHERE organization_id = $1 AND status = $2",
        )
        .bind(&build.organization_id)
        .bind(BUILDING)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if running >= max_building {
            return Err(StoreError::Quota(
                sandboxd_core::quotas::QuotaExceeded::Builds {
                    limit: max_building,
                },
            ));
        }
        let last = sqlx::query(
            "SELECT template_id, version FROM template_builds WHERE organization_id = $1 \
             AND project_id = $2 AND name = $3 ORDER BY version DESC LIMIT 1",
        )
        .bind(&build.organization_id)
        .bind(&build.project_id)
        .bind(&build.name)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(last) = last {
            build.template_id = last.try_get("template_id")?;
            build.version = last.try_get::<i64, _>("version")? + 1;
        } else {
            build.version = 1;
        }
        sqlx::query(
            "INSERT INTO template_builds (build_id, template_id, organization_id, project_id, \
             name, version, status, cpu_milli, memory_mb, isolation, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&build.build_id)
        .bind(&build.template_id)
        .bind(&build.organization_id)
        .bind(&build.project_id)
        .bind(&build.name)
        .bind(build.version)
        .bind(BUILDING)
        .bind(build.cpu.map(|cpu| (cpu * 1000.0).round() as i64))
        .bind(build.memory_mb)
        .bind(&build.isolation)
        .bind(created_by)
        .bind(build.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ends a build that is still building: ready with what its sandboxes get, or
    /// failed with its step and reason. False when it was not building any more.
    pub async fn finish_template_build(&self, build: &TemplateBuild) -> Result<bool, StoreError> {
        let json = |argv: &Option<Vec<String>>| {
            argv.as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(|e| StoreError::Corrupt(format!("template command: {e}")))
        };
        let start = json(&build.start)?;
        let ready = json(&build.ready)?;
        let done = sqlx::query(
            "UPDATE template_builds SET status = $1, image = $2, run_as = $3, workdir = $4, \
             start_cmd = $5, error_step = $6, error_message = $7, finished_at = $8, \
             ready_cmd = $11 WHERE build_id = $9 AND status = $10",
        )
        .bind(&build.status)
        .bind(&build.image)
        .bind(&build.user)
        .bind(&build.workdir)
        .bind(start)
        .bind(build.error_step)
        .bind(&build.error_message)
        .bind(build.finished_at)
        .bind(&build.build_id)
        .bind(BUILDING)
        .bind(ready)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks failed the builds still `building` that started before `started_before`
    /// (their runner is gone: sandboxd stopped while they ran); answers their ids.
    pub async fn fail_stale_builds(
        &self,
        started_before: i64,
        now: i64,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(
            "SELECT build_id FROM template_builds WHERE status = $1 AND created_at < $2",
        )
        .bind(BUILDING)
        .bind(started_before)
        .fetch_all(&self.pool)
        .await?;
        let mut failed = Vec::new();
        for row in rows {
            let build_id: String = row.try_get("build_id")?;
            let done = sqlx::query(
                "UPDATE template_builds SET status = 'error', error_step = 0, \
                 error_message = 'the build was cut short: sandboxd stopped while it ran', \
                 finished_at = $1 WHERE build_id = $2 AND status = $3",
            )
            .bind(now)
            .bind(&build_id)
            .bind(BUILDING)
            .execute(&self.pool)
            .await?;
            if done.rows_affected() == 1 {
                failed.push(build_id);
            }
        }
        Ok(failed)
    }

    /// Every build of the organization's templates, by name and newest version first.
    pub async fn template_builds(
        &self,
        organization_id: &str,
    ) -> Result<Vec<TemplateBuild>, StoreError> {
        let rows = sqlx::query(select_builds!(" ORDER BY name, project_id, version DESC"))
            .bind(organization_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(build).collect()
    }

    /// One build of the organization's.
    pub async fn template_build(
        &self,
        organization_id: &str,
        build_id: &str,
    ) -> Result<Option<TemplateBuild>, StoreError> {
        let row = sqlx::query(select_builds!(" AND build_id = $2"))
            .bind(organization_id)
            .bind(build_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(build).transpose()
    }

    /// The newest ready version of a template named in a project.
    pub async fn ready_template(
        &self,
        organization_id: &str,
        project_id: &str,
        name: &str,
    ) -> Result<Option<TemplateBuild>, StoreError> {
        let row = sqlx::query(select_builds!(
            " AND project_id = $2 AND name = $3 AND status = 'ready' ORDER BY version DESC LIMIT 1"
        ))
        .bind(organization_id)
        .bind(project_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(build).transpose()
    }

    /// Adds lines to a build's log from `seq` on; past `MAX_LOG_LINES` nothing more is
    /// kept. Answers how many lines the log holds now.
    pub async fn append_build_log(
        &self,
        build_id: &str,
        seq: i64,
        lines: &[LogLine],
    ) -> Result<i64, StoreError> {
        let mut tx = self.write_tx().await?;
        let mut next = seq;
        for line in lines {
            if next >= MAX_LOG_LINES {
                break;
            }
            sqlx::query(
                "INSERT INTO template_build_log (build_id, seq, at, step, stream, line) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(build_id)
            .bind(next)
            .bind(line.time)
            .bind(line.step)
            .bind(&line.stream)
            .bind(&line.line)
            .execute(&mut *tx)
            .await?;
            next += 1;
        }
        tx.commit().await?;
        Ok(next)
    }

    /// At most `limit` lines of a build's log from `offset` on.
    pub async fn build_log(
        &self,
        build_id: &str,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<LogLine>, StoreError> {
        let rows = sqlx::query(
            "SELECT at, step, stream, line FROM template_build_log WHERE build_id = $1 \
             AND seq >= $2 ORDER BY seq LIMIT $3",
        )
        .bind(build_id)
        .bind(offset)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(LogLine {
                    time: row.try_get("at")?,
                    step: row.try_get("step")?,
                    stream: row.try_get("stream")?,
                    line: row.try_get("line")?,
                })
            })
            .collect()
    }

    /// Removes a template's every version and log, unless a creating, running or paused
    /// sandbox uses one of its images or one is still building; answers the images to
    /// remove from the engine.
    pub async fn remove_template(
        &self,
        organization_id: &str,
        template_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.write_tx().await?;
        let rows = sqlx::query(
            "SELECT build_id, status, image FROM template_builds WHERE organization_id = $1 \
             AND template_id = $2",
        )
        .bind(organization_id)
        .bind(template_id)
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            return Err(StoreError::Unknown("template".into()));
        }
        let mut images = Vec::new();
        for row in &rows {
            if row.try_get::<String, _>("status")? == BUILDING {
                return Err(StoreError::Conflict(
                    "the template is being built: remove it once its build ends".into(),
                ));
            }
            if let Some(image) = row.try_get::<Option<String>, _>("image")? {
                let users: i64 = sqlx::query(
                    "SELECT COUNT(*) AS n FROM sandboxes WHERE image = $1 \
                     AND status IN ('creating', 'running', 'paused')",
                )
                .bind(&image)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
                if users > 0 {
                    return Err(StoreError::Conflict(format!(
                        "{users} sandbox(es) being created, running or paused use the template: kill them first"
                    )));
                }
                images.push(image);
            }
        }
        for row in &rows {
            let build_id: String = row.try_get("build_id")?;
            sqlx::query("DELETE FROM template_build_log WHERE build_id = $1")
                .bind(&build_id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM e2b_builds WHERE organization_id = $1 AND template_id = $2")
            .bind(organization_id)
            .bind(template_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM template_builds WHERE organization_id = $1 AND template_id = $2")
            .bind(organization_id)
            .bind(template_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(images)
    }
}

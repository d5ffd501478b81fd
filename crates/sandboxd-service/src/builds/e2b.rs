//! Builds asked for through E2B's API (`sandboxd_core::e2b::templates`): a request
//! names the build and its template first; the SDK then uploads each `COPY`'s files
//! (kept per project and hash), and sends the steps, which become a sandboxd build of
//! the same id, run as any other. Its status reads that build and its log, with E2B's
//! step names. Whoever may create sandboxes in the project may do each of these; what
//! an upload holds reaches only that project's builds.

use sandboxd_core::e2b::templates::{self, BuildStart, StatusAnswer};
use sandboxd_core::error::Invalid;
use sandboxd_core::model::{NetworkMode, Principal};
use sandboxd_core::template_build::FileBounds;
use sandboxd_core::validate::{BuildHead, GivenFiles, build_of};
use sandboxd_store::{E2bBuild, new_id, new_uuid};

use super::{Builds, LOG_PAGE};
use crate::{ServiceError, now_ms};

/// The most bytes the archives of one build's copies may hold together: the files'
/// bound and a tar header and padding for each of the most files.
const MAX_ARCHIVES_BYTES: usize = sandboxd_core::template_build::MAX_FILES_BYTES as usize
    + sandboxd_core::template_build::MAX_FILES * 1024
    + (1 << 20);

/// The E2B template a file upload is for: its project.
#[derive(Debug, Clone)]
pub struct UploadPlace {
    pub project_id: String,
    /// Whether the project holds these files already.
    pub present: bool,
}

impl Builds {
    /// Keeps a build asked for through E2B's API in `project_id`, waiting for its steps.
    pub async fn e2b_request(
        &self,
        caller: &Principal,
        project_id: &str,
        name: String,
        tags: Vec<String>,
        cpu: Option<i64>,
        memory_mb: Option<i64>,
    ) -> Result<E2bBuild, ServiceError> {
        self.service
            .access()
            .check_create_in(caller, project_id)
            .await?;
        // The name is checked now, as the build will check it.
        build_of(
            BuildHead {
                name: name.clone(),
                cpu: cpu.map(|c| c as f64),
                memory_mb,
                ..Default::default()
            },
            vec![sandboxd_core::template_build::Instruction {
                line: 1,
                keyword: "FROM".into(),
                args: "base".into(),
            }],
            GivenFiles::default(),
            FileBounds::GIVEN,
        )?;
        let mut build = E2bBuild {
            build_id: new_uuid()?,
            template_id: new_id()?,
            organization_id: caller.organization_id.clone(),
            project_id: project_id.to_owned(),
            name,
            cpu: cpu.map(|c| c as f64),
            memory_mb,
            tags,
            steps: None,
            created_by: caller.user_id.clone(),
            created_at: now_ms(),
        };
        self.service.store().insert_e2b_build(&mut build).await?;
        Ok(build)
    }

    /// Where the files of `files_hash` for E2B's template `template_id` go, and whether
    /// they are there already.
    pub async fn e2b_upload_place(
        &self,
        caller: &Principal,
        template_id: &str,
        files_hash: &str,
    ) -> Result<UploadPlace, ServiceError> {
        if !templates::files_hash_ok(files_hash) {
            return Err(Invalid::one("hash", "is not a files hash (SHA-256, hex)").into());
        }
        let project_id = self
            .service
            .store()
            .e2b_template_project(&caller.organization_id, template_id)
            .await?
            .ok_or(ServiceError::NotFound("template"))?;
        self.service
            .access()
            .check_create_in(caller, &project_id)
            .await?;
        let present = self
            .service
            .store()
            .has_e2b_files(&project_id, files_hash)
            .await?;
        Ok(UploadPlace {
            project_id,
            present,
        })
    }

    /// Keeps an uploaded archive for a project's builds, if the caller (the key an upload
    /// URL was made for, as it stands now) may still build there.
    pub async fn e2b_upload(
        &self,
        caller: &Principal,
        project_id: &str,
        files_hash: &str,
        archive: &[u8],
    ) -> Result<(), ServiceError> {
        self.service
            .access()
            .check_create_in(caller, project_id)
            .await?;
        self.service
            .store()
            .put_e2b_files(
                &caller.organization_id,
                project_id,
                files_hash,
                archive,
                now_ms(),
            )
            .await?;
        Ok(())
    }

    /// Starts a build asked for through E2B's API with its steps.
    pub async fn e2b_start(
        &self,
        caller: &Principal,
        template_id: &str,
        build_id: &str,
        start: BuildStart,
    ) -> Result<(), ServiceError> {
        let store = self.service.store();
        let asked = store
            .e2b_build(&caller.organization_id, build_id)
            .await?
            .filter(|b| b.template_id == template_id || b.name == template_id)
            .ok_or(ServiceError::NotFound("build"))?;
        self.service
            .access()
            .check_create_in(caller, &asked.project_id)
            .await?;
        if asked.steps.is_some() {
            return Err(ServiceError::Conflict(
                "the build has started already".into(),
            ));
        }
        let plan = templates::plan(&start)?;
        let mut archives = Vec::new();
        let mut held = 0usize;
        for (index, hash) in plan.copies.iter().enumerate() {
            let archive = store
                .e2b_files(&asked.project_id, hash)
                .await?
                .ok_or_else(|| {
                    Invalid::one(
                        "steps",
                        format!(
                            "the files of COPY number {} were not uploaded (or were dropped after a day): build again",
                            index + 1
                        ),
                    )
                })?;
            // What the archives unpack to is bounded by the build's files; what they
            // hold, by that and a tar's headers for as many files.
            held += archive.len();
            if held > MAX_ARCHIVES_BYTES {
                return Err(Invalid::one(
                    "steps",
                    format!(
                        "the uploaded files of the copies hold more than {} MiB",
                        MAX_ARCHIVES_BYTES >> 20
                    ),
                )
                .into());
            }
            archives.push(archive);
        }
        let given = tokio::task::spawn_blocking(move || {
            let mut given = GivenFiles::default();
            for archive in &archives {
                templates::read_archive(archive, &mut given)?;
            }
            Ok::<_, String>(given)
        })
        .await
        .map_err(|_| ServiceError::Unavailable("the uploaded files could not be read".into()))?
        .map_err(|message| Invalid::one("steps", message))?;
        let network = if self.internet_possible() {
            NetworkMode::Internet
        } else {
            NetworkMode::Isolated
        };
        let head = BuildHead {
            name: asked.name.clone(),
            project_id: Some(asked.project_id.clone()),
            cpu: asked.cpu,
            memory_mb: asked.memory_mb,
            isolation: None,
            network: Some(network),
        };
        let mut cmd = build_of(head, plan.instructions, given, FileBounds::GIVEN)?;
        cmd.fresh_from = plan.fresh_from;
        cmd.ready = plan.ready;
        if !store.e2b_build_started(build_id, &plan.steps).await? {
            return Err(ServiceError::Conflict(
                "the build has started already".into(),
            ));
        }
        let ids = (asked.build_id.clone(), asked.template_id.clone());
        if let Err(error) = self.start_as(caller, cmd, Some(ids)).await {
            store.e2b_build_not_started(build_id).await?;
            return Err(error);
        }
        // A tag names one build: the newest build asked for with it takes it.
        store
            .tag_e2b_build(&caller.organization_id, build_id, &asked.tags)
            .await?;
        Ok(())
    }

    /// A build's status in E2B's form, with at most `limit` (at most 100) of its log's
    /// lines from `offset` on. A build made through sandboxd's own API is answered too.
    pub async fn e2b_status(
        &self,
        caller: &Principal,
        template_id: &str,
        build_id: &str,
        offset: i64,
        limit: i64,
    ) -> Result<StatusAnswer, ServiceError> {
        let asked = self
            .service
            .store()
            .e2b_build(&caller.organization_id, build_id)
            .await?;
        if let Some(asked) = &asked {
            if asked.template_id != template_id && asked.name != template_id {
                return Err(ServiceError::NotFound("build"));
            }
            self.visible(caller, &asked.project_id, "build").await?;
            if asked.steps.is_none() {
                return Ok(templates::status_answer(
                    &asked.template_id,
                    build_id,
                    None,
                    &[],
                    &[],
                    sandboxd_core::rfc3339::format_millis,
                ));
            }
        }
        let build = self.build_for(caller, build_id).await?;
        let limit = limit.clamp(1, templates::MAX_STATUS_ENTRIES.min(LOG_PAGE));
        let lines = self
            .service
            .store()
            .build_log(&build.build_id, offset.max(0), limit)
            .await?;
        let steps = asked.and_then(|a| a.steps).unwrap_or_default();
        Ok(templates::status_answer(
            &build.template_id,
            build_id,
            Some(&build),
            &steps,
            &lines,
            sandboxd_core::rfc3339::format_millis,
        ))
    }

    /// Whether a build's steps may reach the internet: not under gVisor, which has no
    /// network interface here but loopback.
    fn internet_possible(&self) -> bool {
        let runtime = self.service.runtime_of(None, None);
        !sandboxd_core::plan::under_gvisor(runtime.as_deref())
    }
}

//! `template.*`: templates users build. A build is checked (`validate::build_asked`; a
//! build naming a context streamed as a tar, against its index: `context.rs`),
//! its `FROM` resolved to an image the engine holds (`base.rs`), kept in `building`
//! within the organization's bound on builds at once, and run in the background on the
//! local engine (`run.rs`, each step in its container by `layer.rs`), its log written as
//! it goes (`log.rs`). The newest ready
//! version of a name is what `sandbox.create {template}` uses (`ready_for_create`); its
//! image is carried to a remote server where one of its sandboxes is made (`carry.rs`).
//! A template is removed, with its images (on every server), while no live sandbox uses
//! it.

mod base;
pub(crate) mod carry;
pub(crate) mod context;
pub use context::{CONTEXT_KEPT_MS, UploadedContext};
mod e2b;
mod e2b_tags;
pub use e2b::UploadPlace;
mod failure;
mod layer;
mod log;
mod run;
mod workdir;

use std::time::Duration;

use sandboxd_core::access::SandboxNeed;
use sandboxd_core::error::Invalid;
use sandboxd_core::model::{Isolation, Principal};
use sandboxd_core::template_build::{BUILDING, FAILED, LogLine, TemplateBuild};
use sandboxd_core::validate::BuildTemplate;
use sandboxd_store::new_id;
use serde_json::json;
use tracing::warn;

use crate::{Resource, Service, ServiceError, now_ms};

/// What bounds builds.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Patterns of the images a `FROM` may name (`sandboxd_core::images`); empty: the
    /// configured templates' images only.
    pub base_images: Vec<String>,
    /// How long one build may run.
    pub timeout: Duration,
    /// How much a build may add to its base image, MiB.
    pub disk_mb: i64,
    /// How many builds one organization runs at once.
    pub per_organization: i64,
    /// How many builds this server runs at once, whoever asked; the others wait.
    pub at_once: usize,
    /// How long the build cache's images and the images prepared for sandboxes are
    /// kept after they were made (then removed unless a container uses them).
    pub keep_images: Duration,
    /// The most bytes of files one build context streamed as a tar may hold.
    pub context_bytes: u64,
    /// The most bytes of build contexts one organization keeps.
    pub contexts_bytes: i64,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            base_images: Vec::new(),
            timeout: Duration::from_secs(20 * 60),
            disk_mb: 10 * 1024,
            per_organization: 2,
            at_once: 4,
            keep_images: Duration::from_secs(7 * 24 * 3600),
            context_bytes: 1 << 30,
            contexts_bytes: 2 << 30,
        }
    }
}

/// How long a removal waits for the containers of killed sandboxes to let go of the
/// template's image.
const CONTAINERS_LEAVING: Duration = Duration::from_secs(10);

/// How long a new sandbox's create waits for its template's ready command, how often
/// the command runs, and how long one run may take.
const READY_WAIT: Duration = Duration::from_secs(60);
const READY_EVERY: Duration = Duration::from_millis(100);
const READY_RUN: Duration = Duration::from_secs(10);

/// The most log lines one `template.buildLog` answers.
pub const LOG_PAGE: i64 = 1000;

fn resource(build: &TemplateBuild) -> Resource<'_> {
    Resource {
        kind: "template",
        id: &build.template_id,
        name: Some(&build.name),
    }
}

/// The `template.*` operations.
#[derive(Debug, Clone)]
pub struct Builds {
    service: Service,
}

impl Builds {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// Starts a build; it runs on after this answers.
    pub async fn start(
        &self,
        caller: &Principal,
        cmd: BuildTemplate,
    ) -> Result<TemplateBuild, ServiceError> {
        self.start_as(caller, cmd, None).await
    }

    /// Starts a build under ids named before (`build_id`, and the template's id for a
    /// name never built in the project), as E2B's API does.
    pub async fn start_as(
        &self,
        caller: &Principal,
        cmd: BuildTemplate,
        ids: Option<(String, String)>,
    ) -> Result<TemplateBuild, ServiceError> {
        let project_id = self
            .service
            .volumes()
            .project_of(caller, cmd.project_id.as_deref())
            .await?;
        self.service
            .access()
            .check_create_in(caller, &project_id)
            .await?;
        let base = base::resolve(&self.service, caller, &project_id, &cmd.recipe).await?;
        // The base's isolation is the build's floor, and its sandboxes'.
        let isolation = match (cmd.isolation, base.isolation) {
            (Some(Isolation::Container), Some(Isolation::Gvisor)) => {
                return Err(Invalid::one(
                    "isolation",
                    "the base runs under gvisor: a template built on it does too",
                )
                .into());
            }
            (Some(asked), _) => Some(asked),
            (None, of_base) => of_base,
        };
        let runtime = self.service.runtime_of(isolation, None);
        self.service
            .check_isolation(runtime.as_deref(), None, None)?;
        if sandboxd_core::plan::under_gvisor(runtime.as_deref())
            && cmd.network == sandboxd_core::model::NetworkMode::Internet
        {
            return Err(Invalid::one(
                "networkMode",
                "`internet` is not available under gVisor, which has no network interface but loopback here",
            )
            .into());
        }
        let (build_id, template_id) = match ids {
            Some(ids) => ids,
            None => (new_id()?, new_id()?),
        };
        let mut build = TemplateBuild {
            build_id,
            template_id,
            organization_id: caller.organization_id.clone(),
            project_id,
            name: cmd.name.clone(),
            version: 0,
            status: BUILDING.into(),
            image: None,
            user: None,
            workdir: None,
            start: None,
            ready: None,
            cpu: Some(cmd.cpu),
            memory_mb: Some(cmd.memory_mb),
            isolation: isolation.map(|i| i.as_str().to_owned()),
            error_step: None,
            error_message: None,
            created_at: now_ms(),
            finished_at: None,
        };
        let options = &self.service.inner.options.builds;
        self.service
            .store()
            .insert_template_build(&mut build, &caller.user_id, options.per_organization)
            .await?;
        self.service
            .access()
            .record(
                &build.organization_id,
                Some(caller),
                "template.build",
                resource(&build),
                json!({"buildId": build.build_id, "version": build.version, "from": cmd.recipe.from}),
            )
            .await;
        let job = run::Job::new(self.service.clone(), build.clone(), cmd, base, runtime);
        let service = self.service.clone();
        let mut ended = build.clone();
        tokio::spawn(async move {
            // A build whose job panicked is failed, not left building.
            if tokio::spawn(job.run()).await.is_err() {
                warn!(build_id = %ended.build_id, "a build stopped on an internal error");
                ended.status = FAILED.into();
                ended.error_step = Some(0);
                ended.error_message = Some("the build stopped on an internal error".into());
                ended.finished_at = Some(now_ms());
                let _ = service.store().finish_template_build(&ended).await;
                let _ = service
                    .engine()
                    .remove_build_containers(&ended.build_id)
                    .await;
            }
        });
        Ok(build)
    }

    /// A build of the caller's organization in a project the caller sees.
    pub async fn build_for(
        &self,
        caller: &Principal,
        build_id: &str,
    ) -> Result<TemplateBuild, ServiceError> {
        let id = sandboxd_core::validate::volume_id(build_id)
            .map_err(|_| ServiceError::NotFound("build"))?;
        let build = self
            .service
            .store()
            .template_build(&caller.organization_id, &id)
            .await?
            .ok_or(ServiceError::NotFound("build"))?;
        self.visible(caller, &build.project_id, "build").await?;
        Ok(build)
    }

    pub(crate) async fn visible(
        &self,
        caller: &Principal,
        project_id: &str,
        what: &'static str,
    ) -> Result<(), ServiceError> {
        self.service
            .access()
            .require(caller, SandboxNeed::Read.permission())?;
        if !self
            .service
            .access()
            .project_listed(caller, project_id)
            .await?
        {
            return Err(ServiceError::NotFound(what));
        }
        Ok(())
    }

    /// A build, and at most `LOG_PAGE` lines of its log from `offset` on.
    pub async fn log(
        &self,
        caller: &Principal,
        build_id: &str,
        offset: i64,
    ) -> Result<(TemplateBuild, Vec<LogLine>), ServiceError> {
        let build = self.build_for(caller, build_id).await?;
        let lines = self
            .service
            .store()
            .build_log(&build.build_id, offset.max(0), LOG_PAGE)
            .await?;
        Ok((build, lines))
    }

    /// A receiver that changes each time a build of this replica writes to its log or
    /// ends (a build of another replica is seen by asking the store again).
    pub fn written(&self) -> tokio::sync::watch::Receiver<u64> {
        self.service.inner.build_logs.subscribe()
    }

    /// Every build the caller sees, grouped by template, newest version first.
    pub async fn all(&self, caller: &Principal) -> Result<Vec<Vec<TemplateBuild>>, ServiceError> {
        self.service
            .access()
            .require(caller, SandboxNeed::Read.permission())?;
        let mut grouped: Vec<Vec<TemplateBuild>> = Vec::new();
        for build in self
            .service
            .store()
            .template_builds(&caller.organization_id)
            .await?
        {
            if !self
                .service
                .access()
                .project_listed(caller, &build.project_id)
                .await?
            {
                continue;
            }
            match grouped.last_mut() {
                Some(group) if group[0].template_id == build.template_id => group.push(build),
                _ => grouped.push(vec![build]),
            }
        }
        Ok(grouped)
    }

    /// One template's builds, by id or by name in a project.
    pub async fn one(
        &self,
        caller: &Principal,
        template_id: Option<&str>,
        name: Option<&str>,
        project_id: Option<&str>,
    ) -> Result<Vec<TemplateBuild>, ServiceError> {
        let project = match (template_id, name) {
            (None, Some(_)) => Some(
                self.service
                    .volumes()
                    .project_of(caller, project_id)
                    .await?,
            ),
            (Some(_), None) => None,
            _ => {
                return Err(
                    Invalid::one("templateId", "give templateId or name, one of them").into(),
                );
            }
        };
        self.all(caller)
            .await?
            .into_iter()
            .find(|group| match (template_id, name, &project) {
                (Some(id), _, _) => group[0].template_id == id,
                (_, Some(name), Some(project)) => {
                    group[0].name == name && group[0].project_id == *project
                }
                _ => false,
            })
            .ok_or(ServiceError::NotFound("template"))
    }

    /// Removes a template, every version and its images; refused while a live sandbox
    /// uses it or a build of it runs.
    pub async fn remove(&self, caller: &Principal, template_id: &str) -> Result<(), ServiceError> {
        let builds = self.one(caller, Some(template_id), None, None).await?;
        self.service
            .access()
            .require(caller, SandboxNeed::Delete.permission())?;
        let images = self
            .service
            .store()
            .remove_template(&caller.organization_id, template_id)
            .await?;
        // Its warm members hold its images.
        let versions: std::collections::HashSet<String> =
            builds.iter().map(|b| b.build_id.clone()).collect();
        self.service.pools().drop_built(&versions).await;
        let engine = self.service.engine();
        for image in &images {
            // What was prepared from it holds its layers.
            if let Ok(Some(facts)) = engine.image_facts(image).await {
                self.service
                    .sandboxes()
                    .remove_prepared_from(&facts.id)
                    .await;
            }
            remove_when_free(engine, image).await;
        }
        self.remove_carried(&images).await;
        self.service
            .access()
            .record(
                &caller.organization_id,
                Some(caller),
                "template.remove",
                resource(&builds[0]),
                json!({"versions": builds.len()}),
            )
            .await;
        Ok(())
    }

    /// What a sandbox just made from a built template runs before its create answers:
    /// the start command, then the ready command until it succeeds.
    pub(crate) async fn begin(&self, caller: &Principal, sandbox_id: &str, build: &TemplateBuild) {
        if let Some(argv) = build.start.clone() {
            self.start_command(caller, sandbox_id, argv).await;
        }
        if let Some(argv) = build.ready.clone() {
            self.wait_ready(caller, sandbox_id, argv).await;
        }
    }

    /// Runs the ready command every `READY_EVERY` until it exits 0, each run within
    /// `READY_RUN`, for at most `READY_WAIT`; a sandbox never ready is kept, and the
    /// reason logged.
    async fn wait_ready(&self, caller: &Principal, sandbox_id: &str, argv: Vec<String>) {
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        let mut last = String::new();
        while tokio::time::Instant::now() < deadline {
            let sandbox = match self
                .service
                .access()
                .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
                .await
            {
                Ok(sandbox) => sandbox,
                Err(error) => {
                    last = sandboxd_core::error::chain(&error);
                    break;
                }
            };
            let executor = match self.service.executor(&sandbox).await {
                Ok(executor) => executor,
                Err(error) => {
                    last = sandboxd_core::error::chain(&error);
                    break;
                }
            };
            let spec = sandboxd_contracts::ExecSpec {
                argv: argv.clone(),
                cwd: Some(sandbox.workdir.clone()),
                env: Vec::new(),
                user: None,
                timeout: READY_RUN,
                max_output: 4096,
                stream: None,
            };
            match executor.exec(spec).await {
                Ok(outcome) if outcome.exit_code == 0 => return,
                Ok(outcome) => last = format!("it exited with code {}", outcome.exit_code),
                Err(error) => last = sandboxd_core::error::chain(&error),
            }
            tokio::time::sleep(READY_EVERY).await;
        }
        warn!(%sandbox_id, reason = %last, "the template's ready command did not succeed in time");
    }

    /// Starts a built template's start command (`CMD`/`ENTRYPOINT`) in a sandbox just
    /// made from it, as a background process tagged `start`; a sandbox whose command
    /// cannot start is kept, and the reason logged.
    async fn start_command(&self, caller: &Principal, sandbox_id: &str, argv: Vec<String>) {
        let launch = crate::Launch {
            argv,
            cwd: None,
            env: Vec::new(),
            stdin: false,
            tag: Some("start".into()),
            pty: None,
        };
        if let Err(error) = self
            .service
            .commands()
            .launch(caller, sandbox_id, launch)
            .await
        {
            warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "the template's start command did not start");
        }
    }

    /// Build `build_id` of the template `name` in a project, if it is ready, for a
    /// create.
    pub async fn ready_build(
        &self,
        organization_id: &str,
        project_id: &str,
        name: &str,
        build_id: &str,
    ) -> Result<Option<TemplateBuild>, ServiceError> {
        Ok(self
            .service
            .store()
            .template_build(organization_id, build_id)
            .await?
            .filter(|b| b.project_id == project_id && b.name == name && b.status == "ready"))
    }

    /// The newest ready version of the template `name` in a project, for a create.
    pub async fn ready_for_create(
        &self,
        organization_id: &str,
        project_id: &str,
        name: &str,
    ) -> Result<Option<TemplateBuild>, ServiceError> {
        Ok(self
            .service
            .store()
            .ready_template(organization_id, project_id, name)
            .await?)
    }
}

/// Removes an image once no container holds it: the containers of sandboxes killed a
/// moment ago are removed in the background, and may hold it for a while.
pub(crate) async fn remove_when_free(
    engine: &std::sync::Arc<dyn sandboxd_contracts::Engine>,
    image: &str,
) {
    let deadline = tokio::time::Instant::now() + CONTAINERS_LEAVING;
    loop {
        match engine.remove_image(image).await {
            Ok(()) => break,
            Err(sandboxd_contracts::EngineError::Rejected { status: 409, .. })
                if tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => {
                warn!(%image, error = %sandboxd_core::error::chain(&error), "could not remove a template's image");
                break;
            }
        }
    }
}

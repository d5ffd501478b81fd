//! One build, run in the background: each instruction after `FROM` in turn
//! (`sandboxd_core::template_build::Steps`), each step that changes the filesystem in a
//! container of its own, planned as a sandbox's (every capability dropped, limits, the
//! build's network and runtime): a `RUN` through the engine's exec, its output into the
//! log as it comes; a copy or a workdir unpacked by the engine. The container is
//! committed with the settings the build kept, under the step's cache key, and removed;
//! a step whose key the engine already holds is not run again. The whole build is bounded
//! by the time limit, each step's image by the disk limit; whatever ends it, no
//! container is left, and the template's image is named only once every step passed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use sandboxd_core::template_build::{
    Action, CopyTarget, FAILED, Instruction, READY, RESERVED_LABELS, Settings, Steps,
    TemplateBuild, base_key, cache_image, content_digest, image_labels, step_key, template_image,
};
use sandboxd_core::validate::{BuildTemplate, GivenFiles};
use tracing::{info, warn};

use super::base::Base;
use super::failure::{Failure, engine_failed, failed};
use super::log::BuildLog;
use crate::{Service, now_ms};

fn step_line(step: i64, total: usize, keyword: &str, args: &str) -> String {
    format!("Step {step}/{total} : {keyword} {args}")
}

/// What a step's image is committed with: the settings kept, with the labels of
/// `image_labels` (none of sandboxd's carried, the organization that built it).
fn committed(settings: &Settings, organization_id: &str) -> Settings {
    Settings {
        labels: image_labels(&settings.labels, organization_id),
        ..settings.clone()
    }
}

/// One step to run: on the image `from`, committed as `to`, with the settings as of
/// the step; a copy from a context reads `blob`.
pub(super) struct Layer<'a> {
    pub step: i64,
    pub from: &'a str,
    pub to: &'a str,
    pub action: &'a Action,
    pub settings: &'a Settings,
    pub blob: Option<&'a Arc<std::fs::File>>,
}

/// A build to run.
pub(super) struct Job {
    pub service: Service,
    pub build: TemplateBuild,
    /// The build asked for; its files are in `files`.
    pub cmd: BuildTemplate,
    /// The files its copies read (shared with the threads that pack them).
    pub files: Arc<GivenFiles>,
    pub base: Base,
    pub runtime: Option<String>,
}

impl Job {
    pub(super) fn new(
        service: Service,
        build: TemplateBuild,
        mut cmd: BuildTemplate,
        base: Base,
        runtime: Option<String>,
    ) -> Self {
        let files = Arc::new(GivenFiles {
            contents: std::mem::take(&mut cmd.files),
            modes: std::mem::take(&mut cmd.modes),
            links: std::mem::take(&mut cmd.links),
        });
        Self {
            service,
            build,
            cmd,
            files,
            base,
            runtime,
        }
    }
}

impl Job {
    /// Runs the build to its end and records how it ended.
    pub(super) async fn run(self) {
        let mut log = BuildLog::new(
            self.service.store().clone(),
            self.service.inner.build_logs.clone(),
            self.build.build_id.clone(),
        );
        let made = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let current = AtomicI64::new(1);
        let limit = self.service.inner.options.builds.timeout;
        // One of the server's build slots first, within the time limit too: a build
        // that waited that long fails rather than run past what the reaper allows.
        let slots = self.service.inner.build_slots.clone();
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            Err(_) => {
                let at_once = self.service.inner.options.builds.at_once;
                log.line(
                    0,
                    "system",
                    &format!("waiting for one of the server's {at_once} build slots"),
                );
                log.flush().await;
                tokio::time::timeout(limit, slots.acquire_owned())
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
        };
        let outcome = match slot {
            Some(_) => tokio::time::timeout(limit, self.steps(&mut log, &made, &current)).await,
            None => Ok(Err(failed(
                0,
                format!(
                    "no build slot of the server came free within the time limit of {} s",
                    limit.as_secs()
                ),
            ))),
        };
        let engine = self.service.engine().clone();
        let left: Vec<String> = made.lock().map(|m| m.clone()).unwrap_or_default();
        for container in left {
            if let Err(error) = engine.remove_container(&container).await {
                warn!(build_id = %self.build.build_id, %container, error = %sandboxd_core::error::chain(&error), "could not remove a build's container");
            }
        }
        // And whatever else the engine holds of it (a container made as the time limit
        // cut its create short).
        if let Err(error) = engine.remove_build_containers(&self.build.build_id).await {
            warn!(build_id = %self.build.build_id, error = %sandboxd_core::error::chain(&error), "could not look for a build's containers");
        }
        let outcome = outcome.unwrap_or_else(|_| {
            Err(failed(
                current.load(Ordering::Relaxed),
                format!("the build passed its time limit of {} s", limit.as_secs()),
            ))
        });
        let mut build = self.build.clone();
        build.finished_at = Some(now_ms());
        match outcome {
            Ok(settings) => {
                build.status = READY.into();
                build.image = Some(template_image(&build.build_id));
                build.user = (!settings.user.is_empty()).then(|| settings.user.clone());
                build.workdir = (!settings.workdir.is_empty()).then(|| settings.workdir.clone());
                build.start = self.cmd.recipe.start.as_ref().map(|s| s.argv.clone());
                build.ready = self.cmd.ready.clone();
                log.line(0, "system", "the template is ready");
                info!(build_id = %build.build_id, template = %build.name, version = build.version, "template built");
            }
            Err(failure) => {
                let tail = log.tail();
                let mut message = failure.message.clone();
                if !tail.is_empty() {
                    message = format!("{message}; its last lines:\n{}", tail.join("\n"));
                }
                log.line(
                    failure.step,
                    "system",
                    &format!("error: {}", failure.message),
                );
                build.status = FAILED.into();
                build.error_step = Some(failure.step);
                build.error_message = Some(message);
                info!(build_id = %build.build_id, step = failure.step, "template build failed");
            }
        }
        log.flush().await;
        match self.service.store().finish_template_build(&build).await {
            Err(error) => {
                warn!(build_id = %build.build_id, error = %sandboxd_core::error::chain(&error), "could not record the end of a build");
            }
            // The first create after a build is a warm one: the new version counts as
            // created once, so a pool kept for demand (within its bounds) is made now.
            Ok(finished) => {
                if finished
                    && build.status == READY
                    && let Some(shape) = sandboxd_core::pools::Built::of(&build)
                {
                    let key = crate::pools::PoolKey {
                        server_id: None,
                        shape: sandboxd_core::pools::Shape::of_built(&build.name, shape),
                    };
                    self.service
                        .pools()
                        .note_demand(&key, &build.organization_id);
                }
            }
        }
        self.service
            .inner
            .build_logs
            .send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Every step; answers the final settings once the template's image is named.
    async fn steps(
        &self,
        log: &mut BuildLog,
        made: &Arc<std::sync::Mutex<Vec<String>>>,
        current: &AtomicI64,
    ) -> Result<Settings, Failure> {
        let engine = self.service.engine().clone();
        let build_id = self.build.build_id.as_str();
        let organization = self.build.organization_id.as_str();
        let names: BTreeSet<String> = self
            .files
            .contents
            .keys()
            .chain(self.files.links.keys())
            .cloned()
            .collect();
        let mut instructions: Vec<Instruction> = self
            .cmd
            .instructions
            .iter()
            .skip_while(|i| i.keyword != "FROM")
            .skip(1)
            .cloned()
            .collect();
        let total = instructions.len() + 1;
        // A template built on a template runs as its user unless the Dockerfile says.
        if self.cmd.recipe.user.is_none()
            && let Some(user) = &self.base.user
        {
            instructions.push(Instruction {
                line: 0,
                keyword: "USER".into(),
                args: user.clone(),
            });
        }
        log.line(
            1,
            "system",
            &step_line(1, total, "FROM", &self.cmd.recipe.from),
        );
        let mut base = engine
            .image_facts(&self.base.image)
            .await
            .map_err(|e| engine_failed(build_id, 1, "reading the base image", &e))?
            .ok_or_else(|| failed(1, "the engine no longer holds the base image"))?;
        // sandboxd's own labels of the base are not the template's.
        base.settings
            .labels
            .retain(|name, _| !name.starts_with(RESERVED_LABELS));
        // Each file's digest once, off the runtime's threads (up to 64 MiB to hash; a
        // context's were taken as it was stored), with its mode where it has one of its
        // own.
        let files = self.files.clone();
        let digests: BTreeMap<String, String> = tokio::task::spawn_blocking(move || {
            let mut digests: BTreeMap<String, String> = files
                .contents
                .iter()
                .map(|(name, content)| {
                    let digest = content.digest();
                    match files.modes.get(name) {
                        Some(mode) => (name.clone(), format!("{digest} mode {mode:o}")),
                        None => (name.clone(), digest),
                    }
                })
                .collect();
            for (name, target) in &files.links {
                digests.insert(
                    name.clone(),
                    format!("link {}", content_digest(target.as_bytes())),
                );
            }
            digests
        })
        .await
        .map_err(|_| failed(1, "the files could not be read"))?;
        // A context's files, copied to this replica at the first copy that runs (a
        // build whose every copy is cached reads none of it).
        let mut blob: Option<Arc<std::fs::File>> = None;
        let runs_in = format!("{:?} {:?}", self.cmd.network, self.runtime);
        let mut steps = Steps::new(base.settings.clone());
        let mut key = base_key(organization, &base.id, &runs_in);
        let mut image = base.id.clone();
        let mut image_key = key.clone();
        for (index, instruction) in instructions.iter().enumerate() {
            let step = index as i64 + 2;
            current.store(step, Ordering::Relaxed);
            if instruction.line > 0 {
                log.line(
                    step,
                    "system",
                    &step_line(step, total, &instruction.keyword, &instruction.args),
                );
            }
            log.clear_tail();
            log.flush().await;
            let action = steps
                .next_action(instruction, &names)
                .map_err(|e| failed(step, e.to_string()))?;
            let copied: Vec<(&CopyTarget, &str)> = match &action {
                Action::Copy { targets, .. } => targets
                    .iter()
                    .map(|t| (t, digests.get(&t.file).map_or("", String::as_str)))
                    .collect(),
                _ => Vec::new(),
            };
            key = step_key(&key, instruction, &copied);
            if action == Action::Settings {
                continue;
            }
            // Each step that writes files is kept under its own key, with the settings
            // as of that step: what comes after it never makes it run again.
            let cached = cache_image(&key);
            let fresh = self.cmd.fresh_from.is_some_and(|from| step >= from);
            if !fresh && self.holds(&engine, step, &cached).await? {
                log.line(step, "system", " ---> cached");
            } else {
                if let (Action::Copy { .. }, Some(context_id), None) =
                    (&action, &self.cmd.context_id, &blob)
                {
                    log.line(step, "system", "reading the build context");
                    log.flush().await;
                    let fetched = super::context::fetch_blob(
                        self.service.store(),
                        &self.build.organization_id,
                        context_id,
                    )
                    .await
                    .map_err(|message| failed(step, message))?;
                    blob = Some(Arc::new(fetched));
                }
                let settings = committed(&steps.settings, organization);
                let layer = Layer {
                    step,
                    from: &image,
                    to: &cached,
                    action: &action,
                    settings: &settings,
                    blob: blob.as_ref(),
                };
                self.layer(&engine, log, made, layer).await?;
                self.check_disk(&engine, step, &cached, base.size).await?;
            }
            image = cached;
            image_key = key.clone();
        }
        if image_key != key {
            // Settings changed after the last step that wrote files: one more image.
            let step = total as i64;
            let cached = cache_image(&key);
            let fresh = self.cmd.fresh_from.is_some_and(|from| step >= from);
            if fresh || !self.holds(&engine, step, &cached).await? {
                let settings = committed(&steps.settings, organization);
                let layer = Layer {
                    step,
                    from: &image,
                    to: &cached,
                    action: &Action::Settings,
                    settings: &settings,
                    blob: None,
                };
                self.layer(&engine, log, made, layer).await?;
            }
            image = cached;
        }
        engine
            .tag_image(&image, &template_image(build_id))
            .await
            .map_err(|e| {
                engine_failed(build_id, total as i64, "naming the template's image", &e)
            })?;
        Ok(steps.settings)
    }
}

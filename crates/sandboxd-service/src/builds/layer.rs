//! One step of a build in its container: the container made from the step's base
//! image, planned as a sandbox's; a `RUN` run through the engine's exec with its output
//! into the log as it comes, a copy unpacked by the engine, a workdir made
//! (`workdir.rs`); the container committed as the step's image and removed. And the checks
//! around a step: whether the cache holds its image, and whether the image stays within
//! the build's disk limit.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_contracts::{Engine, ExecSpec};
use sandboxd_core::plan::NetworkPlan;
use std::io::Seek as _;

use sandboxd_core::template_build::{
    Action, Blob, BuildShape, CopyMode, CopyTarget, build_container_plan, copy_archive,
};

use super::failure::{Failure, engine_failed, failed};
use super::log::BuildLog;
use super::run::{Job, Layer};
use crate::now_ms;

/// How often a running step's output is written to the log.
const LOG_FLUSH: Duration = Duration::from_millis(50);

impl Job {
    pub(super) async fn holds(
        &self,
        engine: &Arc<dyn Engine>,
        step: i64,
        image: &str,
    ) -> Result<bool, Failure> {
        Ok(engine
            .image_facts(image)
            .await
            .map_err(|e| engine_failed(&self.build.build_id, step, "reading the cache", &e))?
            .is_some())
    }

    /// A copy's tar in a temporary file (unlinked), read from its start: packed off the
    /// runtime's threads, reading a context's files from its blob.
    async fn pack(
        &self,
        targets: Vec<CopyTarget>,
        (owner, chmod): ((u64, u64), Option<u32>),
        mtime: u64,
        blob: Option<&Arc<std::fs::File>>,
    ) -> std::io::Result<std::fs::File> {
        let files = self.files.clone();
        let blob = blob.cloned();
        tokio::task::spawn_blocking(move || {
            let how = CopyMode {
                owner,
                chmod,
                modes: &files.modes,
                links: &files.links,
                mtime,
            };
            // Each copy reads the blob from where it seeks; `&File` reads and seeks.
            let mut reader = blob.as_deref();
            let out = std::io::BufWriter::new(tempfile::tempfile()?);
            let mut tar = copy_archive(
                &targets,
                &files.contents,
                how,
                reader.as_mut().map(|r| r as &mut dyn Blob),
                out,
            )?
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
            tar.rewind()?;
            Ok(tar)
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// Refuses a step's image that adds more than the disk limit to the base (and
    /// removes it: it is no cache).
    pub(super) async fn check_disk(
        &self,
        engine: &Arc<dyn Engine>,
        step: i64,
        image: &str,
        base_size: i64,
    ) -> Result<(), Failure> {
        let limit = self.service.inner.options.builds.disk_mb;
        let size = engine
            .image_facts(image)
            .await
            .map_err(|e| engine_failed(&self.build.build_id, step, "reading the step's image", &e))?
            .map(|facts| facts.size)
            .unwrap_or_default();
        let added_mb = (size - base_size).max(0) / (1024 * 1024);
        if added_mb > limit {
            let _ = engine.remove_image(image).await;
            return Err(failed(
                step,
                format!(
                    "the template adds {added_mb} MiB to its base, over the build's disk limit of {limit} MiB"
                ),
            ));
        }
        Ok(())
    }

    /// Runs one step in a container of its own on `from` and commits it as `to`.
    pub(super) async fn layer(
        &self,
        engine: &Arc<dyn Engine>,
        log: &mut BuildLog,
        made: &Arc<std::sync::Mutex<Vec<String>>>,
        layer: Layer<'_>,
    ) -> Result<(), Failure> {
        let Layer {
            step,
            from,
            to,
            action,
            settings,
            blob,
        } = layer;
        let build_id = self.build.build_id.as_str();
        let shape = BuildShape {
            cpu: self.cmd.cpu,
            memory_mb: self.cmd.memory_mb,
            network: self.cmd.network,
            runtime: self.runtime.clone(),
        };
        let plan = build_container_plan(
            build_id,
            step as usize,
            from,
            self.service.instance_id(),
            &shape,
        );
        if let NetworkPlan::Bridge(name) = &plan.network {
            engine
                .ensure_bridge(name)
                .await
                .map_err(|e| engine_failed(build_id, step, "making the network", &e))?;
        }
        let container = engine
            .create_container(&plan)
            .await
            .map_err(|e| engine_failed(build_id, step, "making the step's container", &e))?;
        if let Ok(mut made) = made.lock() {
            made.push(container.clone());
        }
        let mtime = (now_ms() / 1000).max(0) as u64;
        match action {
            Action::Run {
                argv,
                env,
                user,
                cwd,
            } => {
                engine.start_container(&container).await.map_err(|e| {
                    engine_failed(build_id, step, "starting the step's container", &e)
                })?;
                let (tx, mut rx) = tokio::sync::mpsc::channel(64);
                let spec = ExecSpec {
                    argv: argv.clone(),
                    cwd: Some(cwd.clone()),
                    env: env.clone(),
                    user: Some(if user.is_empty() {
                        "0".into()
                    } else {
                        user.clone()
                    }),
                    // The build's own time limit ends it first.
                    timeout: self.service.inner.options.builds.timeout,
                    max_output: 0,
                    stream: Some(tx),
                };
                let exec = engine.exec(&container, spec);
                tokio::pin!(exec);
                let mut flush = tokio::time::interval(LOG_FLUSH);
                let outcome = loop {
                    tokio::select! {
                        outcome = &mut exec => break outcome,
                        Some((stream, chunk)) = rx.recv() => log.output(step, stream, &chunk),
                        _ = flush.tick() => log.flush().await,
                    }
                };
                while let Ok((stream, chunk)) = rx.try_recv() {
                    log.output(step, stream, &chunk);
                }
                log.end_output(step);
                log.flush().await;
                let outcome =
                    outcome.map_err(|e| engine_failed(build_id, step, "running the step", &e))?;
                if outcome.timed_out {
                    return Err(failed(step, "RUN passed the build's time limit"));
                }
                if outcome.exit_code != 0 {
                    return Err(failed(
                        step,
                        format!("RUN exited with code {}", outcome.exit_code),
                    ));
                }
                // What the step left running ends before its files are kept.
                engine.kill_container(&container).await.map_err(|e| {
                    engine_failed(build_id, step, "stopping the step's container", &e)
                })?;
            }
            Action::Copy {
                targets,
                owner,
                mode,
            } => {
                let tar = self
                    .pack(targets.clone(), (*owner, *mode), mtime, blob)
                    .await
                    .map_err(|e| failed(step, format!("the files could not be packed: {e}")))?;
                let tar: sandboxd_contracts::Chunks = Box::pin(tokio_util::io::ReaderStream::new(
                    tokio::fs::File::from_std(tar),
                ));
                engine
                    .unpack_at_root(&container, tar)
                    .await
                    .map_err(|e| engine_failed(build_id, step, "copying the files", &e))?;
            }
            Action::MakeDir { path, user } => {
                engine.start_container(&container).await.map_err(|e| {
                    engine_failed(build_id, step, "starting the step's container", &e)
                })?;
                super::workdir::make_workdir(engine, &container, build_id, step, path, user, mtime)
                    .await?;
                engine.kill_container(&container).await.map_err(|e| {
                    engine_failed(build_id, step, "stopping the step's container", &e)
                })?;
            }
            Action::Settings => {}
        }
        engine
            .commit_as(&container, to, settings)
            .await
            .map_err(|e| engine_failed(build_id, step, "keeping the step's image", &e))?;
        if engine.remove_container(&container).await.is_ok()
            && let Ok(mut made) = made.lock()
        {
            made.retain(|c| *c != container);
        }
        Ok(())
    }
}

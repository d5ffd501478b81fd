//! What a new container needs made inside it before its sandbox is handed out: the
//! user it runs as (the image's, looked up when the image names it), the roots of its
//! read-write volumes and its workdir made the user's, by the agent when it can, else
//! through the engine's archive API. `prepare_workdir` says who made the workdir: a
//! workdir the engine had to make is what a prepared image saves (`prepared.rs`).

use std::sync::Arc;

use sandboxd_contracts::{Engine, EngineError, ExecSpec};
use sandboxd_core::model::Sandbox;
use sandboxd_core::paths;
use sandboxd_core::plan;

use super::Sandboxes;
use crate::internal_exec;

/// How much of a workdir's listing the agent may send to show it is not empty.
const WORKDIR_LISTING_BYTES: usize = 64 * 1024;

/// Permission bits of a workdir made for a sandbox (as the engine's archive path makes it).
const WORKDIR_MODE: u32 = 0o755;

impl Sandboxes {
    /// The `uid:gid` of an image's default user: root when it names none, as written
    /// when numeric, else looked up inside the running container.
    pub(super) async fn image_user(
        &self,
        engine: &Arc<dyn Engine>,
        container_id: &str,
        configured: &str,
    ) -> Option<String> {
        let configured = configured.trim();
        if configured.is_empty() {
            return Some("0:0".into());
        }
        if let Some((uid, gid)) = plan::parse_user(configured)
            && configured.contains(':')
        {
            return Some(format!("{uid}:{gid}"));
        }
        self.resolve_user(engine, container_id).await
    }

    /// The `uid:gid` the container runs as, read inside it.
    async fn resolve_user(&self, engine: &Arc<dyn Engine>, container_id: &str) -> Option<String> {
        let spec = |flag: &str| internal_exec(vec!["id".into(), flag.into()], 64);
        let uid = engine.exec(container_id, spec("-u")).await.ok()?;
        let gid = engine.exec(container_id, spec("-g")).await.ok()?;
        if uid.exit_code != 0 || gid.exit_code != 0 {
            return None;
        }
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_owned();
        let user = format!("{}:{}", text(&uid.stdout), text(&gid.stdout));
        plan::parse_user(&user).map(|_| user)
    }

    /// Makes the root of each volume mounted read-write the sandbox user's; what is in
    /// it is left as it is. The agent's `chmod` of it succeeds when it is the user's
    /// already (a volume a sandbox of that user mounted before: a round trip on its
    /// connection); otherwise the engine unpacks a directory entry over it (no
    /// capability is needed inside the sandbox; tens of milliseconds).
    pub(super) async fn prepare_volumes(
        &self,
        engine: &Arc<dyn Engine>,
        container_id: &str,
        row: &Sandbox,
        user: Option<&str>,
    ) -> Result<(), EngineError> {
        let owner = user.and_then(plan::parse_user).unwrap_or((0, 0));
        let agent = self.service.agent_channel(&row.sandbox_id);
        for mount in row.volumes.iter().filter(|m| !m.read_only) {
            if let Some(agent) = &agent
                && agent.make_dir(&mount.path, WORKDIR_MODE).await.is_ok()
            {
                continue;
            }
            if let Some((parent, name)) = paths::split_file(&mount.path) {
                engine.put_dir(container_id, parent, name, owner).await?;
            }
        }
        Ok(())
    }

    /// Creates the workdir owned by the sandbox user. The agent does it when it can (a
    /// round trip on its connection). A directory with something in it is the image's
    /// and is left as it is (`workdir: "/etc"`, or a home the image gave another user):
    /// the agent's listing says so when the agent could not make the directory its
    /// user's. Otherwise the engine unpacks a directory entry (the engine's archive
    /// extraction starts a process of its own: tens of milliseconds), so no capability
    /// is needed inside the container; the parent is created (as root) only when the
    /// engine reports it missing.
    pub(super) async fn prepare_workdir(
        &self,
        engine: &Arc<dyn Engine>,
        sandbox_id: &str,
        container_id: &str,
        workdir: &str,
        user: Option<&str>,
    ) -> Result<WorkdirBy, EngineError> {
        let Some((parent, name)) = paths::split_file(workdir) else {
            return Ok(WorkdirBy::Image);
        };
        if let Some(agent) = self.service.agent_channel(sandbox_id) {
            if agent.make_dir(workdir, WORKDIR_MODE).await.is_ok() {
                return Ok(WorkdirBy::Agent);
            }
            // What the agent lists is only its own sandbox's business: at worst the
            // workdir stays as the image made it.
            let listed = agent.list_dir(workdir, WORKDIR_LISTING_BYTES).await;
            if listed.is_ok_and(|entries| !entries.is_empty()) {
                return Ok(WorkdirBy::Image);
            }
        }
        // A directory entry extracted over a filled directory would make it the sandbox
        // user's, so only an empty one is made: the one the engine made for the
        // container's working directory (as root), or none.
        if engine.is_empty_dir(container_id, workdir).await? == Some(false) {
            return Ok(WorkdirBy::Image);
        }
        let owner = user.and_then(plan::parse_user).unwrap_or((0, 0));
        let made = match engine.put_dir(container_id, parent, name, owner).await {
            Err(EngineError::NotFound { .. }) => {
                let argv = vec!["mkdir".into(), "-p".into(), "--".into(), parent.into()];
                let mkdir = ExecSpec {
                    user: Some("0".into()),
                    ..internal_exec(argv, 4096)
                };
                engine.exec(container_id, mkdir).await?;
                engine.put_dir(container_id, parent, name, owner).await
            }
            other => other,
        };
        made.map(|()| WorkdirBy::Engine)
    }
}

/// Who made a sandbox's workdir its user's (or left it as it was).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkdirBy {
    /// The agent: one round trip on its connection.
    Agent,
    /// Nobody: the image has it (filled, or `/`), left as it is.
    Image,
    /// The engine: the round trips a prepared image saves.
    Engine,
}

//! A `WORKDIR` made as the engine's own builder (BuildKit) makes it: the directories
//! that are missing are made owned by the step's user, those that exist are left as they
//! are (their owner, their mode: `/tmp` keeps its sticky bit). As root (no `USER`), or
//! when the image cannot say which directories are missing or who the user is, the
//! directories are made with `mkdir -p` as root.
//!
//! The step's container has no capability to change an owner: the directories for a
//! user are unpacked by the engine from an archive that names their owner.

use std::sync::Arc;
use std::time::Duration;

use sandboxd_contracts::{Engine, ExecSpec};
use sandboxd_core::template_build::{dirs_archive, numeric_owner};

use super::failure::{Failure, engine_failed, failed};

/// How long each look into the step's container may take.
const LOOK: Duration = Duration::from_secs(60);

/// Makes `path` in the started `container`, what is missing owned by `user`.
pub(super) async fn make_workdir(
    engine: &Arc<dyn Engine>,
    container: &str,
    build_id: &str,
    step: i64,
    path: &str,
    user: &str,
    mtime: u64,
) -> Result<(), Failure> {
    let run = |argv: Vec<String>| {
        let engine = engine.clone();
        let container = container.to_owned();
        async move {
            let spec = ExecSpec {
                argv,
                cwd: Some("/".into()),
                env: Vec::new(),
                user: Some("0".into()),
                timeout: LOOK,
                max_output: 64 << 10,
                stream: None,
            };
            engine.exec(&container, spec).await
        }
    };
    let as_root = user.is_empty() || user == "root" || user == "0" || user.starts_with("0:");
    if !as_root && let Some(owner) = owner_of(&run, user).await {
        // The missing directories, deepest first, as the image's own shell finds them.
        let probe = vec![
            "/bin/sh".into(),
            "-c".into(),
            r#"d=$1; while [ ! -e "$d" ]; do echo "$d"; d=${d%/*}; [ -n "$d" ] || break; done"#
                .into(),
            "sh".into(),
            path.into(),
        ];
        if let Ok(outcome) = run(probe).await
            && outcome.exit_code == 0
        {
            let missing: Vec<String> = String::from_utf8_lossy(&outcome.stdout)
                .lines()
                .filter(|l| l.starts_with('/') && path.starts_with(*l))
                .map(str::to_owned)
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            let tar = dirs_archive(&missing, owner, mtime)
                .map_err(|e| failed(step, format!("the workdir could not be packed: {e}")))?;
            let tar: sandboxd_contracts::Chunks = Box::pin(futures_util::stream::once(
                std::future::ready(Ok(bytes::Bytes::from(tar))),
            ));
            return engine
                .unpack_at_root(container, tar)
                .await
                .map_err(|e| engine_failed(build_id, step, "making the workdir", &e));
        }
    }
    let outcome = run(vec!["mkdir".into(), "-p".into(), "--".into(), path.into()])
        .await
        .map_err(|e| engine_failed(build_id, step, "making the workdir", &e))?;
    if outcome.exit_code != 0 {
        return Err(failed(
            step,
            format!(
                "the workdir {path} could not be made: {}",
                String::from_utf8_lossy(&outcome.stderr).trim()
            ),
        ));
    }
    Ok(())
}

/// `user` as numbers: as written, or looked up in the image (`id`).
async fn owner_of<F, Fut>(run: &F, user: &str) -> Option<(u64, u64)>
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<
            Output = Result<sandboxd_contracts::ExecOutcome, sandboxd_contracts::EngineError>,
        >,
{
    if let Some(owner) = numeric_owner(user) {
        return Some(owner);
    }
    let (name, group) = user.split_once(':').unwrap_or((user, ""));
    let id = |flag: &str, name: &str| run(vec!["id".into(), flag.into(), "--".into(), name.into()]);
    let number = |outcome: sandboxd_contracts::ExecOutcome| {
        (outcome.exit_code == 0)
            .then(|| {
                String::from_utf8_lossy(&outcome.stdout)
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .flatten()
    };
    let uid = match name.parse::<u64>() {
        Ok(uid) => uid,
        Err(_) => number(id("-u", name).await.ok()?)?,
    };
    let gid = match group {
        "" => number(id("-g", name).await.ok()?)?,
        group => match group.parse::<u64>() {
            Ok(gid) => gid,
            // A group by name: its number from the group database.
            Err(_) => {
                let outcome = run(vec!["getent".into(), "group".into(), group.into()])
                    .await
                    .ok()?;
                let line = String::from_utf8_lossy(&outcome.stdout).into_owned();
                line.split(':').nth(2)?.trim().parse().ok()?
            }
        },
    };
    Some((uid, gid))
}

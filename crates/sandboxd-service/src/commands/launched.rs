//! Processes started exactly as asked (a program and its arguments, no shell added),
//! named by a tag, and followed as they run: the process model of E2B's in-sandbox
//! daemon, on the agent's background processes (which outlive every client).

use sandboxd_contracts::{FollowFrom, ProcessFollow, ProcessInfo, ProcessSpec};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::model::Principal;

use super::Commands;
use super::processes::process_error;
use crate::ServiceError;

/// A process to start.
#[derive(Debug, Clone)]
pub struct Launch {
    pub argv: Vec<String>,
    /// The sandbox's working directory when `None`.
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub stdin: bool,
    pub tag: Option<String>,
    /// Columns and rows of a terminal to run it on.
    pub pty: Option<(u16, u16)>,
}

fn new_launch_id() -> Result<String, ServiceError> {
    Ok(format!("l_{}", &sandboxd_store::new_id()?[..12]))
}

impl Commands {
    /// Starts a process as asked.
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn launch(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        launch: Launch,
    ) -> Result<ProcessInfo, ServiceError> {
        let (sandbox, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let id = new_launch_id()?;
        let cwd = launch.cwd.unwrap_or_else(|| sandbox.workdir.clone());
        match launch.pty {
            Some((cols, rows)) => {
                let activity = sandboxd_core::activity::TerminalActivity {
                    terminal_id: id.clone(),
                    cols,
                    rows,
                    ..Default::default()
                };
                self.note_terminal(caller, &sandbox, activity);
            }
            None => {
                let command = sandboxd_core::activity::command_line(&launch.argv);
                self.note_started(caller, &sandbox, (&command, &cwd), &id, &launch.env)
                    .await;
            }
        }
        let env = self.service.command_env(&sandbox, launch.env).await?;
        agent
            .spawn_process(ProcessSpec {
                id,
                argv: launch.argv,
                cwd: Some(cwd),
                env,
                stdin: launch.stdin,
                tag: launch.tag,
                pty: launch.pty,
            })
            .await
            .map_err(process_error)
    }

    /// The background processes of a sandbox as its agent knows them.
    pub async fn process_infos(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Vec<ProcessInfo>, ServiceError> {
        let (_, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        let mut infos = agent.processes().await.map_err(process_error)?;
        infos.sort_by(|a, b| {
            a.started_ms
                .cmp(&b.started_ms)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(infos)
    }

    /// Resizes the terminal a background process runs on.
    pub async fn resize_process(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        process_id: &str,
        (cols, rows): (u16, u16),
    ) -> Result<(), ServiceError> {
        let (_, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        agent
            .resize_process(process_id, cols, rows)
            .await
            .map_err(process_error)
    }

    /// Follows a background process's output and exit.
    pub async fn follow(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        process_id: &str,
        from: FollowFrom,
    ) -> Result<Box<dyn ProcessFollow>, ServiceError> {
        let (_, agent) = self
            .service
            .agent_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        agent
            .follow_process(process_id, from)
            .await
            .map_err(process_error)
    }
}

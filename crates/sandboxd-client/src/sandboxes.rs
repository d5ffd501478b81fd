//! The sandbox procedures, typed: what a program driving sandboxes calls most.
//!
//! Create, one, list, exec and `run`, files, timeout, kill, remove, projects, templates,
//! over `sandboxd_core::api`'s types.

use sandboxd_core::api::{
    CreateSandboxRequest, ExecRequest, ExecResult, ListFilesQuery, ListFilesResult,
    ListSandboxesQuery, ProjectView, ReadFileQuery, ReadFileResult, SandboxIdBody, SandboxIdQuery,
    SandboxPauseBody, SandboxView, SetEgressRequest, SetTimeoutRequest, TemplateView,
    WriteFileRequest, WriteFileResult,
};

use sandboxd_core::api::procedures;
use sandboxd_core::model::PauseMemory;

use crate::{Client, Error};

impl Client {
    /// `project.all`: the projects the key sees, with their environments.
    pub async fn projects(&self) -> Result<Vec<ProjectView>, Error> {
        self.invoke::<procedures::ProjectAll>(&procedures::NoArguments {})
            .await
    }

    /// `sandbox.templates`.
    pub async fn templates(&self) -> Result<Vec<TemplateView>, Error> {
        self.invoke::<procedures::SandboxTemplates>(&procedures::NoArguments {})
            .await
    }

    /// `sandbox.create`: the sandbox, running.
    pub async fn create(&self, request: &CreateSandboxRequest) -> Result<SandboxView, Error> {
        self.invoke::<procedures::SandboxCreate>(request).await
    }

    /// `sandbox.one`.
    pub async fn one(&self, sandbox_id: &str) -> Result<SandboxView, Error> {
        self.invoke::<procedures::SandboxOne>(&id_query(sandbox_id))
            .await
    }

    /// `sandbox.list`, of an environment or a project (`None`, `None`: every one the
    /// key sees).
    pub async fn list(&self, query: &ListSandboxesQuery) -> Result<Vec<SandboxView>, Error> {
        self.invoke::<procedures::SandboxList>(query).await
    }

    /// `sandbox.exec`: the command's exit code and output.
    pub async fn exec(&self, request: &ExecRequest) -> Result<ExecResult, Error> {
        self.invoke::<procedures::SandboxExec>(request).await
    }

    /// `sandbox.exec` of `cmd` with the defaults.
    pub async fn run(&self, sandbox_id: &str, cmd: &str) -> Result<ExecResult, Error> {
        self.exec(&ExecRequest {
            sandbox_id: sandbox_id.to_owned(),
            cmd: cmd.to_owned(),
            ..ExecRequest::default()
        })
        .await
    }

    /// `sandbox.writeFile`.
    pub async fn write_file(&self, request: &WriteFileRequest) -> Result<WriteFileResult, Error> {
        self.invoke::<procedures::SandboxWriteFile>(request).await
    }

    /// `sandbox.readFile`.
    pub async fn read_file(&self, query: &ReadFileQuery) -> Result<ReadFileResult, Error> {
        self.call("sandbox.readFile", query).await
    }

    /// `sandbox.listFiles`.
    pub async fn list_files(&self, query: &ListFilesQuery) -> Result<ListFilesResult, Error> {
        self.invoke::<procedures::SandboxListFiles>(query).await
    }

    /// `sandbox.setTimeout`: the sandbox with its new expiry.
    pub async fn set_timeout(
        &self,
        sandbox_id: &str,
        timeout_ms: i64,
    ) -> Result<SandboxView, Error> {
        let request = SetTimeoutRequest {
            sandbox_id: sandbox_id.to_owned(),
            timeout_ms,
        };
        self.invoke::<procedures::SandboxSetTimeout>(&request).await
    }

    /// `sandbox.setEgress`: the `allowlist` sandbox with its new list.
    pub async fn set_egress(
        &self,
        sandbox_id: &str,
        allow: &[String],
    ) -> Result<SandboxView, Error> {
        let request = SetEgressRequest {
            sandbox_id: sandbox_id.to_owned(),
            allow: allow.to_vec(),
        };
        self.invoke::<procedures::SandboxSetEgress>(&request).await
    }

    /// `sandbox.pause`: the sandbox, paused with its memory where `memory` says.
    pub async fn pause(&self, sandbox_id: &str, memory: PauseMemory) -> Result<SandboxView, Error> {
        let request = SandboxPauseBody {
            sandbox_id: sandbox_id.to_owned(),
            memory: Some(memory),
        };
        self.invoke::<procedures::SandboxPause>(&request).await
    }

    /// `sandbox.resume`: the sandbox, running again.
    pub async fn resume(&self, sandbox_id: &str) -> Result<SandboxView, Error> {
        self.invoke::<procedures::SandboxResume>(&id_body(sandbox_id))
            .await
    }

    /// `sandbox.kill`: the sandbox, killed.
    pub async fn kill(&self, sandbox_id: &str) -> Result<SandboxView, Error> {
        self.invoke::<procedures::SandboxKill>(&id_body(sandbox_id))
            .await
    }

    /// `sandbox.remove`: whether there was one to remove.
    pub async fn remove(&self, sandbox_id: &str) -> Result<bool, Error> {
        self.invoke::<procedures::SandboxRemove>(&id_body(sandbox_id))
            .await
    }
}

fn id_query(sandbox_id: &str) -> SandboxIdQuery {
    SandboxIdQuery {
        sandbox_id: sandbox_id.to_owned(),
    }
}

fn id_body(sandbox_id: &str) -> SandboxIdBody {
    SandboxIdBody {
        sandbox_id: sandbox_id.to_owned(),
    }
}

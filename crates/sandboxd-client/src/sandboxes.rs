//! The sandbox procedures, typed: what a program driving sandboxes calls most.

use sandboxd_core::api::{
    CreateSandboxRequest, ExecRequest, ExecResult, ListFilesQuery, ListFilesResult,
    ListSandboxesQuery, ProjectView, ReadFileQuery, ReadFileResult, SandboxIdBody, SandboxIdQuery,
    SandboxView, SetEgressRequest, SetTimeoutRequest, TemplateView, WriteFileRequest,
    WriteFileResult,
};

use crate::{Client, Error};

impl Client {
    /// `project.all`: the projects the key sees, with their environments.
    pub async fn projects(&self) -> Result<Vec<ProjectView>, Error> {
        self.call("project.all", &()).await
    }

    /// `sandbox.templates`.
    pub async fn templates(&self) -> Result<Vec<TemplateView>, Error> {
        self.call("sandbox.templates", &()).await
    }

    /// `sandbox.create`: the sandbox, running.
    pub async fn create(&self, request: &CreateSandboxRequest) -> Result<SandboxView, Error> {
        self.call("sandbox.create", request).await
    }

    /// `sandbox.one`.
    pub async fn one(&self, sandbox_id: &str) -> Result<SandboxView, Error> {
        self.call("sandbox.one", &id_query(sandbox_id)).await
    }

    /// `sandbox.list`, of an environment or a project (`None`, `None`: every one the
    /// key sees).
    pub async fn list(&self, query: &ListSandboxesQuery) -> Result<Vec<SandboxView>, Error> {
        self.call("sandbox.list", query).await
    }

    /// `sandbox.exec`: the command's exit code and output.
    pub async fn exec(&self, request: &ExecRequest) -> Result<ExecResult, Error> {
        self.call("sandbox.exec", request).await
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
        self.call("sandbox.writeFile", request).await
    }

    /// `sandbox.readFile`.
    pub async fn read_file(&self, query: &ReadFileQuery) -> Result<ReadFileResult, Error> {
        self.call("sandbox.readFile", query).await
    }

    /// `sandbox.listFiles`.
    pub async fn list_files(&self, query: &ListFilesQuery) -> Result<ListFilesResult, Error> {
        self.call("sandbox.listFiles", query).await
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
        self.call("sandbox.setTimeout", &request).await
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
        self.call("sandbox.setEgress", &request).await
    }

    /// `sandbox.pause`: the sandbox, paused.
    pub async fn pause(&self, sandbox_id: &str) -> Result<SandboxView, Error> {
        self.call("sandbox.pause", &id_body(sandbox_id)).await
    }

    /// `sandbox.resume`: the sandbox, running again.
    pub async fn resume(&self, sandbox_id: &str) -> Result<SandboxView, Error> {
        self.call("sandbox.resume", &id_body(sandbox_id)).await
    }

    /// `sandbox.kill`: the sandbox, killed.
    pub async fn kill(&self, sandbox_id: &str) -> Result<SandboxView, Error> {
        self.call("sandbox.kill", &id_body(sandbox_id)).await
    }

    /// `sandbox.remove`: whether there was one to remove.
    pub async fn remove(&self, sandbox_id: &str) -> Result<bool, Error> {
        self.call("sandbox.remove", &id_body(sandbox_id)).await
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

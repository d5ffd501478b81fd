//! The tools of one MCP session: each validates with the REST request type, calls the
//! same service method as the REST handler, and returns its result or its error body.
//! A tool whose procedure is forwarded (the procedure table says) is passed to the
//! replica holding the sandbox's agent when another one does, as REST requests are.

use sandboxd_core::access::SandboxNeed;
use std::sync::Arc;

use axum::http::request::Parts;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};
use sandboxd_core::api::procedures;
use sandboxd_core::api::*;
use sandboxd_core::model::Principal;
use sandboxd_core::{paging, validate};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::held::{HeldOutputs, Owner};
use crate::error::ApiError;
use crate::service::{ContextRun, NewContext, Service, ServiceError};
use crate::time::rfc3339;

/// The MCP server of one session.
#[derive(Debug, Clone)]
pub struct SandboxTools {
    service: Service,
    held: Arc<HeldOutputs>,
    previews: crate::previews::PreviewSettings,
    tool_router: ToolRouter<Self>,
}

type ToolResult = Result<CallToolResult, ErrorData>;

fn ok(value: &impl Serialize) -> ToolResult {
    Ok(CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(value).unwrap_or_default(),
    )]))
}

/// A tool's failure: its REST error body, and a line in the request log as a REST
/// request's failure would have (the MCP request itself answers 200).
fn failed(error: impl Into<ApiError>) -> ToolResult {
    let error = error.into();
    let (status, body) = error.status_and_body();
    crate::request_log::failed(&error.failure(), "MCP", "tool", status.as_u16(), 0);
    failed_with(&body)
}

/// The tool's answer as another replica gave it.
fn relayed<T: Serialize>(answer: Result<T, ErrorBody>) -> ToolResult {
    match answer {
        Ok(value) => ok(&value),
        Err(body) => failed_with(&body),
    }
}

fn failed_with(body: &ErrorBody) -> ToolResult {
    Ok(CallToolResult::error(vec![ContentBlock::text(
        serde_json::to_string(body).unwrap_or_default(),
    )]))
}

fn owner(who: &Principal, sandbox_id: &str) -> Owner {
    Owner {
        organization_id: who.organization_id.clone(),
        sandbox_id: sandbox_id.to_owned(),
    }
}

/// The caller, put in the request by [`super::authenticate`].
fn caller(parts: &Parts) -> Result<Principal, ErrorData> {
    parts
        .extensions
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| ErrorData::invalid_request("unauthenticated", None))
}

/// Returns the holder's answer when another replica holds the sandbox's agent.
macro_rules! held_elsewhere {
    ($self:ident, $parts:ident, $tool:literal, $req:ident) => {
        if let Some(answer) = $self
            .through_holder::<serde_json::Value>(&$parts, $tool, &$req.sandbox_id, &$req)
            .await
        {
            return relayed(answer);
        }
    };
}

/// The holder's value, or its error as the tool's answer.
macro_rules! relay {
    ($answer:expr) => {
        match $answer {
            Ok(value) => value,
            Err(body) => return failed_with(&body),
        }
    };
}

macro_rules! attempt {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(error) => return failed(error),
        }
    };
}

mod changes;
mod snapshots;
mod volumes;

impl SandboxTools {
    /// The answer of the replica holding `sandbox_id`'s agent to the procedure of `tool`,
    /// when another replica holds it; `None`: served here.
    async fn through_holder<T: DeserializeOwned>(
        &self,
        parts: &Parts,
        tool: &str,
        sandbox_id: &str,
        arguments: &impl Serialize,
    ) -> Option<Result<T, ErrorBody>> {
        let procedure = procedures::of_tool(tool)?;
        crate::forward::through_holder(
            &self.service,
            &parts.headers,
            procedure,
            sandbox_id,
            arguments,
        )
        .await
    }
}

#[tool_router]
impl SandboxTools {
    pub fn new(
        service: Service,
        held: Arc<HeldOutputs>,
        previews: crate::previews::PreviewSettings,
    ) -> Self {
        Self {
            service,
            held,
            previews,
            tool_router: Self::tool_router()
                + Self::snapshot_tools()
                + Self::changes_tools()
                + Self::volume_tools(),
        }
    }

    #[tool(
        name = "sandbox-create",
        description = "Create a sandbox: an isolated, resource-limited Linux container. Give environmentId (from your project's environments) and a template (base, python, node) or an image. Defaults: 1 CPU, 512 MiB, no network (networkMode internet for egress; allowlist with egress.allow for named hosts only), expires after 5 idle minutes (timeoutMs up to 24 h). Returns the sandbox record; use its sandboxId with sandbox-exec, sandbox-writeFile, sandbox-readFile, and sandbox-kill when done."
    )]
    async fn create(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<CreateSandboxRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let command = attempt!(validate::create_sandbox(req));
        let sandbox = attempt!(self.service.sandboxes().create(&who, command).await);
        ok(&SandboxView::from_sandbox(&sandbox, rfc3339))
    }

    #[tool(
        name = "sandbox-exec",
        description = "Run a shell command (sh -c) in a running sandbox and wait for it. Returns stdout, stderr, exitCode, timedOut and truncated. The first 16 KiB of each stream are in the reply; when there is more, the reply's more.outputId lets you read the rest with sandbox-outputPage. The server keeps up to 1 MiB per stream (truncated: true when a stream was longer: redirect such output to a file, e.g. cmd > /tmp/out.txt, and read it with sandbox-readFile, which pages up to 10 MiB). timeoutMs 1 s–10 min (default 60 s); on timeout every process of the command is killed and exitCode is 124. Optional cwd (absolute) and env."
    )]
    async fn exec(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ExecRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let owner = owner(&who, &req.sandbox_id);
        let mut result = match self
            .through_holder::<ExecResult>(&parts, "sandbox-exec", &req.sandbox_id, &req)
            .await
        {
            Some(answer) => relay!(answer),
            None => {
                let command = attempt!(validate::exec(req));
                attempt!(self.service.commands().exec(&who, command).await)
            }
        };
        let more = attempt!(
            self.held
                .hold_long(
                    owner,
                    &mut [
                        (HeldStream::Stdout, &mut result.stdout),
                        (HeldStream::Stderr, &mut result.stderr),
                    ],
                )
                .map_err(ServiceError::from)
        );
        ok(&Paged { result, more })
    }

    #[tool(
        name = "sandbox-writeFile",
        description = "Write a file in a running sandbox (absolute path; parent directories are created; owned by the sandbox user). content is utf8 text, or base64 with encoding: base64. At most 10 MiB. Optional mode (e.g. 493 for 0o755)."
    )]
    async fn write_file(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<WriteFileRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-writeFile", req);
        let command = attempt!(validate::write_file(req));
        ok(&attempt!(
            self.service.files().write_file(&who, command).await
        ))
    }

    #[tool(
        name = "sandbox-readFile",
        description = "Read a regular file of at most 10 MiB from a running sandbox (absolute path). encoding utf8 (default) or base64 for binary files. The first 16 KiB of the content are in the reply; when the file is longer, read the rest with sandbox-outputPage (stream content) using the reply's more.outputId."
    )]
    async fn read_file(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ReadFileQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let owner = owner(&who, &req.sandbox_id);
        let mut result = match self
            .through_holder::<ReadFileResult>(&parts, "sandbox-readFile", &req.sandbox_id, &req)
            .await
        {
            Some(answer) => relay!(answer),
            None => {
                let command = attempt!(validate::read_file(req));
                attempt!(self.service.files().read_file(&who, command).await)
            }
        };
        let more = attempt!(
            self.held
                .hold_long(owner, &mut [(HeldStream::Content, &mut result.content)])
                .map_err(ServiceError::from)
        );
        ok(&Paged { result, more })
    }

    #[tool(
        name = "sandbox-listFiles",
        description = "List a directory of a running sandbox (default: the sandbox's working directory), directories first, with type, size, mode and modification time."
    )]
    async fn list_files(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ListFilesQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-listFiles", req);
        let command = attempt!(validate::list_files(req));
        ok(&attempt!(
            self.service.files().list_files(&who, command).await
        ))
    }

    #[tool(
        name = "sandbox-setTimeout",
        description = "Change the idle timeout of a running sandbox (timeoutMs 10 s–24 h); it then expires that long from now unless used again. Every operation on a sandbox also extends it."
    )]
    async fn set_timeout(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SetTimeoutRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let (id, timeout) = attempt!(validate::set_timeout(req));
        let sandbox = attempt!(
            self.service
                .sandboxes()
                .set_timeout(&who, &id, timeout)
                .await
        );
        ok(&SandboxView::from_sandbox(&sandbox, rfc3339))
    }

    #[tool(
        name = "sandbox-setEgress",
        description = "Narrow the list of hosts a running `allowlist` sandbox may reach: give the list to keep (entries of the current list only). New connections see it within a second. To reach another host, ask with sandbox-requestEgress: a person approves it."
    )]
    async fn set_egress(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SetEgressRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let (id, allow) = attempt!(validate::set_egress(req));
        let sandbox = attempt!(
            self.service
                .sandboxes()
                .set_egress(
                    &who,
                    &id,
                    &allow,
                    sandboxd_core::egress_requests::ListChange::NarrowOnly
                )
                .await
        );
        ok(&SandboxView::from_sandbox(&sandbox, rfc3339))
    }

    #[tool(
        name = "sandbox-egressLog",
        description = "What an `allowlist` sandbox's connections through the egress proxy met: each host and port asked for, allowed, refused (with the reason) or failed, and the bytes each way once a connection ended. Read it to see why a download or an API call failed. Pass nextCursor back as cursor to read only what came after."
    )]
    async fn egress_log(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<EgressLogQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let read = attempt!(validate::egress_log(req));
        let page = attempt!(self.service.egress().log(&who, &read).await);
        ok(&EgressLogView::new(
            &page.entries,
            page.next,
            page.more,
            rfc3339,
        ))
    }

    #[tool(
        name = "sandbox-requestEgress",
        description = "Ask for an `allowlist` sandbox to reach one more host (a name or `*.` wildcard, optional `:port`), with a reason a person reads. A person with the right to decide approves or denies it; once approved the host is reachable at once. Check with egress-requests (status=all) or sandbox-one (egress.allow)."
    )]
    async fn request_egress(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<RequestEgressRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let ask = attempt!(validate::request_egress(req));
        let request = attempt!(self.service.egress().ask(&who, ask).await);
        ok(&EgressRequestView::from_record(&request, rfc3339))
    }

    #[tool(
        name = "egress-requests",
        description = "Egress requests of your sandboxes, newest first: those waiting for a decision (default), or status=all for decided ones too (approved or denied)."
    )]
    async fn egress_requests(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<EgressRequestsQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let (pending_only, sandbox_id) = attempt!(validate::egress_requests(req));
        let requests = attempt!(
            self.service
                .egress()
                .requests(&who, pending_only, sandbox_id.as_deref())
                .await
        );
        let views: Vec<EgressRequestView> = requests
            .iter()
            .map(|r| EgressRequestView::from_record(r, rfc3339))
            .collect();
        ok(&views)
    }

    #[tool(
        name = "sandbox-pause",
        description = "Pause a sandbox you are not using for a while: its processes and memory are kept but use no CPU. Any later call on it (sandbox-exec, files, processes, contexts, ports) resumes it first, so you need not call sandbox-resume. It is killed when its paused timeout (pausedTimeoutMs, default 24 h) ends."
    )]
    async fn pause(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SandboxIdBody>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let sandbox = attempt!(
            self.service
                .sandboxes()
                .pause_for(&who, &req.sandbox_id)
                .await
        );
        ok(&SandboxView::from_sandbox(&sandbox, rfc3339))
    }

    #[tool(
        name = "sandbox-resume",
        description = "Resume a paused sandbox: its processes go on where they were and its idle timeout starts afresh. Calls on a paused sandbox resume it by themselves; this is for resuming ahead of them."
    )]
    async fn resume(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SandboxIdBody>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let sandbox = attempt!(
            self.service
                .sandboxes()
                .resume_for(&who, &req.sandbox_id)
                .await
        );
        ok(&SandboxView::from_sandbox(&sandbox, rfc3339))
    }

    #[tool(
        name = "sandbox-kill",
        description = "Kill a sandbox: its container and every process and file in it are gone; the record stays with status killed. Call this when you are done with a sandbox."
    )]
    async fn kill(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SandboxIdBody>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let sandbox = attempt!(
            self.service
                .sandboxes()
                .kill_for(&who, &req.sandbox_id)
                .await
        );
        ok(&SandboxView::from_sandbox(&sandbox, rfc3339))
    }

    #[tool(
        name = "sandbox-remove",
        description = "Delete a sandbox's record, killing it first if it still runs."
    )]
    async fn remove(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SandboxIdBody>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        attempt!(
            self.service
                .sandboxes()
                .remove_for(&who, &req.sandbox_id)
                .await
        );
        ok(&true)
    }

    #[tool(
        name = "sandbox-list",
        description = "List the sandboxes of an environment (environmentId) or of a project (projectId), newest first, with their status and expiry."
    )]
    async fn list(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ListSandboxesQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let scope = attempt!(validate::list_scope(req));
        let sandboxes = attempt!(self.service.sandboxes().list(&who, scope).await);
        let views: Vec<SandboxView> = sandboxes
            .iter()
            .map(|s| SandboxView::from_sandbox(s, rfc3339))
            .collect();
        ok(&views)
    }

    #[tool(
        name = "sandbox-one",
        description = "One sandbox's record: status (creating, running, killed, error), limits, expiry."
    )]
    async fn one(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SandboxIdQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let sandbox = attempt!(
            self.service
                .access()
                .sandbox_for(&who, &req.sandbox_id, SandboxNeed::Read)
                .await
        );
        ok(&SandboxView::from_sandbox(&sandbox, rfc3339))
    }

    #[tool(
        name = "sandbox-exposePort",
        description = "Make a port of a running sandbox reachable in a browser: an app listening on 127.0.0.1:<port> inside it gets a preview URL. Private by default (the URL carries a signed link that expires after ttlSeconds, default 1 h); public: true lets anyone with the URL in. Returns the url to hand to a person."
    )]
    async fn expose_port(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ExposePortRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let cmd = attempt!(validate::expose_port(req));
        let exposed = attempt!(self.service.ports().expose(&who, cmd).await);
        ok(&self.previews.view(&parts.headers, &exposed))
    }

    #[tool(
        name = "sandbox-ports",
        description = "The exposed ports of a sandbox, with their preview URLs and expiry."
    )]
    async fn ports(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SandboxIdQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let exposed = attempt!(
            self.service
                .ports()
                .exposed_ports(&who, &req.sandbox_id)
                .await
        );
        let views: Vec<_> = exposed
            .iter()
            .map(|e| self.previews.view(&parts.headers, e))
            .collect();
        ok(&views)
    }

    #[tool(
        name = "sandbox-unexposePort",
        description = "End a port's exposure: its preview links and public access stop at once."
    )]
    async fn unexpose_port(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<PortRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let (id, port) = attempt!(validate::unexpose_port(req));
        let removed = attempt!(self.service.ports().unexpose(&who, &id, port).await);
        ok(&UnexposedView { port, removed })
    }

    #[tool(
        name = "sandbox-stats",
        description = "A running sandbox's resource use now: cpuPercent (of one CPU; 200 is two CPUs busy) against cpuLimit, memoryBytes against memoryLimitBytes, pids against pidsLimit. Use it to see whether a command is stuck burning CPU or close to the memory limit."
    )]
    async fn stats(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<SandboxIdQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        let stats = attempt!(
            self.service
                .sandboxes()
                .sandbox_stats(&who, &req.sandbox_id)
                .await
        );
        ok(&stats)
    }

    #[tool(
        name = "sandbox-processStart",
        description = "Start a long-running command (sh -c) in the background of a running sandbox, e.g. a server or a build, and get its processId at once. It keeps running after this call; read its output with sandbox-processOutput, wait for it with sandbox-processWait, stop it with sandbox-processSignal. Set stdin: true to write to it with sandbox-processWrite."
    )]
    async fn process_start(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ProcessStartRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-processStart", req);
        let start = attempt!(validate::process_start(req));
        ok(&attempt!(
            self.service.commands().start_process(&who, start).await
        ))
    }

    #[tool(
        name = "sandbox-processList",
        description = "The background processes of a sandbox with their status and exit codes."
    )]
    async fn process_list(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ProcessListQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-processList", req);
        ok(&attempt!(
            self.service
                .commands()
                .list_processes(&who, &req.sandbox_id)
                .await
        ))
    }

    #[tool(
        name = "sandbox-processOutput",
        description = "Read up to 1 MiB of a background process's stdout or stderr from a byte offset (start at 0). The reply's end is the offset to pass next time to continue: page through long output this way. start is later than asked when older output was dropped (the last MiB of each stream is kept)."
    )]
    async fn process_output(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ProcessOutputQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-processOutput", req);
        let id = attempt!(validate::process_id(&req.process_id));
        ok(&attempt!(
            self.service
                .commands()
                .read_process(
                    &who,
                    &req.sandbox_id,
                    &id,
                    req.stream,
                    req.offset,
                    req.encoding
                )
                .await
        ))
    }

    #[tool(
        name = "sandbox-processWait",
        description = "Wait up to timeoutMs (default 30 s, max 10 min) for a background process to end; returns its status and exitCode (status running if it has not ended yet)."
    )]
    async fn process_wait(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ProcessWaitRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-processWait", req);
        let id = attempt!(validate::process_id(&req.process_id));
        let wait =
            std::time::Duration::from_millis(attempt!(validate::process_wait_ms(req.timeout_ms)));
        ok(&attempt!(
            self.service
                .commands()
                .wait_process(&who, &req.sandbox_id, &id, wait)
                .await
        ))
    }

    #[tool(
        name = "sandbox-processSignal",
        description = "Send a signal (TERM by default, KILL, INT, HUP, QUIT, USR1, USR2) to a background process and everything it started."
    )]
    async fn process_signal(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ProcessSignalRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-processSignal", req);
        let id = attempt!(validate::process_id(&req.process_id));
        let signal = attempt!(validate::signal_number(req.signal.as_deref()));
        ok(&attempt!(
            self.service
                .commands()
                .signal_process(&who, &req.sandbox_id, &id, signal)
                .await
        ))
    }

    #[tool(
        name = "sandbox-processWrite",
        description = "Write data to the standard input of a background process started with stdin: true; close: true closes its input after (it then reads end of file)."
    )]
    async fn process_write(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ProcessWriteRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-processWrite", req);
        let id = attempt!(validate::process_id(&req.process_id));
        let data = attempt!(validate::process_data(req.data, req.encoding));
        let written = attempt!(
            self.service
                .commands()
                .write_process(&who, &req.sandbox_id, &id, &data, req.close)
                .await
        );
        ok(&ProcessWriteResult { written })
    }

    #[tool(
        name = "sandbox-contextCreate",
        description = "Start a Python interpreter context in a running sandbox (the image needs python3). Variables, imports and functions persist between sandbox-contextRun calls, as in a notebook."
    )]
    async fn context_create(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ContextCreateRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-contextCreate", req);
        ok(&attempt!(
            self.service
                .commands()
                .create_context(&who, &req.sandbox_id, NewContext::from(&req))
                .await
        ))
    }

    #[tool(
        name = "sandbox-contextRun",
        description = "Run Python code in a context from sandbox-contextCreate. Returns captured stdout and stderr, result (repr of a final expression) and error (exception name, value, traceback). At timeoutMs (default 60 s) the run is interrupted and the context keeps its state."
    )]
    async fn context_run(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ContextRunRequest>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-contextRun", req);
        ok(&attempt!(
            self.service
                .commands()
                .run_in_context(
                    &who,
                    &req.sandbox_id,
                    &req.context_id,
                    &ContextRun::from(&req)
                )
                .await
        ))
    }

    #[tool(
        name = "sandbox-contextRemove",
        description = "End an interpreter context from sandbox-contextCreate: its interpreter stops and its state is gone."
    )]
    async fn context_remove(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<ContextIdBody>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        held_elsewhere!(self, parts, "sandbox-contextRemove", req);
        attempt!(
            self.service
                .commands()
                .remove_context(&who, &req.sandbox_id, &req.context_id)
                .await
        );
        ok(&true)
    }

    #[tool(
        name = "project-all",
        description = "Your projects with their environments. sandbox-create needs an environmentId from here."
    )]
    async fn projects(&self, Extension(parts): Extension<Parts>) -> ToolResult {
        let who = caller(&parts)?;
        let projects = attempt!(self.service.tenancy().projects(&who).await);
        let views: Vec<ProjectView> = projects
            .iter()
            .map(|(project, envs)| crate::routes::projects::project_view(project, envs))
            .collect();
        ok(&views)
    }

    #[tool(
        name = "sandbox-outputPage",
        description = "Read the rest of a long sandbox-exec output (stream stdout or stderr) or sandbox-readFile content (stream content) that did not fit in the reply: give the reply's more.outputId, and offset = more.<stream>.shown for the first page, then the previous page's end, until done is true. limit 1 KiB–256 KiB per page (default 64 KiB). Output is held for 10 minutes."
    )]
    async fn output_page(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(req): Parameters<OutputPageQuery>,
    ) -> ToolResult {
        let who = caller(&parts)?;
        // The same access check as reading the sandbox itself.
        let sandbox = attempt!(
            self.service
                .access()
                .sandbox_for(&who, &req.sandbox_id, SandboxNeed::Read)
                .await
        );
        let page = self.held.page(
            &owner(&who, &sandbox.sandbox_id),
            &req.output_id,
            req.stream,
            req.offset,
            paging::page_limit(req.limit),
        );
        match page {
            Some(page) => ok(&page),
            None => failed(ServiceError::NotFound("held output")),
        }
    }

    #[tool(
        name = "sandbox-templates",
        description = "The built-in templates (base, python, node) with their images, users and working directories."
    )]
    async fn templates(&self, Extension(parts): Extension<Parts>) -> ToolResult {
        caller(&parts)?;
        ok(&self.service.templates().views())
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SandboxTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(sandboxd_core::api::MCP_INSTRUCTIONS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use procedures::{PROCEDURES, Tool};

    /// Tools of MCP's own, with no REST procedure: long output read page by page.
    const MCP_ONLY: [&str; 1] = ["sandbox-outputPage"];

    #[test]
    fn the_tools_are_those_of_the_procedure_table() {
        let tools: std::collections::BTreeSet<String> = (SandboxTools::tool_router()
            + SandboxTools::snapshot_tools()
            + SandboxTools::changes_tools()
            + SandboxTools::volume_tools())
        .list_all()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
        let table: std::collections::BTreeSet<String> = PROCEDURES
            .iter()
            .filter_map(|p| match p.tool {
                Tool::Named(name) => Some(name.to_owned()),
                Tool::Without(_) => None,
            })
            .chain(MCP_ONLY.map(String::from))
            .collect();
        assert_eq!(tools, table);
    }
}

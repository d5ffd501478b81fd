//! A recording engine: every call the service makes is kept in order, and each answer
//! is scripted by the test (by default, everything succeeds).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use sandboxd_contracts::{
    Deaths, Engine, EngineError, EnsuredImage, ExecOutcome, ExecSpec, HostResources, ReadFileError,
};
use sandboxd_core::plan::ContainerPlan;
use sandboxd_core::reconcile::ContainerState;

/// One call the service made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    EnsureImage(String),
    EnsureBridge(String),
    Create(String),
    Start(String),
    Kill(String),
    Destroy(String),
    Remove(String),
    List,
    Exec {
        container: String,
        argv: Vec<String>,
    },
    PutFile(String),
    PutDir(String),
    ReadFile(String),
    IsEmptyDir(String),
    PutArchive(String),
    GetArchive(String),
}

/// What the engine answers.
#[derive(Debug, Default)]
pub struct Script {
    /// Answers of the next execs, in order; an exec with none left exits 0.
    pub exec: VecDeque<Result<ExecOutcome, EngineError>>,
    /// Starts fail (the engine refuses).
    pub start_fails: bool,
    /// Kills fail.
    pub kill_fails: bool,
    /// Destroys fail.
    pub destroy_fails: bool,
    /// Updates of a container's limits fail.
    pub update_fails: bool,
    /// What a listing of sandbox containers returns besides those created.
    pub foreign: Vec<ContainerState>,
    /// Containers created through this engine that no longer exist.
    pub vanished: Vec<String>,
    /// Containers found stopped by an exec (answered `NotRunning`) and not started
    /// since.
    pub stopped: Vec<String>,
    /// Each exec, and each start, waits here for a permit when set (a test's hold).
    pub exec_gate: Option<Arc<tokio::sync::Semaphore>>,
    pub start_gate: Option<Arc<tokio::sync::Semaphore>>,
}

#[derive(Debug, Default)]
pub struct RecordingEngine {
    calls: Mutex<Vec<Call>>,
    pub script: Mutex<Script>,
    /// The plans containers were created from, in order.
    pub plans: Mutex<Vec<ContainerPlan>>,
}

impl RecordingEngine {
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// How many of the calls so far are `what`.
    pub fn count(&self, what: impl Fn(&Call) -> bool) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| what(c))
            .count()
    }

    /// Forgets the calls so far.
    pub fn clear(&self) {
        self.calls.lock().unwrap().clear();
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    fn refused(what: &str) -> EngineError {
        EngineError::Rejected {
            status: 500,
            message: format!("{what} refused by the script"),
        }
    }
}

#[async_trait::async_trait]
impl Engine for RecordingEngine {
    fn api_version(&self) -> String {
        "recording".into()
    }

    async fn runtimes(&self) -> Result<Vec<String>, EngineError> {
        Ok(vec!["runc".into()])
    }

    async fn host(&self) -> Result<HostResources, EngineError> {
        Ok(HostResources {
            cpus: 8,
            memory_bytes: 16 << 30,
        })
    }

    async fn ensure_image(&self, image: &str) -> Result<EnsuredImage, EngineError> {
        self.record(Call::EnsureImage(image.into()));
        // The image names no user: the sandbox runs as root, no lookup needed; no id,
        // so it is never prepared.
        Ok(EnsuredImage::default())
    }

    async fn ensure_bridge(&self, name: &str) -> Result<(), EngineError> {
        self.record(Call::EnsureBridge(name.into()));
        Ok(())
    }

    async fn create_container(&self, plan: &ContainerPlan) -> Result<String, EngineError> {
        let mut plans = self.plans.lock().unwrap();
        plans.push(plan.clone());
        let id = format!("c{}", plans.len());
        self.record(Call::Create(id.clone()));
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        self.record(Call::Start(id.into()));
        let gate = self.script.lock().unwrap().start_gate.clone();
        if let Some(gate) = gate {
            gate.acquire().await.unwrap().forget();
        }
        let mut script = self.script.lock().unwrap();
        match script.start_fails {
            true => Err(Self::refused("start")),
            false => {
                script.stopped.retain(|stopped| stopped != id);
                Ok(())
            }
        }
    }

    async fn kill_container(&self, id: &str) -> Result<(), EngineError> {
        self.record(Call::Kill(id.into()));
        match self.script.lock().unwrap().kill_fails {
            true => Err(Self::refused("kill")),
            false => Ok(()),
        }
    }

    async fn destroy_container(&self, id: &str) -> Result<(), EngineError> {
        self.record(Call::Destroy(id.into()));
        match self.script.lock().unwrap().destroy_fails {
            true => Err(Self::refused("destroy")),
            false => Ok(()),
        }
    }

    async fn container_changes(
        &self,
        _id: &str,
    ) -> Result<Vec<(String, sandboxd_core::api::ChangeKind)>, EngineError> {
        Ok(Vec::new())
    }

    async fn commit_container(
        &self,
        _id: &str,
        _commit: &sandboxd_contracts::Commit,
    ) -> Result<i64, EngineError> {
        Err(Self::refused("commit"))
    }

    async fn remove_image(&self, _image: &str) -> Result<(), EngineError> {
        Ok(())
    }

    async fn create_volume(
        &self,
        _name: &str,
        _labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    async fn remove_volume(&self, _name: &str) -> Result<(), EngineError> {
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        self.record(Call::Remove(id.into()));
        Ok(())
    }

    async fn pause_container(&self, _: &str) -> Result<(), EngineError> {
        Ok(())
    }

    async fn unpause_container(&self, _: &str) -> Result<(), EngineError> {
        Ok(())
    }

    async fn update_limits(&self, _: &str, _: i64, _: i64, _: i64) -> Result<(), EngineError> {
        if self.script.lock().unwrap().update_fails {
            return Err(EngineError::Rejected {
                status: 500,
                message: "cannot update".into(),
            });
        }
        Ok(())
    }

    async fn list_sandbox_containers(
        &self,
        _instance_id: &str,
    ) -> Result<Vec<ContainerState>, EngineError> {
        self.record(Call::List);
        let script = self.script.lock().unwrap();
        let created = self.plans.lock().unwrap();
        let mut listed: Vec<ContainerState> = created
            .iter()
            .enumerate()
            .map(|(n, plan)| ContainerState {
                container_id: format!("c{}", n + 1),
                sandbox_id: plan
                    .labels
                    .get(sandboxd_core::plan::LABEL_SANDBOX_ID)
                    .cloned(),
                running: true,
                paused: false,
            })
            .filter(|c| !script.vanished.contains(&c.container_id))
            .collect();
        listed.extend(script.foreign.iter().cloned());
        Ok(listed)
    }

    async fn is_running(&self, id: &str) -> Result<bool, EngineError> {
        let script = self.script.lock().unwrap();
        Ok(!script
            .vanished
            .iter()
            .chain(&script.stopped)
            .any(|v| v == id))
    }

    fn container_deaths(&self, _instance: &str) -> Deaths {
        Box::pin(futures_util::stream::empty())
    }

    async fn exec(&self, container: &str, spec: ExecSpec) -> Result<ExecOutcome, EngineError> {
        self.record(Call::Exec {
            container: container.into(),
            argv: spec.argv,
        });
        let gate = self.script.lock().unwrap().exec_gate.clone();
        if let Some(gate) = gate {
            gate.acquire().await.unwrap().forget();
        }
        let mut script = self.script.lock().unwrap();
        let answer = script
            .exec
            .pop_front()
            .unwrap_or_else(|| Ok(ExecOutcome::default()));
        if let Err(EngineError::NotRunning) = answer {
            script.stopped.push(container.to_owned());
        }
        answer
    }

    async fn put_file(
        &self,
        container: &str,
        dir: &str,
        name: &str,
        _content: &[u8],
        _mode: u32,
        _owner: (u32, u32),
    ) -> Result<(), EngineError> {
        self.record(Call::PutFile(format!("{container}:{dir}/{name}")));
        Ok(())
    }

    async fn put_dir(
        &self,
        container: &str,
        parent: &str,
        name: &str,
        _owner: (u32, u32),
    ) -> Result<(), EngineError> {
        self.record(Call::PutDir(format!("{container}:{parent}/{name}")));
        Ok(())
    }

    async fn read_file(
        &self,
        container: &str,
        path: &str,
        _max: usize,
        _user: &str,
    ) -> Result<Vec<u8>, ReadFileError> {
        self.record(Call::ReadFile(format!("{container}:{path}")));
        Err(ReadFileError::NotFound)
    }

    async fn is_empty_dir(&self, container: &str, path: &str) -> Result<Option<bool>, EngineError> {
        self.record(Call::IsEmptyDir(format!("{container}:{path}")));
        Ok(Some(true))
    }

    async fn put_archive(
        &self,
        container: &str,
        dir: &str,
        _tar: sandboxd_contracts::Chunks,
        _user: &str,
    ) -> Result<(), EngineError> {
        self.record(Call::PutArchive(format!("{container}:{dir}")));
        Ok(())
    }

    async fn get_archive(
        &self,
        container: &str,
        path: &str,
        _user: &str,
    ) -> Result<sandboxd_contracts::Chunks, EngineError> {
        self.record(Call::GetArchive(format!("{container}:{path}")));
        Err(EngineError::NotFound { what: "path" })
    }
}

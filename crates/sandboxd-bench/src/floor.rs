//! The floor: the same work done directly against the Docker API with bollard, with the
//! same image and hardening (network mode `none`, as a user of the raw API would).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::StartExecResults;
use bollard::models::{ContainerCreateBody, ExecConfig, HostConfig};
use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, RemoveContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt as _;

pub struct Floor {
    docker: Docker,
    image: String,
}

impl Floor {
    pub async fn connect(image: &str) -> anyhow::Result<Self> {
        let docker = Docker::connect_with_local_defaults()?
            .negotiate_version()
            .await?;
        Ok(Self {
            docker,
            image: image.into(),
        })
    }

    fn body(&self) -> ContainerCreateBody {
        let memory = 512 * 1024 * 1024;
        ContainerCreateBody {
            image: Some(self.image.clone()),
            entrypoint: Some(vec![String::new()]),
            cmd: Some(vec!["tail".into(), "-f".into(), "/dev/null".into()]),
            user: Some("1000:1000".into()),
            working_dir: Some("/home/user".into()),
            labels: Some(HashMap::from([(
                "sandboxd.bench".to_owned(),
                "true".to_owned(),
            )])),
            host_config: Some(HostConfig {
                init: Some(true),
                nano_cpus: Some(1_000_000_000),
                memory: Some(memory),
                memory_swap: Some(memory),
                pids_limit: Some(256),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges".into()]),
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Runs `cmd` and returns the time to its first output and its output.
    async fn exec(&self, id: &str, cmd: &[&str]) -> anyhow::Result<(Duration, Vec<u8>)> {
        let started = Instant::now();
        let config = ExecConfig {
            cmd: Some(cmd.iter().map(|s| (*s).to_owned()).collect()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let exec = self.docker.create_exec(id, config).await?;
        let StartExecResults::Attached { mut output, .. } =
            self.docker.start_exec(&exec.id, None).await?
        else {
            bail!("detached exec");
        };
        let mut first = None;
        let mut out = Vec::new();
        while let Some(item) = output.next().await {
            if let LogOutput::StdOut { message } = item? {
                first.get_or_insert_with(|| started.elapsed());
                out.extend_from_slice(&message);
            }
        }
        let done = self.docker.inspect_exec(&exec.id).await?;
        if done.exit_code != Some(0) {
            bail!("{cmd:?} exited with {:?}", done.exit_code);
        }
        Ok((first.unwrap_or_else(|| started.elapsed()), out))
    }

    pub async fn create_and_echo(&self) -> anyhow::Result<(String, Duration)> {
        let started = Instant::now();
        let id = self.docker.create_container(None, self.body()).await?.id;
        self.docker.start_container(&id, None).await?;
        let (_, out) = self.exec(&id, &["sh", "-c", "echo hi"]).await?;
        let took = started.elapsed();
        if out != b"hi\n" {
            bail!("unexpected output");
        }
        Ok((id, took))
    }

    /// A container of `image` (as [`Floor::create_and_echo`] makes them), started, and
    /// `echo hi` run in it.
    pub async fn create_from_and_echo(&self, image: &str) -> anyhow::Result<(String, Duration)> {
        let started = Instant::now();
        let body = ContainerCreateBody {
            image: Some(image.to_owned()),
            ..self.body()
        };
        let id = self.docker.create_container(None, body).await?.id;
        self.docker.start_container(&id, None).await?;
        let (_, out) = self.exec(&id, &["sh", "-c", "echo hi"]).await?;
        if out != b"hi\n" {
            bail!("unexpected output");
        }
        Ok((id, started.elapsed()))
    }

    /// A gVisor container (`runsc`), as [`Floor::create_and_echo`] makes them with 1 GiB
    /// of memory, running the Python program `program` as its main process, once it
    /// holds 256 MiB.
    pub async fn create_gvisor_holding(&self, program: &str) -> anyhow::Result<String> {
        let mut body = self.body();
        body.cmd = Some(vec!["python3".into(), "-c".into(), program.into()]);
        if let Some(host) = body.host_config.as_mut() {
            host.runtime = Some("runsc".into());
            host.memory = Some(1 << 30);
            host.memory_swap = Some(1 << 30);
            // gVisor's own init; Docker's would be a second one.
            host.init = Some(false);
        }
        let id = self.docker.create_container(None, body).await?.id;
        self.docker.start_container(&id, None).await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let stats = self
                .docker
                .stats(
                    &id,
                    Some(
                        bollard::query_parameters::StatsOptionsBuilder::default()
                            .stream(false)
                            .build(),
                    ),
                )
                .next()
                .await
                .context("stats")??;
            let used = stats.memory_stats.and_then(|m| m.usage).unwrap_or(0);
            if used >= 256 << 20 {
                return Ok(id);
            }
            if Instant::now() > deadline {
                bail!("the container holds only {used} bytes");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The engine's checkpoint of a running container (stopped by it), then its start
    /// from that checkpoint and `true` run in it: how long each took.
    pub async fn checkpoint_and_restore(&self, id: &str) -> anyhow::Result<(Duration, Duration)> {
        let started = Instant::now();
        self.docker
            .create_checkpoint(
                id,
                bollard::container::CreateCheckpointOptions {
                    checkpoint_id: "bench".into(),
                    checkpoint_dir: None,
                    exit: true,
                },
            )
            .await?;
        // The engine answers before it records the container stopped; a start before
        // that would be a no-op (as sandboxd, it waits).
        while self
            .docker
            .inspect_container(id, None)
            .await?
            .state
            .and_then(|state| state.running)
            .unwrap_or(false)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let saved = started.elapsed();
        let started = Instant::now();
        // bollard's start has no checkpoint: the query is added to its request.
        let docker = self.docker.clone().with_request_modifier(|mut request| {
            let uri = format!("{}?checkpoint=bench", request.uri());
            if let Ok(uri) = uri.parse() {
                *request.uri_mut() = uri;
            }
            request
        });
        // The engine refuses a start from a checkpoint now and then for a race of its own
        // (two uploads of the checkpoint's small file to containerd); tried again, it
        // passes, as sandboxd tries it.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match docker.start_container(id, None).await {
                Ok(()) => break,
                Err(error) if attempt < 4 && error.to_string().contains("already exists") => {
                    tokio::time::sleep(Duration::from_millis(100) * attempt).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
        self.exec(id, &["true"]).await?;
        Ok((saved, started.elapsed()))
    }

    /// Runs a shell line in the container, to its end.
    pub async fn shell(&self, id: &str, line: &str) -> anyhow::Result<()> {
        self.exec(id, &["sh", "-c", line]).await.map(|_| ())
    }

    /// The engine's commit of the container (frozen while it is read) as a labelled
    /// image: its id and how long it took.
    pub async fn commit(&self, id: &str) -> anyhow::Result<(String, Duration)> {
        let started = Instant::now();
        let options = bollard::query_parameters::CommitContainerOptionsBuilder::default()
            .container(id)
            .pause(true)
            .build();
        let config = bollard::models::ContainerConfig {
            labels: Some(HashMap::from([(
                "sandboxd.bench".to_owned(),
                "true".to_owned(),
            )])),
            ..Default::default()
        };
        let image = self.docker.commit_container(options, config).await?;
        let took = started.elapsed();
        Ok((image.id, took))
    }

    /// Removes an image (its containers must be gone).
    pub async fn remove_image(&self, image: &str) -> anyhow::Result<()> {
        let options = bollard::query_parameters::RemoveImageOptionsBuilder::default()
            .force(true)
            .build();
        self.docker.remove_image(image, Some(options), None).await?;
        Ok(())
    }

    /// `echo hi` through the engine's exec: the time to its first output.
    pub async fn first_output(&self, id: &str) -> anyhow::Result<Duration> {
        Ok(self.exec(id, &["sh", "-c", "echo hi"]).await?.0)
    }

    /// The engine's pause then unpause of the container: how long each took.
    pub async fn pause_resume(&self, id: &str) -> anyhow::Result<(Duration, Duration)> {
        let started = Instant::now();
        self.docker.pause_container(id).await?;
        let pause = started.elapsed();
        let started = Instant::now();
        self.docker.unpause_container(id).await?;
        Ok((pause, started.elapsed()))
    }

    pub async fn exec_true(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.exec(id, &["sh", "-c", "true"]).await?;
        Ok(started.elapsed())
    }

    pub async fn write_read(&self, id: &str, payload: &[u8]) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let mut header = tar::Header::new_gnu();
        header.set_size(payload.len() as u64);
        header.set_mode(0o644);
        header.set_uid(1000);
        header.set_gid(1000);
        let mut builder = tar::Builder::new(Vec::new());
        builder.append_data(&mut header, "bench.bin", payload)?;
        let tar = builder.into_inner()?;
        let upload = UploadToContainerOptionsBuilder::default()
            .path("/tmp")
            .build();
        self.docker
            .upload_to_container(
                id,
                Some(upload),
                bollard::body_full(bytes::Bytes::from(tar)),
            )
            .await?;
        let download = DownloadFromContainerOptionsBuilder::default()
            .path("/tmp/bench.bin")
            .build();
        let mut stream = self.docker.download_from_container(id, Some(download));
        let mut archive = Vec::new();
        while let Some(chunk) = stream.next().await {
            archive.extend_from_slice(&chunk?);
        }
        let mut reader = tar::Archive::new(archive.as_slice());
        let mut entry = reader.entries()?.next().context("empty archive")??;
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut content)?;
        let took = started.elapsed();
        if content.len() != payload.len() {
            bail!("read back {} bytes", content.len());
        }
        Ok(took)
    }

    pub async fn remove(&self, id: &str) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let options = RemoveContainerOptionsBuilder::default().force(true).build();
        self.docker.remove_container(id, Some(options)).await?;
        Ok(started.elapsed())
    }

    /// Lists the containers with `label` (what a reconcile pass asks the engine for).
    pub async fn list_labelled(&self, label: &str) -> anyhow::Result<(usize, Duration)> {
        let started = Instant::now();
        let filters = HashMap::from([("label", vec![label.to_owned()])]);
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let list = self.docker.list_containers(Some(options)).await?;
        Ok((list.len(), started.elapsed()))
    }

    /// Force-removes every container with `label`.
    pub async fn remove_labelled(&self, label: &str) {
        let filters = HashMap::from([("label", vec![label.to_owned()])]);
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let Ok(list) = self.docker.list_containers(Some(options)).await else {
            return;
        };
        for id in list.into_iter().filter_map(|c| c.id) {
            let _ = self.remove(&id).await;
        }
        // The volumes a server made.
        let options = bollard::query_parameters::ListVolumesOptionsBuilder::default()
            .filters(&filters)
            .build();
        if let Ok(listed) = self.docker.list_volumes(Some(options)).await {
            for volume in listed.volumes.unwrap_or_default() {
                let _ = self
                    .docker
                    .remove_volume(
                        &volume.name,
                        None::<bollard::query_parameters::RemoveVolumeOptions>,
                    )
                    .await;
            }
        }
        // And the images: commits of the floor, snapshots of a server.
        let options = bollard::query_parameters::ListImagesOptionsBuilder::default()
            .filters(&filters)
            .build();
        let Ok(images) = self.docker.list_images(Some(options)).await else {
            return;
        };
        for image in images {
            let _ = self.remove_image(&image.id).await;
        }
    }
}

//! An image prepared for sandboxes: the image with a sandbox's workdir made and owned by
//! its user, and every setting of the image kept, under a name of sandboxd's, so that no
//! create pays the engine for the workdir again. It is made by the engine's builder from
//! `FROM <the image's id>` and one `ADD` of an archive holding the directory (extracted
//! with its owner and mode; missing parents are made as root): no program of the image
//! runs, and the builder removes what it made on the way, even when the server goes away
//! before it ends.

use std::time::Duration;

use bollard::query_parameters::BuildImageOptionsBuilder;
use bytes::Bytes;

use crate::archive::entry_tar;
use crate::engine::DockerEngine;
use crate::error::EngineError;

/// How long the build may take: it adds one directory entry.
const BUILD_TIMEOUT: Duration = Duration::from_secs(120);

/// The archive the builder gets: the Dockerfile and the directory's own archive.
fn context(image_id: &str, workdir: &str, owner: (u32, u32)) -> std::io::Result<Vec<u8>> {
    let dir = workdir.trim_start_matches('/');
    let workdir_tar = entry_tar(
        &format!("{dir}/"),
        tar::EntryType::Directory,
        &[],
        0o755,
        owner,
    )?;
    let dockerfile = format!("FROM {image_id}\nADD workdir.tar /\n");
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content) in [
        ("Dockerfile", dockerfile.as_bytes()),
        ("workdir.tar", workdir_tar.as_slice()),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, name, content)?;
    }
    builder.into_inner()
}

impl DockerEngine {
    pub(crate) async fn prepare_image(
        &self,
        image: &str,
        target: &str,
        workdir: &str,
        owner: (u32, u32),
    ) -> Result<(), EngineError> {
        if self.image_facts(target).await?.is_some() {
            return Ok(());
        }
        // By its id (the caller names it so: the image the target's name was made of).
        let id = self
            .image_facts(image)
            .await?
            .ok_or(EngineError::NotFound { what: "image" })?
            .id;
        let context = context(&id, workdir, owner).map_err(|e| EngineError::Rejected {
            status: 400,
            message: format!("cannot archive {workdir}: {e}"),
        })?;
        let options = BuildImageOptionsBuilder::default()
            .t(target)
            .rm(true)
            .forcerm(true)
            .networkmode("none")
            .q(true)
            .build();
        let what = format!("prepare {image}");
        let build = crate::progress::follow(
            self.docker.build_image(
                options,
                None,
                Some(bollard::body_full(Bytes::from(context))),
            ),
            &what,
        );
        tokio::time::timeout(BUILD_TIMEOUT, build)
            .await
            .map_err(|_| EngineError::Timeout { call: "build" })?
    }
}

//! Streamed archives through the engine's archive API: a tar stream in, unpacked as it
//! arrives, and a tar stream out. The engine answers an upload only once it has unpacked
//! all of it, so uploads use a client without the request deadline: the caller bounds
//! the stream itself (it is cut when it stops flowing).

use std::time::Duration;

use bollard::query_parameters::UploadToContainerOptionsBuilder;
use futures_util::{StreamExt, TryStreamExt};
use sandboxd_ports::Chunks;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, classify, message_of, status_of};

/// How long an upload may take in all; the caller's idle deadline is what cuts a stalled
/// one.
const UPLOAD_DEADLINE: Duration = Duration::from_secs(24 * 3600);

impl DockerEngine {
    pub(crate) async fn put_archive(
        &self,
        container: &str,
        dir: &str,
        tar: Chunks,
    ) -> Result<(), EngineError> {
        let options = UploadToContainerOptionsBuilder::default().path(dir).build();
        let docker = self.docker.clone().with_timeout(UPLOAD_DEADLINE);
        docker
            .upload_to_container(container, Some(options), bollard::body_try_stream(tar))
            .await
            .map_err(|e| match (status_of(&e), message_of(&e)) {
                (Some(500), message) if message.contains("not a directory") => {
                    EngineError::Rejected {
                        status: 400,
                        message: format!("{dir} is not a directory"),
                    }
                }
                (Some(404), _) => EngineError::NotFound { what: "directory" },
                // What the engine could not unpack (a read-only place, a file where a
                // directory is, an archive it cannot read) is the request's fault.
                (Some(status), message) => EngineError::Rejected {
                    status: if status >= 500 { 400 } else { status },
                    message,
                },
                _ => classify("directory", e),
            })
    }

    pub(crate) async fn get_archive(
        &self,
        container: &str,
        path: &str,
    ) -> Result<Chunks, EngineError> {
        let mut stream = Box::pin(self.download(container, path));
        let first = match bounded("download archive", stream.next()).await? {
            None => return Ok(Box::pin(futures_util::stream::empty())),
            Some(Err(e)) if status_of(&e) == Some(404) => {
                return Err(EngineError::NotFound { what: "path" });
            }
            Some(Err(e)) => return Err(classify("path", e)),
            Some(Ok(chunk)) => chunk,
        };
        let rest = stream.map_err(std::io::Error::other);
        Ok(Box::pin(
            futures_util::stream::once(async move { Ok(first) }).chain(rest),
        ))
    }
}

//! `sandboxd cp`: files and trees between this machine and a sandbox, streamed both ways
//! (`sandbox.upload` / `sandbox.download`), with a progress line on a terminal. A
//! sandbox side is written `SANDBOX_ID:/path`. What comes out of a sandbox is untrusted:
//! a tree is unpacked as `unpack.rs` says (staged, modes masked, only the named entry
//! moved into place), and a file lands under a temporary name, renamed once whole.
//!
//! A local tree is tarred on a blocking thread as it is sent.

use std::io::{IsTerminal as _, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::client::{Client, Failure};
use super::table;

/// One side of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Local(PathBuf),
    Sandbox { id: String, path: String },
}

/// `ID:/path` is a sandbox's (an id has no `/`); anything else is a local path.
pub fn place(text: &str) -> Place {
    match text.split_once(':') {
        Some((id, path)) if !id.is_empty() && !id.contains('/') && path.starts_with('/') => {
            Place::Sandbox {
                id: id.to_owned(),
                path: path.to_owned(),
            }
        }
        _ => Place::Local(PathBuf::from(text)),
    }
}

/// Bytes moved so far, shown on stderr when it is a terminal.
struct Progress {
    total: Option<u64>,
    done: u64,
    shown: Instant,
    on: bool,
}

impl Progress {
    fn new(total: Option<u64>) -> Self {
        Self {
            total,
            done: 0,
            shown: Instant::now(),
            on: std::io::stderr().is_terminal(),
        }
    }

    fn add(&mut self, bytes: usize) {
        self.done += bytes as u64;
        if self.on && self.shown.elapsed() > Duration::from_millis(100) {
            self.shown = Instant::now();
            self.show();
        }
    }

    fn show(&self) {
        let line = match self.total {
            Some(total) if total > 0 => format!(
                "{} / {} ({}%)",
                table::size(self.done),
                table::size(total),
                self.done * 100 / total
            ),
            _ => table::size(self.done),
        };
        eprint!("\r\x1b[2K{line}");
    }

    fn finish(&self) {
        if self.on {
            self.show();
            eprintln!();
        }
    }
}

/// Copies `from` to `to`; what was copied, as the API reported it.
pub async fn copy(client: &Client, from: &str, to: &str) -> Result<Value, Failure> {
    match (place(from), place(to)) {
        (Place::Local(local), Place::Sandbox { id, path }) => {
            upload(client, &local, &id, &path).await
        }
        (Place::Sandbox { id, path }, Place::Local(local)) => {
            download(client, &id, &path, &local).await
        }
        _ => Err(Failure::Refused(
            "one side must be a sandbox (SANDBOX_ID:/path) and the other a local path".into(),
        )),
    }
}

fn local_error(what: &str, path: &Path, error: impl std::fmt::Display) -> Failure {
    Failure::Refused(format!("{what} {}: {error}", path.display()))
}

async fn upload(client: &Client, local: &Path, id: &str, path: &str) -> Result<Value, Failure> {
    let meta = std::fs::metadata(local).map_err(|e| local_error("cannot read", local, e))?;
    let request = client.request("sandbox.upload")?;
    if meta.is_dir() {
        let (stream, progress) = tar_stream(local.to_path_buf());
        let body = reqwest::Body::wrap_stream(stream);
        let answer = client
            .send(
                request
                    .query(&[("sandboxId", id), ("path", path), ("format", "tar")])
                    .header("content-type", "application/x-tar")
                    .body(body),
            )
            .await;
        progress.await.ok();
        return answer;
    }
    let name = local
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = if path.ends_with('/') {
        format!("{path}{name}")
    } else {
        path.to_owned()
    };
    let mode = format!(
        "{:o}",
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777
    );
    let file = tokio::fs::File::open(local)
        .await
        .map_err(|e| local_error("cannot read", local, e))?;
    let mut progress = Progress::new(Some(meta.len()));
    let stream =
        tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024).inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                progress.add(chunk.len());
                if progress.total == Some(progress.done) {
                    progress.finish();
                }
            }
        });
    client
        .send(
            request
                .query(&[
                    ("sandboxId", id),
                    ("path", target.as_str()),
                    ("mode", mode.as_str()),
                ])
                .header("content-type", "application/octet-stream")
                .header("content-length", meta.len())
                .body(reqwest::Body::wrap_stream(stream)),
        )
        .await
}

/// A tar of `dir`'s contents, made on a blocking thread as it is sent.
fn tar_stream(
    dir: PathBuf,
) -> (
    impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    tar_stream_of(move |builder| builder.append_dir_all(".", &dir))
}

/// A tar that `fill` makes (links kept as links), made on a blocking thread as it is
/// sent, with a progress line on a terminal.
pub fn tar_stream_of(
    fill: impl FnOnce(&mut tar::Builder<ChannelWriter>) -> std::io::Result<()> + Send + 'static,
) -> (
    impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send + 'static,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(8);
    let task = tokio::task::spawn_blocking(move || {
        let writer = ChannelWriter {
            tx: tx.clone(),
            buffer: Vec::with_capacity(CHUNK),
            progress: Progress::new(None),
        };
        let mut builder = tar::Builder::new(writer);
        builder.follow_symlinks(false);
        let made = fill(&mut builder)
            .and_then(|()| builder.into_inner())
            .and_then(|mut writer| {
                writer.flush()?;
                writer.progress.finish();
                Ok(())
            });
        if let Err(error) = &made {
            let _ = tx.blocking_send(Err(std::io::Error::other(error.to_string())));
        }
        made
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    (stream, task)
}

const CHUNK: usize = 256 * 1024;

/// A `Write` whose bytes go to an async channel, a chunk at a time.
pub struct ChannelWriter {
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    buffer: Vec<u8>,
    progress: Progress,
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(data);
        if self.buffer.len() >= CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(CHUNK),
        ));
        self.progress.add(chunk.len());
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::other("the upload stopped"))
    }
}

/// A `Read` over chunks from an async channel.
struct ChannelReader {
    rx: mpsc::Receiver<std::io::Result<Bytes>>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk?,
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

async fn download(client: &Client, id: &str, path: &str, local: &Path) -> Result<Value, Failure> {
    let response = client
        .answer(
            client
                .request("sandbox.download")?
                .query(&[("sandboxId", id), ("path", path)]),
        )
        .await?;
    let format = response
        .headers()
        .get("x-sandboxd-format")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("raw")
        .to_owned();
    let total = response.content_length();
    let mut progress = Progress::new(total);
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(8);
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    let local = local.to_path_buf();
    let writer = tokio::task::spawn_blocking(move || {
        let reader = ChannelReader {
            rx,
            current: Bytes::new(),
        };
        if format == "tar" {
            super::unpack::unpack_tree(reader, &local, &name)
        } else {
            write_file(reader, &local, &name, total)
        }
    });
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| Failure::Unavailable(format!("the download was cut: {e}")));
        let failed = chunk.is_err();
        if let Ok(chunk) = &chunk {
            progress.add(chunk.len());
        }
        if tx
            .send(chunk.map_err(|e| std::io::Error::other(e.to_string())))
            .await
            .is_err()
            || failed
        {
            break;
        }
    }
    drop(tx);
    progress.finish();
    let written = writer
        .await
        .map_err(|e| Failure::Unavailable(e.to_string()))?
        .map_err(|e| Failure::Refused(e.to_string()))?;
    Ok(json!({"path": written.0.display().to_string(), "bytes": written.1}))
}

/// Where a copy out lands: into `local` when it is a directory, else as `local`.
fn destination(local: &Path, name: &std::ffi::OsStr) -> PathBuf {
    if local.is_dir() {
        local.join(name)
    } else {
        local.to_path_buf()
    }
}

/// Writes one file under a temporary name, renamed once whole (and as long as the
/// server said).
fn write_file(
    mut reader: ChannelReader,
    local: &Path,
    name: &std::ffi::OsStr,
    total: Option<u64>,
) -> std::io::Result<(PathBuf, u64)> {
    let target = destination(local, name);
    let dir = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    let copied = std::io::copy(&mut reader, temp.as_file_mut())?;
    if total.is_some_and(|total| total != copied) {
        return Err(std::io::Error::other(format!(
            "the download ended after {copied} of {} bytes",
            total.unwrap_or_default()
        )));
    }
    temp.as_file().sync_all()?;
    temp.persist(&target).map_err(|e| e.error)?;
    Ok((target, copied))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_side_has_an_id_and_an_absolute_path() {
        assert_eq!(
            place("sbx1:/home/user/a"),
            Place::Sandbox {
                id: "sbx1".into(),
                path: "/home/user/a".into()
            }
        );
        assert_eq!(place("./a:b"), Place::Local("./a:b".into()));
        assert_eq!(place("dir/x:/y"), Place::Local("dir/x:/y".into()));
        assert_eq!(place("C:relative"), Place::Local("C:relative".into()));
    }
}

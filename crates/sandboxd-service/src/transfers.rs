//! `sandbox.upload` and `sandbox.download`: streamed transfers of any size up to the
//! transfer cap, with constant memory. They go through the engine's archive API on the
//! sandbox's server, checked on the way (`sandboxd_core::transfer`): an upload is one
//! file (its length known up front) or a tar of a tree, every entry owned by the sandbox
//! user; a download is one file's bytes or a tar of a directory. A file upload lands
//! under a temporary name and is renamed into place only once whole, so a failed or cut
//! upload leaves no partial file. A stream that stops flowing for a minute is cut.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::api::{TransferFormat, UploadResult};
use sandboxd_core::limits::{DEFAULT_MAX_TRANSFER_BYTES, MAX_TRANSFER_ENTRIES, TRANSFER_IDLE_SECS};
use sandboxd_core::model::Principal;
use sandboxd_core::paths;
use sandboxd_core::transfer::{self, FileOut, TarIn, TarPolicy, TransferRefused};
use sandboxd_core::validate::Upload;
use sandboxd_ports::{Chunks, EngineError, ExecSpec};

use super::executor::Executor;
use super::{Service, ServiceError, internal_exec, now_ms};

/// A download under way: its shape, a file's size, and its bytes.
pub struct Download {
    pub format: TransferFormat,
    /// A file's size (raw); a tar's is not known before it ends.
    pub size: Option<u64>,
    pub body: Chunks,
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Download")
            .field("format", &self.format)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

fn refused(refusal: TransferRefused) -> ServiceError {
    match refusal {
        TransferRefused::OverCap { .. } | TransferRefused::TooManyEntries { .. } => {
            ServiceError::TooLarge(refusal.to_string())
        }
        other => ServiceError::Refused(other.to_string()),
    }
}

/// `stream`, cut with an error when no chunk comes for [`TRANSFER_IDLE_SECS`].
fn with_idle_deadline(stream: Chunks) -> Chunks {
    let idle = Duration::from_secs(TRANSFER_IDLE_SECS);
    Box::pin(stream::unfold(stream, move |mut stream| async move {
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(item)) => Some((item, stream)),
            Ok(None) => None,
            Err(_) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no bytes for {TRANSFER_IDLE_SECS} s"),
                )),
                stream,
            )),
        }
    }))
}

/// A command through the engine as the sandbox user, or as root (`Some("0:0")`).
fn engine_command(argv: &[&str], user: Option<&str>) -> ExecSpec {
    let mut spec = internal_exec(argv.iter().map(|a| (*a).to_owned()).collect(), 4096);
    spec.user = user.map(str::to_owned);
    spec
}

impl Service {
    /// Runs `argv` (a rename or a clean-up of an upload) as the sandbox user, then, if
    /// that was refused, as root: sandboxes run without the capability that lets root
    /// write in another user's directory, so the directory's owner is the one who can.
    async fn as_user_then_root(
        &self,
        executor: &Executor<'_>,
        argv: &[&str],
    ) -> Result<(), String> {
        let mut reason = String::new();
        for user in [None, Some("0:0")] {
            match self
                .engine_exec(
                    executor.engine(),
                    executor.container(),
                    engine_command(argv, user),
                )
                .await
            {
                Ok(out) if out.exit_code == 0 => return Ok(()),
                Ok(out) => reason = String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                Err(error) => reason = error.to_string(),
            }
        }
        Err(reason)
    }

    /// The transfer cap in force.
    fn transfer_cap(&self) -> u64 {
        self.inner
            .options
            .max_transfer_bytes
            .unwrap_or(DEFAULT_MAX_TRANSFER_BYTES)
    }

    /// Streams `body` into the sandbox (see the module's text); `length` is the body's
    /// length when the client sent it (required for a raw file).
    pub async fn upload(
        &self,
        caller: &Principal,
        cmd: Upload,
        length: Option<u64>,
        body: Chunks,
    ) -> Result<UploadResult, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        let executor = self.executor(&sandbox).await?;
        let cap = self.transfer_cap();
        let cut = Cut::default();
        let body = cut.watch(with_idle_deadline(body));
        let uploaded = match cmd.format {
            TransferFormat::Raw => {
                let (dir, name) = paths::split_file(&cmd.path)
                    .ok_or_else(|| ServiceError::Refused("path must point to a file".into()))?;
                let length = length.ok_or_else(|| {
                    ServiceError::Refused(
                        "a file upload needs its length (Content-Length); send a tar to stream one of unknown length".into(),
                    )
                })?;
                if length > cap {
                    return Err(ServiceError::TooLarge(format!(
                        "the transfer is larger than the limit of {cap} bytes"
                    )));
                }
                executor.ensure_dir(dir).await?;
                let temp = format!(
                    ".{name}.sandboxd-upload-{}",
                    &sandboxd_store::new_id()?[..12]
                );
                let header = transfer::raw_entry(
                    &temp,
                    length,
                    cmd.mode.unwrap_or(0o644),
                    executor.owner(),
                    (now_ms() / 1000).max(0) as u64,
                );
                let mut seen = 0u64;
                let content = body.map(move |chunk| {
                    let chunk = chunk?;
                    seen += chunk.len() as u64;
                    if seen > length {
                        return Err(std::io::Error::other("the body is longer than its length"));
                    }
                    Ok(chunk)
                });
                let trailer =
                    vec![0u8; (transfer::padded(length) - length) as usize + 2 * transfer::BLOCK];
                let tar: Chunks = Box::pin(
                    stream::once(async move { Ok(Bytes::from(header)) })
                        .chain(content)
                        .chain(stream::once(async move { Ok(Bytes::from(trailer)) })),
                );
                let temp_path = format!("{}/{temp}", dir.trim_end_matches('/'));
                let put = executor
                    .engine()
                    .put_archive(executor.container(), dir, tar)
                    .await;
                let placed = match put {
                    Ok(()) => self
                        .as_user_then_root(&executor, &["mv", "-f", "--", &temp_path, &cmd.path])
                        .await
                        .map_err(|reason| {
                            ServiceError::Refused(format!(
                                "could not move the upload into place: {reason}"
                            ))
                        }),
                    Err(error) => Err(cut.or(upload_error(error))),
                };
                if let Err(error) = placed {
                    // Nothing partial stays behind.
                    let _ = self
                        .as_user_then_root(&executor, &["rm", "-f", "--", &temp_path])
                        .await;
                    return Err(error);
                }
                UploadResult {
                    path: cmd.path,
                    entries: 1,
                    bytes: length,
                }
            }
            TransferFormat::Tar => {
                executor.ensure_dir(&cmd.path).await?;
                let policy = TarPolicy {
                    owner: executor.owner(),
                    max_bytes: cap,
                    max_entries: MAX_TRANSFER_ENTRIES,
                };
                let checked = CheckedTar::new(policy);
                let tar = checked.clone().wrap(body);
                let put = executor
                    .engine()
                    .put_archive(executor.container(), &cmd.path, tar)
                    .await;
                if let Some(refusal) = checked.refusal() {
                    return Err(refused(refusal));
                }
                put.map_err(|error| cut.or(upload_error(error)))?;
                let summary = checked.summary();
                UploadResult {
                    path: cmd.path,
                    entries: summary.entries,
                    bytes: summary.bytes,
                }
            }
        };
        self.while_touching(&sandbox.sandbox_id, std::future::ready(()))
            .await;
        Ok(uploaded)
    }

    /// Streams a file's bytes (raw) or a directory's tar out of the sandbox; `None` as
    /// the format picks by what `path` is.
    pub async fn download(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        path: &str,
        format: Option<TransferFormat>,
    ) -> Result<Download, ServiceError> {
        let sandbox = self
            .sandbox_for(caller, sandbox_id, SandboxNeed::Read)
            .await?;
        let executor = self.executor(&sandbox).await?;
        let cap = self.transfer_cap();
        let archive = executor
            .engine()
            .get_archive(executor.container(), path)
            .await
            .map_err(|error| match error {
                EngineError::NotFound { .. } => ServiceError::NotFound("path"),
                other => other.into(),
            })?;
        self.while_touching(&sandbox.sandbox_id, std::future::ready(()))
            .await;
        if format == Some(TransferFormat::Tar) {
            return Ok(Download {
                format: TransferFormat::Tar,
                size: None,
                body: capped(with_idle_deadline(archive), cap),
            });
        }
        let mut archive = with_idle_deadline(archive);
        let mut reader = FileOut::new(cap);
        let mut first = Vec::new();
        // What was read before the file's header: a directory's tar starts with it.
        let mut read = Vec::new();
        let size = loop {
            let chunk = archive
                .next()
                .await
                .ok_or_else(|| ServiceError::Refused("the engine's archive ended early".into()))?
                .map_err(|e| ServiceError::Refused(format!("the download failed: {e}")))?;
            read.push(chunk.clone());
            match reader.push(chunk, &mut first) {
                Ok(()) => {
                    if let Some(size) = reader.size() {
                        break size;
                    }
                }
                Err(TransferRefused::NotAFile(_)) if format.is_none() => {
                    let body = stream::iter(read.into_iter().map(Ok)).chain(archive);
                    return Ok(Download {
                        format: TransferFormat::Tar,
                        size: None,
                        body: capped(Box::pin(body), cap),
                    });
                }
                Err(refusal) => return Err(refused(refusal)),
            }
        };
        drop(read);
        let reader = Arc::new(Mutex::new(reader));
        let rest = archive.map(move |chunk| {
            let mut out = Vec::new();
            let mut reader = reader.lock().unwrap_or_else(|e| e.into_inner());
            reader
                .push(chunk?, &mut out)
                .map_err(std::io::Error::other)?;
            Ok::<_, std::io::Error>(stream::iter(out.into_iter().map(Ok)))
        });
        let body = stream::iter(first.into_iter().map(Ok)).chain(rest.try_flatten());
        Ok(Download {
            format: TransferFormat::Raw,
            size: Some(size),
            body: Box::pin(body),
        })
    }
}

/// The first failure of an upload's body (the client went away, or sent nothing for a
/// minute), kept to tell it from the engine's own.
#[derive(Clone, Default)]
struct Cut(Arc<Mutex<Option<String>>>);

impl Cut {
    fn watch(&self, body: Chunks) -> Chunks {
        let seen = self.clone();
        Box::pin(body.inspect_err(move |error| {
            let mut first = seen.0.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| error.to_string());
        }))
    }

    /// The cut, when there was one, else `error`.
    fn or(&self, error: ServiceError) -> ServiceError {
        match self.0.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            Some(reason) => ServiceError::Refused(format!("the upload was cut: {reason}")),
            None => error,
        }
    }
}

/// An upload the engine could not unpack.
fn upload_error(error: EngineError) -> ServiceError {
    match error {
        EngineError::NotFound { .. } => ServiceError::NotFound("directory"),
        other => other.into(),
    }
}

/// `stream`, cut with an error past `cap` bytes.
fn capped(stream: Chunks, cap: u64) -> Chunks {
    let mut seen = 0u64;
    Box::pin(stream.map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len() as u64;
        if seen > cap {
            return Err(std::io::Error::other(format!(
                "the transfer is larger than the limit of {cap} bytes"
            )));
        }
        Ok(chunk)
    }))
}

/// An upload's tar checked as it passes, keeping why it was refused.
#[derive(Clone)]
struct CheckedTar {
    state: Arc<Mutex<(TarIn, Option<TransferRefused>)>>,
}

impl CheckedTar {
    fn new(policy: TarPolicy) -> Self {
        Self {
            state: Arc::new(Mutex::new((TarIn::new(policy), None))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (TarIn, Option<TransferRefused>)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refusal(&self) -> Option<TransferRefused> {
        self.lock().1.clone()
    }

    fn summary(&self) -> transfer::TarSummary {
        self.lock().0.summary()
    }

    /// The rewritten stream of `body`; a refusal ends it with an error.
    fn wrap(self, body: Chunks) -> Chunks {
        let checked = body
            .map(Some)
            .chain(stream::once(async { None }))
            .map(move |item| {
                let mut out = Vec::new();
                let mut state = self.lock();
                let (tar, refusal) = &mut *state;
                let done = match item {
                    Some(Ok(chunk)) => tar.push(chunk, &mut out),
                    Some(Err(error)) => return Err(error),
                    None => tar.finish(&mut out).map(|_| ()),
                };
                if let Err(error) = done {
                    *refusal = Some(error.clone());
                    return Err(std::io::Error::other(error));
                }
                Ok(stream::iter(out.into_iter().map(Ok)))
            });
        Box::pin(checked.try_flatten())
    }
}

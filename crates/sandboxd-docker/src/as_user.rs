//! Files and archives as the sandbox user. The engine's archive API acts as root inside
//! the container (it follows links, scoped only to the container's root), so a read or
//! a write through it could reach what the sandbox user cannot: `/etc/shadow`, a
//! root-owned file. Instead `tar` runs through the engine's exec under the sandbox's
//! `uid:gid`, its archive streamed through the exec's stdin or stdout, and the kernel
//! decides what it may read and write, as it does for the agent.

use std::sync::{Arc, Mutex};

use bollard::container::LogOutput;
use bollard::models::ExecConfig;
use bytes::Bytes;
use futures_util::StreamExt as _;
use sandboxd_contracts::Chunks;
use sandboxd_core::plan::AGENT_KEY_VAR;
use tokio::io::AsyncWriteExt as _;

use crate::engine::{DockerEngine, bounded};
use crate::error::{EngineError, fault};
use crate::exec::{ExecInput as Input, ExecOutput as Output};

/// How long `tar` may take to finish unpacking once its whole input is in.
const UNPACK_AFTER_INPUT: std::time::Duration = std::time::Duration::from_secs(120);

/// What is kept of `tar`'s complaints for the error it ends with.
const MAX_STDERR: usize = 4096;

/// Exit codes of the checks before `tar` runs.
const MISSING: i64 = 3;
const DENIED: i64 = 4;
const NOT_A_DIRECTORY: i64 = 5;

/// Reads `"$1"` (a path) as the user: there, readable (and searchable when a
/// directory), then `tar` of it from its parent (`$2`, with the name `$3`).
const TAR_OUT: &str = r#"[ -e "$1" ] || [ -L "$1" ] || exit 3
[ -r "$1" ] || exit 4
if [ -d "$1" ] && [ ! -x "$1" ]; then exit 4; fi
cd -- "$2" || exit 4
exec tar -c -f - -- "$3""#;

/// Writes into the directory `"$1"` as the user: there, a directory, enterable, then
/// `tar` unpacks the archive on stdin into it.
const TAR_IN: &str = r#"[ -e "$1" ] || exit 3
[ -d "$1" ] || exit 5
cd -- "$1" || exit 4
exec tar -x -f -"#;

fn argv(script: &str, args: &[&str]) -> Vec<String> {
    let mut argv = vec!["sh".to_owned(), "-c".into(), script.into(), "sh".into()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    argv
}

/// `(parent, name)` of an absolute, normalized path; `/` is `("/", ".")`.
fn split(path: &str) -> (String, String) {
    match path.rsplit_once('/') {
        Some(("", "")) | None => ("/".into(), ".".into()),
        Some(("", name)) => ("/".into(), name.into()),
        Some((parent, name)) => (parent.into(), name.into()),
    }
}

/// The first line of what `tar` said, for an error message.
fn said(stderr: &Mutex<Vec<u8>>) -> String {
    let bytes = stderr.lock().map(|b| b.clone()).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("tar failed")
        .chars()
        .take(300)
        .collect()
}

fn failure(code: i64, path: &str, what: &'static str, stderr: &Mutex<Vec<u8>>) -> EngineError {
    match code {
        MISSING => EngineError::NotFound { what },
        DENIED => EngineError::Rejected {
            status: 400,
            message: format!("permission denied: {path}"),
        },
        NOT_A_DIRECTORY => EngineError::Rejected {
            status: 400,
            message: format!("{path} is not a directory"),
        },
        // The image has no `sh` or `tar`: the engine path cannot serve it.
        126 | 127 => EngineError::Rejected {
            status: 400,
            message: "this sandbox's image has no sh or tar, which file transfers without \
                      the agent need"
                .into(),
        },
        _ => EngineError::Rejected {
            status: 400,
            message: said(stderr),
        },
    }
}

/// Keeps stderr (bounded) and hands on stdout.
fn keep_stderr(stderr: &Mutex<Vec<u8>>, message: &[u8]) {
    if let Ok(mut kept) = stderr.lock() {
        let room = MAX_STDERR.saturating_sub(kept.len());
        kept.extend_from_slice(&message[..room.min(message.len())]);
    }
}

impl DockerEngine {
    async fn start_as(
        &self,
        container: &str,
        argv: Vec<String>,
        user: &str,
        stdin: bool,
    ) -> Result<(String, Output, Input), EngineError> {
        let config = ExecConfig {
            attach_stdin: Some(stdin),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            cmd: Some(argv),
            user: Some(user.to_owned()),
            // The container's environment holds the agent key: tar never sees it.
            env: Some(vec![format!("{AGENT_KEY_VAR}=")]),
            ..Default::default()
        };
        self.start_attached(container, config).await
    }

    /// Unpacks a tar stream into the directory `dir` as `user` ("uid:gid").
    pub(crate) async fn tar_in_as(
        &self,
        container: &str,
        dir: &str,
        user: &str,
        mut tar: Chunks,
    ) -> Result<(), EngineError> {
        let (exec, mut output, mut input) = self
            .start_as(container, argv(TAR_IN, &[dir]), user, true)
            .await?;
        // Whether the source failed (its own deadlines, a refusal of the checker): the
        // input is closed either way, so tar ends, and the upload fails.
        let feed = async move {
            let mut failed = false;
            while let Some(chunk) = tar.next().await {
                let Ok(chunk) = chunk else {
                    failed = true;
                    break;
                };
                if input.write_all(&chunk).await.is_err() {
                    break;
                }
            }
            let _ = input.shutdown().await;
            failed
        };
        let stderr = Mutex::new(Vec::new());
        let drain = async {
            while let Some(Ok(item)) = output.next().await {
                if let LogOutput::StdErr { message } = item {
                    keep_stderr(&stderr, &message);
                }
            }
        };
        let failed = {
            tokio::pin!(feed, drain);
            let mut failed = None;
            loop {
                tokio::select! {
                    done = &mut feed, if failed.is_none() => failed = Some(done),
                    () = &mut drain => break,
                    // Once all of the input is in, tar has this long to finish.
                    () = tokio::time::sleep(UNPACK_AFTER_INPUT), if failed.is_some() => {
                        return Err(EngineError::Timeout { call: "unpack archive" });
                    }
                }
            }
            failed
        };
        // The output is done with: its channel goes before the next call needs one.
        drop(output);
        if failed == Some(true) {
            return Err(EngineError::Rejected {
                status: 400,
                message: "the upload's stream failed before its end".into(),
            });
        }
        match self.exit_code(&exec).await? {
            0 => Ok(()),
            code => Err(failure(code, dir, "directory", &stderr)),
        }
    }

    /// A tar stream of `path` (its entries under its name), read as `user`; a path that
    /// is missing or that the user may not read is an error here, before any byte.
    pub(crate) async fn tar_out_as(
        &self,
        container: &str,
        path: &str,
        user: &str,
    ) -> Result<Chunks, EngineError> {
        let (parent, name) = split(path);
        let (exec, mut output, _) = self
            .start_as(
                container,
                argv(TAR_OUT, &[path, &parent, &name]),
                user,
                false,
            )
            .await?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        // The checks run before tar writes anything: the first byte of stdout means
        // they passed.
        let first = bounded("download archive", async {
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) if !message.is_empty() => {
                        return Some(Ok(message));
                    }
                    Ok(LogOutput::StdErr { message }) => keep_stderr(&stderr, &message),
                    Ok(_) => {}
                    Err(error) => return Some(Err(error)),
                }
            }
            None
        })
        .await?;
        let first = match first {
            Some(Ok(first)) => first,
            Some(Err(error)) => return Err(fault(error)),
            None => {
                drop(output);
                let code = self.exit_code(&exec).await?;
                return Err(failure(code, path, "path", &stderr));
            }
        };
        let engine = self.clone();
        let rest = futures_util::stream::unfold(
            (Some(output), engine, exec, stderr),
            |(output, engine, exec, stderr)| async move {
                let mut output = output?;
                loop {
                    match output.next().await {
                        Some(Ok(LogOutput::StdOut { message })) => {
                            return Some((Ok(message), (Some(output), engine, exec, stderr)));
                        }
                        Some(Ok(LogOutput::StdErr { message })) => {
                            keep_stderr(&stderr, &message);
                        }
                        Some(Ok(_)) => {}
                        Some(Err(error)) => {
                            let error = std::io::Error::other(error);
                            return Some((Err(error), (None, engine, exec, stderr)));
                        }
                        None => {
                            // A tar that failed part way (a file it could not read) ends
                            // the stream with its error, never as a whole archive. The
                            // output's channel goes first: the question needs one.
                            drop(output);
                            return match engine.exit_code(&exec).await {
                                Ok(0) => None,
                                Ok(_) | Err(_) => {
                                    let error = std::io::Error::other(said(&stderr));
                                    Some((Err(error), (None, engine, exec, stderr)))
                                }
                            };
                        }
                    }
                }
            },
        );
        Ok(Box::pin(
            futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(first) })
                .chain(rest),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_split_into_its_parent_and_name() {
        assert_eq!(split("/home/user/out"), ("/home/user".into(), "out".into()));
        assert_eq!(split("/etc"), ("/".into(), "etc".into()));
        assert_eq!(split("/"), ("/".into(), ".".into()));
    }

    #[test]
    fn the_scripts_take_their_paths_as_arguments() {
        let argv = argv(TAR_OUT, &["/a b", "/", "a b"]);
        assert_eq!(argv[..2], ["sh", "-c"]);
        assert_eq!(argv[3..], ["sh", "/a b", "/", "a b"]);
        assert!(!argv[2].contains("a b"));
    }
}

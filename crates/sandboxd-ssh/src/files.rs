//! Small file operations on the server: a directory with a mode, a file's mode, a small
//! file written whole, a file removed. Each is a request on one SFTP channel the link
//! keeps open (a round trip), where a command costs the server a new session and a
//! process (about 90 ms on a stock sshd). A server without the SFTP subsystem gets the
//! same operations as commands.
//!
//! The operations are `make_dir`, `set_mode`, `put_file` and `remove_file`, on an SFTP
//! channel (russh-sftp) the link opens on first use and again after a failure. Only plain
//! absolute paths (letters, digits, `/._-`) are taken.

use std::sync::Arc;
use std::time::Duration;

use russh_sftp::client::RawSftpSession;
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::protocol::{FileAttributes, OpenFlags, StatusCode};
use tracing::debug;

use crate::SshError;
use crate::link::{Sftp, SshLink};

/// The longest one request may take; a server that does not answer fails the operation.
const REQUEST_TIMEOUT_SECS: u64 = 10;
/// The longest opening the channel may take, before the commands are used instead.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Refuses a path that is not plain (letters, digits, `/._-`): paths go into commands
/// when the server has no SFTP.
pub(crate) fn plain(path: &str) -> Result<&str, SshError> {
    if path.starts_with('/')
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
    {
        Ok(path)
    } else {
        Err(SshError::Refused {
            what: format!("a file operation on {path:?} (not a plain absolute path)"),
        })
    }
}

/// A failed request, as the caller sees it.
fn refused(what: &str, path: &str, error: &SftpError) -> SshError {
    match error {
        SftpError::Timeout => SshError::Timeout {
            address: format!("{what} {path} on the server"),
            seconds: REQUEST_TIMEOUT_SECS,
        },
        other => SshError::Refused {
            what: format!("{what} {path}: {other}"),
        },
    }
}

fn mode(bits: u32) -> FileAttributes {
    FileAttributes {
        permissions: Some(bits),
        ..FileAttributes::empty()
    }
}

impl SshLink {
    /// The link's SFTP channel; `None` when the server refuses it.
    async fn sftp(&self) -> Option<Arc<RawSftpSession>> {
        let mut state = self.sftp_cell().lock().await;
        match &*state {
            Sftp::Open(session) => return Some(session.clone()),
            Sftp::Absent => return None,
            Sftp::Untried => {}
        }
        let opened = match tokio::time::timeout(OPEN_TIMEOUT, self.open_sftp()).await {
            Ok(Ok(session)) => Some(Arc::new(session)),
            Ok(Err(error)) => {
                debug!(%error, "no SFTP on the server: file operations run as commands");
                None
            }
            Err(_) => {
                debug!("SFTP did not open in time: file operations run as commands");
                None
            }
        };
        *state = opened.clone().map_or(Sftp::Absent, Sftp::Open);
        opened
    }

    /// Notes that a request failed for want of an answer, not by the server's refusal:
    /// the channel is opened again for the next one.
    async fn check(&self, error: &SftpError) {
        if !matches!(error, SftpError::Status(_)) {
            *self.sftp_cell().lock().await = Sftp::Untried;
        }
    }

    async fn open_sftp(&self) -> Result<RawSftpSession, SshError> {
        let mut channel = self.open_session_channel().await?;
        channel.request_subsystem(true, "sftp").await?;
        // The server's answer comes as a message on the channel.
        loop {
            match channel.wait().await {
                Some(russh::ChannelMsg::Success) => break,
                Some(russh::ChannelMsg::Failure) | None => {
                    return Err(SshError::Refused {
                        what: "the SFTP subsystem".into(),
                    });
                }
                Some(_) => {}
            }
        }
        let session = RawSftpSession::new(channel.into_stream());
        session.set_timeout(REQUEST_TIMEOUT_SECS);
        session.init().await.map_err(|error| SshError::Refused {
            what: format!("SFTP ({error})"),
        })?;
        Ok(session)
    }

    /// Makes the directory `path` (its parent must exist) with `bits`, or gives an
    /// existing one `bits`.
    pub async fn make_dir(&self, path: &str, bits: u32) -> Result<(), SshError> {
        let path = plain(path)?;
        let Some(sftp) = self.sftp().await else {
            return self
                .command(&format!(
                    "(test -d '{path}' || mkdir '{path}') && chmod {bits:o} '{path}'"
                ))
                .await;
        };
        if let Err(error) = sftp.mkdir(path, mode(bits)).await {
            // Already there is fine, if it is a directory.
            let is_dir = match sftp.stat(path).await {
                Ok(found) => found.attrs.is_dir(),
                Err(_) => false,
            };
            if !is_dir {
                self.check(&error).await;
                return Err(refused("making the directory", path, &error));
            }
        }
        self.set_mode(path, bits).await
    }

    /// Gives `path` the mode `bits`.
    pub async fn set_mode(&self, path: &str, bits: u32) -> Result<(), SshError> {
        let path = plain(path)?;
        let Some(sftp) = self.sftp().await else {
            return self.command(&format!("chmod {bits:o} '{path}'")).await;
        };
        match sftp.setstat(path, mode(bits)).await {
            Ok(_) => Ok(()),
            Err(error) => {
                self.check(&error).await;
                Err(refused("the mode of", path, &error))
            }
        }
    }

    /// Writes `content` as the file `path` with the mode `bits`, replacing any file
    /// there (its directory must exist). For a few bytes: it is not written in pieces.
    pub async fn put_file(&self, path: &str, content: &[u8], bits: u32) -> Result<(), SshError> {
        let path = plain(path)?;
        let Some(sftp) = self.sftp().await else {
            return self
                .command_with(
                    &format!(
                        "rm -f '{path}' && (umask 077 && cat > '{path}') && chmod {bits:o} '{path}'"
                    ),
                    content,
                )
                .await;
        };
        self.remove_file(path).await?;
        let flags = OpenFlags::CREATE | OpenFlags::EXCLUDE | OpenFlags::WRITE;
        let handle = match sftp.open(path, flags, mode(0o600)).await {
            Ok(opened) => opened.handle,
            Err(error) => {
                self.check(&error).await;
                return Err(refused("creating", path, &error));
            }
        };
        let written = sftp.write(handle.as_str(), 0, content.to_vec()).await;
        let closed = sftp.close(handle).await;
        if let Err(error) = written.as_ref().map(drop).and(closed.as_ref().map(drop)) {
            self.check(error).await;
            return Err(refused("writing", path, error));
        }
        // Its mode once its content is whole, whatever the server's umask.
        self.set_mode(path, bits).await
    }

    /// Removes the file `path`; a file already gone is not an error.
    pub async fn remove_file(&self, path: &str) -> Result<(), SshError> {
        let path = plain(path)?;
        let Some(sftp) = self.sftp().await else {
            return self.command(&format!("rm -f '{path}'")).await;
        };
        match sftp.remove(path).await {
            Ok(_) => Ok(()),
            Err(SftpError::Status(status)) if status.status_code == StatusCode::NoSuchFile => {
                Ok(())
            }
            Err(error) => {
                self.check(&error).await;
                Err(refused("removing", path, &error))
            }
        }
    }

    async fn command(&self, command: &str) -> Result<(), SshError> {
        self.command_with(command, b"").await
    }

    async fn command_with(&self, command: &str, stdin: &[u8]) -> Result<(), SshError> {
        let done = self.run(command, stdin, 1024).await?;
        if done.exit_code == Some(0) {
            return Ok(());
        }
        Err(SshError::Refused {
            what: format!(
                "a file operation ({}): {}",
                command.split_whitespace().next().unwrap_or_default(),
                String::from_utf8_lossy(&done.stderr).trim()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_plain_absolute_paths_are_taken() {
        assert!(super::plain("/srv/sandboxd/agents/sbx_1.x-y/agent.key").is_ok());
        for bad in ["relative", "/a b", "/a'b", "/a;rm", "/a$(x)", "/a\nb", ""] {
            assert!(super::plain(bad).is_err(), "{bad:?}");
        }
    }
}

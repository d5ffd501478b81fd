//! Streamed transfers, done with the sandbox user's own permissions: an upload lands a
//! file under a temporary name renamed into place once whole, or unpacks a tar (already
//! checked and re-owned by sandboxd) file by file the same way; a download sends a
//! file's bytes or a tar of a tree. Content moves within the credit the receiving side
//! grants (`flow.rs`), so neither side queues more than a window of it.

mod flow;
mod pack;
mod unpack;

use std::fs;
use std::io::{self, BufWriter, Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use sandboxd_agent_protocol::{DownloadStart, FailureKind, Frame, Kind, TransferShape};

use crate::files::{done, fail, fail_io};
use crate::input::Input;
use crate::outbox::Outbox;
use flow::{Incoming, Outgoing};

/// Files are written and read in pieces of this size: on a FUSE filesystem (as
/// fuse-overlayfs roots are) each write or read is a round trip to its daemon, and 8 KiB
/// pieces are ten times slower than these.
pub(crate) const FILE_BUFFER: usize = 1024 * 1024;

/// An upload asked for.
pub struct Upload {
    pub path: String,
    pub shape: TransferShape,
    pub mode: u32,
    pub size: Option<u64>,
    /// A raw file is written where it goes (not aside, renamed once whole).
    pub in_place: bool,
}

/// Serves an upload; the reply is Done with the bytes taken, or Error.
pub fn upload(outbox: &Outbox, channel: u32, upload: Upload, input: &Input) {
    let outcome = match upload.shape {
        TransferShape::Raw => match upload.size {
            Some(size) => upload_file(
                outbox,
                channel,
                &upload.path,
                (upload.mode, size, upload.in_place),
                input,
            ),
            None => {
                return fail(
                    outbox,
                    channel,
                    FailureKind::Invalid,
                    "a file upload needs its size",
                );
            }
        },
        TransferShape::Tar => upload_tree(outbox, channel, &upload.path, input),
    };
    // A cancelled upload is answered too, once what it wrote is gone: sandboxd answers
    // its client only then.
    match outcome {
        Ok(size) => done(outbox, channel, size),
        Err(error) => fail_io(outbox, channel, &upload.path, &error),
    }
}

/// A temporary name beside `name` in `dir`, unique to this process and channel.
fn temp_beside(dir: &Path, name: &std::ffi::OsStr, channel: u32) -> std::path::PathBuf {
    dir.join(format!(
        ".{}.sandboxd-{}-{channel}",
        name.to_string_lossy(),
        std::process::id()
    ))
}

fn upload_file(
    outbox: &Outbox,
    channel: u32,
    path: &str,
    (mode, size, in_place): (u32, u64, bool),
    input: &Input,
) -> io::Result<u64> {
    let target = Path::new(path);
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path must point to a file",
        ));
    };
    fs::create_dir_all(dir)?;
    let temp = if in_place {
        target.to_path_buf()
    } else {
        temp_beside(dir, name, channel)
    };
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)?;
    let mut file = BufWriter::with_capacity(FILE_BUFFER, file);
    let written = (|| {
        let mut incoming = Incoming::start(outbox, channel, input)?;
        let copied = io::copy(&mut (&mut incoming).take(size.saturating_add(1)), &mut file)?;
        if copied != size || incoming.received != size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the upload ended after {} of {size} bytes",
                    incoming.received
                ),
            ));
        }
        // Up to End, which must come now.
        if io::copy(&mut incoming, &mut io::sink())? != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the upload is longer than its {size} bytes"),
            ));
        }
        let file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.set_permissions(fs::Permissions::from_mode(mode & 0o7777))?;
        drop(file);
        if in_place {
            return Ok(());
        }
        // A directory in the way makes the rename fail (EISDIR): nothing is replaced.
        fs::rename(&temp, target)
    })();
    if let Err(error) = written {
        // What an in-place write got to stays, as E2B's daemon leaves it.
        if !in_place {
            let _ = fs::remove_file(&temp);
        }
        return Err(error);
    }
    Ok(size)
}

fn upload_tree(outbox: &Outbox, channel: u32, path: &str, input: &Input) -> io::Result<u64> {
    let root = Path::new(path);
    fs::create_dir_all(root)?;
    let mut incoming = Incoming::start(outbox, channel, input)?;
    let bytes = unpack::unpack(root, &mut incoming, channel)?;
    // What follows the archive's end marker, up to End.
    io::copy(&mut incoming, &mut io::sink())?;
    Ok(bytes)
}

/// Serves a download: Data([`DownloadStart`]), the content, Done; or Error.
pub fn download(
    outbox: &Outbox,
    channel: u32,
    path: &str,
    shape: Option<TransferShape>,
    max: u64,
    input: &Input,
) {
    // Opened first, so that a file that cannot be read is refused before any byte.
    let opened = fs::File::open(path).and_then(|file| Ok((file.metadata()?, file)));
    let (meta, file) = match opened {
        Ok(opened) => opened,
        Err(error) => return fail_io(outbox, channel, path, &error),
    };
    let shape = match (shape, meta.is_dir(), meta.is_file()) {
        (Some(TransferShape::Raw) | None, false, true) => TransferShape::Raw,
        (Some(TransferShape::Tar) | None, true, _) | (Some(TransferShape::Tar), _, true) => {
            TransferShape::Tar
        }
        _ => {
            return fail(
                outbox,
                channel,
                FailureKind::NotAFile,
                &format!("{path} is not a regular file"),
            );
        }
    };
    let size = (shape == TransferShape::Raw).then_some(meta.len());
    if size.is_some_and(|size| size > max) {
        return fail(
            outbox,
            channel,
            FailureKind::TooLarge,
            &format!("the transfer is larger than the limit of {max} bytes"),
        );
    }
    let mut outgoing = Outgoing::new(outbox, channel, input);
    let start = Frame::json(channel, Kind::Data, &DownloadStart { shape, size });
    let sent = outgoing
        .send_whole(&start.payload)
        .and_then(|()| match size {
            Some(size) => send_file(file, size, &mut outgoing),
            None => pack::pack(Path::new(path), max, &mut outgoing),
        });
    match sent.and_then(|()| outgoing.flush()) {
        Ok(()) => done(outbox, channel, outgoing.sent),
        Err(error) if error.kind() == io::ErrorKind::ConnectionAborted => {}
        Err(error) => fail_io(outbox, channel, path, &error),
    }
}

/// The first `size` bytes of the file: as many as announced, or a failure.
fn send_file(mut file: fs::File, size: u64, out: &mut Outgoing<'_>) -> io::Result<()> {
    let mut buf = vec![0u8; FILE_BUFFER];
    let mut left = size;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the file shrank to {} of {size} bytes while read",
                    size - left
                ),
            ));
        }
        out.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

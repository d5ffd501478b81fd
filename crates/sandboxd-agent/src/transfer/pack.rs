//! A download's tar, made as it is sent: the path's directory (its entries under its
//! name, as the engine's archive API names them) or one file. Symlinks are kept as
//! links; sockets, fifos and devices are left out.

use std::fs;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::FILE_BUFFER;
use super::flow::Outgoing;

/// Stops the archive once it passes the transfer's limit.
struct Capped<'o, 'a> {
    out: &'o mut Outgoing<'a>,
    max: u64,
    written: u64,
}

impl Write for Capped<'_, '_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.written += data.len() as u64;
        if self.written > self.max {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "the transfer is larger than the limit of {} bytes",
                    self.max
                ),
            ));
        }
        self.out.write_all(data)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Sends a tar of `path` (a directory or a file), at most `max` bytes of it.
pub fn pack(path: &Path, max: u64, out: &mut Outgoing<'_>) -> io::Result<()> {
    let real = path.canonicalize()?;
    let name = path
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut builder = tar::Builder::new(Capped {
        out,
        max,
        written: 0,
    });
    builder.follow_symlinks(false);
    if real.is_file() {
        append_file(&mut builder, &real, &name)?;
    } else {
        let mut pending = vec![(real, name)];
        while let Some((dir, name)) = pending.pop() {
            builder.append_dir(&name, &dir)?;
            let mut children = fs::read_dir(&dir)?.collect::<Result<Vec<_>, _>>()?;
            children.sort_by_key(|child| child.file_name());
            let mut subdirs = Vec::new();
            for child in children {
                let kind = child.file_type()?;
                let inner = name.join(child.file_name());
                if kind.is_dir() {
                    subdirs.push((child.path(), inner));
                } else if kind.is_file() {
                    append_file(&mut builder, &child.path(), &inner)?;
                } else if kind.is_symlink() {
                    builder.append_path_with_name(child.path(), &inner)?;
                }
            }
            pending.extend(subdirs.into_iter().rev());
        }
    }
    builder.into_inner()?.flush()
}

/// A file's entry, its content read in large pieces (the tar writer's own reads are
/// 8 KiB) and exactly as long as its header says: a file that grows while read is cut
/// there, one that shrinks is padded with zeros, so the archive stays well formed.
fn append_file(builder: &mut tar::Builder<impl Write>, path: &Path, name: &Path) -> io::Result<()> {
    let file = fs::File::open(path)?;
    let meta = file.metadata()?;
    let mut header = tar::Header::new_gnu();
    header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
    let content = Exactly {
        inner: BufReader::with_capacity(FILE_BUFFER, file).take(meta.len()),
        left: meta.len(),
    };
    builder.append_data(&mut header, name, content)
}

/// `left` bytes of `inner`, zeros past its end.
struct Exactly<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Exactly<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = match self.inner.read(&mut buf[..want])? {
            0 => {
                buf[..want].fill(0);
                want
            }
            n => n,
        };
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_as_long_as_the_header_says() {
        let mut out = Vec::new();
        Exactly {
            inner: &b"abcdef"[..],
            left: 4,
        }
        .read_to_end(&mut out)
        .unwrap();
        assert_eq!(out, b"abcd");
        out.clear();
        Exactly {
            inner: &b"ab"[..],
            left: 5,
        }
        .read_to_end(&mut out)
        .unwrap();
        assert_eq!(out, b"ab\0\0\0");
    }
}

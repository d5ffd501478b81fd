//! A download's tar, made as it is sent: the path's directory (its entries under its
//! name, as the engine's archive API names them) or one file. Symlinks are kept as
//! links; sockets, fifos and devices are left out.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

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
                format!("the transfer is larger than the limit of {} bytes", self.max),
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
        builder.append_path_with_name(&real, &name)?;
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
                } else if kind.is_file() || kind.is_symlink() {
                    builder.append_path_with_name(child.path(), &inner)?;
                }
            }
            pending.extend(subdirs.into_iter().rev());
        }
    }
    builder.into_inner()?.flush()
}

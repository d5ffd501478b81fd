//! A path's metadata as E2B keeps it: extended attributes in the `user.e2b.`
//! namespace, the prefix stripped. Read without following a final link; replaced as a
//! whole.

use std::collections::BTreeMap;
use std::path::Path;

use rustix::fs::{XattrFlags, lgetxattr, llistxattr, lremovexattr, lsetxattr};

const PREFIX: &str = "user.e2b.";
/// The largest list of names and the largest value read (the kernel's own bound).
const MAX_XATTR: usize = 64 * 1024;

fn names(path: &Path) -> Vec<String> {
    let mut buf = vec![0u8; MAX_XATTR];
    let Ok(len) = llistxattr(path, &mut buf[..]) else {
        return Vec::new();
    };
    buf[..len]
        .split(|b| *b == 0)
        .filter_map(|name| std::str::from_utf8(name).ok())
        .filter(|name| name.starts_with(PREFIX))
        .map(str::to_owned)
        .collect()
}

/// The metadata of `path`; `None` when it has none.
pub fn read(path: &Path) -> Option<BTreeMap<String, String>> {
    let names = names(path);
    if names.is_empty() {
        return None;
    }
    let mut buf = vec![0u8; MAX_XATTR];
    let metadata: BTreeMap<String, String> = names
        .iter()
        .filter_map(|name| {
            let len = lgetxattr(path, name.as_str(), &mut buf[..]).ok()?;
            Some((
                name[PREFIX.len()..].to_owned(),
                String::from_utf8_lossy(&buf[..len]).into_owned(),
            ))
        })
        .collect();
    (!metadata.is_empty()).then_some(metadata)
}

/// Replaces the metadata of `path` with `metadata`.
pub fn replace(path: &Path, metadata: &BTreeMap<String, String>) -> std::io::Result<()> {
    for name in names(path) {
        lremovexattr(path, name.as_str())?;
    }
    for (key, value) in metadata {
        lsetxattr(
            path,
            format!("{PREFIX}{key}").as_str(),
            value.as_bytes(),
            XattrFlags::empty(),
        )?;
    }
    Ok(())
}

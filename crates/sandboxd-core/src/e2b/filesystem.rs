//! `filesystem.Filesystem` of E2B's in-sandbox daemon in ProtoJSON: requests, the
//! entry of a path as the daemon describes it (Go's mode string, owner names, times in
//! RFC 3339), and how its paths resolve (relative to the user's home).
//!
//! `EntryInfo` (permission bits and metadata too), `resolve` (a path from the user's
//! home), `depth_of`, and `metadata_of` (an upload's `X-Metadata-*` headers).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Invalid;

/// The home of E2B's default user, where relative paths start.
pub const HOME: &str = "/home/user";
/// Levels of a recursive listing at most.
pub const MAX_DEPTH: u32 = 32;
/// Entries of one listing at most.
pub const MAX_ENTRIES: usize = 20_000;

/// A request naming one path (`Stat`, `MakeDir`, `Remove`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PathRequest {
    pub path: String,
}

/// `Move`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MoveRequest {
    pub source: String,
    pub destination: String,
}

/// `ListDir`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ListDirRequest {
    pub path: String,
    pub depth: u32,
}

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
    Symlink,
    Other,
}

impl Kind {
    fn wire(self) -> &'static str {
        match self {
            Self::File => "FILE_TYPE_FILE",
            Self::Directory => "FILE_TYPE_DIRECTORY",
            Self::Symlink => "FILE_TYPE_SYMLINK",
            Self::Other => "FILE_TYPE_UNSPECIFIED",
        }
    }
}

/// A path as the sandbox reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: Kind,
    pub size: u64,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
    pub modified_ms: i64,
    pub owner: String,
    pub group: String,
    pub link_target: Option<String>,
    /// Its metadata (E2B's `user.e2b.` extended attributes).
    pub metadata: Option<BTreeMap<String, String>>,
}

/// An entry as the daemon's answers carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub path: String,
    /// ProtoJSON writes 64-bit integers as strings.
    pub size: String,
    pub mode: u32,
    pub permissions: String,
    pub owner: String,
    pub group: String,
    pub modified_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// `{entry}`: the answer of `Stat`, `MakeDir`, `Move`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryAnswer {
    pub entry: EntryInfo,
}

/// `ListDir`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListAnswer {
    pub entries: Vec<EntryInfo>,
}

/// Go's `FileMode.String()` of a kind and permission bits: `drwxr-xr-x`,
/// `Lrwxrwxrwx`, `-rw-r--r--`.
pub fn permissions(kind: Kind, mode: u32) -> String {
    let mut text = String::with_capacity(10);
    text.push(match kind {
        Kind::Directory => 'd',
        Kind::Symlink => 'L',
        Kind::File | Kind::Other => '-',
    });
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        text.push(if mode & (1 << (8 - i)) != 0 { c } else { '-' });
    }
    text
}

/// The entry of `path`.
pub fn entry_info(path: &str, found: Found, format_time: impl Fn(i64) -> String) -> EntryInfo {
    let name = path
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("/");
    EntryInfo {
        name: name.to_owned(),
        kind: found.kind.wire(),
        path: path.to_owned(),
        size: found.size.to_string(),
        mode: found.mode & 0o777,
        permissions: permissions(found.kind, found.mode),
        owner: found.owner,
        group: found.group,
        modified_time: format_time(found.modified_ms),
        symlink_target: found.link_target,
        metadata: found.metadata,
    }
}

/// Metadata of an upload from its `X-Metadata-<key>` headers (keys lowercased): at
/// most 64, values of printable ASCII, 64 KiB in all.
pub fn metadata_of<'h>(
    headers: impl Iterator<Item = (&'h str, &'h [u8])>,
) -> Result<BTreeMap<String, String>, Invalid> {
    let mut metadata = BTreeMap::new();
    let mut bytes = 0usize;
    for (name, value) in headers {
        let Some(key) = name
            .get(..11)
            .filter(|p| p.eq_ignore_ascii_case("x-metadata-"))
            .map(|_| name[11..].to_ascii_lowercase())
        else {
            continue;
        };
        if key.is_empty() {
            return Err(Invalid::one("metadata", "a key is empty"));
        }
        let value = std::str::from_utf8(value)
            .ok()
            .filter(|v| v.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .ok_or_else(|| Invalid::one(format!("metadata.{key}"), "must be printable ASCII"))?;
        bytes += key.len() + value.len();
        metadata.insert(key, value.to_owned());
    }
    if metadata.len() > 64 {
        return Err(Invalid::one("metadata", "at most 64 keys"));
    }
    if bytes > 64 * 1024 {
        return Err(Invalid::one("metadata", "at most 64 KiB in all"));
    }
    Ok(metadata)
}

/// A path as the daemon resolves it: relative to the home of the user, `~` for the
/// home, `.` and `..` resolved; never above `/`.
pub fn resolve(path: &str, field: &str) -> Result<String, Invalid> {
    if path.contains('\0') {
        return Err(Invalid::one(field, "must not contain NUL bytes"));
    }
    if path.len() > 4096 {
        return Err(Invalid::one(field, "at most 4096 bytes"));
    }
    let joined = if path.is_empty() || path == "~" {
        HOME.to_owned()
    } else if let Some(rest) = path.strip_prefix("~/") {
        format!("{HOME}/{rest}")
    } else if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{HOME}/{path}")
    };
    Ok(crate::paths::normalized(&joined))
}

/// The depth a listing asks for: at least one.
pub fn depth_of(depth: u32) -> Result<u32, Invalid> {
    match depth {
        0 => Ok(1),
        d if d > MAX_DEPTH => Err(Invalid::one("depth", format!("at most {MAX_DEPTH}"))),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_as_the_daemon_writes_them() {
        let found = Found {
            kind: Kind::Directory,
            size: 4096,
            mode: 0o755,
            modified_ms: 0,
            owner: "user".into(),
            group: "user".into(),
            link_target: None,
            metadata: None,
        };
        let info = entry_info("/home/user/dir", found, |_| "1970-01-01T00:00:00Z".into());
        assert_eq!(info.name, "dir");
        assert_eq!(info.permissions, "drwxr-xr-x");
        assert_eq!(info.mode, 0o755, "permission bits only");
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["type"], "FILE_TYPE_DIRECTORY");
        assert_eq!(json["size"], "4096");
        assert_eq!(json["modifiedTime"], "1970-01-01T00:00:00Z");
        assert!(json.get("symlinkTarget").is_none());
        assert_eq!(permissions(Kind::Symlink, 0o777), "Lrwxrwxrwx");
        assert_eq!(permissions(Kind::File, 0o640), "-rw-r-----");
    }

    #[test]
    fn metadata_comes_from_its_headers() {
        let headers = [
            ("X-Metadata-Author", &b"mish"[..]),
            ("content-type", b"text/plain"),
            ("x-metadata-purpose", b"upload"),
        ];
        let metadata = metadata_of(headers.into_iter()).unwrap();
        assert_eq!(
            metadata,
            BTreeMap::from([
                ("author".into(), "mish".into()),
                ("purpose".into(), "upload".into())
            ])
        );
        assert!(metadata_of([("x-metadata-a", &b"\x01"[..])].into_iter()).is_err());
        assert!(metadata_of([("x-metadata-", &b"v"[..])].into_iter()).is_err());
    }

    #[test]
    fn paths_resolve_from_the_home() {
        let r = |p| resolve(p, "path").unwrap();
        assert_eq!(r("a/b"), "/home/user/a/b");
        assert_eq!(r(""), "/home/user");
        assert_eq!(r("~/x"), "/home/user/x");
        assert_eq!(r("/tmp/../etc/./x/"), "/etc/x");
        assert_eq!(r("/../../"), "/");
        assert!(resolve("a\0b", "path").is_err());
        assert_eq!(depth_of(0).unwrap(), 1);
        assert!(depth_of(MAX_DEPTH + 1).is_err());
    }
}

//! PAX extended header records (`<length> <key>=<value>\n`): only those that name and
//! time an entry are kept. Owners (`uid`, `gid`, `uname`, `gname`) would override the
//! sandbox user, and extended attributes (`SCHILY.xattr.*`) could carry file
//! capabilities.

use super::TransferRefused;

/// Keys kept; `size` also tells the next entry's real size.
const KEPT: [&str; 6] = ["path", "linkpath", "size", "mtime", "atime", "ctime"];

/// One record, its length counting its own digits.
pub fn record(key: &str, value: &str) -> Vec<u8> {
    let body = format!(" {key}={value}\n");
    let mut length = body.len() + 1;
    while format!("{length}{body}").len() != length {
        length += 1;
    }
    format!("{length}{body}").into_bytes()
}

/// The value of `key` among well-formed `records` (as [`filter`] keeps them).
pub fn value(records: &[u8], key: &str) -> Option<String> {
    let mut rest = records;
    let mut found = None;
    while let Some(space) = rest.iter().position(|b| *b == b' ') {
        let length: usize = std::str::from_utf8(&rest[..space]).ok()?.parse().ok()?;
        let record = rest.get(space + 1..length.checked_sub(1)?)?;
        if let Some(value) = record
            .strip_prefix(key.as_bytes())
            .and_then(|r| r.strip_prefix(b"="))
        {
            found = Some(String::from_utf8_lossy(value).into_owned());
        }
        rest = &rest[length..];
    }
    found
}

/// The records of `data` whose key is kept, re-encoded, and the `size` they set.
pub fn filter(data: &[u8]) -> Result<(Vec<u8>, Option<u64>), TransferRefused> {
    let malformed = TransferRefused::Malformed("a PAX record");
    let mut rest = data;
    let mut kept = Vec::with_capacity(data.len());
    let mut size = None;
    while !rest.is_empty() {
        // Trailing NUL padding ends the records.
        if rest.iter().all(|b| *b == 0) {
            break;
        }
        let space = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or(malformed.clone())?;
        let length: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or(malformed.clone())?;
        if length <= space + 1 || length > rest.len() || rest[length - 1] != b'\n' {
            return Err(malformed);
        }
        let record = &rest[space + 1..length - 1];
        let equals = record
            .iter()
            .position(|b| *b == b'=')
            .ok_or(malformed.clone())?;
        let key = std::str::from_utf8(&record[..equals]).map_err(|_| malformed.clone())?;
        if KEPT.contains(&key) {
            if key == "size" {
                let value = std::str::from_utf8(&record[equals + 1..])
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .ok_or(malformed.clone())?;
                size = Some(value);
            }
            kept.extend_from_slice(&rest[..length]);
        }
        rest = &rest[length..];
    }
    Ok((kept, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_and_attributes_are_dropped_names_and_sizes_kept() {
        let data = [
            record("path", "a/very/long/name"),
            record("uid", "0"),
            record("uname", "root"),
            record("SCHILY.xattr.security.capability", "\u{1}"),
            record("size", "12345"),
        ]
        .concat();
        let (kept, size) = filter(&data).unwrap();
        assert_eq!(
            kept,
            [record("path", "a/very/long/name"), record("size", "12345")].concat()
        );
        assert_eq!(size, Some(12345));
    }

    #[test]
    fn a_bad_length_is_refused() {
        assert!(filter(b"99 path=x\n").is_err());
        assert!(filter(b"3 x\n").is_err());
        assert!(filter(b"x path=y\n").is_err());
    }
}

//! The JSON of a file read, written in one buffer sized up front. A file's content is
//! most of the reply (up to 10 MiB, a third more as base64): serde would grow its buffer
//! by doubling and check every byte of the content against its escape table. Here the
//! content is copied as it is when it holds nothing JSON escapes (always true of
//! base64), found by a comparison pass the compiler vectorizes; the bytes are the same
//! as serde's (tested).

use super::ReadFileResult;

/// Room for everything but the path and the content.
const FIELDS_LEN: usize = 64;

impl ReadFileResult {
    /// This result as JSON, byte for byte what `serde_json::to_vec` writes.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIELDS_LEN + self.path.len() + self.content.len());
        out.extend_from_slice(b"{\"path\":");
        push_str(&mut out, &self.path);
        out.extend_from_slice(b",\"size\":");
        out.extend_from_slice(self.size.to_string().as_bytes());
        out.extend_from_slice(b",\"encoding\":");
        // Writing a unit enum variant into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &self.encoding);
        out.extend_from_slice(b",\"content\":");
        push_str(&mut out, &self.content);
        out.push(b'}');
        out
    }
}

/// Appends `text` as a JSON string.
fn push_str(out: &mut Vec<u8>, text: &str) {
    if needs_escape(text.as_bytes()) {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    } else {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// Whether serde_json escapes anything in `bytes`: quotes, backslashes and control
/// characters. No early exit, so the loop is vectorized.
fn needs_escape(bytes: &[u8]) -> bool {
    bytes.iter().fold(false, |found, &b| {
        found | (b == b'"') | (b == b'\\') | (b < 0x20)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Encoding;

    fn result(path: &str, content: &str, encoding: Encoding) -> ReadFileResult {
        ReadFileResult {
            path: path.into(),
            size: content.len() as u64,
            encoding,
            content: content.into(),
        }
    }

    #[test]
    fn writes_what_serde_writes() {
        let cases = [
            result("/home/user/a.txt", "hello\n", Encoding::Utf8),
            result(
                "/tmp/q\"uote",
                "tab\there \\ \"quoted\" \u{1} é ✓ \u{7f}",
                Encoding::Utf8,
            ),
            result("/tmp/plain", "no escapes at all / here", Encoding::Utf8),
            result("/tmp/b.bin", "AAEC/w==", Encoding::Base64),
            result("/tmp/empty", "", Encoding::Base64),
        ];
        for case in cases {
            assert_eq!(
                String::from_utf8(case.to_json()).unwrap(),
                serde_json::to_string(&case).unwrap()
            );
        }
    }

    #[test]
    fn finds_every_character_serde_escapes() {
        for b in 0u8..=0x7f {
            let text = format!("ab{}cd", b as char);
            let serde = serde_json::to_string(&text).unwrap();
            assert_eq!(
                needs_escape(text.as_bytes()),
                serde != format!("\"{text}\""),
                "byte {b:#x}"
            );
        }
    }
}

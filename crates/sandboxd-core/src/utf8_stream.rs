//! Turns a byte stream cut at arbitrary points into text without breaking characters: an
//! incomplete sequence at the end of a chunk waits for the next chunk; invalid bytes
//! become U+FFFD.

/// The decoder of one stream.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The text completed by `bytes`.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match error.error_len() {
                        // An incomplete sequence at the end: keep it for the next chunk.
                        None => {
                            rest = after;
                            break;
                        }
                        Some(len) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[len..];
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// What is left at the end of the stream (an incomplete sequence becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_split_across_chunks_survive() {
        let text = "é€😀 done";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut stream = Utf8Stream::default();
            let mut out = stream.push(&bytes[..cut]);
            out.push_str(&stream.push(&bytes[cut..]));
            out.push_str(&stream.finish());
            assert_eq!(out, text, "cut at {cut}");
        }
    }

    #[test]
    fn byte_by_byte_and_invalid_bytes() {
        let mut stream = Utf8Stream::default();
        let out: String = "a😀b".bytes().map(|b| stream.push(&[b])).collect();
        assert_eq!(out, "a😀b");
        assert_eq!(stream.push(b"x\xffy"), "x\u{fffd}y");
        assert_eq!(stream.push(b"\xe2\x82"), "");
        assert_eq!(stream.finish(), "\u{fffd}");
    }
}

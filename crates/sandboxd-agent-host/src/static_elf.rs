//! Whether a file is a statically linked ELF executable: one with no program interpreter
//! (`PT_INTERP`), so it runs in images without a libc.
//!
//! An agent that is dynamically linked is refused.

use std::io::Read as _;
use std::path::Path;

const PT_INTERP: u32 = 3;

/// `true` for a 64-bit little-endian ELF file without a `PT_INTERP` program header.
pub fn is_static_elf(path: &Path) -> bool {
    let mut bytes = Vec::new();
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // Program headers sit near the start; 64 KiB is far more than any needs.
    if file.take(64 * 1024).read_to_end(&mut bytes).is_err() {
        return false;
    }
    parse(&bytes).unwrap_or(false)
}

fn parse(bytes: &[u8]) -> Option<bool> {
    if bytes.get(..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for index in 0..phnum {
        let at = phoff + index * phentsize;
        let kind = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
        if kind == PT_INTERP {
            return Some(false);
        }
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_executables_and_non_elf_files_are_refused() {
        // The test binary itself is dynamically linked.
        let me = std::env::current_exe().unwrap();
        assert!(!is_static_elf(&me));
        assert!(!is_static_elf(Path::new("/etc/hostname")));
        assert!(!is_static_elf(Path::new("/nonexistent")));
        assert_eq!(parse(b"\x7fELF"), None);
    }
}

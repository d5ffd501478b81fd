//! A Dockerfile read into instructions as the engine's builder reads it: a `#` line is a
//! comment (the parser directives at the very top are named, so that they can be
//! refused), a line ending in `\` goes on on the next (comment lines inside are
//! dropped), the first word is the instruction, in any case.

use crate::error::Invalid;

/// One instruction, with the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    pub line: usize,
    /// Its keyword, upper-case (`RUN`).
    pub keyword: String,
    /// Everything after the keyword, continuation lines joined, trimmed.
    pub args: String,
}

/// The instructions of `text`, or the first thing in it that cannot be read.
pub fn parse(text: &str) -> Result<Vec<Instruction>, Invalid> {
    if text.len() > super::MAX_DOCKERFILE_BYTES {
        return Err(Invalid::one(
            "dockerfile",
            format!(
                "is {} bytes; at most {} are taken",
                text.len(),
                super::MAX_DOCKERFILE_BYTES
            ),
        ));
    }
    if text.contains('\0') {
        return Err(Invalid::one("dockerfile", "holds a NUL byte"));
    }
    let mut instructions = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut directives_allowed = true;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') {
            if directives_allowed && current.is_none() && is_directive(trimmed) {
                return Err(at(
                    number,
                    "parser directives (`# syntax=`, `# escape=`, `# check=`) are not taken",
                ));
            }
            // A comment, also inside an instruction that goes on.
            continue;
        }
        directives_allowed = false;
        if current.is_none() && trimmed.is_empty() {
            continue;
        }
        let (start, mut joined) = current.take().unwrap_or((number, String::new()));
        let (body, goes_on) = match line.trim_end().strip_suffix('\\') {
            Some(body) => (body, true),
            None => (line, false),
        };
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(body.trim());
        if goes_on {
            current = Some((start, joined));
        } else {
            instructions.push(instruction(start, &joined)?);
        }
    }
    if let Some((start, joined)) = current {
        instructions.push(instruction(start, &joined)?);
    }
    Ok(instructions)
}

fn is_directive(comment: &str) -> bool {
    let body = comment.trim_start_matches('#').trim_start();
    let Some((key, _)) = body.split_once('=') else {
        return false;
    };
    let key = key.trim();
    !key.is_empty() && !key.contains(char::is_whitespace)
}

fn instruction(line: usize, joined: &str) -> Result<Instruction, Invalid> {
    let joined = joined.trim();
    let (keyword, args) = match joined.split_once(char::is_whitespace) {
        Some((keyword, args)) => (keyword, args.trim()),
        None => (joined, ""),
    };
    if keyword.is_empty() || !keyword.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(at(line, format!("{keyword:?} is not an instruction")));
    }
    Ok(Instruction {
        line,
        keyword: keyword.to_ascii_uppercase(),
        args: args.to_owned(),
    })
}

/// An octal file mode of at most `07777` (`=` before it is taken, as `--chmod=` leaves
/// it).
pub fn octal_mode(value: &str) -> Option<u32> {
    let digits = value.strip_prefix('=').unwrap_or(value);
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
    {
        return None;
    }
    u32::from_str_radix(digits, 8).ok().filter(|m| *m <= 0o7777)
}

/// An issue of the Dockerfile at a line.
pub(super) fn at(line: usize, message: impl std::fmt::Display) -> Invalid {
    Invalid::one("dockerfile", format!("line {line}: {message}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn keywords(text: &str) -> Vec<(usize, String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|i| (i.line, i.keyword, i.args))
            .collect()
    }

    #[test]
    fn instructions_keep_their_line_and_continuations_are_joined() {
        let text = "# a comment\nfrom base\n\nRUN apt-get update && \\\n  # inside\n  apt-get install -y git\nenv A=1\n";
        assert_eq!(
            keywords(text),
            vec![
                (2, "FROM".into(), "base".into()),
                (
                    4,
                    "RUN".into(),
                    "apt-get update && apt-get install -y git".into()
                ),
                (7, "ENV".into(), "A=1".into()),
            ]
        );
    }

    #[test]
    fn directives_are_refused_and_comments_after_them_are_comments() {
        let error = parse("# syntax=docker/dockerfile:1\nFROM base\n").unwrap_err();
        assert!(error.to_string().contains("line 1"), "{error}");
        assert!(parse("# escape=`\nFROM base\n").is_err());
        // After the first instruction, `# key=value` is a comment.
        assert_eq!(keywords("FROM base\n# escape=`\nRUN true\n").len(), 2);
        // A comment of words is no directive.
        assert_eq!(keywords("# build it\nFROM base\n").len(), 1);
    }

    #[test]
    fn what_cannot_be_read_is_named() {
        assert!(parse("FROM base\n/bin/true\n").is_err());
        assert!(parse("FROM base\0\n").is_err());
        let big = "#".repeat(super::super::MAX_DOCKERFILE_BYTES + 1);
        assert!(parse(&big).is_err());
        // A last line that goes on ends the instruction.
        assert_eq!(keywords("FROM base\nRUN a \\")[1].2, "a");
        assert_eq!(keywords("FROM base\r\nRUN b\r\n")[1].2, "b");
    }
}

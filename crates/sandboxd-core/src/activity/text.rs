//! Text from a sandbox as its timeline keeps it: cut to a bound and printable
//! (`shown`), a command's output as its size and first and last lines
//! (`OutputSummary`), a program's arguments as one command line (`command_line`), and
//! the values of its secrets masked (`Masker`), also where text comes in pieces
//! (`partial_suffix`, `straddling`: `crate::recording` holds back what could start one).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A command's output as an entry keeps it: its size and its first and last lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputSummary {
    /// Bytes the command wrote (all of them, including those not kept).
    pub bytes: u64,
    /// The first lines (at most 3, each cut at 200 characters).
    pub first_lines: Vec<String>,
    /// The last lines after the first ones (at most 3, each cut at 200 characters).
    pub last_lines: Vec<String>,
}

/// Lines kept of the start and of the end of an output.
pub const OUTPUT_LINES: usize = 3;
/// The longest line of output kept, in characters.
pub const MAX_LINE_CHARS: usize = 200;
/// The longest command line kept, in characters.
pub const MAX_COMMAND_CHARS: usize = 2048;
/// The longest path or other text from the sandbox kept, in characters.
pub const MAX_TEXT_CHARS: usize = 1024;
/// A secret value shorter than this is not masked: it would hide ordinary text.
pub const MIN_MASKED_CHARS: usize = 4;
/// What a secret value is replaced with.
pub const MASK: &str = "***";

impl OutputSummary {
    /// The summary of an output of which `seen` was kept by sandboxd (it may be cut)
    /// and `bytes` were written in all.
    pub fn of(seen: &[u8], bytes: u64, masker: &Masker) -> Self {
        let text = String::from_utf8_lossy(seen);
        let count = text.lines().count();
        let first = count.min(OUTPUT_LINES);
        let last = count.saturating_sub(OUTPUT_LINES).max(first);
        let keep = |line: &str| shown(&masker.mask(line), MAX_LINE_CHARS);
        let mut last_lines: Vec<String> = text.lines().rev().take(count - last).map(keep).collect();
        last_lines.reverse();
        Self {
            bytes,
            first_lines: text.lines().take(first).map(keep).collect(),
            last_lines,
        }
    }
}

/// Text from the sandbox as an entry keeps it: at most `max` characters (a cut one
/// ends with `…`), control characters but tabs replaced with `?`.
pub fn shown(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 2));
    for (count, c) in text.chars().enumerate() {
        if count + 1 == max && text.chars().nth(max).is_some() {
            out.push('…');
            return out;
        }
        out.push(if c.is_control() && c != '\t' { '?' } else { c });
    }
    out
}

/// A program and its arguments as one command line, each word quoted for `sh` where
/// it needs to be.
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            let plain = !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Hides the values of a sandbox's secrets (its environment variables, the variables
/// of a command) in text kept from it.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    /// Longest first, so a value containing another is masked whole.
    secrets: Vec<String>,
}

impl Masker {
    /// A masker of `values`; those shorter than [`MIN_MASKED_CHARS`] are left out.
    pub fn new<I, S>(values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = values
            .into_iter()
            .map(Into::into)
            .filter(|value| value.chars().count() >= MIN_MASKED_CHARS)
            .collect();
        secrets.sort_by_key(|value| std::cmp::Reverse(value.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Whether it masks nothing.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The length in bytes of the longest end of `text` that is the start (not the
    /// whole) of a secret value.
    pub fn partial_suffix(&self, text: &str) -> usize {
        let mut longest = 0;
        for secret in &self.secrets {
            // Only the ends shorter than the secret, and only where its first byte
            // stands: no comparison at each of its lengths.
            let first = secret.as_bytes()[0];
            let window = text.len().saturating_sub(secret.len() - 1);
            let tail = &text.as_bytes()[window..];
            for (at, _) in tail.iter().enumerate().filter(|(_, b)| **b == first) {
                let end = &tail[at..];
                if end.len() > longest && secret.as_bytes().starts_with(end) {
                    longest = end.len();
                    break;
                }
            }
        }
        longest
    }

    /// The start of the first whole secret value in `text` that the byte index `cut`
    /// falls inside of.
    pub fn straddling(&self, text: &str, cut: usize) -> Option<usize> {
        self.secrets
            .iter()
            .flat_map(|secret| {
                text.match_indices(secret.as_str())
                    .map(|(start, found)| (start, start + found.len()))
            })
            .filter(|&(start, end)| start < cut && cut < end)
            .map(|(start, _)| start)
            .min()
    }

    /// `text` with every secret value replaced by [`MASK`].
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_masked_longest_first_and_short_ones_left() {
        let masker = Masker::new(["s3cr3t-token", "s3cr3t", "abc"]);
        assert_eq!(
            masker.mask("curl -H 'x: s3cr3t-token' s3cr3t abc"),
            "curl -H 'x: ***' *** abc"
        );
        assert_eq!(Masker::default().mask("plain"), "plain");
    }

    #[test]
    fn outputs_keep_their_size_and_first_and_last_lines() {
        let masker = Masker::new(["hunter22"]);
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let summary = OutputSummary::of(text.as_bytes(), 5000, &masker);
        assert_eq!(summary.bytes, 5000);
        assert_eq!(summary.first_lines, ["line 1", "line 2", "line 3"]);
        assert_eq!(summary.last_lines, ["line 8", "line 9", "line 10"]);
        let short = OutputSummary::of(b"a\nb\nhunter22 x\n", 16, &masker);
        assert_eq!(short.first_lines, ["a", "b", "*** x"]);
        assert!(short.last_lines.is_empty(), "no line is kept twice");
        let four = OutputSummary::of(b"1\n2\n3\n4", 7, &masker);
        assert_eq!(four.last_lines, ["4"]);
        assert_eq!(OutputSummary::of(b"", 0, &masker), OutputSummary::default());
    }

    #[test]
    fn text_from_the_sandbox_is_cut_and_printable() {
        assert_eq!(shown("ls -l", 10), "ls -l");
        assert_eq!(shown("a\u{1b}[31mb\tc", 20), "a?[31mb\tc");
        let long = shown(&"é".repeat(5000), MAX_LINE_CHARS);
        assert_eq!(long.chars().count(), MAX_LINE_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(shown(&"x".repeat(10), 10), "x".repeat(10));
        assert_eq!(shown(&"x".repeat(11), 10), format!("{}…", "x".repeat(9)));
    }

    #[test]
    fn argv_reads_as_a_command_line() {
        let argv = ["/bin/bash", "-l", "-c", "echo 'hi' there", ""].map(String::from);
        assert_eq!(
            command_line(&argv),
            r#"/bin/bash -l -c 'echo '\''hi'\'' there' ''"#
        );
    }
}

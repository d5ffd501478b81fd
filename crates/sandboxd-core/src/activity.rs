//! A sandbox's activity timeline, its pure parts: what one entry records (a command, a
//! file moved, a terminal, a network event, a change of the sandbox's life), how what
//! comes out of the sandbox is cut to the entry's bounds, and how the values of its
//! secrets are masked before anything is kept.
//!
//! `ActivityEntry` is what is kept and shown; `ActivityRecord` is one entry as the store
//! holds it (the sandbox, its organization, its place in the timeline). `Masker` hides
//! secret values; `OutputSummary::of` keeps the size and the first and last lines of a
//! command's output; `shown` cuts any text from the sandbox to a bound.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The kinds of entries, each its own field of the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ActivityKind {
    /// A command run: exec, streamed exec, a background process, an interpreter run.
    Command,
    /// A file written, read, uploaded, downloaded, removed or moved.
    File,
    /// A terminal opened and closed.
    Terminal,
    /// A port exposed or closed, a preview entered, an egress request.
    Network,
    /// The sandbox's life: created, paused, resumed, forked, snapshotted, its timeout
    /// changed, killed.
    Lifecycle,
}

impl ActivityKind {
    pub const ALL: [Self; 5] = [
        Self::Command,
        Self::File,
        Self::Terminal,
        Self::Network,
        Self::Lifecycle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Command => "command",
            Self::File => "file",
            Self::Terminal => "terminal",
            Self::Network => "network",
            Self::Lifecycle => "lifecycle",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// Who asked: the key (and its user) the request came with. Absent on entries
/// sandboxd made itself (a timeout's kill, a restart after an engine outage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityBy {
    pub key_id: String,
    pub user_id: String,
}

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
        let lines: Vec<&str> = text.lines().collect();
        let first = lines.len().min(OUTPUT_LINES);
        let last_from = lines.len().saturating_sub(OUTPUT_LINES).max(first);
        let keep = |line: &&str| shown(&masker.mask(line), MAX_LINE_CHARS);
        Self {
            bytes,
            first_lines: lines[..first].iter().map(keep).collect(),
            last_lines: lines[last_from..].iter().map(keep).collect(),
        }
    }
}

/// A command run in the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandActivity {
    /// The command line (cut at 2048 characters, secret values masked).
    pub command: String,
    pub cwd: Option<String>,
    /// The user it ran as, when not the sandbox's.
    pub user: Option<String>,
    /// The background process or interpreter context it ran as.
    pub process_id: Option<String>,
    /// Milliseconds from its start to its end; absent while it runs.
    pub duration_ms: Option<u64>,
    /// Absent while it runs, or when it ended without one (killed by sandboxd).
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub oom_killed: bool,
    pub stdout: Option<OutputSummary>,
    pub stderr: Option<OutputSummary>,
    /// The server's answer when the command could not run at all.
    pub error: Option<String>,
}

impl CommandActivity {
    /// Whether it failed: a non-zero exit, a timeout, an OOM kill, or no run at all.
    pub fn failed(&self) -> bool {
        self.exit_code.is_some_and(|code| code != 0)
            || self.timed_out
            || self.oom_killed
            || self.error.is_some()
    }
}

/// A file or directory moved in or out of the sandbox, or changed there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileActivity {
    pub path: String,
    /// Where it went (a move).
    pub to: Option<String>,
    /// Bytes written or read, when known.
    pub bytes: Option<u64>,
    pub error: Option<String>,
}

/// A terminal (PTY) session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TerminalActivity {
    pub terminal_id: String,
    pub cols: u16,
    pub rows: u16,
    /// Milliseconds it was open (on `close`).
    pub duration_ms: Option<u64>,
    /// Whether it is recorded (`sandbox.recording`).
    pub recorded: bool,
}

/// A port, a preview or an egress event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkActivity {
    pub port: Option<u16>,
    pub host: Option<String>,
    /// The egress log's entry, for an egress decision.
    pub egress_entry_id: Option<String>,
}

/// A change of the sandbox's life.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleActivity {
    /// What it was made from (a template, an image, a snapshot, the sandbox forked).
    pub from: Option<String>,
    /// Why, when sandboxd did it itself (`timeout`, `engine restart`, …).
    pub reason: Option<String>,
    /// The new timeout, in milliseconds (a timeout change).
    pub timeout_ms: Option<u64>,
    /// What it made (a snapshot's id, a fork's sandbox id).
    pub made: Option<String>,
}

/// One thing done in a sandbox. Exactly one of the kinds' fields is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActivityEntry {
    /// What was done, in the kind's words: `exec`, `stream`, `process`, `code` (a
    /// command); `write`, `read`, `upload`, `download`, `remove`, `move`, `mkdir`
    /// (a file); `open`, `close` (a terminal); `expose`, `unexpose` (a port);
    /// `create`, `pause`, `resume`, `snapshot`, `fork`, `timeout`, `kill` (its life).
    pub action: String,
    /// Who asked; absent when sandboxd did it itself.
    pub by: Option<ActivityBy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<FileActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<TerminalActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkActivity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleActivity>,
}

impl ActivityEntry {
    fn of(action: &str, by: Option<ActivityBy>) -> Self {
        Self {
            action: action.to_owned(),
            by,
            command: None,
            file: None,
            terminal: None,
            network: None,
            lifecycle: None,
        }
    }

    pub fn command(action: &str, by: Option<ActivityBy>, command: CommandActivity) -> Self {
        Self {
            command: Some(command),
            ..Self::of(action, by)
        }
    }

    pub fn file(action: &str, by: Option<ActivityBy>, file: FileActivity) -> Self {
        Self {
            file: Some(file),
            ..Self::of(action, by)
        }
    }

    pub fn terminal(action: &str, by: Option<ActivityBy>, terminal: TerminalActivity) -> Self {
        Self {
            terminal: Some(terminal),
            ..Self::of(action, by)
        }
    }

    pub fn network(action: &str, by: Option<ActivityBy>, network: NetworkActivity) -> Self {
        Self {
            network: Some(network),
            ..Self::of(action, by)
        }
    }

    pub fn lifecycle(action: &str, by: Option<ActivityBy>, lifecycle: LifecycleActivity) -> Self {
        Self {
            lifecycle: Some(lifecycle),
            ..Self::of(action, by)
        }
    }

    /// Its kind: the field that is set.
    pub fn kind(&self) -> ActivityKind {
        if self.command.is_some() {
            ActivityKind::Command
        } else if self.file.is_some() {
            ActivityKind::File
        } else if self.terminal.is_some() {
            ActivityKind::Terminal
        } else if self.network.is_some() {
            ActivityKind::Network
        } else {
            ActivityKind::Lifecycle
        }
    }
}

/// One entry as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityRecord {
    pub entry_id: String,
    pub sandbox_id: String,
    pub organization_id: String,
    /// Where it stands in the timeline: set by the store on each write (an entry
    /// written again, as a command that ended, moves to the end).
    pub position: String,
    /// When it happened (a command: when it started), epoch ms.
    pub at: i64,
    pub entry: ActivityEntry,
}

/// How much of a sandbox's timeline is kept, and for how long after it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keeping {
    /// Entries per sandbox; older ones go first.
    pub entries: u32,
    /// Bytes of entries per sandbox; older ones go first.
    pub bytes: u64,
    /// How long a timeline outlives its sandbox's end, in milliseconds.
    pub retention_ms: i64,
    /// Bytes of one terminal session's recording; it stops there, with a marker.
    pub recording_bytes: u64,
    /// Bytes of recordings one sandbox keeps; a session past them is not recorded.
    pub recordings_bytes: u64,
    /// Whether what is typed into a terminal is recorded too.
    pub record_input: bool,
}

impl Default for Keeping {
    fn default() -> Self {
        Self {
            entries: 10_000,
            bytes: 8 * 1024 * 1024,
            retention_ms: 7 * 24 * 3600 * 1000,
            recording_bytes: 4 * 1024 * 1024,
            recordings_bytes: 32 * 1024 * 1024,
            record_input: false,
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

/// The entry of an audited action on a sandbox (`sandbox.create`, `sandbox.pause`, …),
/// from the audit entry's action and metadata, with no one as `by`; `None` for the
/// actions the timeline writes otherwise (`sandbox.exec`) or not at all.
pub fn of_audited(action: &str, metadata: &serde_json::Value) -> Option<ActivityEntry> {
    let text = |key: &str| {
        metadata
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(|value| shown(value, MAX_TEXT_CHARS))
    };
    let number = |key: &str| metadata.get(key).and_then(serde_json::Value::as_u64);
    let reason = text("reason").filter(|reason| reason != "asked");
    let life = |word: &str, lifecycle: LifecycleActivity| {
        Some(ActivityEntry::lifecycle(word, None, lifecycle))
    };
    let network =
        |word: &str, network: NetworkActivity| Some(ActivityEntry::network(word, None, network));
    match action.strip_prefix("sandbox.")? {
        "create" => life(
            "create",
            LifecycleActivity {
                from: text("template").or_else(|| text("image")),
                reason: text("pool").map(|pool| format!("from the warm pool {pool}")),
                ..LifecycleActivity::default()
            },
        ),
        "pause" => life(
            "pause",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "resume" => life(
            "resume",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "kill" => life(
            "kill",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "restart" => life(
            "restart",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "remove" => life("remove", LifecycleActivity::default()),
        "rename" => life("rename", LifecycleActivity::default()),
        "setTimeout" => life(
            "timeout",
            LifecycleActivity {
                timeout_ms: number("timeoutMs"),
                ..LifecycleActivity::default()
            },
        ),
        "snapshot" => life(
            "snapshot",
            LifecycleActivity {
                made: text("snapshotId"),
                ..LifecycleActivity::default()
            },
        ),
        "exposePort" => network(
            "expose",
            NetworkActivity {
                port: number("port").and_then(|port| u16::try_from(port).ok()),
                ..NetworkActivity::default()
            },
        ),
        "unexposePort" => network(
            "unexpose",
            NetworkActivity {
                port: number("port").and_then(|port| u16::try_from(port).ok()),
                ..NetworkActivity::default()
            },
        ),
        "egressRefused" => network(
            "refused",
            NetworkActivity {
                port: number("port").and_then(|port| u16::try_from(port).ok()),
                host: text("host"),
                ..NetworkActivity::default()
            },
        ),
        "requestEgress" => network(
            "request",
            NetworkActivity {
                host: text("host"),
                ..NetworkActivity::default()
            },
        ),
        "setEgress" => network("allow", NetworkActivity::default()),
        _ => None,
    }
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
            for (end, _) in secret.char_indices().skip(1) {
                if end > longest && text.ends_with(&secret[..end]) {
                    longest = end;
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
    fn an_entry_has_the_kind_of_its_field_and_kinds_read_back() {
        let entry = ActivityEntry::file("write", None, FileActivity::default());
        assert_eq!(entry.kind(), ActivityKind::File);
        assert_eq!(
            ActivityEntry::lifecycle("kill", None, LifecycleActivity::default()).kind(),
            ActivityKind::Lifecycle
        );
        for kind in ActivityKind::ALL {
            assert_eq!(ActivityKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ActivityKind::parse("everything"), None);
        let json = serde_json::to_value(&entry).unwrap_or_default();
        assert!(json.get("command").is_none(), "{json}");
        assert_eq!(json["file"]["path"], "");
    }

    #[test]
    fn audited_actions_become_entries() {
        let pause = of_audited(
            "sandbox.pause",
            &serde_json::json!({"reason": "idle timeout"}),
        );
        let pause = pause.unwrap_or_else(|| panic!("a pause is an entry"));
        assert_eq!(
            (pause.kind(), pause.action.as_str()),
            (ActivityKind::Lifecycle, "pause")
        );
        assert_eq!(
            pause.lifecycle.and_then(|life| life.reason).as_deref(),
            Some("idle timeout")
        );
        let asked = of_audited("sandbox.resume", &serde_json::json!({"reason": "asked"}));
        assert_eq!(
            asked
                .and_then(|entry| entry.lifecycle)
                .and_then(|l| l.reason),
            None
        );
        let created = of_audited(
            "sandbox.create",
            &serde_json::json!({"image": "debian", "template": "python", "pool": null}),
        );
        assert_eq!(
            created
                .and_then(|entry| entry.lifecycle)
                .and_then(|l| l.from)
                .as_deref(),
            Some("python")
        );
        let exposed = of_audited("sandbox.exposePort", &serde_json::json!({"port": 8080}));
        assert_eq!(
            exposed.and_then(|entry| entry.network).and_then(|n| n.port),
            Some(8080)
        );
        assert!(of_audited("sandbox.exec", &serde_json::json!({})).is_none());
        assert!(of_audited("apiKey.create", &serde_json::json!({})).is_none());
        let huge = "x".repeat(10_000);
        let refused = of_audited("sandbox.egressRefused", &serde_json::json!({"host": huge}));
        let host = refused.and_then(|entry| entry.network).and_then(|n| n.host);
        assert_eq!(host.map(|host| host.chars().count()), Some(MAX_TEXT_CHARS));
    }

    #[test]
    fn argv_reads_as_a_command_line() {
        let argv = ["/bin/bash", "-l", "-c", "echo 'hi' there", ""].map(String::from);
        assert_eq!(
            command_line(&argv),
            r#"/bin/bash -l -c 'echo '\''hi'\'' there' ''"#
        );
    }

    #[test]
    fn failed_commands_are_told_apart() {
        let ok = CommandActivity {
            exit_code: Some(0),
            ..CommandActivity::default()
        };
        assert!(!ok.failed());
        assert!(
            CommandActivity {
                exit_code: Some(2),
                ..CommandActivity::default()
            }
            .failed()
        );
        assert!(
            CommandActivity {
                timed_out: true,
                ..ok.clone()
            }
            .failed()
        );
        assert!(!CommandActivity::default().failed(), "still running");
    }
}

//! `process.Process` of E2B's in-sandbox daemon in ProtoJSON: requests, the events of
//! a process stream, and their mapping onto the agent's processes (a program and its
//! arguments, a tag, standard input, the exit).
//!
//! `launch_of` checks a `Start`: program and arguments as given, a bounded environment,
//! the tag, the terminal's size. `signal_of`; `end_of` writes `exit status N` or
//! `signal: killed`.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Invalid, Issues};

/// Arguments of one process at most.
const MAX_ARGS: usize = 4096;
/// Bytes of a process's program, arguments and environment at most.
const MAX_COMMAND_BYTES: usize = 256 * 1024;
/// Environment variables of one process at most.
const MAX_ENVS: usize = 512;
/// Characters of a tag at most.
const MAX_TAG: usize = 256;

/// A number ProtoJSON may also write as a string.
fn number<'de, D: Deserializer<'de>>(de: D) -> Result<Option<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Number(u32),
        Text(String),
    }
    match Option::<Either>::deserialize(de)? {
        None => Ok(None),
        Some(Either::Number(n)) => Ok(Some(n)),
        Some(Either::Text(text)) => text.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

/// What a process runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ProcessConfig {
    pub cmd: String,
    pub args: Vec<String>,
    pub envs: BTreeMap<String, String>,
    pub cwd: Option<String>,
}

/// A terminal's size.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct Size {
    pub cols: u32,
    pub rows: u32,
}

/// A terminal asked for.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct Pty {
    pub size: Option<Size>,
}

/// `Start`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StartRequest {
    pub process: Option<ProcessConfig>,
    pub pty: Option<Pty>,
    pub tag: Option<String>,
    /// Absent: kept open (the daemon's default for older SDKs).
    pub stdin: Option<bool>,
}

/// Which process: by pid or by tag.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Selector {
    #[serde(deserialize_with = "number")]
    pub pid: Option<u32>,
    pub tag: Option<String>,
}

/// `Connect`, `CloseStdin`: a selector.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SelectRequest {
    pub process: Option<Selector>,
}

/// Input for a process: bytes for its standard input or its terminal (base64).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ProcessInput {
    pub stdin: Option<String>,
    pub pty: Option<String>,
}

/// `SendInput`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SendInputRequest {
    pub process: Option<Selector>,
    pub input: Option<ProcessInput>,
}

/// `SendSignal`: the signal by name (`SIGNAL_SIGKILL`) or number.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SendSignalRequest {
    pub process: Option<Selector>,
    pub signal: Option<serde_json::Value>,
}

/// `Update`: a terminal's new size.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UpdateRequest {
    pub process: Option<Selector>,
    pub pty: Option<Pty>,
}

/// The output of a process, base64 as ProtoJSON writes bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Output {
    Stdout(String),
    Stderr(String),
    Pty(String),
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    pub exit_code: i32,
    pub exited: bool,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One event of a process stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Event {
    Start { pid: u32 },
    Data(Output),
    End(End),
    Keepalive {},
}

/// A message of `Start` and `Connect` streams.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventMessage {
    pub event: Event,
}

/// A process as `List` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedProcess {
    pub config: ListedConfig,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// What a listed process runs (its environment is not shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListedConfig {
    pub cmd: String,
    pub args: Vec<String>,
    pub envs: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// `List`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListAnswer {
    pub processes: Vec<ListedProcess>,
}

/// A process to start, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub argv: Vec<String>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub stdin: bool,
    pub tag: Option<String>,
    /// Columns and rows of the terminal it runs on, when one was asked for.
    pub pty: Option<(u16, u16)>,
}

fn env_name_ok(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

/// Checks a `Start` request: a program, bounded arguments and environment, an
/// absolute working directory, a short tag, a terminal of a sensible size.
pub fn launch_of(request: StartRequest) -> Result<Launch, Invalid> {
    let mut issues = Issues::default();
    let config = request.process.unwrap_or_default();
    if config.cmd.is_empty() {
        issues.push("process.cmd", "is required");
    }
    if config.args.len() > MAX_ARGS {
        issues.push("process.args", format!("at most {MAX_ARGS} arguments"));
    }
    let bytes = config.cmd.len()
        + config.args.iter().map(String::len).sum::<usize>()
        + config
            .envs
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>();
    if bytes > MAX_COMMAND_BYTES {
        issues.push(
            "process",
            format!("the command and its environment exceed {MAX_COMMAND_BYTES} bytes"),
        );
    }
    if std::iter::once(&config.cmd)
        .chain(&config.args)
        .any(|arg| arg.contains('\0'))
    {
        issues.push("process.args", "must not contain NUL bytes");
    }
    if config.envs.len() > MAX_ENVS {
        issues.push("process.envs", format!("at most {MAX_ENVS} variables"));
    }
    if let Some(bad) = config
        .envs
        .iter()
        .find(|(k, v)| !env_name_ok(k) || v.contains('\0'))
    {
        issues.push("process.envs", format!("invalid variable {:?}", bad.0));
    }
    let cwd = config.cwd.filter(|cwd| !cwd.is_empty());
    if cwd.as_ref().is_some_and(|cwd| cwd.contains('\0')) {
        issues.push("process.cwd", "must not contain NUL bytes");
    }
    let tag = request.tag.filter(|tag| !tag.is_empty());
    if tag
        .as_ref()
        .is_some_and(|tag| tag.chars().count() > MAX_TAG)
    {
        issues.push("tag", format!("at most {MAX_TAG} characters"));
    }
    let pty = request.pty.map(|pty| {
        let size = pty.size.unwrap_or(Size { cols: 80, rows: 24 });
        (size.cols, size.rows)
    });
    if let Some((cols, rows)) = pty
        && (!(1..=1000).contains(&cols) || !(1..=1000).contains(&rows))
    {
        issues.push("pty.size", "columns and rows must be 1 to 1000");
    }
    issues.finish(Launch {
        argv: std::iter::once(config.cmd).chain(config.args).collect(),
        cwd,
        env: config.envs.into_iter().collect(),
        stdin: request.stdin.unwrap_or(true),
        tag,
        pty: pty.map(|(cols, rows)| (cols as u16, rows as u16)),
    })
}

/// The signal number a `SendSignal` names: SIGKILL and SIGTERM, by name or number.
pub fn signal_of(value: Option<&serde_json::Value>) -> Result<i32, Invalid> {
    let number = match value {
        Some(serde_json::Value::String(name)) => match name.as_str() {
            "SIGNAL_SIGKILL" => Some(9),
            "SIGNAL_SIGTERM" => Some(15),
            _ => None,
        },
        Some(serde_json::Value::Number(n)) => {
            n.as_i64().filter(|n| [9, 15].contains(n)).map(|n| n as i32)
        }
        _ => None,
    };
    number.ok_or_else(|| Invalid::one("signal", "must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"))
}

/// How a process ended, as the daemon reports it: a code and `exit status N` when it
/// exited, `-1` and `signal: NAME` when a signal ended it.
pub fn end_of(code: Option<i32>, signal: Option<i32>) -> End {
    match (code, signal) {
        (Some(code), _) => End {
            exit_code: code,
            exited: true,
            status: format!("exit status {code}"),
            error: None,
        },
        (None, Some(signal)) => End {
            exit_code: -1,
            exited: false,
            status: format!("signal: {}", signal_name(signal)),
            error: None,
        },
        (None, None) => End {
            exit_code: -1,
            exited: false,
            status: "unknown".into(),
            error: None,
        },
    }
}

fn signal_name(signal: i32) -> String {
    match signal {
        1 => "hangup".into(),
        2 => "interrupt".into(),
        9 => "killed".into(),
        13 => "broken pipe".into(),
        15 => "terminated".into(),
        other => format!("signal {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(json: &str) -> Result<Launch, Invalid> {
        launch_of(serde_json::from_str(json).unwrap())
    }

    #[test]
    fn a_start_is_the_program_and_its_arguments() {
        let launch = start(
            r#"{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"1"},"cwd":"/tmp"},"stdin":false,"tag":"t"}"#,
        )
        .unwrap();
        assert_eq!(launch.argv, ["/bin/bash", "-l", "-c", "echo hi"]);
        assert_eq!(launch.env, [("A".to_owned(), "1".to_owned())]);
        assert_eq!(launch.cwd.as_deref(), Some("/tmp"));
        assert!(!launch.stdin);
        assert_eq!(launch.tag.as_deref(), Some("t"));
        assert_eq!(launch.pty, None);
        let defaults =
            start(r#"{"process":{"cmd":"ls"},"pty":{"size":{"cols":100,"rows":30}}}"#).unwrap();
        assert!(
            defaults.stdin,
            "stdin stays open unless the SDK says otherwise"
        );
        assert_eq!(defaults.pty, Some((100, 30)));
    }

    #[test]
    fn bad_starts_are_refused_naming_the_field() {
        for (json, field) in [
            (r#"{}"#, "process.cmd"),
            (
                r#"{"process":{"cmd":"a","envs":{"A=B":"1"}}}"#,
                "process.envs",
            ),
            (r#"{"process":{"cmd":"a\u0000b"}}"#, "process.args"),
            (
                r#"{"process":{"cmd":"a"},"pty":{"size":{"cols":0,"rows":5}}}"#,
                "pty.size",
            ),
        ] {
            let error = start(json).unwrap_err();
            assert!(error.to_string().contains(field), "{json}: {error}");
        }
    }

    #[test]
    fn events_are_protojson() {
        let event = |event| serde_json::to_string(&EventMessage { event }).unwrap();
        assert_eq!(
            event(Event::Start { pid: 7 }),
            r#"{"event":{"start":{"pid":7}}}"#
        );
        assert_eq!(
            event(Event::Data(Output::Stdout("aGk=".into()))),
            r#"{"event":{"data":{"stdout":"aGk="}}}"#
        );
        assert_eq!(event(Event::Keepalive {}), r#"{"event":{"keepalive":{}}}"#);
        assert_eq!(
            event(Event::End(end_of(Some(1), None))),
            r#"{"event":{"end":{"exitCode":1,"exited":true,"status":"exit status 1"}}}"#
        );
        assert_eq!(end_of(None, Some(9)).status, "signal: killed");
    }

    #[test]
    fn selectors_and_signals_read_either_form() {
        let selector: Selector = serde_json::from_str(r#"{"pid":"12"}"#).unwrap();
        assert_eq!(selector.pid, Some(12));
        assert_eq!(signal_of(Some(&"SIGNAL_SIGKILL".into())).unwrap(), 9);
        assert_eq!(signal_of(Some(&15.into())).unwrap(), 15);
        assert!(signal_of(Some(&"SIGNAL_SIGSTOP".into())).is_err());
        assert!(signal_of(None).is_err());
    }
}

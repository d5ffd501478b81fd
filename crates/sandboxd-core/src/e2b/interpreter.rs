//! E2B's code interpreter (`e2b-code-interpreter`), which its SDK reaches on port
//! 49999 of a sandbox: `POST /execute` runs code in a context and answers a line of
//! JSON per output (`stdout`, `stderr`, `result`, `error`, `number_of_executions`,
//! `end_of_execution`); `/contexts` makes, lists, restarts and removes contexts. Its
//! contexts are sandboxd's (Python, JavaScript, bash). A context keeps its E2B id when
//! restarted: the n-th restart runs as the process `<id>-<n>`. A result's formats,
//! by MIME type in sandboxd, are E2B's named fields (`result_line`).
//!
//! Contexts are listed by their E2B ids (`listed`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{ContextResult, ContextRunResult, ContextView, context_language};

/// The port E2B's SDK names for the code interpreter.
pub const INTERPRETER_PORT: u16 = 49999;

/// The context Python code runs in when a run names none: one per sandbox, made at its
/// first use (`default_context` names the other languages').
pub const DEFAULT_CONTEXT: &str = "c_e2bdefault";

/// The language of a run or context that names none.
pub const LANGUAGE: &str = "python";

/// The languages whose default contexts a listing shows, as E2B's server starts them.
pub const LISTED_DEFAULTS: [&str; 2] = ["python", "javascript"];

/// The context code of `language` runs in when a run names none.
pub fn default_context(language: &str) -> String {
    match language {
        "python" => DEFAULT_CONTEXT.to_owned(),
        "javascript" => format!("{DEFAULT_CONTEXT}js"),
        other => format!("{DEFAULT_CONTEXT}{other}"),
    }
}

/// Whether `id` is a language's default context, and which.
pub fn default_language(id: &str) -> Option<&'static str> {
    crate::api::CONTEXT_LANGUAGES
        .into_iter()
        .find(|language| default_context(language) == id)
}

/// The E2B fields of the formats of a result; any other format goes under `extra`.
const FIELDS: [(&str, &str); 12] = [
    ("text/plain", "text"),
    ("text/html", "html"),
    ("text/markdown", "markdown"),
    ("image/svg+xml", "svg"),
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("application/pdf", "pdf"),
    ("text/latex", "latex"),
    ("application/json", "json"),
    ("application/javascript", "javascript"),
    ("application/vnd.sandboxd.data+json", "data"),
    ("application/vnd.sandboxd.chart+json", "chart"),
];

/// Body of `POST /execute`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ExecuteRequest {
    pub code: String,
    pub context_id: Option<String>,
    pub language: Option<String>,
    pub env_vars: Option<BTreeMap<String, String>>,
}

/// Body of `POST /contexts`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NewContextRequest {
    pub language: Option<String>,
    pub cwd: Option<String>,
}

/// A context as E2B's SDK reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextAnswer {
    pub id: String,
    pub language: String,
    pub cwd: String,
}

/// The language E2B's SDK names (`python` when none), if it is one served.
pub fn language_served(language: Option<&str>) -> Option<&'static str> {
    language.map_or(Some(LANGUAGE), context_language)
}

/// The E2B id of a context's process (`c_x` for `c_x` and its restarts `c_x-3`).
pub fn base_of(process_id: &str) -> &str {
    match process_id.rsplit_once('-') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => process_id,
    }
}

fn generation(process_id: &str) -> u32 {
    process_id
        .rsplit_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// The process an E2B context runs as now: its latest restart.
pub fn current<'a>(contexts: &'a [ContextView], id: &str) -> Option<&'a ContextView> {
    contexts
        .iter()
        .filter(|c| base_of(&c.context_id) == id)
        .max_by_key(|c| generation(&c.context_id))
}

/// The process id a context's next restart runs as.
pub fn restarted_id(process_id: &str) -> String {
    format!("{}-{}", base_of(process_id), generation(process_id) + 1)
}

/// The contexts E2B shows: each running one once, by its E2B id, the default ones
/// first (E2B's server has them from its start), then the others oldest first.
pub fn listed(contexts: &[ContextView], default_cwd: &str) -> Vec<ContextAnswer> {
    let mut seen = Vec::<ContextAnswer>::new();
    let mut running: Vec<&ContextView> =
        contexts.iter().filter(|c| c.status == "running").collect();
    running.sort_by_key(|c| default_language(base_of(&c.context_id)).is_none());
    for context in running {
        let id = base_of(&context.context_id);
        if seen.iter().all(|c| c.id != id) {
            seen.push(ContextAnswer {
                id: id.to_owned(),
                language: context.language.clone(),
                cwd: context
                    .cwd
                    .clone()
                    .unwrap_or_else(|| default_cwd.to_owned()),
            });
        }
    }
    seen
}

/// A result's text as E2B's interpreter shows it: a string's own characters (its
/// `repr()` unquoted and unescaped), any other value's `repr()` as it is.
pub fn plain_text(repr: &str) -> String {
    string_of_repr(repr).unwrap_or_else(|| repr.to_owned())
}

/// The string a Python `repr()` of a `str` stands for, if it is one.
fn string_of_repr(repr: &str) -> Option<String> {
    let quote = repr.chars().next().filter(|q| *q == '\'' || *q == '"')?;
    let inner = repr.strip_prefix(quote)?.strip_suffix(quote)?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return None;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let hex = |chars: &mut std::str::Chars<'_>, n: usize| {
            let digits: String = chars.by_ref().take(n).collect();
            (digits.len() == n)
                .then(|| u32::from_str_radix(&digits, 16).ok())
                .flatten()
                .and_then(char::from_u32)
        };
        out.push(match chars.next()? {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '\\' => '\\',
            '\'' => '\'',
            '"' => '"',
            'x' => hex(&mut chars, 2)?,
            'u' => hex(&mut chars, 4)?,
            'U' => hex(&mut chars, 8)?,
            _ => return None,
        });
    }
    Some(out)
}

/// A piece of a run's output as it was printed (`stream`: `stdout` or `stderr`), as
/// E2B's line for it.
pub fn output_line(stream: &str, text: &str, now_ns: i64) -> Value {
    json!({"type": stream, "text": text, "timestamp": now_ns})
}

/// A result as E2B's line for it: each format under its E2B name, any other under
/// `extra`; a Python string's text unquoted (`python`: whether it came of Python).
pub fn result_line(result: &ContextResult, python: bool) -> Value {
    let mut line = serde_json::Map::new();
    line.insert("type".into(), "result".into());
    let mut extra = serde_json::Map::new();
    for (format, value) in &result.data {
        match FIELDS.iter().find(|(mime, _)| mime == format) {
            Some((_, "text")) if python => {
                let text = value.as_str().map(plain_text);
                line.insert(
                    "text".into(),
                    text.map_or_else(|| value.clone(), Value::from),
                );
            }
            Some((_, field)) => {
                line.insert((*field).into(), value.clone());
            }
            None => {
                extra.insert(format.clone(), value.clone());
            }
        }
    }
    if !extra.is_empty() {
        line.insert("extra".into(), extra.into());
    }
    line.insert("is_main_result".into(), result.is_main_result.into());
    line.into()
}

/// The lines that end a run's answer, after its output: its result, its error, its
/// number in the context, then the end.
pub fn ending_lines(run: &ContextRunResult, python: bool) -> Vec<Value> {
    let mut lines: Vec<Value> = run.results.iter().map(|r| result_line(r, python)).collect();
    if let Some(error) = &run.error {
        lines.push(json!({
            "type": "error",
            "name": error.name,
            "value": error.value,
            "traceback": error.traceback,
        }));
    }
    lines.push(json!({"type": "number_of_executions", "execution_count": run.execution_count}));
    lines.push(json!({"type": "end_of_execution"}));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ContextError;

    fn context(id: &str, status: &str) -> ContextView {
        ContextView {
            context_id: id.into(),
            sandbox_id: "s".into(),
            language: "python".into(),
            status: status.into(),
            started_at: String::new(),
            cwd: Some("/home/user".into()),
        }
    }

    #[test]
    fn a_restarted_context_keeps_its_id_and_runs_as_its_latest_process() {
        assert_eq!(base_of("c_abc-2"), "c_abc");
        assert_eq!(base_of("c_abc"), "c_abc");
        assert_eq!(base_of("c_a-b"), "c_a-b");
        assert_eq!(restarted_id("c_abc"), "c_abc-1");
        assert_eq!(restarted_id("c_abc-1"), "c_abc-2");
        let all = [
            context("c_abc", "exited"),
            context("c_abc-2", "running"),
            context("c_abc-1", "exited"),
            context("c_other", "running"),
        ];
        assert_eq!(current(&all, "c_abc").unwrap().context_id, "c_abc-2");
        assert!(current(&all, "c_none").is_none());
        let shown = listed(&all, "/home/user");
        assert_eq!(
            shown.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["c_abc", "c_other"]
        );
        let later_default = [
            context("c_mine", "running"),
            context("c_e2bdefaultjs", "running"),
        ];
        assert_eq!(
            listed(&later_default, "/home/user")
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
            ["c_e2bdefaultjs", "c_mine"],
            "a default context comes first, however late it was made"
        );
    }

    #[test]
    fn a_run_is_told_as_e2bs_lines_ending_with_the_end_of_execution() {
        let run = ContextRunResult {
            stdout: String::new(),
            stderr: String::new(),
            result: Some("2".into()),
            results: vec![ContextResult {
                data: [("text/plain".to_owned(), Value::from("2"))].into(),
                is_main_result: true,
            }],
            error: Some(ContextError {
                name: "NameError".into(),
                value: "x".into(),
                traceback: "t".into(),
            }),
            timed_out: false,
            truncated: false,
            execution_count: 3,
        };
        assert_eq!(
            output_line("stdout", "hi\n", 7),
            json!({"type": "stdout", "text": "hi\n", "timestamp": 7})
        );
        let lines = ending_lines(&run, true);
        let kinds: Vec<_> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "result",
                "error",
                "number_of_executions",
                "end_of_execution"
            ]
        );
        assert_eq!(lines[0]["is_main_result"], true);
        assert_eq!(lines[2]["execution_count"], 3);
        assert_eq!(language_served(None), Some("python"));
        assert_eq!(language_served(Some("Python")), Some("python"));
        assert_eq!(language_served(Some("js")), Some("javascript"));
        assert_eq!(language_served(Some("r")), None);
    }

    #[test]
    fn a_strings_result_is_its_text_and_any_other_its_repr() {
        assert_eq!(plain_text("'supertest'"), "supertest");
        assert_eq!(plain_text(r#""it's""#), "it's");
        assert_eq!(plain_text(r"'a\nb\\c\x41\u00e9'"), "a\nb\\cAé");
        for kept in [
            "1", "[1, 2]", "{'a': 1}", "'a' 'b'", "None", "'bad\\q'", "''x",
        ] {
            assert_eq!(plain_text(kept), kept, "{kept}");
        }
    }

    #[test]
    fn a_results_formats_are_e2bs_fields_and_others_its_extra() {
        let shown = ContextResult {
            data: [
                ("text/plain", json!("'<Figure>'")),
                ("image/png", json!("iVBO")),
                (
                    "application/vnd.sandboxd.chart+json",
                    json!({"type": "line"}),
                ),
                ("text/latex", json!("x")),
                ("application/x-own", json!(1)),
            ]
            .map(|(k, v)| (k.to_owned(), v))
            .into(),
            is_main_result: false,
        };
        let line = result_line(&shown, true);
        assert_eq!(line["type"], "result");
        assert_eq!(line["text"], "<Figure>");
        assert_eq!(line["png"], "iVBO");
        assert_eq!(line["chart"]["type"], "line");
        assert_eq!(line["latex"], "x");
        assert_eq!(line["extra"], json!({"application/x-own": 1}));
        assert_eq!(line["is_main_result"], false);
        assert_eq!(
            result_line(&shown, false)["text"],
            "'<Figure>'",
            "not Python's"
        );
    }

    #[test]
    fn each_language_has_its_default_context() {
        assert_eq!(default_context("python"), DEFAULT_CONTEXT);
        for language in crate::api::CONTEXT_LANGUAGES {
            assert_eq!(default_language(&default_context(language)), Some(language));
        }
        assert_eq!(default_language("c_other"), None);
    }
}
